// SPDX-License-Identifier: GPL-3.0-or-later
// Deterministic mode (ForwardRequest::batch_invariant, Session::set_batch_invariant): a token's
// logits do not depend on the rest of the pass. The same 40-token prompt evaluated in batches of 512,
// 64, 7 and 1 tokens, then three decode steps, and the three steps again as one verification batch (what
// speculative decoding does): every logit bit-equal, for every weight type the engine reads, in both
// of llama.cpp's weight orders, on whichever CPU path this run uses (ctest runs the AVX2 and portable
// paths too). In the default mode the same runs differ — llama.cpp sums by batch size — and the
// differences are reported, not hidden.
#include "backend/backend.h"
#include "backend/vulkan/vulkan_backend.h"
#include "model/test_model.h"
#include "quant/ggml_type.h"
#include "session/session.h"
#include "util/error.h"

#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <cstring>

using namespace engine;

namespace {

struct Run {
    std::vector<std::vector<float>> logits; // after the prompt, then after each decode step
};

const std::vector<TokenId> kDraft{17, 93, 41};

std::vector<TokenId> prompt_of(const Model& model, std::size_t n)
{
    std::vector<TokenId> ids;
    uint32_t x = 12345;
    for (std::size_t i = 0; i < n; ++i) {
        x = x * 1664525u + 1013904223u;
        ids.push_back(TokenId(1 + (x >> 8) % (model.config().n_vocab - 1)));
    }
    return ids;
}

// The prompt in batches of n_batch, then the draft one token at a time.
Run decoded(const std::shared_ptr<const Model>& model, WeightOrder order, bool invariant, uint32_t n_batch,
            std::span<const TokenId> prompt, bool flash = false)
{
    Session s(model, make_cpu_backend(model, {.threads = 2, .n_ctx = 256, .order = order, .flash_attention = flash}),
              n_batch);
    s.set_batch_invariant(invariant);
    Run r;
    s.prefill(prompt);
    r.logits.emplace_back(s.logits().begin(), s.logits().end());
    for (TokenId t : kDraft) {
        s.decode(t);
        r.logits.emplace_back(s.logits().begin(), s.logits().end());
    }
    return r;
}

// The prompt, then the draft as one batch: the last logits (after the whole draft).
std::vector<float> verified(const std::shared_ptr<const Model>& model, WeightOrder order, bool invariant,
                            std::span<const TokenId> prompt, bool flash = false)
{
    Session s(model, make_cpu_backend(model, {.threads = 2, .n_ctx = 256, .order = order, .flash_attention = flash}),
              512);
    s.set_batch_invariant(invariant);
    s.prefill(prompt);
    std::vector<TokenId> all(prompt.begin(), prompt.end());
    all.insert(all.end(), kDraft.begin(), kDraft.end());
    const PrefillReport report = s.prefill(all);
    if (report.computed != kDraft.size())
        qFatal("the draft was not evaluated as one batch of %zu (%u computed)", kDraft.size(), report.computed);
    return {s.logits().begin(), s.logits().end()};
}

float max_difference(std::span<const float> a, std::span<const float> b)
{
    float worst = 0.0f;
    for (std::size_t i = 0; i < a.size(); ++i)
        worst = std::max(worst, std::fabs(a[i] - b[i]));
    return worst;
}

bool bit_equal(std::span<const float> a, std::span<const float> b)
{
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

} // namespace

class TestBatchInvariance : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { QVERIFY(m_dir.isValid()); }
    void tokensDoNotDependOnTheirBatch_data();
    void tokensDoNotDependOnTheirBatch();
    void aBackendOptionMakesEveryPassInvariant();
    void otherBackendsRefuseIt();

private:
    std::shared_ptr<const Model> model_of(const QString& type);
    QTemporaryDir m_dir;
};

std::shared_ptr<const Model> TestBatchInvariance::model_of(const QString& type)
{
    const std::string path = m_dir.filePath("model-" + type + ".gguf").toStdString();
    TestModelShape shape;
    if (type != "mix")
        shape.matrix_type = ggml_type_from_name(type.toStdString());
    make_test_model("llama", 3, shape).write(path);
    return Model::load(path);
}

void TestBatchInvariance::tokensDoNotDependOnTheirBatch_data()
{
    QTest::addColumn<QString>("type");
    QTest::addColumn<bool>("repacked");
    QTest::addColumn<bool>("flash");
    // the test model's own mix, then every type the engine reads: those llama.cpp repacks (Q4_0, Q4_K,
    // IQ4_NL) and those with batch kernels of their own (the float types batched, the k-quants tiled)
    for (const char* type : {"mix", "F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K",
                             "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"})
        for (const bool repacked : {false, true}) // the repacked order changes only the types llama.cpp repacks
            if (!repacked || QString(type) == "mix" || QString(type) == "Q4_0" || QString(type) == "Q4_K" ||
                QString(type) == "IQ4_NL")
                QTest::addRow("%s %s", type, repacked ? "repacked" : "plain") << QString(type) << repacked << false;
    // with llama.cpp's flash attention (the app's default): every row through its tile kernel
    for (const char* type : {"mix", "F16", "Q4_0"})
        for (const bool repacked : {false, true})
            QTest::addRow("%s %s, flash attention", type, repacked ? "repacked" : "plain")
                << QString(type) << repacked << true;
}

void TestBatchInvariance::tokensDoNotDependOnTheirBatch()
{
    QFETCH(QString, type);
    QFETCH(bool, repacked);
    QFETCH(bool, flash);
    const auto model = model_of(type);
    const WeightOrder order = repacked ? WeightOrder::Repacked : WeightOrder::Plain;
    const std::vector<TokenId> prompt = prompt_of(*model, 40);

    const Run whole = decoded(model, order, true, 512, prompt, flash);
    for (const uint32_t n_batch : {64u, 7u, 1u}) {
        const Run cut = decoded(model, order, true, n_batch, prompt, flash);
        for (std::size_t step = 0; step < whole.logits.size(); ++step)
            QVERIFY2(bit_equal(whole.logits[step], cut.logits[step]),
                     qPrintable(
                         QString("batches of %1, %2: max |Δ| %3")
                             .arg(n_batch)
                             .arg(step == 0 ? QString("the prompt's last token") : QString("decode step %1").arg(step))
                             .arg(double(max_difference(whole.logits[step], cut.logits[step])))));
    }
    QVERIFY2(bit_equal(whole.logits.back(), verified(model, order, true, prompt, flash)),
             "the draft verified as one batch differs from the draft decoded token by token");

    // The default mode, for comparison: reported, not asserted (llama.cpp's order depends on the batch);
    // once, on the path this CPU chooses (the forced paths' runs are the costly ones in CI).
    if (qEnvironmentVariableIsSet("TOKENSCOPE_SIMD"))
        return;
    const Run plain_whole = decoded(model, order, false, 512, prompt, flash);
    const Run plain_cut = decoded(model, order, false, 7, prompt, flash);
    float worst = 0.0f;
    int differing = 0;
    for (std::size_t step = 0; step < plain_whole.logits.size(); ++step) {
        worst = std::max(worst, max_difference(plain_whole.logits[step], plain_cut.logits[step]));
        differing += !bit_equal(plain_whole.logits[step], plain_cut.logits[step]);
    }
    qInfo("default mode, batches of 512 vs 7: %d of %zu logit vectors differ, max |Δ| %g; verification batch "
          "vs decode: max |Δ| %g",
          differing, plain_whole.logits.size(), double(worst),
          double(max_difference(plain_whole.logits.back(), verified(model, order, false, prompt, flash))));
}

// CpuBackendOptions::batch_invariant: every pass of that backend in deterministic mode without
// asking (the lab's and the text analysis's own requests) — the same bits as the session's flag.
void TestBatchInvariance::aBackendOptionMakesEveryPassInvariant()
{
    const auto model = model_of("Q4_K");
    const std::vector<TokenId> prompt = prompt_of(*model, 40);
    const Run flagged = decoded(model, WeightOrder::Repacked, true, 512, prompt);
    for (const uint32_t n_batch : {512u, 7u}) {
        Session s(model,
                  make_cpu_backend(
                      model, {.threads = 2, .n_ctx = 256, .order = WeightOrder::Repacked, .batch_invariant = true}),
                  n_batch);
        QVERIFY(!s.batch_invariant()); // the session asks nothing: the backend does it
        s.prefill(prompt);
        QVERIFY2(bit_equal(flagged.logits[0], s.logits()), qPrintable(QString("batches of %1").arg(n_batch)));
        for (std::size_t i = 0; i < kDraft.size(); ++i) {
            s.decode(kDraft[i]);
            QVERIFY(bit_equal(flagged.logits[i + 1], s.logits()));
        }
    }
    // and without the option the same backend sums as llama.cpp does (Q4_K: by batch size)
    const Run plain = decoded(model, WeightOrder::Repacked, false, 512, prompt);
    QVERIFY(!bit_equal(flagged.logits[0], plain.logits[0]));
}

// A backend whose kernels do not promise it refuses the mode by name rather than ignoring it.
void TestBatchInvariance::otherBackendsRefuseIt()
{
#ifdef TOKENSCOPE_HAVE_VULKAN
    bool device = false;
    for (const auto& d : list_vulkan_devices())
        device |= d.usable;
    if (!device)
        QSKIP("no usable Vulkan device here: the refusal is checked where one is (lavapipe in CI)");
    const auto model = model_of("mix");
    Session s(model, make_vulkan_backend(model, {.device = -1, .n_ctx = 128}));
    try {
        s.set_batch_invariant(true);
        QFAIL("the Vulkan backend accepted deterministic mode");
    } catch (const UnsupportedError& e) {
        QVERIFY2(std::string(e.what()).find("deterministic") != std::string::npos, e.what());
    }
    QVERIFY(!s.batch_invariant());
#else
    QSKIP("built without Vulkan: no other backend to refuse it");
#endif
}

QTEST_MAIN(TestBatchInvariance)
#include "test_batch_invariance.moc"
