// SPDX-License-Identifier: GPL-3.0-or-later
// EngineController on a model served elsewhere: the chat and the tokenizer through the remote
// client, the same signals the local engine sends, and an honest "not available on a server" for
// everything that needs the model's weights or activations.
#include "bridge/engine_controller.h"

#include "bridge/token_text.h"
#include "session/generator.h"

#include <cmath>

#include <QMetaObject>
#include <algorithm>

namespace tokenscope::ui {

namespace er = engine::remote;

namespace {

// A served model's id is often a path on the server; the file or repository name reads better.
QString model_display_name(const QString& id)
{
    const QString last = id.section('/', -1);
    return last.isEmpty() ? id : last;
}

std::shared_ptr<const ModelSummary> summary_of(const remote::ServerInfo& s)
{
    auto m = std::make_shared<ModelSummary>();
    m->remote = true;
    m->server_url = s.base.toString();
    m->server_kind = s.kind_name;
    m->path = s.base.toString() + " · " + s.model;
    m->name = model_display_name(s.model);
    m->architecture = s.kind_name;
    m->context_length = s.trained_context ? s.trained_context : s.context_length;
    m->n_ctx = s.context_length;
    m->backend = QObject::tr("Server: %1 at %2").arg(s.kind_name, s.base.toString());
    m->chat_format = QObject::tr("the server's own template");
    // The server applies its template and answers as a chat model; whether the model was
    // instruction-tuned is not something these APIs say.
    m->instruction_tuned = true;
    m->model_kind_reason = QObject::tr("the server answers through its own chat template");
    return m;
}

er::SamplingRequest sampling_request(const SamplingSettings& sampling, bool greedy = false)
{
    er::SamplingRequest s;
    s.temperature = greedy ? 0.0 : sampling.temperature;
    s.top_k = sampling.top_k;
    s.top_p = sampling.top_p;
    s.min_p = sampling.min_p;
    s.repeat_penalty = sampling.repeat_penalty;
    s.seed = static_cast<int64_t>(sampling.seed);
    s.max_tokens = sampling.max_tokens;
    return s;
}

QString piece_display(const std::string& piece)
{
    return visible_whitespace(QString::fromUtf8(piece.data(), qsizetype(piece.size())));
}

constexpr int kServerTopN = 20; // what OpenAI-style servers allow; llama-server takes more

} // namespace

QString EngineController::unavailableOnServer(const QString& what)
{
    return tr("%1 needs the model's weights and activations, which a server does not expose: not available "
              "on a server connection (File → Open model… to run a model here)")
        .arg(what);
}

template <typename Snapshot, typename Signal>
quint64 EngineController::answerWithError(Signal signal, quint64 id, const QString& message)
{
    auto s = std::make_shared<Snapshot>();
    s->request_id = id;
    s->error = message;
    if constexpr (requires { s->action; })
        s->action = "error";
    std::shared_ptr<const Snapshot> out = s;
    QMetaObject::invokeMethod(
        this, [this, out, signal] { emit(this->*signal)(out); }, Qt::QueuedConnection);
    return id;
}

template <typename Snapshot, typename Signal>
quint64 EngineController::refuseOnServer(Signal signal, const QString& what)
{
    return answerWithError<Snapshot>(signal, nextId(), unavailableOnServer(what));
}

// The instantiations the controller uses.
template quint64
EngineController::refuseOnServer<StepperState>(void (EngineController::*)(std::shared_ptr<const StepperState>),
                                               const QString&);
template quint64
EngineController::refuseOnServer<KvContents>(void (EngineController::*)(std::shared_ptr<const KvContents>),
                                             const QString&);
template quint64 EngineController::refuseOnServer<AttentionSnapshot>(
    void (EngineController::*)(std::shared_ptr<const AttentionSnapshot>), const QString&);
template quint64
EngineController::refuseOnServer<PatchingSnapshot>(void (EngineController::*)(std::shared_ptr<const PatchingSnapshot>),
                                                   const QString&);
template quint64 EngineController::refuseOnServer<AttributionSnapshot>(
    void (EngineController::*)(std::shared_ptr<const AttributionSnapshot>), const QString&);
template quint64
EngineController::refuseOnServer<HeadsSnapshot>(void (EngineController::*)(std::shared_ptr<const HeadsSnapshot>),
                                                const QString&);
template quint64
EngineController::refuseOnServer<AblationSnapshot>(void (EngineController::*)(std::shared_ptr<const AblationSnapshot>),
                                                   const QString&);
template quint64
EngineController::refuseOnServer<SteeringSnapshot>(void (EngineController::*)(std::shared_ptr<const SteeringSnapshot>),
                                                   const QString&);
template quint64 EngineController::refuseOnServer<TextAnalysisSnapshot>(
    void (EngineController::*)(std::shared_ptr<const TextAnalysisSnapshot>), const QString&);

quint64 EngineController::connectServer(const remote::Endpoint& endpoint)
{
    if (!m_client) {
        m_client = new remote::Client(this);
        connect(m_client, &remote::Client::probed, this,
                [this](quint64 id, std::shared_ptr<const remote::ServerInfo> s) {
                    if (id != m_server_probe)
                        return;
                    finished(id);
                    m_server = s;
                    m_model = summary_of(*s);
                    setBusy(false);
                    emit serverConnected(s);
                    emit modelLoaded(m_model);
                });
        connect(m_client, &remote::Client::delta, this, [this](quint64 client_id, const QString& text) {
            if (const auto it = m_server_requests.find(client_id); it != m_server_requests.end())
                emit replyDelta(it->second, text);
        });
        connect(m_client, &remote::Client::replyFinished, this, &EngineController::onServerReply);
        connect(m_client, &remote::Client::tokenized, this,
                [this](quint64 client_id, std::shared_ptr<const std::vector<er::RemoteToken>> tokens) {
                    if (client_id == m_server_stepper.tokenize_client) {
                        onServerStepperTokens(*tokens);
                        return;
                    }
                    const auto it = m_server_requests.find(client_id);
                    if (it == m_server_requests.end())
                        return;
                    auto t = std::make_shared<Tokenization>();
                    t->request_id = it->second;
                    const QString text = m_server_texts[client_id].text;
                    t->ms = double(m_server_texts[client_id].clock.nsecsElapsed()) / 1e6;
                    t->source = tr("the server (%1)").arg(m_server ? m_server->kind_name : QString());
                    m_server_texts.erase(client_id);
                    t->text = text;
                    t->utf8 = text.toUtf8();
                    m_server_requests.erase(it);
                    // Byte spans: each piece found where the text continues; a piece that is not there
                    // (a control token the server added, such as BOS) gets an empty span.
                    int at = 0;
                    for (const auto& rt : *tokens) {
                        TokenSpan span;
                        span.id = rt.id;
                        const QByteArray piece = QByteArray::fromStdString(rt.piece);
                        span.piece = QString::fromUtf8(piece);
                        span.begin = span.end = at;
                        span.type = "normal";
                        if (!piece.isEmpty() && t->utf8.mid(at, piece.size()) == piece) {
                            span.end = at + int(piece.size());
                            at = span.end;
                        } else {
                            span.type = "control";
                        }
                        t->tokens.push_back(std::move(span));
                    }
                    emit tokenized(t);
                });
        connect(m_client, &remote::Client::nextTokenReady, this,
                [this](quint64 client_id, std::shared_ptr<const er::TokenLogprob> next) {
                    if (client_id == m_server_stepper.next_client)
                        onServerNextToken(*next);
                });
        connect(m_client, &remote::Client::metricsRead, this,
                [this](quint64 client_id, const engine::remote::ServerMetrics& metrics) {
                    if (client_id != m_server_metrics || !m_server_cache)
                        return;
                    m_server_metrics = 0;
                    m_server_cache->kv_usage = metrics.kv_cache_usage;
                    m_server_cache->running = metrics.running;
                    m_server_cache->waiting = metrics.waiting;
                    m_server_cache->metrics_note = metrics.kv_cache_usage || metrics.running || metrics.waiting
                                                       ? tr("from the server's /metrics after this reply")
                                                       : tr("the server's /metrics names no cache or queue figures");
                    emit serverCacheChanged(std::exchange(m_server_cache, nullptr));
                });
        connect(m_client, &remote::Client::failed, this, [this](quint64 client_id, const QString& message) {
            if (client_id == m_server_metrics && m_server_cache) {
                m_server_metrics = 0;
                m_server_cache->metrics_note = tr("/metrics did not answer: %1").arg(message);
                emit serverCacheChanged(std::exchange(m_server_cache, nullptr));
                return;
            }
            if (client_id == m_server_stepper.tokenize_client || client_id == m_server_stepper.next_client) {
                m_server_stepper.tokenize_client = m_server_stepper.next_client = 0;
                finished(m_server_stepper.request);
                answerWithError<StepperState>(&EngineController::stepperState, m_server_stepper.request, message);
                return;
            }
            if (client_id == m_server_probe) {
                finished(client_id);
                setBusy(false);
                emit serverFailed(message);
                return;
            }
            const auto it = m_server_requests.find(client_id);
            if (it == m_server_requests.end())
                return;
            const quint64 id = it->second;
            m_server_requests.erase(it);
            if (const auto t = m_server_texts.find(client_id); t != m_server_texts.end()) {
                auto failed_tokenization = std::make_shared<Tokenization>();
                failed_tokenization->request_id = id;
                failed_tokenization->text = t->second.text;
                failed_tokenization->utf8 = t->second.text.toUtf8();
                failed_tokenization->error = message;
                m_server_texts.erase(t);
                emit tokenized(failed_tokenization);
                return;
            }
            finished(id);
            setBusy(false);
            emit replyFailed(id, message);
        });
    }
    m_client->setEndpoint(endpoint);
    setBusy(true);
    m_server_probe = m_client->probe();
    return m_server_probe;
}

void EngineController::disconnectServer()
{
    if (!m_server)
        return;
    const auto requests = m_server_requests; // a cancelled stream answers at once, editing the map
    for (const auto& [client_id, id] : requests)
        m_client->cancel(client_id);
    m_server_requests.clear();
    // A /metrics answer still on its way belongs to this server: it must not reach the next one's view.
    if (m_server_metrics)
        m_client->cancel(std::exchange(m_server_metrics, 0));
    m_server_cache.reset();
    m_server.reset();
    m_model.reset();
    emit serverDisconnected();
}

quint64 EngineController::sendChatToServer(std::vector<ChatTurn> turns, const SamplingSettings& sampling)
{
    const quint64 id = nextId();
    std::vector<er::ChatMessage> messages;
    for (const auto& t : turns)
        messages.push_back({t.role.toStdString(), t.content.toStdString()});
    const er::SamplingRequest s = sampling_request(sampling);
    setBusy(true);
    const quint64 client_id = m_client->chat(messages, s);
    m_server_requests[client_id] = id;
    m_cancellable[id] = std::make_shared<std::atomic<bool>>(false); // cancel(id) finds it (see cancel)
    emit replyStarted(id);
    return id;
}

quint64 EngineController::stepperOnServer(const QString& action, const QString& prompt, const StepperSettings& settings,
                                          int forced_token)
{
    const quint64 id = nextId();
    const auto refuse = [this, id](const QString& message) {
        return answerWithError<StepperState>(&EngineController::stepperState, id, message);
    };
    if (!m_server->next_token_probs)
        return refuse(remote::Client::noNextTokenReason(*m_server));
    ServerStepper& st = m_server_stepper;
    st.request = id;
    st.action = action;
    st.settings = settings;
    if (action == "prefill") {
        st.tokens.clear();
        st.steps = 0;
        st.top.clear();
        st.drawn = -1;
        st.tokenize_client = m_client->tokenize(prompt, true);
        return id;
    }
    if (st.tokens.empty())
        return refuse(tr("Prefill a prompt first."));
    if (action == "step") {
        StepperToken t;
        t.prompt = false;
        t.forced = forced_token >= 0;
        t.id = t.forced ? forced_token : st.drawn;
        t.text = st.drawn_text;
        t.probability = 0.0f;
        for (const auto& c : st.top)
            if (c.id == t.id) {
                t.probability = c.probability;
                if (t.forced)
                    t.text = c.text;
            }
        if (t.forced && t.probability == 0.0f)
            t.text = QString("#%1").arg(forced_token);
        st.tokens.push_back(t);
        ++st.steps;
    } else if (action == "back" && st.steps > 0) {
        st.tokens.pop_back();
        --st.steps;
    }
    askServerForNextToken();
    return id;
}

void EngineController::onServerStepperTokens(const std::vector<er::RemoteToken>& tokens)
{
    ServerStepper& st = m_server_stepper;
    st.tokenize_client = 0;
    for (const auto& rt : tokens) {
        StepperToken t;
        t.id = rt.id;
        t.text = piece_display(rt.piece);
        t.prompt = true;
        st.tokens.push_back(t);
    }
    st.prompt_length = int(st.tokens.size());
    askServerForNextToken();
}

void EngineController::askServerForNextToken()
{
    ServerStepper& st = m_server_stepper;
    std::vector<int32_t> ids;
    for (const auto& t : st.tokens)
        ids.push_back(t.id);
    const er::SamplingRequest s = sampling_request(st.settings.sampling, st.settings.greedy);
    st.next_client = m_client->nextToken(ids, kServerTopN, &s);
}

void EngineController::onServerNextToken(const er::TokenLogprob& next)
{
    ServerStepper& st = m_server_stepper;
    st.next_client = 0;
    st.top.clear();
    for (const auto& c : next.top)
        st.top.push_back({c.id, piece_display(c.token), float(std::exp(c.logprob))});
    st.drawn = next.id;
    st.drawn_text = piece_display(next.token);
    auto state = std::make_shared<StepperState>();
    state->request_id = st.request;
    state->action = st.action;
    state->tokens = st.tokens;
    state->prompt_length = st.prompt_length;
    state->steps = st.steps;
    state->server = m_server ? m_server->kind_name : QString();
    state->server_top = st.top;
    state->server_drawn = st.drawn;
    state->server_drawn_text = st.drawn_text;
    for (std::size_t i = std::size_t(st.prompt_length); i < st.tokens.size(); ++i)
        state->generated_text += st.tokens[i].text;
    finished(st.request);
    emit stepperState(state);
}

quint64 EngineController::tokenizeOnServer(const QString& text)
{
    const quint64 id = nextId();
    const quint64 client_id = m_client->tokenize(text, true);
    m_server_requests[client_id] = id;
    m_server_texts[client_id].text = text; // for the byte spans of the answer
    m_server_texts[client_id].clock.start();
    return id;
}

void EngineController::onServerReply(std::shared_ptr<const remote::StreamedReply> reply)
{
    const auto it = m_server_requests.find(reply->id);
    if (it == m_server_requests.end())
        return;
    const quint64 id = it->second;
    m_server_requests.erase(it);
    finished(id);
    setBusy(false);

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
    stats->server = m_server ? m_server->kind_name : tr("the server");
    stats->prompt_text =
        tr("(the chat template was applied by the server: %1)").arg(m_server ? m_server->kind_name : QString());
    QStringList notes;
    if (reply->cut_off)
        notes << tr("The reply was cut off — what arrived is kept: %1").arg(reply->error);
    if (reused < 0)
        notes << tr("The server did not say how much of the history it reused from its cache.");
    stats->notice = notes.join("\n");

    // The timeline: measured here, on the stream's arrivals, with the server's account beside it.
    auto tl = std::make_shared<TimelineSnapshot>();
    tl->source = "chat";
    tl->remote = true;
    tl->server = m_server ? m_server->kind_name + " at " + m_server->base.toString() : QString();
    tl->prompt_tokens = stats->prompt_tokens;
    tl->prefill_computed = stats->computed_tokens;
    tl->ttft_ms = stats->ttft_ms;
    tl->prefill_ms = stats->ttft_ms;
    tl->total_ms = reply->total_ms;
    if (timings) {
        tl->server_prompt_ms = timings->prompt_ms >= 0 ? timings->prompt_ms : timings->ttft_ms;
        tl->server_generation_ms = timings->predicted_ms;
        tl->server_generated = timings->predicted_n;
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
        tl->note = tr("cut off: %1").arg(reply->error);
    emit timelineChanged(tl);
    emit replyFinished(stats);
    reportServerCache(*stats, reused);
}

void EngineController::reportServerCache(const ReplyStats& stats, int reused)
{
    auto cache = std::make_shared<ServerCacheSnapshot>();
    cache->server = m_server ? m_server->kind_name + " at " + m_server->base.toString() : tr("the server");
    cache->context_length = m_server ? int(m_server->context_length) : 0;
    cache->prompt_tokens = stats.prompt_tokens;
    cache->tokens_held = stats.prompt_tokens + stats.generated_tokens;
    cache->reused_tokens = reused;
    if (!m_server || !m_server->metrics || !m_client) {
        cache->metrics_note = m_server && m_server->kind == engine::remote::ServerKind::LlamaCpp
                                  ? tr("the server does not expose /metrics (llama-server: start it with --metrics)")
                                  : tr("the server does not expose /metrics");
        emit serverCacheChanged(cache);
        return;
    }
    // One /metrics request at a time: a newer reply's replaces an older one still on its way.
    if (m_server_metrics)
        m_client->cancel(m_server_metrics);
    m_server_cache = cache;
    m_server_metrics = m_client->metrics();
}

} // namespace tokenscope::ui
