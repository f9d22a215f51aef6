// SPDX-License-Identifier: GPL-3.0-or-later
// The desktop app with the real default model (offscreen): load it, send a message, watch streamed
// text arrive, stop mid-reply, send a second turn that reuses the cached prefix, restart and find
// the conversation; kill the app with SIGKILL during a reply and find every completed message.
#include "bridge/chat_client.h"
#include "bridge/engine_controller.h"
#include "main_window.h"
#include "panels/chat_panel.h"
#include "panels/stepper_panel.h"
#include "storage/conversation_store.h"
#include "test_paths.h"
#include "text_review.h"
#include "widgets/bounded_count_box.h"

#include <QPlainTextEdit>
#include <QProcess>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

using namespace tokenscope::ui;

class TestChatUi : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void chatStreamsStopsReusesAndPersists();
    void sigkillDuringReplyLosesNoCompletedMessage();
    void overflowIsToldBeforeSendingAndPrefillStops();
    void maxTokensOverTheLimitIsShownNotChanged();
    void aModelSwitchIsMarkedAndEveryReplyNamesItsModel();

private:
    QTemporaryDir m_dir;
};

void TestChatUi::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(m_dir.isValid());
}

void TestChatUi::chatStreamsStopsReusesAndPersists()
{
    REQUIRE_DEFAULT_MODEL(path);
    const QString db = m_dir.filePath("chat.sqlite");
    std::shared_ptr<const ReplyStats> first, second;
    {
        ConversationStore store(db, "ui-test-1");
        QVERIFY(store.ok());
        EngineController engine;
        MainWindow window(&engine, &store);
        window.show();
        QSignalSpy loaded(&engine, &EngineController::modelLoaded);
        window.openModel(QString::fromStdString(path));
        QVERIFY(loaded.wait(120000));
        ChatPanel* chat = window.chatPanel();
        auto s = chat->sampling();
        s.temperature = 0.0f;
        s.max_tokens = 200;
        chat->setSampling(s);

        QSignalSpy deltas(&engine.chat(), &ChatClient::replyDelta);
        QSignalSpy finished(chat, &ChatPanel::replyFinished);
        chat->send("Write a long story about a lighthouse keeper.");
        QVERIFY(chat->replying());
        QTRY_VERIFY_WITH_TIMEOUT(deltas.count() >= 5, 60000);
        // streamed text reaches the view (flushed once per frame)
        const QString streamed = deltas.at(0).at(1).toString() + deltas.at(1).at(1).toString();
        QTRY_VERIFY_WITH_TIMEOUT(chat->transcriptText().contains(streamed.trimmed()), 5000);

        const int seen_at_stop = int(deltas.count());
        chat->stop();
        QVERIFY(finished.wait(30000));
        first = chat->lastStats();
        QVERIFY(first->cancelled);
        // the reply ends within one decode step of Stop (the delta in flight may still arrive)
        QVERIFY2(first->generated_tokens <= seen_at_stop + 2,
                 qPrintable(QString("%1 tokens after %2 deltas").arg(first->generated_tokens).arg(seen_at_stop)));
        QVERIFY(first->generated_tokens < 200);
        QCOMPARE(chat->messageCount(), 2);

        chat->send("What happened next?");
        QVERIFY(finished.wait(120000));
        second = chat->lastStats();
        QVERIFY(second->reused_tokens >= first->prompt_tokens);
        QCOMPARE(second->reused_tokens + second->computed_tokens, second->prompt_tokens);
        QVERIFY(chat->transcriptText().contains(QString("reused %1 cached tokens").arg(second->reused_tokens)));
        QCOMPARE(chat->messageCount(), 4);
        QVERIFY_WORDING(&window);
        window.close();
    }
    // restart: the conversation is intact
    ConversationStore store(db, "ui-test-2");
    const auto saved = store.latest();
    QVERIFY(saved.has_value());
    QCOMPARE(saved->messages.size(), 4);
    QCOMPARE(saved->messages[0].content, QString("Write a long story about a lighthouse keeper."));
    QCOMPARE(saved->messages[2].content, QString("What happened next?"));
    EngineController engine;
    ChatPanel restored(&engine, &store);
    QCOMPARE(restored.messageCount(), 4);
    QVERIFY(restored.transcriptText().contains("What happened next?"));
}

void TestChatUi::sigkillDuringReplyLosesNoCompletedMessage()
{
    REQUIRE_DEFAULT_MODEL(path);
    QTemporaryDir data;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("QT_QPA_PLATFORM", "offscreen");
    env.insert("XDG_DATA_HOME", data.path());
    env.insert("XDG_CONFIG_HOME", data.path());
    env.insert("TOKENSCOPE_MODEL", QString::fromStdString(path));
    // 1. a complete exchange, then the app quits by itself
    QProcess first;
    first.setProcessEnvironment(env);
    first.start(TOKENSCOPE_GUI_PATH, {"--auto-send", "Hello there.", "--max-tokens", "8", "--quit-after-reply"});
    QVERIFY(first.waitForFinished(180000));
    QCOMPARE(first.exitCode(), 0);
    // 2. a second message, killed while the reply streams
    QProcess second;
    second.setProcessEnvironment(env);
    second.start(TOKENSCOPE_GUI_PATH, {"--auto-send", "Tell me a very long story.", "--max-tokens", "2000"});
    QVERIFY(second.waitForStarted());
    const QString db = data.path() + "/Tokenscope/Tokenscope/conversations.sqlite";
    int messages = 0;
    for (int i = 0; i < 600 && messages < 3; ++i) {
        QTest::qWait(100);
        ConversationStore peek(db, "peek" + QString::number(i));
        if (auto c = peek.latest())
            messages = int(c->messages.size());
    }
    QCOMPARE(messages, 3);
    QTest::qWait(1500); // the reply is streaming now
    QCOMPARE(second.state(), QProcess::Running);
    second.kill(); // SIGKILL
    QVERIFY(second.waitForFinished(10000));
    ConversationStore store(db, "after-kill");
    const auto c = store.latest();
    QVERIFY(c.has_value());
    QCOMPARE(c->messages.size(), 3); // user, assistant, user: every completed message survived
    QCOMPARE(c->messages[0].content, QString("Hello there."));
    QCOMPARE(c->messages[1].role, QString("assistant"));
    QVERIFY(!c->messages[1].content.isEmpty() || !c->messages[1].stats.isEmpty());
    QCOMPARE(c->messages[2].content, QString("Tell me a very long story."));
}

void TestChatUi::overflowIsToldBeforeSendingAndPrefillStops()
{
    REQUIRE_DEFAULT_MODEL(path);
    ConversationStore store(m_dir.filePath("overflow.sqlite"), "ui-overflow");
    EngineController engine;
    ChatPanel chat(&engine, &store);
    chat.show();
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    engine.loadModel(QString::fromStdString(path), 2, 160);
    QVERIFY(loaded.wait(120000));
    auto s = chat.sampling();
    s.max_tokens = 16;
    chat.setSampling(s);
    // a draft longer than the 160-token context: the warning appears while typing, before Send
    QString draft;
    for (int i = 0; i < 150; ++i)
        draft += "lighthouse keeper ";
    auto* input = chat.findChild<QPlainTextEdit*>("messageInput");
    QVERIFY(input);
    input->setPlainText(draft);
    QTRY_VERIFY_WITH_TIMEOUT(!chat.fitNotice().isEmpty(), 10000);
    QVERIFY2(chat.fitNotice().contains("160 tokens"), qPrintable(chat.fitNotice()));
    QCOMPARE(chat.messageCount(), 0); // nothing was sent

    // Stop during a long prefill: it ends between batches, no token is generated
    EngineController big;
    ChatPanel chat2(&big, &store);
    QSignalSpy loaded2(&big, &EngineController::modelLoaded);
    big.loadModel(QString::fromStdString(path), 2, 2048);
    QVERIFY(loaded2.wait(120000));
    chat2.newChat();
    QSignalSpy progress(&big.chat(), &ChatClient::prefillProgress);
    QSignalSpy finished(&chat2, &ChatPanel::replyFinished);
    QString long_text;
    for (int i = 0; i < 120; ++i)
        long_text += QString("Sentence number %1 about the sea. ").arg(i);
    chat2.send(long_text);
    QVERIFY(progress.wait(60000));
    chat2.stop();
    QVERIFY(finished.wait(60000));
    QVERIFY(chat2.lastStats()->cancelled);
    QCOMPARE(chat2.lastStats()->generated_tokens, 0);
    QVERIFY(chat2.lastStats()->computed_tokens < chat2.lastStats()->prompt_tokens);
}

namespace {

// Replaces a box's text as a user does: select everything, type.
void type_into(QSpinBox* box, const QString& text)
{
    box->setFocus();
    QTest::keyClick(box, Qt::Key_A, Qt::ControlModifier);
    QTest::keyClicks(box, text);
}

QPushButton* button(QWidget* panel, const QString& text)
{
    for (auto* b : panel->findChildren<QPushButton*>())
        if (b->text() == text)
            return b;
    return nullptr;
}

} // namespace

// The max-tokens boxes of the chat and the stepper take what is typed: a value over the limit is
// shown as typed and marked invalid with the limit (Send and Prefill wait for a valid one) — a
// QSpinBox with a maximum had turned 5000 into 500 and 999999999 into 999 without a word.
void TestChatUi::maxTokensOverTheLimitIsShownNotChanged()
{
    REQUIRE_DEFAULT_MODEL(path);
    ConversationStore store(m_dir.filePath("max.sqlite"), "ui-test-max");
    EngineController engine;
    MainWindow window(&engine, &store);
    window.show();
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    window.openModel(QString::fromStdString(path));
    QVERIFY(loaded.wait(120000));

    for (QWidget* panel : {static_cast<QWidget*>(window.chatPanel()), static_cast<QWidget*>(window.stepperPanel())}) {
        auto* box = panel->findChild<BoundedCountBox*>();
        QVERIFY(box);
        QPushButton* go = button(panel, panel == window.chatPanel() ? "Send" : "Prefill");
        QVERIFY(go && go->isEnabled());
        type_into(box, "5000");
        QCOMPARE(box->text(), QString("5000"));
        QCOMPARE(box->value(), 5000);
        QVERIFY(!box->valid());
        QVERIFY2(box->toolTip().contains(box->limitText()), qPrintable(box->toolTip()));
        QVERIFY(!go->isEnabled());
        type_into(box, "999999999");
        QCOMPARE(box->value(), 999999999);
        QVERIFY(!go->isEnabled());
        type_into(box, "300");
        QCOMPARE(box->value(), 300);
        QVERIFY(box->valid());
        QVERIFY(go->isEnabled());
    }
}

// A conversation that goes on after another model is loaded: the switch is marked in the transcript
// where it happens, the line under each reply names the model that wrote it, and the conversation
// database records it (messages.model, user_version 2). Typed and sent with real key events.
void TestChatUi::aModelSwitchIsMarkedAndEveryReplyNamesItsModel()
{
    REQUIRE_DEFAULT_MODEL(base);
    REQUIRE_CHAT_MODEL(instruct);
    const QString db = m_dir.filePath("switch.sqlite");
    ConversationStore store(db, "switch");
    EngineController engine;
    MainWindow window(&engine, &store);
    window.show();
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    window.openModel(QString::fromStdString(base));
    QVERIFY(loaded.wait(120000));
    const QString first_model = engine.model()->name;
    ChatPanel* chat = window.chatPanel();
    auto s = chat->sampling();
    s.temperature = 0.0f;
    s.max_tokens = 6;
    chat->setSampling(s);
    auto* input = chat->findChild<QPlainTextEdit*>("messageInput");
    QVERIFY(input);
    QSignalSpy finished(chat, &ChatPanel::replyFinished);
    const auto say = [&](const QString& text) {
        input->setFocus();
        QTest::keyClicks(input, text);
        QTest::keyClick(input, Qt::Key_Return, Qt::ControlModifier);
        return finished.wait(180000);
    };
    QVERIFY(say("The lighthouse keeper"));
    QVERIFY(!chat->transcriptText().contains("Model changed"));
    QVERIFY2(chat->transcriptText().contains(first_model + " · "), qPrintable(chat->transcriptText()));

    window.openModel(QString::fromStdString(instruct));
    QVERIFY(loaded.wait(120000));
    const QString second_model = engine.model()->name;
    QVERIFY(second_model != first_model);
    QVERIFY2(chat->transcriptText().contains(QString("Model changed to %1: the next reply").arg(second_model)),
             qPrintable(chat->transcriptText()));
    QVERIFY(say("Say hello."));
    const QString text = chat->transcriptText();
    QVERIFY2(text.contains(QString("Model changed to %1: it read the whole conversation").arg(second_model)),
             qPrintable(text));
    QVERIFY(!text.contains("the next reply re-reads"));
    QVERIFY(text.contains(first_model + " · ") && text.contains(second_model + " · "));

    ConversationStore reread(db, "switch-reread");
    const auto saved = reread.latest();
    QVERIFY(saved.has_value());
    QCOMPARE(saved->messages.size(), 4);
    QCOMPARE(saved->messages[1].model, first_model);
    QCOMPARE(saved->messages[3].model, second_model);
    window.close();
}

QTEST_MAIN(TestChatUi)
#include "test_chat_ui.moc"
