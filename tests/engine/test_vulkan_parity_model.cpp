// SPDX-License-Identifier: GPL-3.0-or-later
// The Vulkan backend against the CPU backend on the default model (Gemma 3 270M: Q5_0, Q8_0, Q4_K and
// Q6_K weights; the 262144 × 640 embedding/output matrix is larger than lavapipe's 128 MiB binding
// limit, so it is split into row ranges): backend_parity.h's checks with the validation layer on, for
// a short prompt (the one-row and small-batch orders) and a long one (the k-quants' tiled order,
// and micro-batches of 128 tokens on the device against one pass on the CPU).
// Heavy (lavapipe runs the 268M-parameter model on the CPU cores): labelled "model".
#include "vulkan_test_support.h"

#include "backend_parity.h"
#include "model/model.h"
#include "test_paths.h"

#include <QTest>

using namespace engine;

class TestVulkanParityModel : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { REQUIRE_VULKAN(); }
    void cleanup() { REQUIRE_NO_VALIDATION_MESSAGES(); }
    void defaultModel_data();
    void defaultModel();
};

void TestVulkanParityModel::defaultModel_data()
{
    QTest::addColumn<QString>("prompt");
    QTest::addColumn<int>("steps");
    QTest::newRow("short") << QString("The capital of France is Paris. The capital of Germany is") << 32;
    QString long_prompt;
    for (int i = 0; long_prompt.size() < 1200; ++i)
        long_prompt += QString("Paragraph %1: the river bends past the mill, and the miller counts the sacks of grain. ").arg(i);
    QTest::newRow("long, micro-batches") << long_prompt << 8;
}

void TestVulkanParityModel::defaultModel()
{
    QFETCH(QString, prompt);
    QFETCH(int, steps);
    REQUIRE_DEFAULT_MODEL(path);
    const auto model = Model::load(path);
    auto cpu = make_cpu_backend(model, {.threads = 0, .n_ctx = 512});
    auto vulkan = make_vulkan_backend(model, {.device = -1, .n_ctx = 512, .validation = true});
    qInfo("%s, %.0f MiB of weights on the device", vulkan->name().c_str(), double(vulkan->memory().weight_bytes) / 1048576.0);
    const auto tokens = model->tokenizer().encode_ids(prompt.toStdString());
    testsupport::ParityReport r;
    testsupport::run_parity(*cpu, *vulkan, tokens, steps, r);
    qInfo("default model, %zu prompt tokens: logits Pearson ≥ %.7f, max |Δ| %.3g; greedy %d/%d steps identical%s; attention weights max |Δ| %.3g",
          tokens.size(), r.min_pearson, r.max_abs_diff, r.greedy_matched, r.greedy_steps, r.diverged_at_tie ? " (then a near-tie on the CPU)" : "",
          r.max_attention_diff);
}

QTEST_GUILESS_MAIN(TestVulkanParityModel)
#include "test_vulkan_parity_model.moc"
