// SPDX-License-Identifier: GPL-3.0-or-later
#include "hostile_server.h"

#include <QHostAddress>
#include <QSemaphore>
#include <QTcpServer>
#include <QTcpSocket>
#include <QTimer>
#include <functional>

namespace testsupport {

namespace {

constexpr char kModels[] =
    R"({"object":"list","data":[{"id":"hostile.gguf","object":"model","owned_by":"llamacpp","meta":)"
    R"({"vocab_type":2,"n_vocab":1000,"n_ctx_train":4096,"n_embd":64,"n_params":100000,"size":1000000}}]})";
constexpr char kProps[] = R"({"default_generation_settings":{"id":0,"n_ctx":4096},"total_slots":1})";
constexpr char kUnauthorized[] = R"({"error":{"code":401,"message":"Invalid API Key","type":"authentication_error"}})";
constexpr qint64 kUnsent = 256 * 1024;         // what the pump lets the socket hold unsent
constexpr qint64 kEndless = qint64(1) << 30;   // the "endless" stream stops here all the same
constexpr int kManyEvents = 2000000;           // many-events
constexpr qint64 kHugeField = 100'000'000;     // huge-field: one content field
constexpr qint64 kHugePiece = 6 * 1024 * 1024; // huge-piece: one token piece
constexpr int kDripBytes = 600;                // drip: ten minutes at a byte a second

QByteArray head(int status, const QByteArray& type, qint64 length = -1, const QByteArray& extra = {})
{
    QByteArray h = "HTTP/1.1 " + QByteArray::number(status) + (status < 300 ? " OK" : " Other") + "\r\n";
    h += "Content-Type: " + type + "\r\nConnection: close\r\n";
    if (length >= 0)
        h += "Content-Length: " + QByteArray::number(length) + "\r\n";
    return h + extra + "\r\n";
}

QByteArray answer_with(int status, const QByteArray& type, const QByteArray& body, const QByteArray& extra = {})
{
    return head(status, type, body.size(), extra) + body;
}

QByteArray json_ok(const QByteArray& body)
{
    return answer_with(200, "application/json", body);
}

QByteArray sse_event(const QByteArray& data)
{
    return "data: " + data + "\n\n";
}

// One streamed chunk of a chat (delta.content) or a completion (text), `more` inside the choice.
QByteArray chunk(bool chat, const QByteArray& content, const QByteArray& more = {})
{
    const QByteArray piece = chat ? R"("delta":{"content":")" + content + "\"}" : R"("text":")" + content + "\"";
    return R"({"choices":[{"index":0,)" + piece + R"(,"finish_reason":null)" + more + "}]}";
}

QByteArray finish_chunk(bool chat)
{
    return chat ? R"({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})"
                : R"({"choices":[{"index":0,"text":"","finish_reason":"stop"}]})";
}

QByteArray logprobs(const QByteArray& id, const QByteArray& logprob)
{
    return R"(,"logprobs":{"content":[{"id":)" + id + R"(,"token":"a","logprob":)" + logprob +
           R"(,"top_logprobs":[{"id":1,"token":"a","logprob":-0.5}]}]})";
}

QByteArray completion_answer(const QByteArray& id, const QByteArray& logprob)
{
    return R"({"content":"a","stop":true,"completion_probabilities":[{"id":)" + id + R"(,"token":"a","logprob":)" +
           logprob + R"(,"top_logprobs":[{"id":)" + id + R"(,"token":"a","logprob":)" + logprob + "}]}]}";
}

} // namespace

// One connection: reads one request, answers it (at once, or pumped as the socket drains), closes.
class HostileConnection : public QObject {
public:
    HostileConnection(QTcpSocket* socket, HostileServer* server, bool other)
        : QObject(socket), m_socket(socket), m_server(server), m_other(other)
    {
        connect(socket, &QTcpSocket::readyRead, this, [this] { onReadable(); });
        connect(socket, &QTcpSocket::disconnected, socket, &QObject::deleteLater);
        connect(socket, &QTcpSocket::bytesWritten, this, [this] { fill(); });
    }

private:
    void onReadable()
    {
        if (m_answered)
            return (void)m_socket->readAll();
        m_in += m_socket->readAll();
        const qsizetype end = m_in.indexOf("\r\n\r\n");
        if (end < 0) {
            if (m_in.size() > 1 << 20)
                m_socket->abort();
            return;
        }
        const QList<QByteArray> lines = m_in.left(end).split('\n');
        const QList<QByteArray> request = lines.value(0).trimmed().split(' ');
        qint64 length = 0;
        bool key = false;
        for (const QByteArray& l : lines.mid(1)) {
            const qsizetype colon = l.indexOf(':');
            const QByteArray name = l.left(colon).trimmed().toLower();
            if (name == "content-length")
                length = l.mid(colon + 1).trimmed().toLongLong();
            else if (name == "authorization")
                key = true;
        }
        if (m_in.size() < end + 4 + length)
            return; // the body is still coming
        m_answered = true;
        if (m_other) {
            ++m_server->m_requests_at_other;
            if (key)
                ++m_server->m_keys_at_other;
        }
        answer(request.value(0), request.value(1));
    }

    void send(const QByteArray& bytes)
    {
        m_socket->write(bytes);
        m_socket->disconnectFromHost();
    }

    // Writes next() while the socket holds less than kUnsent unsent, until next() is empty.
    void pump(std::function<QByteArray()> next)
    {
        m_next = std::move(next);
        fill();
    }

    void fill()
    {
        while (m_next && m_socket->state() == QAbstractSocket::ConnectedState && m_socket->bytesToWrite() < kUnsent) {
            const QByteArray b = m_next();
            if (b.isEmpty()) {
                m_next = nullptr;
                m_socket->disconnectFromHost();
                return;
            }
            m_socket->write(b);
            m_server->m_bytes_sent += b.size();
        }
    }

    // `start` at once, then `body` a byte a second (at most kDripBytes of it).
    void drip(const QByteArray& start, const QByteArray& body)
    {
        m_socket->write(start);
        auto* timer = new QTimer(this);
        auto at = std::make_shared<int>(0);
        connect(timer, &QTimer::timeout, this, [this, timer, body, at] {
            if (*at >= body.size() || *at >= kDripBytes) {
                timer->stop();
                m_socket->disconnectFromHost();
                return;
            }
            m_socket->write(body.mid((*at)++, 1));
            ++m_server->m_bytes_sent;
        });
        timer->start(1000);
    }

    void redirect(int status, const QByteArray& to)
    {
        send(answer_with(status, "text/plain", "moved", "Location: " + to + "\r\n"));
    }

    void answer(const QByteArray& method, const QByteArray& target)
    {
        // /<behaviour>/<endpoint>[?query]
        const qsizetype slash = target.indexOf('/', 1);
        const QByteArray behaviour = m_other ? QByteArray("ok") : target.mid(1, slash < 0 ? -1 : slash - 1);
        QByteArray endpoint = slash < 0 ? QByteArray() : target.mid(slash);
        const QByteArray query = endpoint.contains('?') ? endpoint.mid(endpoint.indexOf('?')) : QByteArray();
        endpoint = endpoint.left(endpoint.size() - query.size());
        const QByteArray elsewhere = "http://127.0.0.1:" + QByteArray::number(m_server->m_other_port.load()) + target;

        if (behaviour == "unauthorized")
            return send(answer_with(401, "application/json", kUnauthorized));
        if (method == "GET") {
            if (endpoint == "/v1/models") {
                if (behaviour.startsWith("redirect-get-"))
                    return redirect(behaviour.mid(13).toInt(), elsewhere);
                if (behaviour == "redirect-same" && query.isEmpty())
                    return redirect(302, target + "?moved=1");
                if (behaviour == "redirect-loop")
                    return redirect(307, target);
                return send(json_ok(kModels));
            }
            if (endpoint == "/props")
                return send(json_ok(kProps));
            if (endpoint == "/metrics")
                return send(answer_with(200, "text/plain", "llamacpp:requests_processing 0\n"));
            return send(answer_with(404, "application/json", R"({"error":"no such endpoint"})"));
        }
        if (behaviour.startsWith("redirect-post-"))
            return redirect(behaviour.mid(14).toInt(), elsewhere);
        if (endpoint == "/tokenize")
            return tokenize(behaviour);
        if (endpoint == "/completion")
            return nextToken(behaviour);
        if (endpoint == "/v1/chat/completions" || endpoint == "/v1/completions")
            return stream(behaviour, endpoint == "/v1/chat/completions");
        send(answer_with(404, "application/json", R"({"error":"no such endpoint"})"));
    }

    void tokenize(const QByteArray& behaviour)
    {
        if (behaviour == "big-id")
            return send(json_ok(R"({"tokens":[{"id":1099511627776,"piece":"a"}]})"));
        if (behaviour == "outside-vocab")
            return send(json_ok(R"({"tokens":[{"id":5000,"piece":"a"}]})"));
        if (behaviour == "drip") {
            const QByteArray body = R"({"tokens":[{"id":1,"piece":"a"}]})" + QByteArray(kDripBytes, ' ');
            return drip(head(200, "application/json", body.size()), body);
        }
        if (behaviour == "huge-piece") {
            const QByteArray start = R"({"tokens":[{"id":1,"piece":")", end = "\"}]}";
            m_socket->write(head(200, "application/json", start.size() + kHugePiece + end.size()) + start);
            auto left = std::make_shared<qint64>(kHugePiece);
            return pump([left, end]() -> QByteArray {
                if (*left < 0)
                    return {};
                if (*left == 0) {
                    *left = -1;
                    return end;
                }
                const qint64 n = std::min<qint64>(*left, 64 * 1024);
                *left -= n;
                return QByteArray(n, 'a');
            });
        }
        send(json_ok(R"({"tokens":[{"id":1,"piece":"a"}]})"));
    }

    void nextToken(const QByteArray& behaviour)
    {
        if (behaviour == "big-id")
            return send(json_ok(completion_answer("1099511627776", "-0.5")));
        if (behaviour == "huge-logprob")
            return send(json_ok(completion_answer("1", "1e308")));
        send(json_ok(completion_answer("1", "-0.5")));
    }

    void stream(const QByteArray& behaviour, bool chat)
    {
        if (behaviour == "reply-500")
            return send(
                answer_with(500, "application/json", R"({"error":{"code":500,"message":"the model crashed"}})"));
        const QByteArray start = head(200, "text/event-stream");
        const QByteArray done = sse_event(finish_chunk(chat)) + sse_event("[DONE]");
        if (behaviour == "drip")
            return drip(start, sse_event(chunk(chat, "a")).repeated(kDripBytes));
        m_socket->write(start);
        if (behaviour == "endless") {
            const QByteArray e = sse_event(chunk(chat, QByteArray(64 * 1024, 'a')));
            auto sent = std::make_shared<qint64>(0);
            return pump([e, sent]() -> QByteArray {
                if (*sent >= kEndless)
                    return {};
                *sent += e.size();
                return e;
            });
        }
        if (behaviour == "many-events") {
            const QByteArray e = sse_event(chunk(chat, "a"));
            auto n = std::make_shared<int>(0);
            return pump([e, n, done]() -> QByteArray {
                if (*n < 0)
                    return {};
                if (*n >= kManyEvents) {
                    *n = -1;
                    return done;
                }
                const int batch = std::min(kManyEvents - *n, 1000);
                *n += batch;
                return e.repeated(batch);
            });
        }
        if (behaviour == "huge-field") {
            const QByteArray first = chunk(chat, "");
            const qsizetype quote = first.indexOf("\"\"") + 1; // inside the empty content
            m_socket->write("data: " + first.left(quote));
            auto left = std::make_shared<qint64>(kHugeField);
            const QByteArray rest = first.mid(quote) + "\n\n" + done;
            return pump([left, rest]() -> QByteArray {
                if (*left < 0)
                    return {};
                if (*left == 0) {
                    *left = -1;
                    return rest;
                }
                const qint64 n = std::min<qint64>(*left, 64 * 1024);
                *left -= n;
                return QByteArray(n, 'a');
            });
        }
        QByteArray body = sse_event(chunk(chat, "Hello"));
        if (behaviour == "big-id")
            body += sse_event(chunk(chat, " there", logprobs("1099511627776", "-0.5")));
        else if (behaviour == "huge-logprob")
            body += sse_event(chunk(chat, " there", logprobs("1", "1e308")));
        else
            body += sse_event(chunk(chat, " there"));
        body += sse_event(finish_chunk(chat));
        body += sse_event(
            behaviour == "big-count"
                ? R"({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2147483648,"total_tokens":2147483651}})"
                : R"({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}})");
        send(body + sse_event("[DONE]"));
    }

    QTcpSocket* m_socket;
    HostileServer* m_server;
    bool m_other;
    bool m_answered = false;
    QByteArray m_in;
    std::function<QByteArray()> m_next;
};

HostileServer::HostileServer()
{
    start();
    while (!m_ready.load())
        QThread::msleep(5);
}

HostileServer::~HostileServer()
{
    quit();
    wait();
}

QString HostileServer::url(const QString& behaviour) const
{
    return QString("http://127.0.0.1:%1/%2").arg(m_port.load()).arg(behaviour);
}

QString HostileServer::otherOrigin() const
{
    return QString("http://127.0.0.1:%1").arg(m_other_port.load());
}

void HostileServer::run()
{
    QTcpServer main, other;
    const auto serve = [this](QTcpServer& server, bool is_other) {
        QObject::connect(&server, &QTcpServer::newConnection, &server, [this, &server, is_other] {
            while (QTcpSocket* socket = server.nextPendingConnection())
                new HostileConnection(socket, this, is_other);
        });
        return server.listen(QHostAddress::LocalHost) ? int(server.serverPort()) : -1;
    };
    m_port = serve(main, false);
    m_other_port = serve(other, true);
    m_ready = true;
    if (listening())
        exec();
}

} // namespace testsupport
