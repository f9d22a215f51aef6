// SPDX-License-Identifier: GPL-3.0-or-later
// The Vulkan backend against the CPU backend on the default model (Gemma 3 270M: Q5_0, Q8_0, Q4_K and
// Q6_K weights; the 262144 × 640 embedding/output matrix is larger than lavapipe's 128 MiB binding
// limit, so it is split into row ranges): backend_parity.h's checks with the validation layer on, for
// one short prompt (the one-row and small-batch orders). Lavapipe runs every shader on the CPU, so a
// real model gets one short prompt each; long prompts (the k-quants' tiled order, micro-batches of 128
// tokens on the device against one pass on the CPU) run on the random-weight models of
// test_vulkan_parity.
// The chat model (Qwen2.5-Coder 0.5B Instruct: GQA 7:1, Q/K/V biases, Q5_0/Q8_0/Q4_K/Q6_K) on one
// short chat prompt: the exact arithmetic is bit-equal to the CPU there too. Both models also run in
// the default f32 arithmetic, held to the tolerance criteria.
// Heavy (lavapipe runs the 268M- and 494M-parameter models on the CPU cores): labelled "model".
#include "vulkan_test_support.h"

#include "backend_parity.h"
#include "model/model.h"
#include "test_paths.h"

#include <QTest>
#include <cstdlib>
#include <string>

using namespace engine;

class TestVulkanParityModel : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { REQUIRE_VULKAN(); }
    void cleanup() { REQUIRE_NO_VALIDATION_MESSAGES(); }
    void defaultModel_data();
    void defaultModel();
    void chatModelBitEqual();
    void chatModelF32();
};

void TestVulkanParityModel::defaultModel_data()
{
    QTest::addColumn<QString>("prompt");
    QTest::addColumn<int>("steps");
    QTest::addColumn<bool>("exact");
    const QString prompt("The capital of France is Paris. The capital of Germany is");
    QTest::newRow("short, exact") << prompt << 32 << true;
    QTest::newRow("short, f32") << prompt << 32 << false;
}

void TestVulkanParityModel::defaultModel()
{
    QFETCH(QString, prompt);
    QFETCH(int, steps);
    QFETCH(bool, exact);
    REQUIRE_DEFAULT_MODEL(path);
    const auto model = Model::load(path);
    auto cpu = make_cpu_backend(model, {.threads = 0, .n_ctx = 512});
    auto vulkan = make_vulkan_backend(model, {.device = -1, .n_ctx = 512, .validation = true, .exact = exact});
    qInfo("%s, %.0f MiB of weights on the device", vulkan->name().c_str(),
          double(vulkan->memory().weight_bytes) / 1048576.0);
    const auto tokens = model->tokenizer().encode_ids(prompt.toStdString());
    QVERIFY(tokens.size() <= 32); // lavapipe is slow: one short prompt
    testsupport::ParityReport r;
    // the f32 path: the tolerance criteria for the default model
    testsupport::run_parity(*cpu, *vulkan, tokens, steps, r,
                            {.min_pearson = exact ? 0.9999 : 0.999, .attention = exact ? 1e-4 : 1e-3});
    if (exact)
        QCOMPARE(r.max_abs_diff, 0.0);
    qInfo("default model, %zu prompt tokens: logits Pearson ≥ %.7f, max |Δ| %.3g; greedy %d/%d steps identical%s; "
          "attention weights max |Δ| %.3g",
          tokens.size(), r.min_pearson, r.max_abs_diff, r.greedy_matched, r.greedy_steps,
          r.diverged_at_tie ? " (then a near-tie on the CPU)" : "", r.max_attention_diff);
}

void TestVulkanParityModel::chatModelBitEqual()
{
    REQUIRE_CHAT_MODEL(path);
    const auto model = Model::load(path);
    auto cpu = make_cpu_backend(model, {.threads = 0, .n_ctx = 256});
    auto vulkan = make_vulkan_backend(model, {.device = -1, .n_ctx = 256, .validation = true, .exact = true});
    const auto tokens = model->tokenizer().encode_ids(
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n");
    QVERIFY(tokens.size() <= 32); // lavapipe is slow: one short prompt
    testsupport::ParityReport r;
    testsupport::run_parity(*cpu, *vulkan, tokens, 8, r);
    qInfo("chat model, %zu prompt tokens: logits Pearson ≥ %.7f, max |Δ| %.3g; greedy %d/%d; attention max |Δ| %.3g",
          tokens.size(), r.min_pearson, r.max_abs_diff, r.greedy_matched, r.greedy_steps, r.max_attention_diff);
    QCOMPARE(r.max_abs_diff, 0.0);
    QCOMPARE(r.max_attention_diff, 0.0);
    QCOMPARE(r.greedy_matched, 8);
}

// The default arithmetic on the chat model: the tolerance criteria (Pearson ≥ 0.999, greedy tokens
// identical up to the first CPU near-tie, attention within 1e-3).
void TestVulkanParityModel::chatModelF32()
{
    REQUIRE_CHAT_MODEL(path);
    const auto model = Model::load(path);
    auto cpu = make_cpu_backend(model, {.threads = 0, .n_ctx = 256});
    auto vulkan = make_vulkan_backend(model, {.device = -1, .n_ctx = 256, .validation = true});
    QVERIFY(QString::fromStdString(vulkan->name()).endsWith(", f32)"));
    const auto tokens = model->tokenizer().encode_ids(
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n");
    QVERIFY(tokens.size() <= 32);
    testsupport::ParityReport r;
    testsupport::run_parity(*cpu, *vulkan, tokens, 8, r, {.min_pearson = 0.999, .attention = 1e-3});
    qInfo("chat model, f32 path, %zu prompt tokens: logits Pearson ≥ %.7f, max |Δ| %.3g; greedy %d/%d%s; attention "
          "max |Δ| %.3g",
          tokens.size(), r.min_pearson, r.max_abs_diff, r.greedy_matched, r.greedy_steps,
          r.diverged_at_tie ? " (then a near-tie on the CPU)" : "", r.max_attention_diff);
}

QTEST_GUILESS_MAIN(TestVulkanParityModel)
#include "test_vulkan_parity_model.moc"
