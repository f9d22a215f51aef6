// SPDX-License-Identifier: GPL-3.0-or-later
// The CUDA backend end to end against the CPU backend (backend_parity.h: logits, greedy
// continuations, captures, logit lens, KV accounting and read-back) on the random-weight models of
// every architecture and, in test_cuda_parity_model, the two real models. Without a GPU the backend
// runs on the emulated device (its kernels over their whole grids on the host): that checks the
// backend's buffers, chunking, recording and replay and the kernels' orders, not the device. Where
// an NVIDIA GPU is present the same rows run on it ("device"); elsewhere those rows skip, saying why.
#include "backend/backend_factory.h"
#include "backend/cuda/cuda_backend.h"
#include "backend_parity.h"
#include "model/model.h"
#include "model/test_model.h"
#include "util/error.h"

#include <QTemporaryDir>
#include <QTest>
#include <cstring>
#include <random>

using namespace engine;

namespace {

std::shared_ptr<const Model> test_model(QTemporaryDir& dir, const QString& arch)
{
    const QString path = dir.filePath(arch + ".gguf");
    make_test_model(arch.toStdString(), 1).write(path.toStdString());
    return Model::load(path.toStdString());
}

std::vector<TokenId> random_tokens(const Model& model, std::size_t n, uint32_t seed)
{
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> pick(0, int32_t(model.config().n_vocab) - 1);
    std::vector<TokenId> tokens(n);
    for (auto& t : tokens)
        t = pick(rng);
    return tokens;
}

} // namespace

// The device rows need an NVIDIA GPU: skipped, with the driver's reason, without one.
#define SKIP_WITHOUT_CUDA_DEVICE()                                                                                     \
    do {                                                                                                               \
        const CudaDeviceListing listing_ = list_cuda_devices();                                                        \
        if (listing_.devices.empty())                                                                                  \
            QSKIP(qPrintable("no CUDA device: " + QString::fromStdString(listing_.why_unavailable)));                  \
    } while (false)

class TestCudaBackend : public QObject {
    Q_OBJECT
private slots:
    void testModels_data();
    void testModels();
    void weightTypes_data();
    void weightTypes();
    void twinsOnDevice_data();
    void twinsOnDevice();
    void longPromptInChunks();
    void decodeReplay();
    void fusedEqualsUnfused();
    void interventions();
    void unavailableWithoutDevice();
};

void TestCudaBackend::testModels_data()
{
    QTest::addColumn<QString>("arch");
    QTest::addColumn<int>("prompt");
    QTest::addColumn<bool>("device");
    for (const bool device : {false, true})
        for (const char* a :
             {"llama", "qwen2", "qwen3", "gemma3", "smollm3", "phi3", "granite", "olmo2", "mistral3", "gemma2"}) {
            // gemma3 and gemma2: 100 + 24 positions cross their 64-token window; mistral3: 300 its original context
            const QString arch(a);
            const int prompt = arch.startsWith("gemma") ? 100 : arch == "mistral3" ? 300 : 40;
            QTest::addRow("%s %s", a, device ? "device" : "emulated") << arch << prompt << device;
        }
}

void TestCudaBackend::testModels()
{
    QFETCH(QString, arch);
    QFETCH(int, prompt);
    QFETCH(bool, device);
    if (device)
        SKIP_WITHOUT_CUDA_DEVICE();
    QTemporaryDir dir;
    const auto model = test_model(dir, arch);
    auto cpu = make_cpu_backend(model, {.threads = 0, .n_ctx = 512});
    auto cuda = make_cuda_backend(model, {.n_ctx = 512, .emulate = !device});
    QCOMPARE(cuda->kv_cache().config().n_ctx, cpu->kv_cache().config().n_ctx);
    qInfo("%s", cuda->name().c_str());
    const auto tokens = random_tokens(*model, std::size_t(prompt), 7);
    testsupport::ParityReport r;
    // the criteria for random-weight models (the emulator meets them with no difference at all)
    testsupport::run_parity(*cpu, *cuda, tokens, 24, r, {.min_pearson = 0.9999, .attention = 1e-3});
    if (QTest::currentTestFailed())
        return;
    qInfo("%s: logits Pearson ≥ %.7f, max |Δ| %.3g; greedy %d/%d steps identical%s; attention weights max |Δ| %.3g",
          qPrintable(arch), r.min_pearson, r.max_abs_diff, r.greedy_matched, r.greedy_steps,
          r.diverged_at_tie ? " (then a near-tie on the CPU)" : "", r.max_attention_diff);
    QVERIFY(r.greedy_steps > 0);
    if (!device) { // the kernels follow the CPU's summation orders: the emulator gives its bits
        QCOMPARE(r.max_abs_diff, 0.0);
        QCOMPARE(r.max_attention_diff, 0.0);
    }
    const auto mem = cuda->memory();
    QVERIFY(mem.weight_bytes > 0);
    QCOMPARE(mem.kv_bytes_allocated, cpu->memory().kv_bytes_allocated);
}

void TestCudaBackend::weightTypes_data()
{
    QTest::addColumn<QString>("type");
    QTest::addColumn<bool>("device");
    for (const bool device : {false, true})
        for (const char* t : {"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K",
                              "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"})
            QTest::addRow("%s %s", t, device ? "device" : "emulated") << QString(t) << device;
}

// Every weight type the CPU reads (make-test-model --type: every matrix of that type) on the CUDA
// backend: the CPU's bits in emulation, the random-weight criteria on a device. A prompt of 12
// tokens (the batched and tiled orders) and 8 greedy steps (the one-row orders).
void TestCudaBackend::weightTypes()
{
    QFETCH(QString, type);
    QFETCH(bool, device);
    if (device)
        SKIP_WITHOUT_CUDA_DEVICE();
    QTemporaryDir dir;
    const QString path = dir.filePath(type + ".gguf");
    TestModelShape shape;
    shape.matrix_type = ggml_type_from_name(type.toStdString());
    make_test_model("llama", 1, shape).write(path.toStdString());
    const auto model = Model::load(path.toStdString());
    auto cpu = make_cpu_backend(model, {.threads = 0, .n_ctx = 256});
    auto cuda = make_cuda_backend(model, {.n_ctx = 256, .emulate = !device});
    testsupport::ParityReport r;
    testsupport::run_parity(*cpu, *cuda, random_tokens(*model, 12, 3), 8, r,
                            {.min_pearson = 0.9999, .attention = 1e-3});
    if (QTest::currentTestFailed())
        return;
    qInfo("%s: logits Pearson >= %.7f, max |Δ| %.3g; greedy %d/%d steps identical", qPrintable(type), r.min_pearson,
          r.max_abs_diff, r.greedy_matched, r.greedy_steps);
    QVERIFY(r.greedy_steps > 0);
    if (!device)
        QCOMPARE(r.max_abs_diff, 0.0);
}

void TestCudaBackend::twinsOnDevice_data()
{
    QTest::addColumn<QString>("preset");
    QTest::newRow("gemma3-270m") << QString("gemma3-270m");
    QTest::newRow("qwen2.5-0.5b") << QString("qwen2.5-0.5b");
}

// The real models' shapes (full-size random-weight twins, make-test-model --preset) on a GPU: the
// random-weight criteria. Skipped without a CUDA device (the emulator runs the real models
// themselves, in test_cuda_parity_model).
void TestCudaBackend::twinsOnDevice()
{
    QFETCH(QString, preset);
    SKIP_WITHOUT_CUDA_DEVICE();
    QTemporaryDir dir;
    const QString path = dir.filePath(preset + ".gguf");
    make_test_model_preset(preset.toStdString(), 1).write(path.toStdString());
    const auto model = Model::load(path.toStdString());
    auto cpu = make_cpu_backend(model, {.threads = 0, .n_ctx = 256});
    auto cuda = make_cuda_backend(model, {.n_ctx = 256});
    const auto tokens = random_tokens(*model, 24, 11);
    testsupport::ParityReport r;
    testsupport::run_parity(*cpu, *cuda, tokens, 16, r, {.min_pearson = 0.9999, .attention = 1e-3});
    qInfo("%s twin on %s: logits Pearson ≥ %.7f, max |Δ| %.3g; greedy %d/%d%s; attention max |Δ| %.3g",
          qPrintable(preset), cuda->name().c_str(), r.min_pearson, r.max_abs_diff, r.greedy_matched, r.greedy_steps,
          r.diverged_at_tie ? " (then a near-tie on the CPU)" : "", r.max_attention_diff);
}

// A prompt longer than one chunk (the backend's micro-batch for a long context is small): the chunks'
// logits of every position equal those of shorter requests continuing the cache.
void TestCudaBackend::longPromptInChunks()
{
    QTemporaryDir dir;
    const auto model = test_model(dir, "qwen2");
    const uint32_t n_ctx = uint32_t(model->config().n_ctx_train);
    auto cpu = make_cpu_backend(model, {.threads = 0, .n_ctx = n_ctx});
    auto cuda = make_cuda_backend(model, {.n_ctx = n_ctx, .emulate = true});
    const auto tokens = random_tokens(*model, 300, 9);
    const auto a = cpu->forward({.tokens = tokens, .all_logits = true});
    const auto b = cuda->forward({.tokens = tokens, .all_logits = true});
    QCOMPARE(b.logits.size(), a.logits.size());
    const double p = testsupport::pearson(a.logits, b.logits);
    qInfo("300 positions, every position's logits: Pearson %.7f", p);
    QVERIFY(std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * sizeof(float)) == 0);
    testsupport::compare_accounting(cpu->kv_cache().accounting(), cuda->kv_cache().accounting());
}

// Decode steps replayed from one recording give the bits of steps issued afresh, across gemma3's
// 64-token window, around steps with captures (issued, not replayed) and after the cache is cut
// back (the position comes from the device word the host rewrites).
void TestCudaBackend::decodeReplay()
{
    QTemporaryDir dir;
    const auto model = test_model(dir, "gemma3");
    const auto prompt = random_tokens(*model, 50, 3);
    CaptureRequest capture;
    capture.residuals = true;
    bool recompute = false;
    const auto run = [&](bool replay) -> std::vector<std::vector<float>> {
        qputenv("TOKENSCOPE_CUDA_REPLAY", replay ? "1" : "0");
        auto b = make_cuda_backend(model, {.n_ctx = 256, .emulate = true});
        std::vector<std::vector<float>> steps;
        std::vector<float> logits = b->forward({.tokens = prompt}).logits;
        for (int step = 0; step < 40; ++step) {
            const TokenId t = testsupport::argmax(logits);
            if (step == 20)
                recompute = recompute || b->kv_cache().truncate(uint32_t(prompt.size()) + 10).recompute;
            // steps 10 and 12 capture the residual stream: step 12 reuses the download buffer (the same
            // size), so the recording of step 11 stays, and puts its logits behind the residuals; the
            // replayed step 13 must find its own at the start again
            const bool with_capture = step == 10 || step == 12;
            logits = b->forward({.tokens = std::span(&t, 1), .capture = with_capture ? &capture : nullptr}).logits;
            steps.push_back(logits);
        }
        qunsetenv("TOKENSCOPE_CUDA_REPLAY");
        return steps;
    };
    const uint64_t before = cuda_decode_replays();
    const auto replayed = run(true);
    const uint64_t replays = cuda_decode_replays() - before;
    const auto issued = run(false);
    QVERIFY2(!recompute, "the cut must keep the cache (no sliding-window recompute)");
    QCOMPARE(cuda_decode_replays() - before, replays); // none without replay
    QVERIFY2(replays >= 35, qPrintable(QString("%1 of 40 steps replayed").arg(replays)));
    for (std::size_t i = 0; i < replayed.size(); ++i)
        QVERIFY2(std::memcmp(replayed[i].data(), issued[i].data(), replayed[i].size() * sizeof(float)) == 0,
                 qPrintable(QString("step %1 differs").arg(i)));
}

// The residual add fused with the next norm (a plain run) and the two operations apart (a run that
// captures every residual) give the same bits.
void TestCudaBackend::fusedEqualsUnfused()
{
    QTemporaryDir dir;
    const auto model = test_model(dir, "llama");
    const auto tokens = random_tokens(*model, 12, 5);
    CaptureRequest capture;
    capture.residuals = true;
    auto a = make_cuda_backend(model, {.n_ctx = 128, .emulate = true});
    auto b = make_cuda_backend(model, {.n_ctx = 128, .emulate = true});
    const auto plain = a->forward({.tokens = tokens, .all_logits = true});
    const auto captured = b->forward({.tokens = tokens, .all_logits = true, .capture = &capture});
    QVERIFY(captured.captures && captured.captures->residuals.size() == model->config().n_layer);
    QCOMPARE(plain.logits.size(), captured.logits.size());
    QVERIFY(std::memcmp(plain.logits.data(), captured.logits.data(), plain.logits.size() * sizeof(float)) == 0);
}

// The lab's interventions on the device: a patch of a run's own activations keeps every bit, and
// zeroing a layer's attention output changes the logits as it does on the CPU.
void TestCudaBackend::interventions()
{
    QTemporaryDir dir;
    const auto model = test_model(dir, "qwen2");
    const auto tokens = random_tokens(*model, 10, 6);
    const uint32_t layer = 1, E = model->config().n_embd;
    CaptureRequest capture;
    capture.sites = {Site::AttentionOut};
    auto cuda = make_cuda_backend(model, {.n_ctx = 128, .emulate = true});
    const auto base = cuda->forward({.tokens = tokens, .all_logits = true, .capture = &capture});
    cuda->kv_cache().truncate(0);
    const auto& rows = base.captures->at(Site::AttentionOut, layer);
    QCOMPARE(rows.size(), tokens.size() * site_width(model->config(), Site::AttentionOut, layer));
    Intervention same;
    same.site = Site::AttentionOut;
    same.layer = layer;
    same.first = 3;
    same.values.assign(rows.begin() + 3 * E, rows.begin() + 4 * E);
    const auto patched = cuda->forward({.tokens = tokens, .all_logits = true, .interventions = std::span(&same, 1)});
    QVERIFY(std::memcmp(patched.logits.data(), base.logits.data(), base.logits.size() * sizeof(float)) == 0);
    cuda->kv_cache().truncate(0);

    Intervention zero = same;
    zero.values.assign(E, 0.0f);
    auto cpu = make_cpu_backend(model, {.threads = 0, .n_ctx = 128});
    const auto c = cpu->forward({.tokens = tokens, .all_logits = true, .interventions = std::span(&zero, 1)});
    const auto g = cuda->forward({.tokens = tokens, .all_logits = true, .interventions = std::span(&zero, 1)});
    QVERIFY(std::memcmp(g.logits.data(), base.logits.data(), base.logits.size() * sizeof(float)) != 0);
    QVERIFY(std::memcmp(g.logits.data(), c.logits.data(), c.logits.size() * sizeof(float)) == 0);
}

// Without a usable device: the factory says why and runs on the CPU; make_cuda_backend throws
// UnsupportedError naming the reason. (Auto's order is test_backend_choice's: asking it here would
// load and unload the Vulkan driver, whose allocations LeakSanitizer then cannot name.)
void TestCudaBackend::unavailableWithoutDevice()
{
    const CudaDeviceListing listing = list_cuda_devices();
    if (!listing.devices.empty())
        QSKIP("a CUDA device is present: this checks a machine without one");
    QVERIFY(!listing.why_unavailable.empty());
    qInfo("CUDA unavailable: %s", listing.why_unavailable.c_str());
    QTemporaryDir dir;
    const auto model = test_model(dir, "llama");
    try {
        make_cuda_backend(model, {.n_ctx = 128});
        QFAIL("make_cuda_backend succeeded without a CUDA device");
    } catch (const UnsupportedError& e) {
        QVERIFY2(QString(e.what()).contains(QString::fromStdString(listing.why_unavailable)), e.what());
    }
    std::string note;
    auto b = make_backend(BackendKind::Cuda, model, 128, 1, &note);
    QVERIFY(QString::fromStdString(b->name()).startsWith("CPU"));
    QVERIFY2(QString::fromStdString(note).contains("CUDA"), note.c_str());
    QCOMPARE(parse_backend_kind("CUDA"), std::optional(BackendKind::Cuda));
    QVERIFY(!parse_backend_choice("cuda-exact"));
}

QTEST_GUILESS_MAIN(TestCudaBackend)
#include "test_cuda_backend.moc"
