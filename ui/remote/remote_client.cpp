// SPDX-License-Identifier: GPL-3.0-or-later
#include "remote/remote_client.h"

#include "util/error.h"

#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QNetworkRequest>
#include <QTimer>
#include <algorithm>
#include <climits>

namespace tokenscope::remote {

namespace er = engine::remote;

struct Client::Stream {
    QPointer<QNetworkReply> reply;
    bool ndjson = false;
    er::ResponseLimits limits;
    er::SseDecoder sse;
    er::LineDecoder lines;
    quint64 bytes = 0;     // arrived so far
    quint64 events = 0;    // decoded so far
    QByteArray error_body; // an HTTP error's body, its first kErrorBody bytes
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
    // Each redirect is checked by guard(): followed within the origin the user gave, never beyond.
    m_network->setRedirectPolicy(QNetworkRequest::UserVerifiedRedirectPolicy);
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

// What Qt is asked to hold of a reply before the client reads it. (Qt 6.4's HTTP thread still reads
// ahead — megabytes at once on a fast link — so every reply is also read as it arrives, its limits
// checked, and stopped at the first one passed.)
constexpr qint64 kReadBuffer = 1 << 20;
// Same-origin redirects followed for one request (a loop ends there).
constexpr int kMaxRedirects = 5;
// A stream is decoded this much at a time, its limits checked after each slice.
constexpr std::size_t kSlice = 64 * 1024;
// An HTTP error's body: its start is all the message quotes.
constexpr qsizetype kErrorBody = 64 * 1024;
// The reply's property that holds why the client stopped it.
constexpr char kRefusal[] = "tokenscope_refusal";

QNetworkRequest request_for(const QUrl& url, const Endpoint& e)
{
    QNetworkRequest r(url);
    r.setHeader(QNetworkRequest::ContentTypeHeader, "application/json");
    r.setRawHeader("Accept", "application/json, text/event-stream");
    if (!e.api_key.isEmpty())
        r.setRawHeader("Authorization", "Bearer " + e.api_key.toUtf8());
    r.setTransferTimeout(e.timeout_ms);
    r.setAttribute(QNetworkRequest::RedirectPolicyAttribute, QNetworkRequest::UserVerifiedRedirectPolicy);
    r.setMaximumRedirectsAllowed(kMaxRedirects);
    return r;
}

QString where(const QUrl& url)
{
    return url.host() + (url.port() > 0 ? ":" + QString::number(url.port()) : QString());
}

// scheme://host:port, the scheme's default port named: what a redirect must keep.
QString origin(const QUrl& url)
{
    const QString scheme = url.scheme().toLower();
    return QString("%1://%2:%3").arg(scheme, url.host().toLower()).arg(url.port(scheme == "https" ? 443 : 80));
}

std::string to_std(const QString& s)
{
    return s.toStdString();
}

// The special tokens a tokenizer may add to a text besides one token per byte.
constexpr std::size_t kSpecialTokens = 64;

// An id the server names is one of its model's tokens (when it said how many it has).
void check_vocabulary(int32_t id, quint32 n_vocab)
{
    if (n_vocab > 0 && id >= 0 && static_cast<quint32>(id) >= n_vocab)
        throw engine::Error("token id " + std::to_string(id) + " is outside the model's vocabulary of " +
                            std::to_string(n_vocab) + " tokens");
}

std::string_view view_of(const QByteArray& bytes)
{
    return {bytes.constData(), static_cast<std::size_t>(bytes.size())};
}

QString refusal_of(QNetworkReply* reply)
{
    return reply->property(kRefusal).toString();
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

void Client::refuse(QNetworkReply* reply, const QString& why)
{
    if (refusal_of(reply).isEmpty())
        reply->setProperty(kRefusal, why);
    // Queued: the reply may be in the middle of the signal that brought us here.
    QMetaObject::invokeMethod(reply, &QNetworkReply::abort, Qt::QueuedConnection);
}

void Client::guard(QNetworkReply* reply, const er::ResponseLimits& limits, const QString& what)
{
    // Qt passes the limit to its HTTP thread only once the request has started there. A GET starts
    // within get(); a POST with a body starts from a queued call, so the limit is set again after
    // it (queued too, so in order): set only now, it was lost and the HTTP thread read as fast as
    // the server sent, unbounded (a gigabyte before the first readyRead, seen on an endless stream).
    reply->setReadBufferSize(kReadBuffer);
    QMetaObject::invokeMethod(
        reply, [reply] { reply->setReadBufferSize(kReadBuffer); }, Qt::QueuedConnection);
    const QString given = origin(m_endpoint.base);
    connect(reply, &QNetworkReply::redirected, this, [this, reply, given, what](const QUrl& to) {
        if (origin(to) == given) {
            emit reply->redirectAllowed();
            return;
        }
        refuse(reply, QString("%1 failed: %2 redirected it to %3, another origin (scheme, host and port); such a "
                              "redirect is not followed, so that the API key goes only to the server given")
                          .arg(what, given, origin(to)));
    });
    const qint64 ms = std::min<qint64>(static_cast<qint64>(limits.max_seconds) * 1000, INT_MAX);
    const std::string server = to_std(where(reply->url()));
    QTimer::singleShot(static_cast<int>(ms), reply, [this, reply, limits, what, server] {
        refuse(reply, QString::fromStdString(er::limit_message(er::Limit::Seconds, limits, to_std(what), server)));
    });
}

void Client::fetch(QNetworkReply* reply, const er::ResponseLimits& limits, const QString& what, Fetched done)
{
    guard(reply, limits, what);
    auto body = std::make_shared<QByteArray>();
    const std::string server = to_std(where(reply->url()));
    const auto take = [this, reply, body, limits, what, server] {
        const QByteArray more = reply->isOpen() ? reply->readAll() : QByteArray();
        if (!refusal_of(reply).isEmpty())
            return; // dropped
        const int status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
        const quint64 cap = status >= 400 ? quint64(kErrorBody) : limits.max_bytes;
        if (quint64(body->size()) + quint64(more.size()) > cap) {
            if (status >= 400) {
                body->append(more.left(kErrorBody - body->size()));
                return;
            }
            *body = QByteArray();
            refuse(reply, QString::fromStdString(er::limit_message(er::Limit::Bytes, limits, to_std(what), server)));
            return;
        }
        body->append(more);
    };
    connect(reply, &QNetworkReply::readyRead, this, take);
    connect(reply, &QNetworkReply::finished, this, [reply, body, take, limits, what, server, done] {
        reply->deleteLater();
        take();
        const int status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
        if (refusal_of(reply).isEmpty() && status < 400 &&
            er::longest_json_string(view_of(*body)) > limits.max_field_bytes) {
            *body = QByteArray();
            reply->setProperty(kRefusal, QString::fromStdString(
                                             er::limit_message(er::Limit::FieldBytes, limits, to_std(what), server)));
        }
        done(reply, *body);
    });
}

QString Client::failure(QNetworkReply* reply, const QString& what, const QByteArray& body) const
{
    if (const QString refused = refusal_of(reply); !refused.isEmpty())
        return refused;
    const int status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
    if (status >= 400)
        return QString::fromStdString(er::http_error_message(status, view_of(body), to_std(what)));
    if (status >= 300 && status < 400 && reply->error() == QNetworkReply::NoError)
        return QString("%1 failed: %2 answered HTTP %3, a redirect with no target to follow")
            .arg(what, where(reply->url()))
            .arg(status);
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

template <typename Done>
void Client::oneShot(quint64 id, QNetworkReply* reply, const er::ResponseLimits& limits, const QString& what, Done done)
{
    m_pending[id] = reply;
    fetch(reply, limits, what, [this, id, what, done](QNetworkReply* r, const QByteArray& body) {
        const bool cancelled = !m_pending.count(id);
        m_pending.erase(id);
        if (cancelled)
            return;
        const QString error = failure(r, what, body);
        if (!error.isEmpty()) {
            emit failed(id, error);
            return;
        }
        try {
            done(std::string(view_of(body)));
        } catch (const engine::Error& e) {
            emit failed(id, QString("%1: %2 sent an answer that is refused: %3")
                                .arg(what, where(r->url()), QString::fromStdString(e.what())));
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

bool Client::refusedKey(const std::shared_ptr<Probe>& p, QNetworkReply* r, const QByteArray& body)
{
    const int status = r->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
    if (status != 401 && status != 403 && refusal_of(r).isEmpty())
        return false;
    emit failed(p->id, failure(r, "Connecting to " + m_endpoint.base.toString(), body));
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
        fetch(get("/v1/models"), er::answer_limits(), "GET /v1/models",
              [this, p, next](QNetworkReply* r, const QByteArray& body) {
                  const int status = r->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
                  if (refusedKey(p, r, body))
                      return;
                  if (status == 0 && r->error() != QNetworkReply::NoError) {
                      emit failed(p->id, failure(r, "Connecting to " + m_endpoint.base.toString(), body));
                      return;
                  }
                  if (status == 200) {
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
                      } catch (const engine::Error& e) {
                          // Not an OpenAI-compatible list: the next steps may still recognise the server;
                          // a list with a count out of range is refused.
                          if (body.trimmed().startsWith('{') && body.contains("\"data\"")) {
                              emit failed(p->id, QString("GET /v1/models: %1 sent an answer that is refused: %2")
                                                     .arg(where(r->url()), QString::fromStdString(e.what())));
                              return;
                          }
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
            const QString path = ollama ? "/api/version" : "/api/v0/models";
            fetch(get(path), er::answer_limits(), "GET " + path,
                  [this, p, next, ollama](QNetworkReply* r, const QByteArray& answer) {
                      if (!refusal_of(r).isEmpty()) {
                          emit failed(p->id, refusal_of(r));
                          return;
                      }
                      if (r->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt() == 200) {
                          const std::string body(view_of(answer));
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
            fetch(get("/props"), er::answer_limits(), "GET /props",
                  [this, p, next](QNetworkReply* r, const QByteArray& body) {
                      // llama-server lists its models without a key; /props is where a wrong one shows.
                      if (refusedKey(p, r, body))
                          return;
                      if (r->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt() == 200) {
                          try {
                              p->info->context_length = er::parse_props_context(view_of(body));
                          } catch (const engine::Error& e) {
                              if (body.trimmed().startsWith('{')) { // JSON, with a value out of range
                                  emit failed(p->id, QString("GET /props: %1 sent an answer that is refused: %2")
                                                         .arg(where(r->url()), QString::fromStdString(e.what())));
                                  return;
                              }
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
            fetch(get("/metrics"), er::answer_limits(), "GET /metrics",
                  [this, p, next](QNetworkReply* r, const QByteArray& body) {
                      if (refusedKey(p, r, body))
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

quint64 Client::startStream(const QString& path, const std::string& body, bool ndjson, int max_tokens)
{
    const quint64 id = m_next++;
    auto s = std::make_unique<Stream>();
    s->ndjson = ndjson;
    s->limits = er::stream_limits(max_tokens);
    s->sse = er::SseDecoder(s->limits.max_field_bytes);
    s->lines = er::LineDecoder(s->limits.max_field_bytes);
    s->result->id = id;
    s->what = "POST " + path;
    s->clock.start();
    s->reply = post(path, body);
    QNetworkReply* r = s->reply;
    guard(r, s->limits, s->what);
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
    consume(id, *it->second, false);
}

QString Client::takeEvent(Stream& s, const std::string& e, double now_ms, QString& text)
{
    er::StreamChunk c;
    try {
        c = er::parse_stream_chunk(e);
    } catch (const engine::Error& err) {
        return QString("%1: %2 sent a chunk that is refused: %3")
            .arg(s.what, where(s.reply->url()), QString::fromStdString(err.what()));
    }
    StreamedReply& r = *s.result;
    if (!c.error.empty()) {
        r.error = QString::fromStdString(c.error);
        return {};
    }
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
    return {};
}

void Client::consume(quint64 id, Stream& s, bool at_end)
{
    const int status = s.reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
    const QByteArray bytes = s.reply->isOpen() ? s.reply->readAll() : QByteArray();
    if (status >= 400) { // the error's body, read when the reply finishes: its start
        s.error_body.append(bytes.left(kErrorBody - s.error_body.size()));
        return;
    }
    if (!refusal_of(s.reply).isEmpty())
        return; // stopped: what still arrives is dropped
    const std::string server = to_std(where(s.reply->url()));
    QString refused;
    const auto stop = [&](er::Limit which) {
        refused = QString::fromStdString(er::limit_message(which, s.limits, to_std(s.what), server));
    };
    const double now_ms = static_cast<double>(s.clock.nsecsElapsed()) / 1e6;
    QString text;
    // In slices: Qt hands over what it has (megabytes at once on a fast link), and the limits are
    // checked in the order the bytes came.
    const std::string_view all = view_of(bytes);
    for (std::size_t at = 0; refused.isEmpty() && (at < all.size() || (at == 0 && at_end)); at += kSlice) {
        const std::string_view slice = all.substr(at, kSlice);
        s.bytes += slice.size();
        if (s.bytes > s.limits.max_bytes) {
            stop(er::Limit::Bytes);
            break;
        }
        std::vector<std::string> events = s.ndjson ? s.lines.feed(slice) : s.sse.feed(slice);
        if (at_end && s.ndjson && at + kSlice >= all.size()) // the last line, left without a newline
            for (auto& e : s.lines.feed("\n"))
                events.push_back(std::move(e));
        for (const auto& e : events) {
            if (++s.events > s.limits.max_events) {
                stop(er::Limit::Events);
                break;
            }
            refused = takeEvent(s, e, now_ms, text);
            if (!refused.isEmpty())
                break;
        }
        if (refused.isEmpty() && (s.sse.too_long() || s.lines.too_long()))
            stop(er::Limit::FieldBytes);
    }
    if (!s.ndjson && s.sse.done())
        s.server_done = true;
    if (!refused.isEmpty())
        refuse(s.reply, refused);
    if (!text.isEmpty()) {
        s.result->text += text;
        emit delta(id, text); // last: a receiver may cancel the stream
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
    consume(id, *s, true); // what arrived with the end of the reply
    StreamedReply& r = *s->result;
    r.total_ms = static_cast<double>(s->clock.nsecsElapsed()) / 1e6;
    if (r.cancelled) {
        emit replyFinished(s->result);
        return;
    }
    const QString error = failure(reply, s->what, s->error_body);
    if (!error.isEmpty() && r.text.isEmpty() && r.chunks == 0) {
        emit failed(id, error);
        return;
    }
    if (!refusal_of(reply).isEmpty())
        s->server_done = false; // stopped here: whatever the server said, the reply is cut off
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
    return kind == ServerKind::Ollama ? startStream("/api/chat", body, true, sampling.sampling.max_tokens)
                                      : startStream("/v1/chat/completions", body, false, sampling.sampling.max_tokens);
}

quint64 Client::complete(const QString& prompt, er::SamplingRequest sampling)
{
    if (sampling.model.empty() && m_server)
        sampling.model = to_std(m_server->model);
    sampling.stream = true;
    return startStream("/v1/completions", er::completion_request_body(to_std(prompt), sampling), false,
                       sampling.sampling.max_tokens);
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
    const std::string utf8 = to_std(text);
    const std::string body = er::tokenize_request_body(utf8, m_server->kind, to_std(m_server->model), add_special);
    const quint32 n_vocab = m_server->n_vocab;
    const std::size_t most = utf8.size() + kSpecialTokens;
    oneShot(id, post("/tokenize", body), er::answer_limits(utf8.size()), "POST /tokenize",
            [this, id, n_vocab, most, bytes = utf8.size()](const std::string& answer) {
                auto tokens = er::parse_tokenize(answer);
                // A tokenizer gives at most a token per byte, besides the special tokens it adds.
                if (tokens.size() > most)
                    throw engine::Error(std::to_string(tokens.size()) + " tokens for a text of " +
                                        std::to_string(bytes) + " bytes (at most " + std::to_string(most) +
                                        " are possible)");
                for (const auto& t : tokens)
                    check_vocabulary(t.id, n_vocab);
                emit tokenized(id, std::make_shared<const std::vector<er::RemoteToken>>(std::move(tokens)));
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
    const quint32 n_vocab = m_server->n_vocab;
    oneShot(id, post("/completion", er::next_token_request_body(ids, n, sampling)), er::answer_limits(),
            "POST /completion", [this, id, n, n_vocab](const std::string& answer) {
                auto probs = er::parse_completion_probabilities(answer);
                const er::TokenLogprob& next = probs.front();
                if (next.top.size() > static_cast<std::size_t>(std::max(n, 0)))
                    throw engine::Error(std::to_string(next.top.size()) + " candidates where " + std::to_string(n) +
                                        " were asked for");
                check_vocabulary(next.id, n_vocab);
                for (const auto& c : next.top)
                    check_vocabulary(c.id, n_vocab);
                emit nextTokenReady(id, std::make_shared<const er::TokenLogprob>(std::move(probs.front())));
            });
    return id;
}

quint64 Client::metrics()
{
    const quint64 id = m_next++;
    oneShot(id, get("/metrics"), er::answer_limits(), "GET /metrics",
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
