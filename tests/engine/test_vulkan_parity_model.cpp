// SPDX-License-Identifier: GPL-3.0-or-later
// The Vulkan backend against the CPU backend on the default model (Gemma 3 270M: Q5_0, Q8_0, Q4_K and
// Q6_K weights; the 262144 × 640 embedding/output matrix is larger than lavapipe's 128 MiB binding
// limit, so it is split into row ranges): backend_parity.h's checks with the validation layer on, for
// one short prompt (the one-row and small-batch orders). Lavapipe runs every shader on the CPU, so a
// real model gets one short prompt each; long prompts (the k-quants' tiled order, micro-batches of 128
// tokens on the device against one pass on the CPU) run on the random-weight models of
// test_vulkan_parity.
// The chat model (Qwen2.5-Coder 0.5B Instruct: GQA 7:1, Q/K/V biases, Q5_0/Q8_0/Q4_K/Q6_K) on one
// short chat prompt: the exact arithmetic is bit-equal to the CPU there too.
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
};

void TestVulkanParityModel::defaultModel_data()
{
    QTest::addColumn<QString>("prompt");
    QTest::addColumn<int>("steps");
    QTest::newRow("short") << QString("The capital of France is Paris. The capital of Germany is") << 32;
}

void TestVulkanParityModel::defaultModel()
{
    QFETCH(QString, prompt);
    QFETCH(int, steps);
    REQUIRE_DEFAULT_MODEL(path);
    const auto model = Model::load(path);
    auto cpu = make_cpu_backend(model, {.threads = 0, .n_ctx = 512});
    auto vulkan = make_vulkan_backend(model, {.device = -1, .n_ctx = 512, .validation = true});
    qInfo("%s, %.0f MiB of weights on the device", vulkan->name().c_str(),
          double(vulkan->memory().weight_bytes) / 1048576.0);
    const auto tokens = model->tokenizer().encode_ids(prompt.toStdString());
    testsupport::ParityReport r;
    testsupport::run_parity(*cpu, *vulkan, tokens, steps, r);
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
    auto vulkan = make_vulkan_backend(model, {.device = -1, .n_ctx = 256, .validation = true});
    const auto tokens = model->tokenizer().encode_ids(
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n");
    QVERIFY(tokens.size() <= 32); // lavapipe is slow: one short prompt
    testsupport::ParityReport r;
    testsupport::run_parity(*cpu, *vulkan, tokens, 8, r);
    qInfo("chat model, %zu prompt tokens: logits Pearson ≥ %.7f, max |Δ| %.3g; greedy %d/%d; attention max |Δ| %.3g",
          tokens.size(), r.min_pearson, r.max_abs_diff, r.greedy_matched, r.greedy_steps, r.max_attention_diff);
    if (const char* e = std::getenv("TOKENSCOPE_VULKAN_EXACT"); e && std::string(e) == "0")
        QSKIP("TOKENSCOPE_VULKAN_EXACT=0 selects the f32 shaders: bit-equality is not claimed there");
    QCOMPARE(r.max_abs_diff, 0.0);
    QCOMPARE(r.max_attention_diff, 0.0);
    QCOMPARE(r.greedy_matched, 8);
}

QTEST_GUILESS_MAIN(TestVulkanParityModel)
#include "test_vulkan_parity_model.moc"
