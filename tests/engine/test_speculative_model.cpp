// SPDX-License-Identifier: GPL-3.0-or-later
// Speculative decoding on the two shipped models (issue 45): greedy output with prompt-lookup and
// early-exit drafts is the plain decode loop's token for token in deterministic mode, on a code-editing
// prompt (the chat model) and a text that repeats itself (the default model), with drafts accepted and
// rejected, and the session left with the plain session's logits bit for bit.
#include "backend/backend.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "model/test_model.h"
#include "session/session.h"
#include "speculative/speculative.h"
#include "test_paths.h"

#include <QTemporaryDir>
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
    QTest::addColumn<QString>("source");
    QTest::addColumn<QString>("prompt");
    const QString edit =
        "<|im_start|>user\nRename total to sum and give the whole function back:\n\ndef average(values):\n"
        "    total = 0\n    for v in values:\n        total += v\n    return total / len(values)\n"
        "<|im_end|>\n<|im_start|>assistant\n```python\ndef average(values):\n";
    const QString list =
        "Monday: bread, milk, eggs. Tuesday: bread, milk, apples. Wednesday: bread, milk, eggs. Thursday:";
    QTest::newRow("chat model, code edit, lookup") << true << "lookup" << edit;
    QTest::newRow("default model, a list, lookup") << false << "lookup" << list;
    QTest::newRow("chat model, a question, early exit 21/24")
        << true << "early-exit:21"
        << "<|im_start|>user\nWhat is a hash map?<|im_end|>\n<|im_start|>assistant\n";
    QTest::newRow("default model, a list, early exit 16/18") << false << "early-exit:16" << list;
    // a random-weight draft model carrying the chat model's vocabulary (make-test-model --vocab)
    QTest::newRow("chat model, code edit, random draft with its vocabulary") << true << "draft:twin" << edit;
}

void TestSpeculativeModel::greedyIdentityInDeterministicMode()
{
    QFETCH(bool, chat);
    QFETCH(QString, source);
    QFETCH(QString, prompt);
    REQUIRE_SHIPPED_MODEL(path, chat);
    const auto model = Model::load(path);
    const auto ids = model->tokenizer().encode_ids(prompt.toStdString());
    // the random draft is always wrong: a shorter run with narrower drafts tests its cuts at a quarter of the cost
    const bool random_draft = source == "draft:twin";
    const uint32_t kNew = random_draft ? 12 : 32, kDraft = random_draft ? 2 : 8;
    const BackendFactory backend_for = [](std::shared_ptr<const Model> m) {
        return make_cpu_backend(m, {.threads = 0, .n_ctx = 512});
    };
    Session plain(model, backend_for(model), 512);
    Session spec(model, backend_for(model), 512);
    plain.set_batch_invariant(true);
    spec.set_batch_invariant(true);
    plain.prefill(ids);
    spec.prefill(ids);
    SamplerConfig greedy;
    greedy.greedy = true;
    greedy.stage_view_size = 0;
    QTemporaryDir dir;
    if (source == "draft:twin") { // passes llama.cpp's vocabulary rules: the same tokens, flags and ids
        const auto vocab = gguf::GgufFile::open(path);
        const QString twin = dir.filePath("twin.gguf");
        make_test_model("qwen2", 7, vocab.get()).write(twin.toStdString());
        source = "draft:" + twin;
    }
    const auto drafter = make_drafter(parse_draft_source(source.toStdString()), model, backend_for, greedy, &spec);
    Sampler s1(greedy), s2(greedy);
    const std::vector<TokenId> want = generate_plain(plain, kNew, s1);
    const SpeculativeResult r = generate_speculative(spec, kNew, *drafter, s2, {.draft_max = kDraft});
    qInfo("%s, %s: %u drafted, %u accepted (%.0f%%), %u passes for %u tokens", qPrintable(QString::fromStdString(path)),
          drafter->name().c_str(), r.drafted, r.accepted, 100.0 * r.acceptance(), r.passes, kNew);
    if (random_draft) // random weights: its drafts are rejected (every cut tested)
        QVERIFY(r.drafted > 0 && r.accepted < r.drafted);
    else
        QVERIFY2(r.accepted > 0 && r.accepted < r.drafted, "the prompt should give accepted and rejected drafts");
    QCOMPARE(r.tokens, want);
    QCOMPARE(spec.tokens(), plain.tokens());
    for (std::size_t v = 0; v < plain.logits().size(); ++v)
        QCOMPARE(std::bit_cast<uint32_t>(spec.logits()[v]), std::bit_cast<uint32_t>(plain.logits()[v]));
}

QTEST_GUILESS_MAIN(TestSpeculativeModel)
#include "test_speculative_model.moc"
