// SPDX-License-Identifier: GPL-3.0-or-later
// The Vulkan backend against the CPU backend on the random-weight test models of every supported
// architecture, in both arithmetics (backend_parity.h: logits, greedy continuations, captures, KV
// accounting and read-back; the f32 path within the tolerance criteria), with the validation layer on and a small
// binding limit so that the embedding and output matrices are split into row ranges and batches into micro-batches. The
// default model runs in test_vulkan_parity_model.
#include "vulkan_test_support.h"

#include "backend/backend_factory.h"
#include "backend_parity.h"
#include "model/model.h"
#include "model/test_model.h"

#include <QTemporaryDir>
#include <QTest>
#include <cstring>
#include <random>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

using namespace engine;

class TestVulkanParity : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void cleanup();
    void devices();
    void testModels_data();
    void testModels();
    void factory();
    void decodeReplay_data();
    void decodeReplay();
};

void TestVulkanParity::initTestCase()
{
    REQUIRE_VULKAN();
}

void TestVulkanParity::cleanup()
{
    REQUIRE_NO_VALIDATION_MESSAGES();
}

void TestVulkanParity::devices()
{
    const auto devices = list_vulkan_devices();
    QVERIFY(!devices.empty());
    for (const auto& d : devices) {
        qInfo("device %u: %s (%s), %s, %.0f MiB device-local, budget %.0f MiB, %s", d.index, d.name.c_str(),
              d.type.c_str(), d.driver.c_str(), double(d.device_local_bytes) / 1048576.0,
              double(d.budget_bytes) / 1048576.0, d.usable ? "usable" : d.why_not.c_str());
        QVERIFY(!d.name.empty());
        QVERIFY(d.usable || !d.why_not.empty());
    }
}

void TestVulkanParity::testModels_data()
{
    QTest::addColumn<QString>("arch");
    QTest::addColumn<int>("prompt");
    QTest::addColumn<bool>("exact");
    for (const bool exact : {true, false}) {
        const char* arithmetic = exact ? "exact" : "f32";
        // smollm3: its fourth layer runs without RoPE (the pass skips the operation); phi3: fused Q/K/V
        // and gate|up as views; granite: its multipliers; olmo2: no pre-norms, whole-row Q/K norms
        for (const char* a : {"llama", "qwen2", "qwen3", "smollm3", "phi3", "granite", "olmo2"})
            QTest::addRow("%s %s", a, arithmetic) << QString(a) << 40 << exact;
        // gemma3's window is 64 tokens: 150 + 32 positions make the sliding-window layers free blocks
        QTest::addRow("gemma3 %s", arithmetic) << QString("gemma3") << 150 << exact;
        // mistral3's original context is 256: 300 positions put YaRN's tables and the query temperature to work
        QTest::addRow("mistral3 %s", arithmetic) << QString("mistral3") << 300 << exact;
        // gemma2: soft-capped scores (the C library's tanhf, step for step) and its 64-token window
        QTest::addRow("gemma2 %s", arithmetic) << QString("gemma2") << 150 << exact;
    }
}

void TestVulkanParity::testModels()
{
    QFETCH(QString, arch);
    QFETCH(int, prompt);
    QFETCH(bool, exact);
    QTemporaryDir dir;
    const QString path = dir.filePath(arch + ".gguf");
    make_test_model(arch.toStdString(), 1).write(path.toStdString());
    const auto model = Model::load(path.toStdString());
    auto cpu = make_cpu_backend(model, {.threads = 0, .n_ctx = 512});
    // 64 KiB bindings: every weight matrix of more than a few hundred rows is split
    auto vulkan = make_vulkan_backend(
        model, {.device = -1, .n_ctx = 512, .validation = true, .max_binding_bytes = 65536, .exact = exact});
    QCOMPARE(vulkan->kv_cache().config().n_ctx, cpu->kv_cache().config().n_ctx);
    qInfo("%s", vulkan->name().c_str());

    std::mt19937 rng(7);
    std::uniform_int_distribution<int32_t> pick(0, int32_t(model->config().n_vocab) - 1);
    std::vector<TokenId> tokens(static_cast<std::size_t>(prompt));
    for (auto& t : tokens)
        t = pick(rng);
    testsupport::ParityReport r;
    // the f32 path: the tolerance criteria for random-weight models (the exact one meets them too)
    testsupport::run_parity(*cpu, *vulkan, tokens, 32, r, {.min_pearson = 0.9999, .attention = exact ? 1e-4 : 1e-3});
    if (QTest::currentTestFailed())
        return;
    qInfo("%s: logits Pearson ≥ %.7f, max |Δ| %.3g; greedy %d/%d steps identical%s; attention weights max |Δ| %.3g",
          qPrintable(arch), r.min_pearson, r.max_abs_diff, r.greedy_matched, r.greedy_steps,
          r.diverged_at_tie ? " (then a near-tie on the CPU)" : "", r.max_attention_diff);
    const auto mem = vulkan->memory();
    QVERIFY(mem.weight_bytes > 0);
    QCOMPARE(mem.kv_bytes_allocated, cpu->memory().kv_bytes_allocated);
}

void TestVulkanParity::factory()
{
    QTemporaryDir dir;
    const QString path = dir.filePath("llama.gguf");
    make_test_model("llama", 1).write(path.toStdString());
    const auto model = Model::load(path.toStdString());
    std::string note;
    auto cpu = make_backend(BackendKind::Cpu, model, 256, 1, &note);
    QVERIFY(note.empty());
    QVERIFY(QString::fromStdString(cpu->name()).startsWith("CPU"));
    auto vulkan = make_backend(BackendKind::Vulkan, model, 256, 1, &note);
    QVERIFY2(note.empty(), note.c_str());
    QVERIFY(QString::fromStdString(vulkan->name()).startsWith("Vulkan"));
    // auto takes a hardware GPU only; on a machine with lavapipe alone it says why it chose the CPU
    auto automatic = make_backend(BackendKind::Auto, model, 256, 1, &note);
    bool gpu = false;
    for (const auto& d : list_vulkan_devices())
        gpu = gpu || (d.usable && (d.type == "discrete GPU" || d.type == "integrated GPU"));
    QCOMPARE(QString::fromStdString(automatic->name()).startsWith("Vulkan"), gpu);
    if (!gpu)
        QVERIFY(!note.empty());
    // auto allowed a software device (as a machine with a GPU would offer one): the f32 path, said
    // in the log; vulkan-exact asks for the 64-bit shaders
    {
        auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64);
        spdlog::default_logger()->sinks().push_back(sink);
        qputenv("TOKENSCOPE_VULKAN_AUTO_SOFTWARE", "1");
        auto chosen = make_backend(BackendKind::Auto, model, 256, 1, &note);
        qunsetenv("TOKENSCOPE_VULKAN_AUTO_SOFTWARE");
        auto exact = make_backend(BackendKind::Vulkan, model, 256, 1, &note, -1, true);
        spdlog::default_logger()->sinks().pop_back();
        QVERIFY2(QString::fromStdString(chosen->name()).endsWith(", f32)"), chosen->name().c_str());
        QVERIFY2(QString::fromStdString(exact->name()).endsWith(", exact)"), exact->name().c_str());
        bool said_f32 = false, said_exact = false;
        for (const std::string& line : sink->last_formatted()) {
            said_f32 = said_f32 || (line.find("backend (auto): Vulkan") != std::string::npos &&
                                    line.find("f32 arithmetic, the default") != std::string::npos);
            said_exact = said_exact || line.find("Vulkan arithmetic: exact") != std::string::npos;
        }
        QVERIFY2(said_f32, "no log line saying auto chose the f32 path");
        QVERIFY2(said_exact, "no log line saying the exact arithmetic was asked for");
        QCOMPARE(parse_backend_choice("vulkan-exact")->vulkan_exact, true);
        QCOMPARE(parse_backend_choice("vulkan")->vulkan_exact, false);
        QVERIFY(!parse_backend_choice("cpu-exact"));
    }
    // a device that does not exist: the CPU, with the reason
    auto fallback = make_backend(BackendKind::Vulkan, model, 256, 1, &note, 99);
    QVERIFY(QString::fromStdString(fallback->name()).startsWith("CPU"));
    QVERIFY2(note.find("no Vulkan device 99") != std::string::npos, note.c_str());
    QCOMPARE(parse_backend_kind("Vulkan"), std::optional(BackendKind::Vulkan));
    QVERIFY(!parse_backend_kind("metal"));

    // IQ4_NL and IQ4_XS weights: the shaders do not read them; the backend refuses them by name and
    // the factory runs the CPU, saying why (auto on a machine whose Vulkan GPU would be chosen too)
    for (const GgmlType type : {GgmlType::IQ4_NL, GgmlType::IQ4_XS}) {
        const std::string name(ggml_type_name(type));
        const QString iq_path = dir.filePath(QString::fromStdString(name) + ".gguf");
        TestModelShape shape;
        shape.matrix_type = type;
        make_test_model("llama", 1, shape).write(iq_path.toStdString());
        const auto iq = Model::load(iq_path.toStdString());
        auto refused = make_backend(BackendKind::Vulkan, iq, 256, 1, &note);
        QVERIFY(QString::fromStdString(refused->name()).startsWith("CPU"));
        QVERIFY2(note.find("cannot read " + name + " weights") != std::string::npos, note.c_str());
        QVERIFY2(note.find("using the CPU") != std::string::npos, note.c_str());
        qputenv("TOKENSCOPE_VULKAN_AUTO_SOFTWARE", "1");
        auto automatic_iq = make_backend(BackendKind::Auto, iq, 256, 1, &note);
        qunsetenv("TOKENSCOPE_VULKAN_AUTO_SOFTWARE");
        QVERIFY(QString::fromStdString(automatic_iq->name()).startsWith("CPU"));
        QVERIFY2(note.find("cannot read " + name + " weights") != std::string::npos, note.c_str());
    }
}

void TestVulkanParity::decodeReplay_data()
{
    QTest::addColumn<bool>("exact");
    QTest::newRow("f32") << false;
    QTest::newRow("exact") << true;
}

// Decode steps replayed from one recording give the bits of steps recorded afresh, across the
// sliding window's edge (gemma3's 64 tokens), around a step with captures (recorded, not replayed)
// and after the cache is cut back (the positions come from the step buffer).
void TestVulkanParity::decodeReplay()
{
    QFETCH(bool, exact);
    QTemporaryDir dir;
    const QString path = dir.filePath("gemma3.gguf");
    make_test_model("gemma3", 1).write(path.toStdString());
    const auto model = Model::load(path.toStdString());
    std::mt19937 rng(3);
    std::uniform_int_distribution<int32_t> pick(0, int32_t(model->config().n_vocab) - 1);
    std::vector<TokenId> prompt(50);
    for (auto& t : prompt)
        t = pick(rng);
    CaptureRequest capture;
    capture.all_heads = true;
    // the logits of every step, each backend following its own greedy tokens
    bool recompute = false;
    const auto run = [&](bool replay) -> std::vector<std::vector<float>> {
        qputenv("TOKENSCOPE_VULKAN_REPLAY", replay ? "1" : "0");
        auto b = make_vulkan_backend(model, {.device = -1, .n_ctx = 256, .validation = true, .exact = exact});
        std::vector<std::vector<float>> steps;
        std::vector<float> logits = b->forward({.tokens = prompt}).logits;
        for (int step = 0; step < 40; ++step) {
            const TokenId t = testsupport::argmax(logits);
            if (step == 20) { // back to 60 positions: the next steps rewrite positions 60 …
                const uint32_t keep = uint32_t(prompt.size()) + 10;
                recompute = recompute || b->kv_cache().truncate(keep).recompute;
            }
            const bool with_capture = step == 10;
            logits = b->forward({.tokens = std::span(&t, 1), .capture = with_capture ? &capture : nullptr}).logits;
            steps.push_back(logits);
        }
        qunsetenv("TOKENSCOPE_VULKAN_REPLAY");
        return steps;
    };
    const uint64_t before = vulkan_decode_replays();
    const auto replayed = run(true);
    const uint64_t replays = vulkan_decode_replays() - before;
    const auto recorded = run(false);
    QVERIFY2(!recompute, "the cut must keep the cache (no sliding-window recompute)");
    QCOMPARE(vulkan_decode_replays() - before, replays); // none without replay
    QVERIFY2(replays >= 36, qPrintable(QString("%1 of 40 steps replayed").arg(replays)));
    QCOMPARE(replayed.size(), recorded.size());
    for (std::size_t i = 0; i < replayed.size(); ++i)
        QVERIFY2(std::memcmp(replayed[i].data(), recorded[i].data(), replayed[i].size() * sizeof(float)) == 0,
                 qPrintable(QString("step %1 differs").arg(i)));
}

QTEST_GUILESS_MAIN(TestVulkanParity)
#include "test_vulkan_parity.moc"
