// SPDX-License-Identifier: GPL-3.0-or-later
// The chat with the instruct model (offscreen, greedy): it answers ("Paris", then "Rome" on a second
// turn that reuses the whole first prompt from the KV cache), renders a Markdown reply's fenced code
// as a monospace code block, copies a reply's raw text; a base model shows its notice, whose button
// opens the chat model.
#include "bridge/chat_client.h"
#include "bridge/engine_controller.h"
#include "main_window.h"
#include "panels/chat_panel.h"
#include "storage/conversation_store.h"
#include "test_paths.h"

#include <QClipboard>
#include <QGuiApplication>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <QTextBlock>
#include <QTextDocument>

using namespace tokenscope::ui;

class TestChatAnswers : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void instructModelAnswersAndReusesTheCache();
    void markdownReplyShowsACodeBlock();
    void promptIsRenderedAndTokenizedOncePerReply();
    void baseModelShowsANoticeThatOpensTheChatModel();
    void cleanupTestCase();

private:
    std::shared_ptr<const ReplyStats> ask(const QString& message);
    QString lastReply() const;

    QTemporaryDir m_dir;
    std::unique_ptr<ConversationStore> m_store;
    std::unique_ptr<EngineController> m_engine;
    std::unique_ptr<MainWindow> m_window;
};

void TestChatAnswers::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true);
    REQUIRE_CHAT_MODEL(path);
    QVERIFY(m_dir.isValid());
    m_store = std::make_unique<ConversationStore>(m_dir.filePath("chat.sqlite"), "chat-answers");
    QVERIFY(m_store->ok());
    m_engine = std::make_unique<EngineController>();
    m_window = std::make_unique<MainWindow>(m_engine.get(), m_store.get());
    m_window->show();
    QSignalSpy loaded(m_engine.get(), &EngineController::modelLoaded);
    m_window->openModel(QString::fromStdString(path));
    QVERIFY(loaded.wait(120000));
    QVERIFY(m_engine->model()->instruction_tuned);
    auto s = m_window->chatPanel()->sampling();
    s.temperature = 0.0f;
    s.max_tokens = 160;
    m_window->chatPanel()->setSampling(s);
}

void TestChatAnswers::cleanupTestCase()
{
    m_window.reset();
    m_engine.reset();
    m_store.reset();
}

std::shared_ptr<const ReplyStats> TestChatAnswers::ask(const QString& message)
{
    ChatPanel* chat = m_window->chatPanel();
    QSignalSpy finished(chat, &ChatPanel::replyFinished);
    chat->send(message);
    if (!finished.wait(180000))
        return nullptr;
    return chat->lastStats();
}

QString TestChatAnswers::lastReply() const
{
    // The last message's raw text, through the reply's Copy link.
    ChatPanel* chat = m_window->chatPanel();
    chat->copyMessage(chat->messageCount() - 1);
    return QGuiApplication::clipboard()->text();
}

void TestChatAnswers::instructModelAnswersAndReusesTheCache()
{
    ChatPanel* chat = m_window->chatPanel();
    chat->newChat();
    QCOMPARE(chat->baseModelNotice(), QString());

    const auto first = ask("What is the capital of France? Answer in one word.");
    QVERIFY(first);
    const QString paris = lastReply();
    qInfo("reply 1: %s", qPrintable(paris));
    QVERIFY2(paris.contains("Paris"), qPrintable(paris));
    QVERIFY(chat->transcriptText().contains("Paris"));
    // The template's own default system message went in, as llama.cpp's Jinja path renders it.
    QVERIFY(first->prompt_text.startsWith("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud."));
    // The exact-text view shows tokens as every other view does (· for a space, ⏎ for a newline),
    // not the vocabulary's raw byte-level pieces (Ġ, Ċ).
    const auto* exact = chat->findChild<QPlainTextEdit*>("exactPromptView");
    QVERIFY(exact);
    const QString tokens = exact->toPlainText().section("Tokens:\n", 1);
    QVERIFY2(tokens.contains("⏎") && tokens.contains("·") && !tokens.contains(QChar(0x120)) &&
                 !tokens.contains(QChar(0x10A)),
             qPrintable(tokens.left(300)));

    const auto second = ask("And of Italy?");
    QVERIFY(second);
    const QString rome = lastReply();
    qInfo("reply 2: %s (reused %d cached tokens; the first prompt was %d)", qPrintable(rome), second->reused_tokens,
          first->prompt_tokens);
    QVERIFY2(rome.contains("Rome"), qPrintable(rome));
    QVERIFY2(second->reused_tokens >= first->prompt_tokens,
             qPrintable(QString("reused %1 < %2").arg(second->reused_tokens).arg(first->prompt_tokens)));
    QCOMPARE(chat->messageCount(), 4);
}

void TestChatAnswers::markdownReplyShowsACodeBlock()
{
    ChatPanel* chat = m_window->chatPanel();
    chat->newChat();
    const auto stats = ask("Write a Python function that returns the sum of two numbers.");
    QVERIFY(stats);
    const QString raw = lastReply();
    QVERIFY2(raw.contains("```"), qPrintable(raw)); // the model wrote a fenced block…
    QVERIFY(raw.contains("def "));

    // …and the transcript shows it as a code block: a block with the fence (and language) from Qt's
    // Markdown parser, in a fixed-pitch font, on a shaded background; the fence itself is not shown.
    const QTextDocument* doc = chat->transcriptDocument();
    bool code_block = false, def_in_code = false;
    for (QTextBlock b = doc->begin(); b.isValid(); b = b.next()) {
        const QTextBlockFormat f = b.blockFormat();
        if (!f.hasProperty(QTextFormat::BlockCodeFence) && !f.hasProperty(QTextFormat::BlockCodeLanguage))
            continue;
        code_block = true;
        QVERIFY(f.background().style() != Qt::NoBrush);
        // (an empty line of the code, a blank line in a docstring, has no text to have a font)
        QVERIFY(b.text().isEmpty() || QTextCursor(b).charFormat().fontFixedPitch() || b.charFormat().fontFixedPitch() ||
                b.begin().fragment().charFormat().fontFixedPitch());
        if (b.text().contains("def "))
            def_in_code = true;
    }
    QVERIFY(code_block);
    QVERIFY(def_in_code);
    QVERIFY(!chat->transcriptText().contains("```"));
}

// The chat's prompt is rendered and tokenized once per reply: a reply on its own builds it once (the
// generation takes its tokens, not the text), and a reply to a conversation whose fit was just
// checked takes the fit check's prompt whole.
void TestChatAnswers::promptIsRenderedAndTokenizedOncePerReply()
{
    ChatClient& chat = m_engine->chat();
    QSignalSpy finished(&chat, &ChatClient::replyFinished);
    QSignalSpy fitted(&chat, &ChatClient::fitChecked);
    SamplingSettings s;
    s.temperature = 0.0f;
    s.max_tokens = 4;
    const quint64 first = chat.sendChat({{"user", "Name a colour."}}, s);
    QVERIFY(finished.wait(120000));
    auto stats = finished.last().at(0).value<std::shared_ptr<const ReplyStats>>();
    QCOMPARE(stats->request_id, first);
    QVERIFY(!stats->prompt_reused);
    QCOMPARE(stats->prompt_renders, 1);
    QCOMPARE(stats->prompt_tokenizations, 1);
    QCOMPARE(stats->prompt_pieces.size(), stats->prompt_tokens); // the pieces shown are the tokens sent

    const std::vector<ChatTurn> draft{{"user", "Name a fruit."}};
    const quint64 check = chat.checkFit(draft, s);
    QVERIFY(fitted.wait(60000));
    QCOMPARE(fitted.last().at(0).toULongLong(), check);
    const quint64 second = chat.sendChat(draft, s);
    QVERIFY(finished.wait(120000));
    stats = finished.last().at(0).value<std::shared_ptr<const ReplyStats>>();
    QCOMPARE(stats->request_id, second);
    QVERIFY(stats->prompt_reused);
    QCOMPARE(stats->prompt_renders, 0);
    QCOMPARE(stats->prompt_tokenizations, 0);
}

void TestChatAnswers::baseModelShowsANoticeThatOpensTheChatModel()
{
    REQUIRE_DEFAULT_MODEL(base);
    ChatPanel* chat = m_window->chatPanel();
    QSignalSpy loaded(m_engine.get(), &EngineController::modelLoaded);
    m_window->openModel(QString::fromStdString(base));
    QVERIFY(loaded.wait(120000));
    QVERIFY(!m_engine->model()->instruction_tuned);
    QVERIFY2(chat->baseModelNotice().contains("base model"), qPrintable(chat->baseModelNotice()));
    // …and which rule decided it (the default model has no chat template and no instruct name).
    QVERIFY2(chat->baseModelNotice().contains("no chat template, and its name does not say instruct"),
             qPrintable(chat->baseModelNotice()));
    auto* button = chat->findChild<QPushButton*>("openInstructModel");
    QVERIFY(button && button->isVisible());
    button->click(); // the chat model is installed: the button opens it
    QVERIFY(loaded.wait(120000));
    QVERIFY(m_engine->model()->instruction_tuned);
    QCOMPARE(m_engine->model()->architecture, QString("qwen2"));
    QCOMPARE(chat->baseModelNotice(), QString());
}

QTEST_MAIN(TestChatAnswers)
#include "test_chat_answers.moc"
