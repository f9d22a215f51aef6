// SPDX-License-Identifier: GPL-3.0-or-later
// The tokenizer panel with the real default model: typing produces the tokens the engine's
// tokenizer gives (counted and spanned), and a token's details show its id, bytes and offsets.
#include "bridge/engine_controller.h"
#include "bridge/token_selection.h"
#include "line_breaks.h"
#include "model/model.h"
#include "panels/tokenizer_comparison.h"
#include "panels/tokenizer_panel.h"
#include "test_paths.h"
#include "text_review.h"
#include "tokenizer/comparison_tokenizer.h"
#include "tokenizer/token_diff.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLocale>
#include <QPlainTextEdit>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QTextBrowser>

using namespace tokenscope::ui;

class TestTokenizerPanel : public QObject {
    Q_OBJECT
private slots:
    void cleanup(); // after every function: the words its state shows, proofread
    void tokensFollowTheText();
    void exportsJsonAndCsv();
    void tenThousandCharacters();
    void whatChangedShowsSplitsAndTheCount();
    void theFirstTextTypedIsNotAChange();
    void comparesWithAnotherVocabulary();
    void linesBreakBetweenWords();

private:
    void load();
    std::unique_ptr<EngineController> m_engine;
    std::unique_ptr<TokenSelection> m_selection;
    std::unique_ptr<TokenizerPanel> m_panel;
    std::shared_ptr<const engine::Model> m_model;
};

void TestTokenizerPanel::load()
{
    if (m_panel)
        return;
    REQUIRE_DEFAULT_MODEL(path);
    m_model = engine::Model::load(path);
    m_engine = std::make_unique<EngineController>();
    m_selection = std::make_unique<TokenSelection>();
    m_panel = std::make_unique<TokenizerPanel>(m_engine.get(), m_selection.get());
    m_panel->resize(900, 700);
    m_panel->show();
    QSignalSpy loaded(m_engine.get(), &EngineController::modelLoaded);
    m_engine->loadModel(QString::fromStdString(path), 2, 256);
    QVERIFY(loaded.wait(120000));
}

void TestTokenizerPanel::cleanup()
{
    if (m_panel)
        QVERIFY_WORDING(m_panel.get());
}

void TestTokenizerPanel::exportsJsonAndCsv()
{
    load();
    const QString text = "Say \"hi\", then\nnaïve 東京";
    m_panel->setText(text);
    QTRY_VERIFY_WITH_TIMEOUT(m_panel->current() && m_panel->current()->text == text, 10000);
    const auto& tokens = m_panel->current()->tokens;

    const QJsonObject json = QJsonDocument::fromJson(m_panel->tokensJson().toUtf8()).object();
    QCOMPARE(json["text"].toString(), text);
    const QJsonArray array = json["tokens"].toArray();
    QCOMPARE(array.size(), qsizetype(tokens.size()));
    QCOMPARE(json["count"].toInt(), int(tokens.size()));
    QByteArray joined;
    for (qsizetype i = 0; i < array.size(); ++i) {
        const QJsonObject t = array[i].toObject();
        QCOMPARE(t["id"].toInt(), tokens[std::size_t(i)].id);
        QCOMPARE(t["begin"].toInt(), tokens[std::size_t(i)].begin);
        joined += QByteArray::fromHex(t["bytes"].toString().toLatin1());
    }
    QCOMPARE(joined, text.toUtf8()); // the bytes of the tokens are the text

    // CSV: a header and one record per token; quoted fields parse back to the same ids and bytes.
    const QString csv = m_panel->tokensCsv();
    QVERIFY(csv.startsWith("index,id,piece,type,begin,end,bytes,text\r\n"));
    QStringList records;
    QString record;
    bool quoted = false;
    for (qsizetype i = 0; i < csv.size(); ++i) {
        const QChar c = csv[i];
        if (c == '"')
            quoted = !quoted;
        if (!quoted && c == '\r' && i + 1 < csv.size() && csv[i + 1] == '\n') {
            records << record;
            record.clear();
            ++i;
            continue;
        }
        record += c;
    }
    QCOMPARE(records.size(), qsizetype(tokens.size()) + 1);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        const QStringList f = records[qsizetype(i) + 1].split(',');
        QCOMPARE(f[1].toInt(), tokens[i].id);
    }

    QTemporaryDir dir;
    QVERIFY(m_panel->exportTo(dir.filePath("t.json")));
    QFile saved(dir.filePath("t.json"));
    QVERIFY(saved.open(QIODevice::ReadOnly));
    QCOMPARE(QString::fromUtf8(saved.readAll()), m_panel->tokensJson());
    QVERIFY(m_panel->exportTo(dir.filePath("t.csv")));
    QString error;
    QVERIFY(!m_panel->exportTo(dir.filePath("missing/dir/t.csv"), &error));
    QVERIFY2(error.contains("missing/dir/t.csv"), qPrintable(error));
}

void TestTokenizerPanel::tenThousandCharacters()
{
    load();
    QString text;
    const QString paragraph = "Tokenizers split text into pieces; a misspeled word, 12345 numbers, code like `x += 1;` "
                              "and 東京 or émigré all cost different amounts. ";
    while (text.size() < 10000)
        text += paragraph;
    text.truncate(10000);
    m_panel->setText(text);
    QTRY_VERIFY_WITH_TIMEOUT(m_panel->current() && m_panel->current()->text == text, 20000);
    const QByteArray utf8 = text.toUtf8();
    const auto expected = m_model->tokenizer().encode(std::string_view(utf8.constData(), std::size_t(utf8.size())));
    QCOMPARE(m_panel->current()->tokens.size(), expected.size());
    QCOMPARE(m_panel->current()->tokens.back().id, expected.back().id);
    // Reported, not asserted (no timed assertions): see README, "Tokenizer panel".
    qInfo("10,000 characters: %zu tokens, tokenized in %.1f ms on the engine thread, rendered in %.1f ms",
          expected.size(), m_panel->current()->ms, m_panel->lastRenderMs());

    // A paste far longer: every token counted and exported, the spans drawn in chunks up to the cap,
    // with a line that says how many more there are.
    QString paste;
    while (paste.size() < 120000)
        paste += paragraph;
    QSignalSpy rendered(m_panel.get(), &TokenizerPanel::rendered);
    m_panel->setText(paste);
    QTRY_VERIFY_WITH_TIMEOUT(m_panel->current() && m_panel->current()->text == paste, 30000);
    QTRY_VERIFY_WITH_TIMEOUT(m_panel->drawnTokens() == 2000 && !rendered.isEmpty(), 30000);
    const int n = int(m_panel->current()->tokens.size());
    QVERIFY(n > 20000);
    QVERIFY(m_panel->countsText().startsWith(QLocale().toString(n) + " tokens"));
    QVERIFY(m_panel->findChild<QTextBrowser*>()->toPlainText().contains(
        QString("%1 more tokens are not drawn").arg(QLocale().toString(n - 2000))));
    QCOMPARE(QJsonDocument::fromJson(m_panel->tokensJson().toUtf8())["tokens"].toArray().size(), n);
}

void TestTokenizerPanel::tokensFollowTheText()
{
    REQUIRE_DEFAULT_MODEL(path);
    EngineController engine;
    TokenSelection selection;
    TokenizerPanel panel(&engine, &selection);
    panel.show();
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    engine.loadModel(QString::fromStdString(path), 2, 256);
    QVERIFY(loaded.wait(120000));
    const QString text = "Hello world, naïve 東京 🤖";
    QSignalSpy updated(&panel, &TokenizerPanel::updated);
    auto* input = panel.findChild<QPlainTextEdit*>("tokenizerInput");
    QVERIFY(input);
    input->setPlainText(text); // as if typed: debounced, tokenized on the engine thread
    QTRY_VERIFY_WITH_TIMEOUT(panel.current() && panel.current()->text == text, 10000);

    const auto model = engine::Model::load(path);
    const QByteArray utf8 = text.toUtf8();
    const auto expected = model->tokenizer().encode(std::string_view(utf8.constData(), std::size_t(utf8.size())));
    const auto& got = panel.current()->tokens;
    QCOMPARE(got.size(), expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        QCOMPARE(got[i].id, expected[i].id);
        QCOMPARE(got[i].begin, int(expected[i].byte_begin));
        QCOMPARE(got[i].end, int(expected[i].byte_end));
    }
    QVERIFY2(panel.countsText().startsWith(
                 QString("%1 tokens · %2 characters · %3 bytes").arg(got.size()).arg(text.size()).arg(utf8.size())),
             qPrintable(panel.countsText()));
    // One of each reads as one: BOS alone is "1 token", one ASCII letter "1 character · 1 byte" (the
    // counts said "1 tokens").
    input->setPlainText("a");
    QTRY_VERIFY_WITH_TIMEOUT(panel.current() && panel.current()->text == "a", 10000);
    QVERIFY2(panel.countsText().contains(
                 QString("%1 · 1 character · 1 byte")
                     .arg(panel.current()->tokens.size() == 1 ? QString("1 token") : QString("2 tokens"))),
             qPrintable(panel.countsText()));
    input->setPlainText("");
    QTRY_VERIFY_WITH_TIMEOUT(panel.current() && panel.current()->text.isEmpty(), 10000);
    QVERIFY2(panel.countsText().startsWith(QString(
                 model->tokenizer().vocab().add_bos ? "1 token · 0 characters · 0 bytes" : "0 tokens · 0 characters")),
             qPrintable(panel.countsText()));
    input->setPlainText(text);
    QTRY_VERIFY_WITH_TIMEOUT(panel.current() && panel.current()->text == text, 10000);
    panel.showDetails(1); // "Hello"
    QVERIFY2(panel.detailText().contains(QString("id %1").arg(expected[1].id)) &&
                 panel.detailText().contains("48 65 6c 6c 6f") && panel.detailText().contains("offsets [0, 5)"),
             qPrintable(panel.detailText()));
    panel.showDetails(0); // <bos>, added by the tokenizer
    QVERIFY(panel.detailText().contains("control"));
}

// Typing into the empty box: the first text is not an edit of anything (it was listed whole as
// "added" on the first keystroke); the edits after it are.
void TestTokenizerPanel::theFirstTextTypedIsNotAChange()
{
    REQUIRE_DEFAULT_MODEL(path);
    EngineController engine;
    TokenSelection selection;
    TokenizerPanel panel(&engine, &selection);
    panel.show();
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    engine.loadModel(QString::fromStdString(path), 2, 256);
    QVERIFY(loaded.wait(120000));
    QTRY_VERIFY_WITH_TIMEOUT(panel.current() && panel.current()->text.isEmpty(), 10000); // the empty box
    auto* input = panel.findChild<QPlainTextEdit*>("tokenizerInput");
    QVERIFY(input);
    input->setFocus();
    QTest::keyClicks(input, "Hello");
    QTRY_VERIFY_WITH_TIMEOUT(panel.current() && panel.current()->text == "Hello", 10000);
    QVERIFY2(!panel.changesText().contains("added"), qPrintable(panel.changesText()));
    QVERIFY(panel.changedRanges().empty());
    QTest::keyClicks(input, " world");
    QTRY_VERIFY_WITH_TIMEOUT(panel.current() && panel.current()->text == "Hello world", 10000);
    QVERIFY2(panel.changesText().contains("added"), qPrintable(panel.changesText()));
}

void TestTokenizerPanel::whatChangedShowsSplitsAndTheCount()
{
    load();
    const auto tokens_of = [&](const QString& text) {
        const QByteArray utf8 = text.toUtf8();
        return m_model->tokenizer().encode(std::string_view(utf8.constData(), std::size_t(utf8.size())));
    };
    m_panel->setText("The quick brown fox");
    QTRY_VERIFY_WITH_TIMEOUT(m_panel->current() && m_panel->current()->text == "The quick brown fox", 10000);
    m_panel->setText("The quikc brown fox");
    QTRY_VERIFY_WITH_TIMEOUT(m_panel->current() && m_panel->current()->text == "The quikc brown fox", 10000);
    const auto before = tokens_of("The quick brown fox"), after = tokens_of("The quikc brown fox");
    const engine::TokenDiff diff = engine::diff_tokens("The quick brown fox", before, "The quikc brown fox", after);
    QCOMPARE(diff.changes.size(), std::size_t(1));
    QCOMPARE(diff.changes[0].kind, engine::TokenChangeKind::Split);
    QCOMPARE(m_panel->changedRanges().size(), std::size_t(1));
    QCOMPARE(m_panel->changedRanges()[0],
             std::make_pair(int(diff.changes[0].new_first), int(diff.changes[0].new_count)));
    const QString text = m_panel->changesText();
    QVERIFY2(
        text.contains("split into") &&
            text.contains(
                QString("%1 → %2 tokens (+%3)").arg(before.size()).arg(after.size()).arg(after.size() - before.size())),
        qPrintable(text));
    // The new pieces are marked in the view.
    QVERIFY(m_panel->viewHtml().contains("#d0453a"));
}

void TestTokenizerPanel::comparesWithAnotherVocabulary()
{
    load();
    const QString text = "Tokenizers differ: naïve café, 12345, and code_like_this().";
    m_panel->setText(text);
    QTRY_VERIFY_WITH_TIMEOUT(m_panel->current() && m_panel->current()->text == text, 10000);
    TokenizerComparison* comparison = m_panel->comparison();
    const QString vocab = QString(TOKENSCOPE_TEST_DATA_DIR) + "/tokenizer/bpe-llama-bpe.gguf";
    comparison->addTokenizer(vocab);
    QTRY_VERIFY_WITH_TIMEOUT(comparison->entries().size() == 1 && comparison->settled(), 10000);
    const auto reference = engine::ComparisonTokenizer::open(vocab.toStdString());
    const QByteArray utf8 = text.toUtf8();
    const auto expected = reference->encode(std::string_view(utf8.constData(), std::size_t(utf8.size())));
    const auto& got = comparison->entries()[0].tokens;
    QCOMPARE(got.size(), expected.size());
    for (std::size_t i = 0; i < got.size(); ++i)
        QCOMPARE(got[i].first, int(expected[i].id));
    const int model_count = int(m_panel->current()->tokens.size());
    QVERIFY2(comparison->html().contains(QString("%1 vs %2").arg(expected.size()).arg(model_count)),
             qPrintable(comparison->html()));

    // A new text is tokenized again by every comparison.
    m_panel->setText("A second text.");
    QTRY_VERIFY_WITH_TIMEOUT(
        m_panel->current() && m_panel->current()->text == "A second text." && comparison->settled(), 10000);
    QCOMPARE(comparison->entries()[0].tokens.size(), reference->encode("A second text.").size());

    // A file that is not a tokenizer: a clear message naming it, nothing added.
    QTemporaryDir dir;
    const QString bad = dir.filePath("notes.gguf");
    QFile f(bad);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("this is not a GGUF file");
    f.close();
    QSignalSpy failed(comparison, &TokenizerComparison::failed);
    comparison->addTokenizer(bad);
    QVERIFY(failed.wait(10000));
    QVERIFY2(failed.first().first().toString().contains("notes.gguf"), qPrintable(failed.first().first().toString()));
    QCOMPARE(comparison->entries().size(), std::size_t(1));
    comparison->removeTokenizer(0);
    QVERIFY(comparison->entries().empty());
}

// The token view shows spaces as "·": its lines still break between words, never inside one.
void TestTokenizerPanel::linesBreakBetweenWords()
{
    load();
    QString text;
    for (int i = 0; i < 4; ++i)
        text += "Nobody knew what had happened to the old keeper of the lighthouse that winter night. ";
    m_panel->setText(text);
    QTRY_VERIFY_WITH_TIMEOUT(m_panel->current() && m_panel->current()->text == text, 10000);
    auto* view = m_panel->findChild<QTextBrowser*>("tokenizerView");
    QVERIFY(view);
    int breaks = 0;
    QStringList inside;
    // the spans are drawn in chunks, a turn of the event loop each
    QTRY_VERIFY_WITH_TIMEOUT((inside = testsupport::words_broken(view->document(), 360, &breaks), breaks >= 4), 10000);
    QVERIFY2(inside.isEmpty(), qPrintable("lines break inside words: " + inside.join(" | ")));
}

QTEST_MAIN(TestTokenizerPanel)
#include "test_tokenizer_panel.moc"
