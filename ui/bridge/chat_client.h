// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/engine_controller.h"
#include "bridge/engine_types.h"

#include <QObject>
#include <QStringList>
#include <memory>
#include <vector>

namespace tokenscope::ui {

// The chat: a reply to the whole history (re-sent every turn), whether a draft would fit the
// context, and each turn's tokens as the template renders them. Answered by the engine here
// (chat_client.cpp) or by a server (chat_remote.cpp), with the same signals.
class ChatClient : public QObject {
    Q_OBJECT
public:
    // What answers the chat's requests.
    class Source {
    public:
        virtual ~Source() = default;
        virtual quint64 sendChat(std::vector<ChatTurn> turns, const SamplingSettings& sampling) = 0;
        virtual quint64 checkFit(std::vector<ChatTurn> turns, const SamplingSettings& sampling) = 0;
        virtual quint64 countTurns(const QStringList& roles, const QStringList& texts) = 0;
        virtual void resetConversation() = 0;
    };

    explicit ChatClient(EngineController& engine);
    ~ChatClient() override;

    // → replyStarted, replyDelta…, then replyFinished or replyFailed (cancellable).
    quint64 sendChat(std::vector<ChatTurn> turns, const SamplingSettings& sampling)
    {
        return source().sendChat(std::move(turns), sampling);
    }
    // Would this conversation (with the draft) fit the context? → fitChecked
    quint64 checkFit(std::vector<ChatTurn> turns, const SamplingSettings& sampling)
    {
        return source().checkFit(std::move(turns), sampling);
    }
    // → turnsCounted
    quint64 countTurns(const QStringList& roles, const QStringList& texts) { return source().countTurns(roles, texts); }
    void resetConversation() { source().resetConversation(); }

signals:
    void replyStarted(quint64 request_id);
    void replyDelta(quint64 request_id, const QString& text);
    void replyFinished(std::shared_ptr<const tokenscope::ui::ReplyStats> stats);
    void replyFailed(quint64 request_id, const QString& message);
    void prefillProgress(quint64 request_id, int done, int total);
    void fitChecked(quint64 request_id, const QString& notice);
    // counts empty: not counted here (a server's template is its own); n_ctx_train: the window
    void turnsCounted(quint64 request_id, const QList<int>& counts, int n_ctx_train);

private:
    Source& source() const { return m_engine.remote() ? *m_remote : *m_local; }

    EngineController& m_engine;
    std::unique_ptr<Source> m_local;
    std::unique_ptr<Source> m_remote;
};

std::unique_ptr<ChatClient::Source> make_remote_chat(ChatClient& client, EngineController& engine);

inline ChatClient& EngineController::chat()
{
    return client<ChatClient>();
}

} // namespace tokenscope::ui
