// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The client for models served elsewhere (llama-server, vLLM, SGLang, Ollama, LM Studio): Qt Core +
// Qt Network only, used by the desktop app and the CLI. Every call returns at once with a request id;
// answers arrive as signals on the thread the client lives on, as immutable values. The protocol
// itself (request bodies, response fields, server kinds) is engine/remote/remote_protocol.h.

#include "remote/remote_protocol.h"

#include <QElapsedTimer>
#include <QObject>
#include <QPointer>
#include <QStringList>
#include <QUrl>
#include <functional>
#include <map>
#include <memory>
#include <vector>

class QNetworkAccessManager;
class QNetworkReply;

namespace tokenscope::remote {

using engine::remote::ServerKind;

struct Endpoint {
    QUrl base;              // http(s)://host:port; a trailing /v1 is dropped
    QString api_key;        // sent as a bearer token; never logged
    QString model;          // empty: the server's first
    int timeout_ms = 60000; // no byte for this long ends a request
    // Besides: every answer and stream within engine::remote::ResponseLimits (bytes, events, one
    // event's size, a deadline), and no redirect followed to another origin.
};

// What a probe found out about the server.
struct ServerInfo {
    ServerKind kind = ServerKind::Unknown;
    QString kind_name;
    QUrl base;
    QStringList models;
    QString model;               // the one requests go to
    quint32 context_length = 0;  // what a request may hold (llama-server: per slot), 0 unknown
    quint32 trained_context = 0; // what the model was trained for, 0 unknown
    quint32 n_vocab = 0;
    bool tokenizer = false;        // the server tokenizes (/tokenize)
    bool token_pieces = false;     // …and names each token's text
    bool next_token_probs = false; // the next-token distribution for given ids (llama-server /completion)
    bool logprobs = false;         // top_logprobs on generated tokens
    bool metrics = false;          // /metrics answered
    QString version;               // Ollama's, when known
};

// A streamed reply, complete or not: the text is kept whatever happened to the stream.
struct StreamedReply {
    quint64 id = 0;
    QString text;
    QString reasoning;
    QString finish_reason;
    bool cut_off = false;           // the stream ended before the server said it was done
    bool cancelled = false;         // cancel(id) stopped it
    QString error;                  // why it was cut off
    double ttft_ms = -1.0;          // request sent → first content, measured here
    std::vector<double> arrival_ms; // each content chunk's arrival, ms after the request was sent
    double total_ms = 0.0;
    int chunks = 0;
    std::vector<engine::remote::TokenLogprob> logprobs;
    std::optional<engine::remote::Usage> usage;
    std::optional<engine::remote::ServerTimings> timings;
};

class Client : public QObject {
    Q_OBJECT
public:
    explicit Client(QObject* parent = nullptr);
    ~Client() override;

    void setEndpoint(Endpoint endpoint);
    const Endpoint& endpoint() const { return m_endpoint; }
    // The server the requests below go to (a probe's answer; set by probe() itself).
    void setServer(std::shared_ptr<const ServerInfo> server) { m_server = std::move(server); }
    const std::shared_ptr<const ServerInfo>& server() const { return m_server; }

    // Finds what the endpoint is: /v1/models (owned_by), /api/version (Ollama), /api/v0/models
    // (LM Studio), /props (llama-server's context), /metrics. → probed or failed.
    quint64 probe();
    // The chat, the template applied by the server. → delta …, replyFinished (or failed when
    // nothing arrived at all).
    quint64 chat(const std::vector<engine::remote::ChatMessage>& messages, engine::remote::SamplingRequest sampling);
    // A raw prompt (/v1/completions). → delta …, replyFinished or failed.
    quint64 complete(const QString& prompt, engine::remote::SamplingRequest sampling);
    // → tokenized or failed (a server that does not tokenize fails with that sentence).
    quint64 tokenize(const QString& text, bool add_special);
    // The distribution of the token after `ids` (n candidates). → nextToken or failed.
    // With `sampling`, the answer's id is the token the server drew with those settings.
    quint64 nextToken(const std::vector<int32_t>& ids, int n,
                      const engine::remote::SamplingRequest* sampling = nullptr);
    // GET /metrics → metricsRead or failed.
    quint64 metrics();
    void cancel(quint64 id);

    // The sentence for a server without a tokenizer / next-token probabilities (for panels).
    static QString noTokenizerReason(const ServerInfo& server);
    static QString noNextTokenReason(const ServerInfo& server);

signals:
    void probed(quint64 id, std::shared_ptr<const tokenscope::remote::ServerInfo> server);
    void delta(quint64 id, const QString& text);
    void replyFinished(std::shared_ptr<const tokenscope::remote::StreamedReply> reply);
    void tokenized(quint64 id, std::shared_ptr<const std::vector<engine::remote::RemoteToken>> tokens);
    void nextTokenReady(quint64 id, std::shared_ptr<const engine::remote::TokenLogprob> next);
    void metricsRead(quint64 id, const engine::remote::ServerMetrics& metrics);
    void failed(quint64 id, const QString& message);

private:
    struct Stream;
    struct Probe;
    using Fetched = std::function<void(QNetworkReply* reply, const QByteArray& body)>;
    QNetworkReply* get(const QString& path);
    QNetworkReply* post(const QString& path, const std::string& body);
    QUrl url(const QString& path) const;
    // Every reply, before its first byte: redirects followed only within the origin the user gave
    // (scheme, host and port: the API key goes nowhere else), and the deadline of `limits`.
    void guard(QNetworkReply* reply, const engine::remote::ResponseLimits& limits, const QString& what);
    // Stops a reply for `why` (a limit passed, another origin): failure() says why from then on.
    void refuse(QNetworkReply* reply, const QString& why);
    // Reads a one-shot answer as it arrives, within `limits`, and calls done(reply, body) when the
    // reply has finished (failure(reply, …) then says whether it failed).
    void fetch(QNetworkReply* reply, const engine::remote::ResponseLimits& limits, const QString& what, Fetched done);
    // A finished reply's error as a sentence, or empty when it succeeded.
    QString failure(QNetworkReply* reply, const QString& what, const QByteArray& body) const;
    quint64 startStream(const QString& path, const std::string& body, bool ndjson, int max_tokens);
    void onStreamData(quint64 id);
    // Reads and parses what has arrived (at the end: also the last line left without a newline).
    void consume(quint64 id, Stream& stream, bool at_end);
    // One event of a stream into its reply; a refusal (a chunk out of range) as a sentence.
    QString takeEvent(Stream& stream, const std::string& event, double now_ms, QString& text);
    void onStreamFinished(quint64 id);
    void probeStep(const std::shared_ptr<Probe>& probe);
    // A probe step was refused (another origin, a limit) or answered 401/403: the probe fails with
    // that (true).
    bool refusedKey(const std::shared_ptr<Probe>& probe, QNetworkReply* reply, const QByteArray& body);
    // Sends a one-shot request and calls done(body) on success, failed() otherwise.
    template <typename Done>
    void oneShot(quint64 id, QNetworkReply* reply, const engine::remote::ResponseLimits& limits, const QString& what,
                 Done done);

    QNetworkAccessManager* m_network;
    Endpoint m_endpoint;
    std::shared_ptr<const ServerInfo> m_server;
    std::map<quint64, std::unique_ptr<Stream>> m_streams;
    std::map<quint64, QPointer<QNetworkReply>> m_pending; // one-shot requests, for cancel()
    quint64 m_next = 1;
};

} // namespace tokenscope::remote
