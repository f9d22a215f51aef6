// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QSqlDatabase>
#include <QString>
#include <QVector>
#include <optional>

namespace tokenscope::ui {

struct StoredMessage {
    qint64 id = 0;
    int seq = 0;
    QString role;
    QString content;
    QString stats; // one line shown under a reply
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
class ConversationStore {
public:
    explicit ConversationStore(const QString& path, const QString& connection_name = "conversations");
    ~ConversationStore();
    ConversationStore(const ConversationStore&) = delete;
    ConversationStore& operator=(const ConversationStore&) = delete;

    bool ok() const { return m_error.isEmpty(); }
    QString error() const { return m_error; }

    qint64 createConversation(const QString& system_prompt, const QString& model_path);
    void setTitle(qint64 conversation, const QString& title);
    void setSystemPrompt(qint64 conversation, const QString& system_prompt);
    qint64 appendMessage(qint64 conversation, const QString& role, const QString& content, const QString& stats = {});
    // Removes the messages from position `seq` on (edit-and-resend, regenerate).
    void truncate(qint64 conversation, int seq);
    std::optional<StoredConversation> load(qint64 conversation) const;
    std::optional<StoredConversation> latest() const;

private:
    bool exec(const QString& sql);

    QString m_connection;
    QString m_error;
};

// <app data>/conversations.sqlite
QString default_conversation_path();

} // namespace tokenscope::ui
