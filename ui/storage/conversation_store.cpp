// SPDX-License-Identifier: GPL-3.0-or-later
#include "storage/conversation_store.h"

#include <QDateTime>
#include <QDir>
#include <QSqlError>
#include <QSqlQuery>
#include <QStandardPaths>
#include <QVariant>

namespace tokenscope::ui {

namespace {
// A null QString binds as SQL NULL, which the NOT NULL columns refuse: bind "" instead.
QVariant text(const QString& s) { return s.isNull() ? QVariant(QString::fromLatin1("")) : QVariant(s); }
} // namespace

QString default_conversation_path()
{
    const QString dir = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
    QDir().mkpath(dir);
    return dir + "/conversations.sqlite";
}

ConversationStore::ConversationStore(const QString& path, const QString& connection_name) : m_connection(connection_name)
{
    QSqlDatabase db = QSqlDatabase::addDatabase("QSQLITE", m_connection);
    db.setDatabaseName(path);
    if (!db.open()) {
        m_error = QObject::tr("Cannot open the conversation database %1: %2").arg(path, db.lastError().text());
        return;
    }
    exec("PRAGMA journal_mode=WAL");
    exec("PRAGMA synchronous=FULL");
    exec("PRAGMA foreign_keys=ON");
    exec("CREATE TABLE IF NOT EXISTS conversations (id INTEGER PRIMARY KEY, title TEXT NOT NULL DEFAULT '', "
         "system_prompt TEXT NOT NULL DEFAULT '', model_path TEXT NOT NULL DEFAULT '', created TEXT NOT NULL)");
    exec("CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY, conversation_id INTEGER NOT NULL "
         "REFERENCES conversations(id) ON DELETE CASCADE, seq INTEGER NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL, "
         "stats TEXT NOT NULL DEFAULT '', created TEXT NOT NULL)");
    exec("CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages(conversation_id, seq)");
}

ConversationStore::~ConversationStore()
{
    {
        QSqlDatabase db = QSqlDatabase::database(m_connection, false);
        if (db.isOpen())
            db.close();
    }
    QSqlDatabase::removeDatabase(m_connection);
}

bool ConversationStore::exec(const QString& sql)
{
    QSqlQuery q(QSqlDatabase::database(m_connection));
    if (!q.exec(sql)) {
        m_error = q.lastError().text();
        return false;
    }
    return true;
}

qint64 ConversationStore::createConversation(const QString& system_prompt, const QString& model_path)
{
    QSqlDatabase db = QSqlDatabase::database(m_connection);
    db.transaction();
    QSqlQuery q(db);
    q.prepare("INSERT INTO conversations (system_prompt, model_path, created) VALUES (?, ?, ?)");
    q.addBindValue(text(system_prompt));
    q.addBindValue(text(model_path));
    q.addBindValue(QDateTime::currentDateTimeUtc().toString(Qt::ISODate));
    const bool ok = q.exec();
    const qint64 id = ok ? q.lastInsertId().toLongLong() : 0;
    q.finish();
    if (!db.commit())
        m_error = db.lastError().text();
    return id;
}

void ConversationStore::setTitle(qint64 conversation, const QString& title)
{
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare("UPDATE conversations SET title = ? WHERE id = ?");
    q.addBindValue(text(title));
    q.addBindValue(conversation);
    q.exec();
}

void ConversationStore::setSystemPrompt(qint64 conversation, const QString& system_prompt)
{
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare("UPDATE conversations SET system_prompt = ? WHERE id = ?");
    q.addBindValue(text(system_prompt));
    q.addBindValue(conversation);
    q.exec();
}

qint64 ConversationStore::appendMessage(qint64 conversation, const QString& role, const QString& content, const QString& stats)
{
    QSqlDatabase db = QSqlDatabase::database(m_connection);
    db.transaction();
    QSqlQuery seq(db);
    seq.prepare("SELECT COALESCE(MAX(seq) + 1, 0) FROM messages WHERE conversation_id = ?");
    seq.addBindValue(conversation);
    seq.exec();
    const int next = seq.next() ? seq.value(0).toInt() : 0;
    seq.finish(); // an active statement would make the commit fail
    QSqlQuery q(db);
    q.prepare("INSERT INTO messages (conversation_id, seq, role, content, stats, created) VALUES (?, ?, ?, ?, ?, ?)");
    q.addBindValue(conversation);
    q.addBindValue(next);
    q.addBindValue(text(role));
    q.addBindValue(text(content));
    q.addBindValue(text(stats));
    q.addBindValue(QDateTime::currentDateTimeUtc().toString(Qt::ISODate));
    if (!q.exec()) {
        db.rollback();
        m_error = q.lastError().text();
        return 0;
    }
    const qint64 id = q.lastInsertId().toLongLong();
    q.finish();
    if (!db.commit()) {
        m_error = db.lastError().text();
        db.rollback();
        return 0;
    }
    return id;
}

void ConversationStore::truncate(qint64 conversation, int seq)
{
    QSqlDatabase db = QSqlDatabase::database(m_connection);
    db.transaction();
    QSqlQuery q(db);
    q.prepare("DELETE FROM messages WHERE conversation_id = ? AND seq >= ?");
    q.addBindValue(conversation);
    q.addBindValue(seq);
    q.exec();
    db.commit();
}

std::optional<StoredConversation> ConversationStore::load(qint64 conversation) const
{
    QSqlDatabase db = QSqlDatabase::database(m_connection);
    QSqlQuery c(db);
    c.prepare("SELECT id, title, system_prompt, model_path FROM conversations WHERE id = ?");
    c.addBindValue(conversation);
    if (!c.exec() || !c.next())
        return std::nullopt;
    StoredConversation out;
    out.id = c.value(0).toLongLong();
    out.title = c.value(1).toString();
    out.system_prompt = c.value(2).toString();
    out.model_path = c.value(3).toString();
    QSqlQuery m(db);
    m.prepare("SELECT id, seq, role, content, stats FROM messages WHERE conversation_id = ? ORDER BY seq");
    m.addBindValue(conversation);
    m.exec();
    while (m.next())
        out.messages.push_back({m.value(0).toLongLong(), m.value(1).toInt(), m.value(2).toString(), m.value(3).toString(),
                                m.value(4).toString()});
    return out;
}

std::optional<StoredConversation> ConversationStore::latest() const
{
    QSqlQuery q(QSqlDatabase::database(m_connection));
    if (!q.exec("SELECT id FROM conversations ORDER BY id DESC LIMIT 1") || !q.next())
        return std::nullopt;
    return load(q.value(0).toLongLong());
}

} // namespace tokenscope::ui
