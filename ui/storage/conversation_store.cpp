// SPDX-License-Identifier: GPL-3.0-or-later
#include "storage/conversation_store.h"
#include "widgets/count_text.h"

#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSqlError>
#include <QSqlQuery>
#include <QStandardPaths>
#include <QTimer>
#include <QVariant>
#include <spdlog/spdlog.h>

namespace tokenscope::ui {

namespace {
// A null QString binds as SQL NULL, which the NOT NULL columns refuse: bind "" instead.
QVariant text(const QString& s)
{
    return s.isNull() ? QVariant(QString::fromLatin1("")) : QVariant(s);
}

QString now_iso()
{
    return QDateTime::currentDateTimeUtc().toString(Qt::ISODate);
}

constexpr int kRetryMs = 5000;
} // namespace

QString default_conversation_path()
{
    const QString dir = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
    QDir().mkpath(dir);
    return dir + "/conversations.sqlite";
}

ConversationStore::ConversationStore(const QString& path, const QString& connection_name, QObject* parent)
    : QObject(parent), m_path(path), m_connection(connection_name)
{
    m_retry = new QTimer(this);
    m_retry->setInterval(kRetryMs);
    connect(m_retry, &QTimer::timeout, this, [this] { retry(); });
    QString why;
    m_open = openDatabase(&why);
    if (!m_open)
        m_error = why;
    if (!m_error.isEmpty())
        spdlog::warn("conversation database {}: {}", path.toStdString(), m_error.toStdString());
}

ConversationStore::~ConversationStore()
{
    if (!m_pending.empty())
        flush();
    if (!m_pending.empty())
        spdlog::error("{} conversation change(s) could not be saved to {}: {}", m_pending.size(), m_path.toStdString(),
                      m_error.toStdString());
    {
        QSqlDatabase db = QSqlDatabase::database(m_connection, false);
        if (db.isOpen())
            db.close();
    }
    QSqlDatabase::removeDatabase(m_connection);
}

// Opens the file, checks it, and makes the schema. A file that is not a sound database is moved
// aside and a new one started; one that cannot be written (read-only, full) stays open for reading
// and every write is held in memory until it can be made.
bool ConversationStore::openDatabase(QString* why)
{
    for (int attempt = 0; attempt < 2; ++attempt) {
        {
            QSqlDatabase db = QSqlDatabase::contains(m_connection) ? QSqlDatabase::database(m_connection, false)
                                                                   : QSqlDatabase::addDatabase("QSQLITE", m_connection);
            db.setDatabaseName(m_path);
            if (!db.open()) {
                *why = tr("cannot open %1: %2").arg(m_path, db.lastError().text());
                return false;
            }
            QSqlQuery check(db);
            QString damage;
            if (!check.exec("PRAGMA quick_check")) {
                // Only SQLite's "not a database" (26) and "corrupt" (11) mean damage; anything else
                // (a folder it cannot write its -shm file in, an I/O error) is a problem to report,
                // never a reason to move the user's file.
                const QString code = check.lastError().nativeErrorCode();
                if (code != "26" && code != "11") {
                    *why = tr("cannot read %1: %2").arg(m_path, check.lastError().text());
                    return false;
                }
                damage = check.lastError().text();
            } else {
                QStringList findings;
                while (check.next())
                    findings << check.value(0).toString();
                if (findings != QStringList{"ok"}) {
                    // Its report starts "*** in database main ***", then one finding a line.
                    QStringList lines = findings.join('\n').split('\n', Qt::SkipEmptyParts);
                    lines.removeIf([](const QString& f) { return f.startsWith("***"); });
                    damage = lines.value(0, tr("quick_check failed"));
                }
            }
            check.finish();
            if (damage.isEmpty()) {
                QSqlQuery mode(db);
                mode.exec("PRAGMA journal_mode=WAL");
                mode.exec("PRAGMA synchronous=FULL");
                mode.exec("PRAGMA foreign_keys=ON");
                mode.finish();
                // Not damaged; when it cannot be written (createSchema sets m_error), reads still
                // work and writes are held.
                m_schema_ready = createSchema();
                return true;
            }
            // "file is not a database", "database disk image is malformed", or quick_check's findings.
            if (attempt == 1 || !keepDamagedAside(damage)) {
                *why = tr("%1 is damaged (%2) and could not be moved aside").arg(m_path, damage);
                db.close();
                return false;
            }
        }
    }
    return false;
}

bool ConversationStore::keepDamagedAside(const QString& reason)
{
    {
        QSqlDatabase db = QSqlDatabase::database(m_connection, false);
        db.close();
    }
    const QString aside = m_path + ".damaged-" + QDateTime::currentDateTime().toString("yyyyMMdd-HHmmss");
    if (QFileInfo::exists(aside) || !QFile::rename(m_path, aside))
        return false;
    for (const char* suffix : {"-wal", "-shm"})
        if (QFileInfo::exists(m_path + suffix))
            QFile::rename(m_path + suffix, aside + suffix);
    // The first finding names the damage; quick_check may list hundreds more.
    const QString first = reason.section('\n', 0, 0).trimmed();
    m_notice = tr("The conversation database was damaged (%1). It was kept as %2 and a new one was started at %3.")
                   .arg(first, aside, m_path);
    spdlog::warn("{}", m_notice.toStdString());
    return true;
}

bool ConversationStore::createSchema()
{
    QSqlDatabase db = QSqlDatabase::database(m_connection);
    QSqlQuery q(db);
    const auto run = [&](const char* sql) {
        if (q.exec(QString::fromLatin1(sql)))
            return true;
        m_error = q.lastError().text();
        return false;
    };
    for (const char* sql :
         {"CREATE TABLE IF NOT EXISTS conversations (id INTEGER PRIMARY KEY, title TEXT NOT NULL DEFAULT '', "
          "system_prompt TEXT NOT NULL DEFAULT '', model_path TEXT NOT NULL DEFAULT '', created TEXT NOT NULL)",
          "CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY, conversation_id INTEGER NOT NULL "
          "REFERENCES conversations(id) ON DELETE CASCADE, seq INTEGER NOT NULL, role TEXT NOT NULL, "
          "content TEXT NOT NULL, stats TEXT NOT NULL DEFAULT '', created TEXT NOT NULL, "
          "model TEXT NOT NULL DEFAULT '')",
          "CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages(conversation_id, seq)"})
        if (!run(sql))
            return false;
    // Version 2: each message records the model that wrote it. A version-1 database (written before)
    // gains the column, its messages kept as they were, with no model named.
    if (!run("PRAGMA table_info(messages)"))
        return false;
    bool has_model = false;
    while (q.next())
        has_model = has_model || q.value(1).toString() == "model";
    q.finish();
    if (!has_model && !run("ALTER TABLE messages ADD COLUMN model TEXT NOT NULL DEFAULT ''"))
        return false;
    // A write the file must take: a read-only file or folder shows here, not at the first message.
    return run("PRAGMA user_version = 2");
}

QString ConversationStore::problem() const
{
    if (m_pending.empty() && m_error.isEmpty())
        return {};
    const QString reason = m_error.isEmpty() ? tr("the database could not be opened") : m_error;
    if (m_pending.empty())
        return tr("Conversations cannot be saved to %1: %2.").arg(m_path, reason);
    return tr("Not saved: %1 kept in memory and retried every few seconds — %2: %3.")
        .arg(countText(qint64(m_pending.size()), tr("change is"), tr("changes are")), m_path, reason);
}

qint64 ConversationStore::databaseId(qint64 conversation) const
{
    if (conversation >= 0)
        return conversation;
    const auto it = m_provisional.find(conversation);
    return it == m_provisional.end() ? 0 : it->second;
}

// One change in one transaction. False (with m_error set) when the database refused it.
bool ConversationStore::apply(const Op& op, qint64* created_id)
{
    if (!m_open) {
        QString why;
        m_open = openDatabase(&why);
        if (!m_open) {
            m_error = why;
            return false;
        }
    }
    // A database that could not take its tables at open (a full disk) gets them before any change.
    if (!m_schema_ready && !(m_schema_ready = createSchema()))
        return false;
    QSqlDatabase db = QSqlDatabase::database(m_connection);
    const qint64 id = databaseId(op.conversation);
    if (op.kind != Op::Create && id == 0) {
        m_error = tr("conversation %1 was never written").arg(op.conversation);
        return false;
    }
    if (!db.transaction()) {
        m_error = db.lastError().text();
        return false;
    }
    QSqlQuery q(db);
    bool ok = true;
    qint64 created = 0;
    switch (op.kind) {
    case Op::Create:
        q.prepare("INSERT INTO conversations (system_prompt, model_path, created) VALUES (?, ?, ?)");
        q.addBindValue(text(op.a));
        q.addBindValue(text(op.b));
        q.addBindValue(now_iso());
        ok = q.exec();
        created = ok ? q.lastInsertId().toLongLong() : 0;
        break;
    case Op::Title:
    case Op::System:
        q.prepare(op.kind == Op::Title ? "UPDATE conversations SET title = ? WHERE id = ?"
                                       : "UPDATE conversations SET system_prompt = ? WHERE id = ?");
        q.addBindValue(text(op.a));
        q.addBindValue(id);
        ok = q.exec();
        break;
    case Op::Append: {
        QSqlQuery seq(db);
        seq.prepare("SELECT COALESCE(MAX(seq) + 1, 0) FROM messages WHERE conversation_id = ?");
        seq.addBindValue(id);
        ok = seq.exec();
        const int next = ok && seq.next() ? seq.value(0).toInt() : 0;
        if (!ok)
            m_error = seq.lastError().text();
        seq.finish(); // an active statement would make the commit fail
        if (!ok) {
            db.rollback();
            return false;
        }
        {
            q.prepare("INSERT INTO messages (conversation_id, seq, role, content, stats, created, model) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?)");
            q.addBindValue(id);
            q.addBindValue(next);
            q.addBindValue(text(op.a));
            q.addBindValue(text(op.b));
            q.addBindValue(text(op.c));
            q.addBindValue(now_iso());
            q.addBindValue(text(op.d));
            ok = q.exec();
        }
        break;
    }
    case Op::Truncate:
        q.prepare("DELETE FROM messages WHERE conversation_id = ? AND seq >= ?");
        q.addBindValue(id);
        q.addBindValue(op.seq);
        ok = q.exec();
        break;
    }
    if (!ok) {
        m_error = q.lastError().text();
        q.finish();
        db.rollback();
        return false;
    }
    q.finish();
    if (!db.commit()) {
        m_error = db.lastError().text();
        db.rollback();
        return false;
    }
    if (op.kind == Op::Create && op.conversation < 0)
        m_provisional[op.conversation] = created;
    if (created_id)
        *created_id = created;
    m_error.clear();
    return true;
}

bool ConversationStore::flush()
{
    while (!m_pending.empty()) {
        if (!apply(m_pending.front())) {
            // Reopened at the next try: a connection that found its file read-only stays read-only.
            {
                QSqlDatabase db = QSqlDatabase::database(m_connection, false);
                db.close();
            }
            m_open = false;
            return false;
        }
        m_pending.pop_front();
    }
    return true;
}

// Writes now when nothing is waiting; otherwise queues behind what is, so the order holds.
bool ConversationStore::submit(Op op)
{
    const bool was_ok = ok();
    m_pending.push_back(std::move(op));
    const bool saved = flush();
    if (!saved) {
        if (!m_retry->isActive())
            m_retry->start();
        spdlog::warn("conversation not saved ({} change(s) held in memory): {}", m_pending.size(),
                     m_error.toStdString());
    }
    if (!saved || !was_ok)
        emit statusChanged();
    return saved;
}

bool ConversationStore::retry()
{
    const bool was_ok = ok();
    const bool saved = flush();
    if (saved) {
        m_retry->stop();
        if (!was_ok)
            spdlog::info("conversation changes held in memory are now saved to {}", m_path.toStdString());
    }
    if (saved != was_ok)
        emit statusChanged();
    return saved;
}

qint64 ConversationStore::createConversation(const QString& system_prompt, const QString& model_path)
{
    if (m_pending.empty()) {
        // Written straight away when it can be: the conversation gets its database id.
        const bool was_ok = ok();
        qint64 created = 0;
        if (apply({Op::Create, 0, system_prompt, model_path, {}, 0}, &created)) {
            if (!was_ok)
                emit statusChanged();
            return created;
        }
    }
    const qint64 provisional = m_next_provisional--;
    submit({Op::Create, provisional, system_prompt, model_path, {}, 0});
    return provisional;
}

void ConversationStore::setTitle(qint64 conversation, const QString& title)
{
    submit({Op::Title, conversation, title, {}, {}, 0});
}

void ConversationStore::setSystemPrompt(qint64 conversation, const QString& system_prompt)
{
    submit({Op::System, conversation, system_prompt, {}, {}, 0});
}

bool ConversationStore::appendMessage(qint64 conversation, const QString& role, const QString& content,
                                      const QString& stats, const QString& model)
{
    return submit({Op::Append, conversation, role, content, stats, 0, model});
}

void ConversationStore::truncate(qint64 conversation, int seq)
{
    submit({Op::Truncate, conversation, {}, {}, {}, seq});
}

std::optional<StoredConversation> ConversationStore::load(qint64 conversation) const
{
    if (!m_open)
        return std::nullopt;
    QSqlDatabase db = QSqlDatabase::database(m_connection);
    QSqlQuery c(db);
    c.prepare("SELECT id, title, system_prompt, model_path FROM conversations WHERE id = ?");
    c.addBindValue(databaseId(conversation));
    if (!c.exec() || !c.next())
        return std::nullopt;
    StoredConversation out;
    out.id = c.value(0).toLongLong();
    out.title = c.value(1).toString();
    out.system_prompt = c.value(2).toString();
    out.model_path = c.value(3).toString();
    QSqlQuery m(db);
    m.prepare("SELECT id, seq, role, content, stats, model FROM messages WHERE conversation_id = ? ORDER BY seq");
    m.addBindValue(out.id);
    m.exec();
    while (m.next())
        out.messages.push_back({m.value(0).toLongLong(), m.value(1).toInt(), m.value(2).toString(),
                                m.value(3).toString(), m.value(4).toString(), m.value(5).toString()});
    return out;
}

std::optional<StoredConversation> ConversationStore::latest() const
{
    if (!m_open)
        return std::nullopt;
    QSqlQuery q(QSqlDatabase::database(m_connection));
    if (!q.exec("SELECT id FROM conversations ORDER BY id DESC LIMIT 1") || !q.next())
        return std::nullopt;
    return load(q.value(0).toLongLong());
}

} // namespace tokenscope::ui
