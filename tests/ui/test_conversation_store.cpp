// SPDX-License-Identifier: GPL-3.0-or-later
// The conversation store: messages written one transaction each survive a reopen in order;
// truncation (edit-and-resend, regenerate) removes exactly the later messages.
#include "storage/conversation_store.h"

#include <QFile>
#include <QSqlDatabase>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QTest>

using namespace tokenscope::ui;

class TestConversationStore : public QObject {
    Q_OBJECT
private slots:
    void messagesSurviveReopen();
    void truncateRemovesLaterMessages();
    void aVersion1DatabaseOpensIntactAndRecordsModelsFromNowOn();
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

// tests/data/conversations-v1.sqlite has the schema the store wrote before replies recorded their
// model (user_version 1): it opens with every message as it was, gains the column (user_version 2),
// and a reply appended from now on names its model.
void TestConversationStore::aVersion1DatabaseOpensIntactAndRecordsModelsFromNowOn()
{
    QTemporaryDir dir;
    const QString path = dir.filePath("v1.sqlite");
    QVERIFY(QFile::copy(QStringLiteral(TOKENSCOPE_TEST_DATA_DIR "/conversations-v1.sqlite"), path));
    QFile::setPermissions(path, QFile::ReadOwner | QFile::WriteOwner);
    {
        ConversationStore store(path, "v1");
        QVERIFY2(store.ok(), qPrintable(store.error()));
        const auto c = store.latest();
        QVERIFY(c.has_value());
        QCOMPARE(c->title, QString("Hello there"));
        QCOMPARE(c->system_prompt, QString("Be brief."));
        QCOMPARE(c->messages.size(), 4);
        QCOMPARE(c->messages[3].content,
                 QString("Silent lines of code\nA model reads them slowly\nTokens fall like rain"));
        QVERIFY(c->messages[3].stats.startsWith("17 tokens"));
        for (const auto& m : c->messages)
            QVERIFY(m.model.isEmpty()); // not recorded then
        QVERIFY(store.appendMessage(c->id, "user", "Another one"));
        QVERIFY(store.appendMessage(c->id, "assistant", "Short reply", "3 tokens", "Gemma 3 270m"));
    }
    {
        QSqlDatabase db = QSqlDatabase::addDatabase("QSQLITE", "raw");
        db.setDatabaseName(path);
        QVERIFY(db.open());
        QSqlQuery q(db);
        QVERIFY(q.exec("PRAGMA user_version") && q.next());
        QCOMPARE(q.value(0).toInt(), 2);
    }
    QSqlDatabase::removeDatabase("raw");
    ConversationStore reopened(path, "v2");
    const auto c = reopened.latest();
    QCOMPARE(c->messages.size(), 6);
    QCOMPARE(c->messages[5].model, QString("Gemma 3 270m"));
    QCOMPARE(c->messages[5].stats, QString("3 tokens"));
    QVERIFY(c->messages[4].model.isEmpty());
}

QTEST_GUILESS_MAIN(TestConversationStore)
#include "test_conversation_store.moc"
