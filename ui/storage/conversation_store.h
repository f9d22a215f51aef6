// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QObject>
#include <QSqlDatabase>
#include <QString>
#include <QVector>
#include <deque>
#include <map>
#include <optional>

class QTimer;

namespace tokenscope::ui {

struct StoredMessage {
    qint64 id = 0;
    int seq = 0;
    QString role;
    QString content;
    QString stats; // one line shown under a reply
    QString model; // the model that wrote a reply (empty: a user message, or stored before version 2)
};

struct StoredConversation {
    qint64 id = 0;
    QString title;
    QString system_prompt;
    QString model_path;
    QVector<StoredMessage> messages;
};

// Conversations in SQLite (Qt SQL) in the app data directory. Every write is one transaction in
// WAL mode with synchronous=FULL, so killing the app at any moment loses no completed message.
//
// When the disk or the database fails, nothing is lost silently:
//  - a damaged database (not a database, truncated, a corrupt page: PRAGMA quick_check) is kept
//    aside — renamed to "<name>.damaged-<time>", never deleted — and a fresh one started, with a
//    notice naming both files;
//  - a write that fails (read-only file or folder, full disk) is held in memory, with every later
//    write queued behind it in order — so a reply is never stored without the user turn before it —
//    and retried every few seconds and before each new write; problem() says what is not saved and
//    why until everything is written, and statusChanged() tells the UI.
// Conversation ids are the database's; a conversation created while writes fail gets a provisional
// (negative) id that keeps working after it is written.
class ConversationStore : public QObject {
    Q_OBJECT
public:
    explicit ConversationStore(const QString& path, const QString& connection_name = "conversations",
                               QObject* parent = nullptr);
    ~ConversationStore() override;
    ConversationStore(const ConversationStore&) = delete;
    ConversationStore& operator=(const ConversationStore&) = delete;

    // The database is open and everything written so far reached it.
    bool ok() const { return m_open && m_pending.empty() && m_error.isEmpty(); }
    // Why not, as the database said it; empty when ok().
    QString error() const { return m_error; }
    // A sentence for the UI while something is not saved; empty when everything is.
    QString problem() const;
    // A one-time notice from opening (a damaged database kept aside); empty otherwise.
    QString notice() const { return m_notice; }
    QString path() const { return m_path; }
    int unsavedCount() const { return int(m_pending.size()); }
    // Writes what is held in memory, in order; true when nothing is left unsaved.
    bool retry();

    qint64 createConversation(const QString& system_prompt, const QString& model_path);
    void setTitle(qint64 conversation, const QString& title);
    void setSystemPrompt(qint64 conversation, const QString& system_prompt);
    // True when the message reached the database now; false when it is held in memory (see problem()).
    bool appendMessage(qint64 conversation, const QString& role, const QString& content, const QString& stats = {},
                       const QString& model = {});
    // Removes the messages from position `seq` on (edit-and-resend, regenerate).
    void truncate(qint64 conversation, int seq);
    std::optional<StoredConversation> load(qint64 conversation) const;
    std::optional<StoredConversation> latest() const;

signals:
    void statusChanged();

private:
    struct Op {
        enum Kind { Create, Title, System, Append, Truncate } kind;
        qint64 conversation = 0; // the caller's id (provisional when negative)
        QString a, b, c;         // Create: system, model; Title/System: text; Append: role, content, stats
        int seq = 0;             // Truncate
        QString d;               // Append: the model that wrote it
    };
    bool openDatabase(QString* why);
    bool keepDamagedAside(const QString& reason);
    bool createSchema();
    bool apply(const Op& op, qint64* created_id = nullptr);
    bool submit(Op op);
    bool flush();
    qint64 databaseId(qint64 conversation) const;

    QString m_path;
    QString m_connection;
    bool m_open = false;
    bool m_schema_ready = false; // the tables exist (creating them needs a writable file)
    QString m_error;
    QString m_notice;
    std::deque<Op> m_pending;
    std::map<qint64, qint64> m_provisional; // provisional id → database id, once written
    qint64 m_next_provisional = -1;
    QTimer* m_retry = nullptr;
};

// <app data>/conversations.sqlite
QString default_conversation_path();

} // namespace tokenscope::ui
