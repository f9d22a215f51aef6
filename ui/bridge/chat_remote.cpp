// SPDX-License-Identifier: GPL-3.0-or-later
// The chat on a model served elsewhere: the reply streamed from the server through the remote
// client, its timeline measured here on the stream's arrivals, and the server's cache as far as it
// says. Fit checks and turn counts are the server's business (its template, its context policy).
#include "bridge/chat_client.h"
#include "bridge/inspection_client.h"

#include "session/generator.h"

#include <algorithm>
#include <map>
#include <optional>

namespace tokenscope::ui {

namespace er = engine::remote;

namespace {

class RemoteChat final : public QObject, public ChatClient::Source {
public:
    RemoteChat(ChatClient& client, EngineController& engine) : m_client(client), m_engine(engine)
    {
        remote::Client* net = &engine.network();
        connect(net, &remote::Client::delta, this, [this](quint64 client_id, const QString& text) {
            if (const auto it = m_replies.find(client_id); it != m_replies.end())
                emit m_client.replyDelta(it->second, text);
        });
        connect(net, &remote::Client::replyFinished, this, &RemoteChat::onReply);
        connect(net, &remote::Client::metricsRead, this,
                [this](quint64 client_id, const engine::remote::ServerMetrics& metrics) {
                    if (client_id != m_metrics || !m_cache)
                        return;
                    m_metrics = 0;
                    m_cache->kv_usage = metrics.kv_cache_usage;
                    m_cache->running = metrics.running;
                    m_cache->waiting = metrics.waiting;
                    m_cache->metrics_note = metrics.kv_cache_usage || metrics.running || metrics.waiting
                                                ? QObject::tr("from the server's /metrics after this reply")
                                                : QObject::tr("the server's /metrics names no cache or queue figures");
                    emit m_engine.inspection().serverCacheChanged(std::exchange(m_cache, nullptr));
                });
        connect(net, &remote::Client::failed, this, [this](quint64 client_id, const QString& message) {
            if (client_id == m_metrics && m_cache) {
                m_metrics = 0;
                m_cache->metrics_note = QObject::tr("/metrics did not answer: %1").arg(message);
                emit m_engine.inspection().serverCacheChanged(std::exchange(m_cache, nullptr));
                return;
            }
            if (const auto id = endReply(client_id))
                emit m_client.replyFailed(*id, message);
        });
        connect(&engine, &EngineController::serverClosing, this, [this] {
            const auto replies = m_replies; // a cancelled stream answers at once, editing the map
            for (const auto& [client_id, id] : replies)
                m_engine.network().cancel(client_id);
            m_replies.clear();
            // A /metrics answer still on its way belongs to this server: it must not reach the next one's view.
            if (m_metrics)
                m_engine.network().cancel(std::exchange(m_metrics, 0));
            m_cache.reset();
        });
    }

    quint64 sendChat(std::vector<ChatTurn> turns, const SamplingSettings& sampling) override
    {
        std::vector<er::ChatMessage> messages;
        for (const auto& t : turns)
            messages.push_back({t.role.toStdString(), t.content.toStdString()});
        const RequestBook::Ticket ticket = m_engine.requests().open();
        m_engine.setBusy(true);
        const quint64 client_id = m_engine.network().chat(messages, engine::remote::sampling_request(sampling, false));
        m_replies[client_id] = ticket.id;
        m_engine.requests().onCancel(ticket.id, [this, client_id] { m_engine.network().cancel(client_id); });
        emit m_client.replyStarted(ticket.id);
        return ticket.id;
    }

    quint64 checkFit(std::vector<ChatTurn>, const SamplingSettings&) override
    {
        // The server applies its template and its own context policy.
        const quint64 id = m_engine.requests().next();
        EngineController::toUi(&m_client, [client = &m_client, id] { emit client->fitChecked(id, QString()); });
        return id;
    }

    quint64 countTurns(const QStringList&, const QStringList&) override
    {
        // Counted with the server's template, not here: the panel keeps its estimates.
        const quint64 id = m_engine.requests().next();
        const int window = m_engine.server() ? int(m_engine.server()->context_length) : 0;
        EngineController::toUi(&m_client,
                               [client = &m_client, id, window] { emit client->turnsCounted(id, {}, window); });
        return id;
    }

    void resetConversation() override {} // the server keeps no conversation: every request carries the history

private:
    QString serverName() const
    {
        const auto s = m_engine.server();
        return s ? s->kind_name : QObject::tr("the server");
    }

    // The reply that network request `client_id` carried, ended (its request closed, busy cleared),
    // or nothing when it is not one of ours.
    std::optional<quint64> endReply(quint64 client_id)
    {
        const auto it = m_replies.find(client_id);
        if (it == m_replies.end())
            return std::nullopt;
        const quint64 id = it->second;
        m_replies.erase(it);
        m_engine.requests().close(id);
        m_engine.setBusy(false);
        return id;
    }
    void onReply(std::shared_ptr<const remote::StreamedReply> reply);
    // The server's cache after a reply (reused: of the prompt, -1 not said); asks /metrics when served.
    void reportCache(const ReplyStats& stats, int reused);

    ChatClient& m_client;
    EngineController& m_engine;
    std::map<quint64, quint64> m_replies; // network request → chat request id
    // The /metrics request after a reply and the cache snapshot it completes.
    quint64 m_metrics = 0;
    std::shared_ptr<ServerCacheSnapshot> m_cache;
};

void RemoteChat::onReply(std::shared_ptr<const remote::StreamedReply> reply)
{
    const auto ended = endReply(reply->id);
    if (!ended)
        return;
    const quint64 id = *ended;
    const auto server = m_engine.server();

    auto stats = std::make_shared<ReplyStats>();
    stats->request_id = id;
    const auto& usage = reply->usage;
    const auto& timings = reply->timings;
    stats->prompt_tokens = usage ? usage->prompt_tokens : 0;
    int reused = usage && usage->cached_tokens >= 0 ? usage->cached_tokens : -1;
    if (reused < 0 && timings && timings->cache_n >= 0)
        reused = timings->cache_n;
    stats->reused_tokens = std::max(0, reused);
    stats->computed_tokens = std::max(0, stats->prompt_tokens - stats->reused_tokens);
    stats->generated_tokens = usage ? usage->completion_tokens : int(reply->arrival_ms.size());
    stats->ttft_ms = std::max(0.0, reply->ttft_ms);
    const auto& a = reply->arrival_ms;
    stats->tokens_per_second =
        a.size() > 1 && a.back() > a.front() ? 1000.0 * double(a.size() - 1) / (a.back() - a.front()) : 0.0;
    stats->stop_reason = reply->cancelled ? "cancelled" : reply->cut_off ? "cut off" : reply->finish_reason;
    stats->cancelled = reply->cancelled;
    stats->server = serverName();
    stats->prompt_text =
        QObject::tr("(the chat template was applied by the server: %1)").arg(server ? server->kind_name : QString());
    QStringList notes;
    if (reply->cut_off)
        notes << QObject::tr("The reply was cut off — what arrived is kept: %1").arg(reply->error);
    if (reused < 0)
        notes << QObject::tr("The server did not say how much of the history it reused from its cache.");
    if (timings && timings->draft_n > 0)
        notes << QObject::tr("The server decoded speculatively: it drafted %1 tokens and accepted %2 (%3%).")
                     .arg(timings->draft_n)
                     .arg(std::max(0, timings->draft_n_accepted))
                     .arg(qRound(100.0 * std::max(0, timings->draft_n_accepted) / timings->draft_n));
    stats->notice = notes.join("\n");

    // The timeline: measured here, on the stream's arrivals, with the server's account beside it.
    auto tl = std::make_shared<TimelineSnapshot>();
    tl->source = "chat";
    tl->remote = true;
    tl->server = server ? server->kind_name + " at " + server->base.toString() : QString();
    tl->prompt_tokens = stats->prompt_tokens;
    tl->prefill_computed = stats->computed_tokens;
    tl->ttft_ms = stats->ttft_ms;
    tl->prefill_ms = stats->ttft_ms;
    tl->total_ms = reply->total_ms;
    if (timings) {
        tl->server_prompt_ms = timings->prompt_ms >= 0 ? timings->prompt_ms : timings->ttft_ms;
        tl->server_generation_ms = timings->predicted_ms;
        tl->server_generated = timings->predicted_n;
        // what a saved run must hold: both or neither, no more accepted than drafted
        tl->server_drafted = std::max(-1, timings->draft_n);
        tl->server_draft_accepted =
            tl->server_drafted >= 0 ? std::clamp(timings->draft_n_accepted, 0, tl->server_drafted) : -1;
    }
    const auto ns = [](double ms) { return static_cast<qint64>(ms * 1e6); };
    if (!a.empty()) {
        tl->events.push_back({int(engine::TimelineStage::Prefill), -1, 0, ns(a.front())});
        for (std::size_t i = 0; i < a.size(); ++i) {
            TimelineStepUi step;
            step.latency_ms = i == 0 ? a.front() : a[i] - a[i - 1];
            tl->steps.push_back(step);
            if (i > 0)
                tl->events.push_back({int(engine::TimelineStage::Decode), int(i), ns(a[i - 1]), ns(a[i])});
        }
    }
    if (reply->cut_off)
        tl->note = QObject::tr("cut off: %1").arg(reply->error);
    emit m_engine.inspection().timelineChanged(tl);
    emit m_client.replyFinished(stats);
    reportCache(*stats, reused);
}

void RemoteChat::reportCache(const ReplyStats& stats, int reused)
{
    const auto server = m_engine.server();
    auto cache = std::make_shared<ServerCacheSnapshot>();
    cache->server = server ? server->kind_name + " at " + server->base.toString() : QObject::tr("the server");
    cache->context_length = server ? int(server->context_length) : 0;
    cache->prompt_tokens = stats.prompt_tokens;
    cache->tokens_held = stats.prompt_tokens + stats.generated_tokens;
    cache->reused_tokens = reused;
    if (!server || !server->metrics) {
        cache->metrics_note =
            server && server->kind == engine::remote::ServerKind::LlamaCpp
                ? QObject::tr("the server does not expose /metrics (llama-server: start it with --metrics)")
                : QObject::tr("the server does not expose /metrics");
        emit m_engine.inspection().serverCacheChanged(cache);
        return;
    }
    // One /metrics request at a time: a newer reply's replaces an older one still on its way.
    if (m_metrics)
        m_engine.network().cancel(m_metrics);
    m_cache = cache;
    m_metrics = m_engine.network().metrics();
}

} // namespace

std::unique_ptr<ChatClient::Source> make_remote_chat(ChatClient& client, EngineController& engine)
{
    return std::make_unique<RemoteChat>(client, engine);
}

} // namespace tokenscope::ui
