// SPDX-License-Identifier: GPL-3.0-or-later
// Speculative decoding on the two shipped models (issue 45): greedy output with prompt-lookup drafts is
// the plain decode loop's token for token in deterministic mode, on a code-editing prompt (the chat
// model) and a text that repeats itself (the default model), with drafts accepted and rejected, and
// the session left with the plain session's logits bit for bit.
#include "backend/backend.h"
#include "model/model.h"
#include "session/session.h"
#include "speculative/speculative.h"
#include "test_paths.h"

#include <QTest>
#include <bit>

using namespace engine;

class TestSpeculativeModel : public QObject {
    Q_OBJECT
private slots:
    void greedyIdentityInDeterministicMode_data();
    void greedyIdentityInDeterministicMode();
};

void TestSpeculativeModel::greedyIdentityInDeterministicMode_data()
{
    QTest::addColumn<bool>("chat");
    QTest::addColumn<QString>("prompt");
    QTest::newRow("chat model, code edit")
        << true
        << QString("<|im_start|>user\nRename total to sum and give the whole function back:\n\ndef average(values):\n"
                   "    total = 0\n    for v in values:\n        total += v\n    return total / len(values)\n"
                   "<|im_end|>\n<|im_start|>assistant\n```python\ndef average(values):\n");
    QTest::newRow("default model, a list")
        << false
        << QString("Monday: bread, milk, eggs. Tuesday: bread, milk, apples. Wednesday: bread, milk, eggs. Thursday:");
}

void TestSpeculativeModel::greedyIdentityInDeterministicMode()
{
    QFETCH(bool, chat);
    QFETCH(QString, prompt);
    REQUIRE_SHIPPED_MODEL(path, chat);
    const auto model = Model::load(path);
    const auto ids = model->tokenizer().encode_ids(prompt.toStdString());
    constexpr uint32_t kNew = 32;
    Session plain(model, make_cpu_backend(model, {.threads = 0, .n_ctx = 512}), 512);
    Session spec(model, make_cpu_backend(model, {.threads = 0, .n_ctx = 512}), 512);
    plain.set_batch_invariant(true);
    spec.set_batch_invariant(true);
    plain.prefill(ids);
    spec.prefill(ids);
    const std::vector<TokenId> want = generate_plain_greedy(plain, kNew);
    const SpeculativeResult r = generate_speculative_greedy(
        spec, kNew, 8, [](std::span<const TokenId> c, uint32_t k) { return lookup_draft(c, k); });
    qInfo("%s: %u drafted, %u accepted (%.0f%%), %u passes for %u tokens", qPrintable(QString::fromStdString(path)),
          r.drafted, r.accepted, 100.0 * r.acceptance(), r.passes, kNew);
    QVERIFY2(r.accepted > 0 && r.accepted < r.drafted, "the prompt should give accepted and rejected drafts");
    QCOMPARE(r.tokens, want);
    QCOMPARE(spec.tokens(), plain.tokens());
    for (std::size_t v = 0; v < plain.logits().size(); ++v)
        QCOMPARE(std::bit_cast<uint32_t>(spec.logits()[v]), std::bit_cast<uint32_t>(plain.logits()[v]));
}

QTEST_GUILESS_MAIN(TestSpeculativeModel)
#include "test_speculative_model.moc"
