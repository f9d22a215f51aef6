// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// A hostile OpenAI-compatible server on the loopback, for the remote client's tests (the client
// class, the CLI, the app). It answers the probe as a llama-server would (GET /v1/models, /props,
// /metrics), then misbehaves on the request that follows as the URL's first path segment asks:
// http://127.0.0.1:PORT/<behaviour> is the base URL a test connects to (the client keeps the path).
// It runs on its own thread with its own event loop (a test blocks on a child process meanwhile),
// listens on 127.0.0.1 only, and every loop in it is bounded. A second port, "the other origin",
// answers anything as the server would and counts the requests that carried an Authorization header.
//
// Behaviours (the request after the probe unless said):
//   ok                       everything answered as a well-behaved server would
//   redirect-get-301|302|303|307|308    GET /v1/models redirected to the other origin
//   redirect-post-301|302|303|307|308   the POST redirected to the other origin
//   redirect-same            GET /v1/models redirected once within the same origin (followed)
//   redirect-loop            GET /v1/models redirected to itself, for ever
//   endless                  a stream of 64 KiB content events that never ends (bounded at 1 GiB)
//   drip                     an answer or stream sent one byte a second (bounded at 10 minutes)
//   many-events              2,000,000 tiny events, then [DONE]
//   huge-field               one stream event whose content is 100 MB
//   huge-piece               a /tokenize answer whose one token piece is 6 MiB
//   big-id                   token ids of 2^40 (/tokenize, /completion, a stream's logprobs)
//   outside-vocab            a token id inside int32 but outside the model's 1,000 tokens
//   big-count                a stream whose usage says 2^31 completion tokens
//   huge-logprob             a log-probability of 1e308 (/completion, a stream's logprobs)
//   unauthorized             401 to everything
//   reply-500                a chat or completion answered HTTP 500 before any byte of a reply

#include <QString>
#include <QThread>
#include <atomic>

namespace testsupport {

class HostileServer : public QThread {
public:
    HostileServer();
    ~HostileServer() override;
    // False when the ports could not be opened (error() says why).
    bool listening() const { return m_port > 0 && m_other_port > 0; }
    QString url(const QString& behaviour) const;
    QString otherOrigin() const;
    // Requests that reached the other origin, and those among them that carried an API key.
    int requestsAtOther() const { return m_requests_at_other.load(); }
    int keysAtOther() const { return m_keys_at_other.load(); }
    // Bytes the server wrote on the misbehaving streams (what the client let it send).
    qint64 bytesSent() const { return m_bytes_sent.load(); }

protected:
    void run() override;

private:
    std::atomic<int> m_port{0};
    std::atomic<int> m_other_port{0};
    std::atomic<bool> m_ready{false};
    std::atomic<int> m_requests_at_other{0};
    std::atomic<int> m_keys_at_other{0};
    std::atomic<qint64> m_bytes_sent{0};
    friend class HostileConnection;
};

} // namespace testsupport
