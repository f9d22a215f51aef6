// SPDX-License-Identifier: GPL-3.0-or-later
#include "remote/remote_client.h"

#include "util/error.h"

#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QNetworkRequest>

namespace tokenscope::remote {

namespace er = engine::remote;

struct Client::Stream {
    QPointer<QNetworkReply> reply;
    bool ndjson = false;
    er::SseDecoder sse;
    er::LineDecoder lines;
    QElapsedTimer clock;
    std::shared_ptr<StreamedReply> result = std::make_shared<StreamedReply>();
    bool server_done = false; // [DONE], a finish_reason or Ollama's done
    QString what;
};

struct Client::Probe {
    quint64 id = 0;
    int step = 0;
    std::shared_ptr<ServerInfo> info = std::make_shared<ServerInfo>();
    bool models_answered = false;
};

Client::Client(QObject* parent) : QObject(parent), m_network(new QNetworkAccessManager(this))
{
    // Follow redirects within the same scheme only (an https → http downgrade is refused).
    m_network->setRedirectPolicy(QNetworkRequest::NoLessSafeRedirectPolicy);
}

Client::~Client()
{
    for (auto& [id, s] : m_streams)
        if (s->reply)
            s->reply->abort();
}

void Client::setEndpoint(Endpoint endpoint)
{
    QString path = endpoint.base.path();
    while (path.endsWith('/'))
        path.chop(1);
    if (path.endsWith("/v1"))
        path.chop(3);
    endpoint.base.setPath(path);
    m_endpoint = std::move(endpoint);
    m_server.reset();
}

QUrl Client::url(const QString& path) const
{
    QUrl u = m_endpoint.base;
    u.setPath(u.path() + path);
    return u;
}

namespace {

QNetworkRequest request_for(const QUrl& url, const Endpoint& e)
{
    QNetworkRequest r(url);
    r.setHeader(QNetworkRequest::ContentTypeHeader, "application/json");
    r.setRawHeader("Accept", "application/json, text/event-stream");
    if (!e.api_key.isEmpty())
        r.setRawHeader("Authorization", "Bearer " + e.api_key.toUtf8());
    r.setTransferTimeout(e.timeout_ms);
    return r;
}

QString where(const QUrl& url)
{
    return url.host() + (url.port() > 0 ? ":" + QString::number(url.port()) : QString());
}

std::string to_std(const QString& s)
{
    return s.toStdString();
}

} // namespace

QNetworkReply* Client::get(const QString& path)
{
    return m_network->get(request_for(url(path), m_endpoint));
}

QNetworkReply* Client::post(const QString& path, const std::string& body)
{
    return m_network->post(request_for(url(path), m_endpoint), QByteArray::fromStdString(body));
}

QString Client::failure(QNetworkReply* reply, const QString& what) const
{
    const int status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
    if (status >= 400) {
        const QByteArray body = reply->readAll();
        return QString::fromStdString(er::http_error_message(
            status, std::string_view(body.constData(), static_cast<std::size_t>(body.size())), to_std(what)));
    }
    const QString host = where(reply->url());
    switch (reply->error()) {
    case QNetworkReply::NoError:
        return {};
    case QNetworkReply::ConnectionRefusedError:
        return QString("%1 failed: %2 refused the connection (is the server running, on this port?)").arg(what, host);
    case QNetworkReply::HostNotFoundError:
        return QString("%1 failed: the host %2 was not found").arg(what, reply->url().host());
    case QNetworkReply::TimeoutError:
    case QNetworkReply::OperationCanceledError:
        return QString("%1 failed: %2 sent nothing for %3 s").arg(what, host).arg(m_endpoint.timeout_ms / 1000.0);
    case QNetworkReply::RemoteHostClosedError:
        return QString("%1 failed: %2 closed the connection before answering").arg(what, host);
    case QNetworkReply::SslHandshakeFailedError:
        return QString("%1 failed: the TLS handshake with %2 failed (%3)").arg(what, host, reply->errorString());
    default:
        return QString("%1 failed: %2").arg(what, reply->errorString());
    }
}

template <typename Done> void Client::oneShot(quint64 id, QNetworkReply* reply, const QString& what, Done done)
{
    m_pending[id] = reply;
    connect(reply, &QNetworkReply::finished, this, [this, id, reply, what, done] {
        reply->deleteLater();
        const bool cancelled = !m_pending.count(id);
        m_pending.erase(id);
        if (cancelled)
            return;
        const QString error = failure(reply, what);
        if (!error.isEmpty()) {
            emit failed(id, error);
            return;
        }
        const QByteArray body = reply->readAll();
        try {
            done(std::string(body.constData(), static_cast<std::size_t>(body.size())));
        } catch (const engine::Error& e) {
            emit failed(id, QString::fromStdString(e.what()));
        }
    });
}

quint64 Client::probe()
{
    auto p = std::make_shared<Probe>();
    p->id = m_next++;
    p->info->base = m_endpoint.base;
    probeStep(p);
    return p->id;
}

bool Client::refusedKey(const std::shared_ptr<Probe>& p, QNetworkReply* r)
{
    const int status = r->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
    if (status != 401 && status != 403)
        return false;
    emit failed(p->id, failure(r, "Connecting to " + m_endpoint.base.toString()));
    return true;
}

// The probe's steps, one request each: 0 /v1/models, 1 /api/version, 2 /api/v0/models, 3 /props,
// 4 /metrics, then done. A step that does not apply is skipped.
void Client::probeStep(const std::shared_ptr<Probe>& p)
{
    ServerInfo& info = *p->info;
    const auto next = [this, p] {
        ++p->step;
        probeStep(p);
    };
    switch (p->step) {
    case 0: {
        QNetworkReply* r = get("/v1/models");
        connect(r, &QNetworkReply::finished, this, [this, r, p, next] {
            r->deleteLater();
            const int status = r->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
            if (status == 401 || status == 403 || (status == 0 && r->error() != QNetworkReply::NoError)) {
                emit failed(p->id, failure(r, "Connecting to " + m_endpoint.base.toString()));
                return;
            }
            if (status == 200) {
                const QByteArray body = r->readAll();
                try {
                    const er::ModelList list = er::parse_models(body.toStdString());
                    p->info->kind = list.kind;
                    for (const auto& m : list.models) {
                        p->info->models << QString::fromStdString(m.id);
                        if (!p->info->trained_context)
                            p->info->trained_context = m.context_length;
                        if (!p->info->n_vocab)
                            p->info->n_vocab = m.n_vocab;
                    }
                    p->models_answered = true;
                } catch (const engine::Error&) {
                    // Not an OpenAI-compatible list: the next steps may still recognise the server.
                }
            }
            next();
        });
        return;
    }
    case 1:
    case 2:
        if (info.kind != ServerKind::Unknown)
            return next();
        {
            const bool ollama = p->step == 1;
            QNetworkReply* r = get(ollama ? "/api/version" : "/api/v0/models");
            connect(r, &QNetworkReply::finished, this, [r, p, next, ollama] {
                r->deleteLater();
                if (r->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt() == 200) {
                    const std::string body = r->readAll().toStdString();
                    try {
                        if (ollama) {
                            if (const auto v = er::parse_ollama_version(body)) {
                                p->info->kind = ServerKind::Ollama;
                                p->info->version = QString::fromStdString(*v);
                            }
                        } else {
                            const auto rows = er::parse_lmstudio_models(body);
                            p->info->kind = ServerKind::LmStudio;
                            p->info->models.clear();
                            for (const auto& m : rows) {
                                p->info->models << QString::fromStdString(m.id);
                                if (!p->info->context_length)
                                    p->info->context_length = m.context_length;
                            }
                        }
                    } catch (const engine::Error&) {
                    }
                }
                next();
            });
        }
        return;
    case 3:
        if (info.kind != ServerKind::LlamaCpp)
            return next();
        {
            QNetworkReply* r = get("/props");
            connect(r, &QNetworkReply::finished, this, [this, r, p, next] {
                r->deleteLater();
                // llama-server lists its models without a key; /props is where a wrong one shows.
                if (refusedKey(p, r))
                    return;
                if (r->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt() == 200) {
                    try {
                        p->info->context_length = er::parse_props_context(r->readAll().toStdString());
                    } catch (const engine::Error&) {
                    }
                }
                next();
            });
        }
        return;
    case 4:
        if (info.kind != ServerKind::Vllm && info.kind != ServerKind::Sglang && info.kind != ServerKind::LlamaCpp)
            return next();
        {
            QNetworkReply* r = get("/metrics");
            connect(r, &QNetworkReply::finished, this, [this, r, p, next] {
                r->deleteLater();
                if (refusedKey(p, r))
                    return;
                p->info->metrics = r->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt() == 200;
                next();
            });
        }
        return;
    default:
        break;
    }
    if (!p->models_answered && info.kind == ServerKind::Unknown) {
        emit failed(p->id, QString("Connecting to %1 failed: it does not answer GET /v1/models (nor Ollama's "
                                   "/api/version or LM Studio's /api/v0/models); is this an OpenAI-compatible server?")
                               .arg(m_endpoint.base.toString()));
        return;
    }
    info.kind_name = QString::fromStdString(er::server_kind_name(info.kind));
    info.model = m_endpoint.model;
    if (info.model.isEmpty() && !info.models.isEmpty())
        info.model = info.models.front();
    if (!info.model.isEmpty() && !info.models.isEmpty() && !info.models.contains(info.model)) {
        emit failed(p->id, QString("The server at %1 does not serve the model \"%2\" (it serves: %3)")
                               .arg(m_endpoint.base.toString(), info.model, info.models.join(", ")));
        return;
    }
    if (!info.context_length)
        info.context_length = info.trained_context;
    info.tokenizer =
        info.kind == ServerKind::LlamaCpp || info.kind == ServerKind::Vllm || info.kind == ServerKind::Sglang;
    info.token_pieces = info.kind == ServerKind::LlamaCpp || info.kind == ServerKind::Vllm;
    info.next_token_probs = info.kind == ServerKind::LlamaCpp;
    info.logprobs = info.kind != ServerKind::LmStudio;
    m_server = p->info;
    emit probed(p->id, p->info);
}

QString Client::noTokenizerReason(const ServerInfo& server)
{
    return QString("%1 does not expose its tokenizer over HTTP, so the tokens it reads cannot be shown")
        .arg(server.kind_name.isEmpty() ? QString("This server") : server.kind_name);
}

QString Client::noNextTokenReason(const ServerInfo& server)
{
    return QString("%1 does not give the next-token distribution for a sequence of token ids (llama-server does)")
        .arg(server.kind_name.isEmpty() ? QString("This server") : server.kind_name);
}

quint64 Client::startStream(const QString& path, const std::string& body, bool ndjson)
{
    const quint64 id = m_next++;
    auto s = std::make_unique<Stream>();
    s->ndjson = ndjson;
    s->result->id = id;
    s->what = "POST " + path;
    s->clock.start();
    s->reply = post(path, body);
    QNetworkReply* r = s->reply;
    m_streams[id] = std::move(s);
    connect(r, &QNetworkReply::readyRead, this, [this, id] { onStreamData(id); });
    connect(r, &QNetworkReply::finished, this, [this, id] { onStreamFinished(id); });
    return id;
}

void Client::onStreamData(quint64 id)
{
    const auto it = m_streams.find(id);
    if (it == m_streams.end() || !it->second->reply)
        return;
    consume(id, *it->second);
}

void Client::consume(quint64 id, Stream& s)
{
    const int status = s.reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
    if (status >= 400)
        return; // the error body is read when the reply finishes
    const QByteArray bytes = s.reply->readAll();
    const double now_ms = static_cast<double>(s.clock.nsecsElapsed()) / 1e6;
    const std::string_view view(bytes.constData(), static_cast<std::size_t>(bytes.size()));
    const std::vector<std::string> events = s.ndjson ? s.lines.feed(view) : s.sse.feed(view);
    if (!s.ndjson && s.sse.done())
        s.server_done = true;
    QString text;
    for (const auto& e : events) {
        er::StreamChunk c;
        try {
            c = er::parse_stream_chunk(e);
        } catch (const engine::Error& err) {
            s.result->error = QString::fromStdString(err.what());
            continue;
        }
        if (!c.error.empty()) {
            s.result->error = QString::fromStdString(c.error);
            continue;
        }
        StreamedReply& r = *s.result;
        if (!c.content.empty()) {
            if (r.ttft_ms < 0)
                r.ttft_ms = now_ms;
            r.arrival_ms.push_back(now_ms);
            text += QString::fromStdString(c.content);
        }
        r.reasoning += QString::fromStdString(c.reasoning);
        if (!c.finish_reason.empty()) {
            r.finish_reason = QString::fromStdString(c.finish_reason);
            s.server_done = true;
        }
        if (c.done)
            s.server_done = true;
        for (auto& lp : c.logprobs)
            r.logprobs.push_back(std::move(lp));
        if (c.usage)
            r.usage = c.usage;
        if (c.timings)
            r.timings = c.timings;
        ++r.chunks;
    }
    if (!text.isEmpty()) {
        s.result->text += text;
        emit delta(id, text);
    }
}

void Client::onStreamFinished(quint64 id)
{
    const auto it = m_streams.find(id);
    if (it == m_streams.end())
        return;
    std::unique_ptr<Stream> s = std::move(it->second);
    m_streams.erase(it);
    if (!s->reply)
        return;
    QNetworkReply* reply = s->reply;
    reply->deleteLater();
    consume(id, *s); // what arrived with the end of the reply
    if (s->ndjson) {
        if (auto last = s->lines.finish()) {
            try {
                const er::StreamChunk c = er::parse_stream_chunk(*last);
                if (c.done)
                    s->server_done = true;
                if (!c.content.empty())
                    s->result->text += QString::fromStdString(c.content);
                if (c.usage)
                    s->result->usage = c.usage;
                if (c.timings)
                    s->result->timings = c.timings;
            } catch (const engine::Error&) {
            }
        }
    }
    StreamedReply& r = *s->result;
    r.total_ms = static_cast<double>(s->clock.nsecsElapsed()) / 1e6;
    if (r.cancelled) {
        emit replyFinished(s->result);
        return;
    }
    const QString error = failure(reply, s->what);
    if (!error.isEmpty() && r.text.isEmpty() && r.chunks == 0) {
        emit failed(id, error);
        return;
    }
    if (!s->server_done) {
        r.cut_off = true;
        if (!error.isEmpty())
            r.error = error;
        else if (r.error.isEmpty())
            r.error = QString("%1: the stream from %2 ended before the server said the reply was complete")
                          .arg(s->what, where(reply->url()));
    } else if (!error.isEmpty()) {
        r.error = error;
    }
    emit replyFinished(s->result);
}

quint64 Client::chat(const std::vector<er::ChatMessage>& messages, er::SamplingRequest sampling)
{
    const ServerKind kind = m_server ? m_server->kind : ServerKind::Unknown;
    if (sampling.model.empty() && m_server)
        sampling.model = to_std(m_server->model);
    sampling.stream = true;
    if (m_server && !m_server->logprobs)
        sampling.top_logprobs = 0;
    const std::string body = er::chat_request_body(messages, sampling, kind);
    return kind == ServerKind::Ollama ? startStream("/api/chat", body, true)
                                      : startStream("/v1/chat/completions", body, false);
}

quint64 Client::complete(const QString& prompt, er::SamplingRequest sampling)
{
    if (sampling.model.empty() && m_server)
        sampling.model = to_std(m_server->model);
    sampling.stream = true;
    return startStream("/v1/completions", er::completion_request_body(to_std(prompt), sampling), false);
}

quint64 Client::tokenize(const QString& text, bool add_special)
{
    const quint64 id = m_next++;
    if (!m_server || !m_server->tokenizer) {
        const QString why = noTokenizerReason(m_server ? *m_server : ServerInfo{});
        QMetaObject::invokeMethod(
            this, [this, id, why] { emit failed(id, why); }, Qt::QueuedConnection);
        return id;
    }
    const std::string body =
        er::tokenize_request_body(to_std(text), m_server->kind, to_std(m_server->model), add_special);
    oneShot(id, post("/tokenize", body), "POST /tokenize", [this, id](const std::string& answer) {
        emit tokenized(id, std::make_shared<const std::vector<er::RemoteToken>>(er::parse_tokenize(answer)));
    });
    return id;
}

quint64 Client::nextToken(const std::vector<int32_t>& ids, int n, const er::SamplingRequest* sampling)
{
    const quint64 id = m_next++;
    if (!m_server || !m_server->next_token_probs) {
        const QString why = noNextTokenReason(m_server ? *m_server : ServerInfo{});
        QMetaObject::invokeMethod(
            this, [this, id, why] { emit failed(id, why); }, Qt::QueuedConnection);
        return id;
    }
    oneShot(id, post("/completion", er::next_token_request_body(ids, n, sampling)), "POST /completion",
            [this, id](const std::string& answer) {
                auto probs = er::parse_completion_probabilities(answer);
                emit nextTokenReady(id, std::make_shared<const er::TokenLogprob>(std::move(probs.front())));
            });
    return id;
}

quint64 Client::metrics()
{
    const quint64 id = m_next++;
    oneShot(id, get("/metrics"), "GET /metrics",
            [this, id](const std::string& answer) { emit metricsRead(id, er::parse_metrics(answer)); });
    return id;
}

void Client::cancel(quint64 id)
{
    if (const auto it = m_streams.find(id); it != m_streams.end()) {
        it->second->result->cancelled = true;
        it->second->server_done = true;
        if (it->second->reply)
            it->second->reply->abort(); // finished → replyFinished, text kept
        return;
    }
    if (const auto it = m_pending.find(id); it != m_pending.end()) {
        QPointer<QNetworkReply> r = it->second;
        m_pending.erase(it);
        if (r)
            r->abort();
    }
}

} // namespace tokenscope::remote
