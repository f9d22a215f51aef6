// SPDX-License-Identifier: GPL-3.0-or-later
// The conversation store: messages written one transaction each survive a reopen in order;
// truncation (edit-and-resend, regenerate) removes exactly the later messages.
#include "storage/conversation_store.h"

#include <QTemporaryDir>
#include <QTest>

using namespace tokenscope::ui;

class TestConversationStore : public QObject {
    Q_OBJECT
private slots:
    void messagesSurviveReopen();
    void truncateRemovesLaterMessages();
};

void TestConversationStore::messagesSurviveReopen()
{
    QTemporaryDir dir;
    const QString path = dir.filePath("c.sqlite");
    qint64 id = 0;
    {
        ConversationStore store(path, "a");
        QVERIFY2(store.ok(), qPrintable(store.error()));
        id = store.createConversation("Be brief.", "/models/x.gguf");
        QVERIFY(id > 0);
        for (int i = 0; i < 4; ++i)
            QVERIFY(store.appendMessage(id, i % 2 ? "assistant" : "user", QString("message %1").arg(i),
                                        i % 2 ? "stats" : ""));
        QVERIFY2(store.ok(), qPrintable(store.error()));
    }
    ConversationStore reopened(path, "b");
    const auto c = reopened.latest();
    QVERIFY(c.has_value());
    QCOMPARE(c->id, id);
    QCOMPARE(c->system_prompt, QString("Be brief."));
    QCOMPARE(c->messages.size(), 4);
    for (int i = 0; i < 4; ++i) {
        QCOMPARE(c->messages[i].seq, i);
        QCOMPARE(c->messages[i].content, QString("message %1").arg(i));
    }
    QCOMPARE(c->messages[1].stats, QString("stats"));
}

void TestConversationStore::truncateRemovesLaterMessages()
{
    QTemporaryDir dir;
    ConversationStore store(dir.filePath("t.sqlite"), "t");
    const qint64 id = store.createConversation({}, {});
    for (int i = 0; i < 5; ++i)
        store.appendMessage(id, "user", QString::number(i));
    store.truncate(id, 3);
    const auto c = store.load(id);
    QCOMPARE(c->messages.size(), 3);
    QCOMPARE(c->messages.back().content, QString("2"));
    QVERIFY(store.appendMessage(id, "user", "again"));
    QCOMPARE(store.load(id)->messages.back().seq, 3);
}

QTEST_GUILESS_MAIN(TestConversationStore)
#include "test_conversation_store.moc"
