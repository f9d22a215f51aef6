// SPDX-License-Identifier: GPL-3.0-or-later
// Text through a served model: its tokens from the server's tokenizer, with byte spans found here;
// the analysis needs every position's logits, which a server does not give.
#include "bridge/analysis_client.h"

#include <QElapsedTimer>
#include <map>

namespace tokenscope::ui {

namespace er = engine::remote;

namespace {

class RemoteAnalysis final : public QObject, public AnalysisClient::Source {
public:
    RemoteAnalysis(AnalysisClient& client, EngineController& engine) : m_client(client), m_engine(engine)
    {
        remote::Client* net = &engine.network();
        connect(net, &remote::Client::tokenized, this,
                [this](quint64 client_id, std::shared_ptr<const std::vector<er::RemoteToken>> tokens) {
                    const auto it = m_pending.find(client_id);
                    if (it == m_pending.end())
                        return;
                    Pending p = std::move(it->second);
                    m_pending.erase(it);
                    emit m_client.tokenized(tokenization(p, *tokens));
                });
        connect(net, &remote::Client::failed, this, [this](quint64 client_id, const QString& message) {
            const auto it = m_pending.find(client_id);
            if (it == m_pending.end())
                return;
            auto failed = std::make_shared<Tokenization>();
            failed->request_id = it->second.id;
            failed->text = it->second.text;
            failed->utf8 = it->second.text.toUtf8();
            failed->error = message;
            m_pending.erase(it);
            emit m_client.tokenized(failed);
        });
        connect(&engine, &EngineController::serverClosing, this, [this] {
            const auto pending = std::exchange(m_pending, {});
            for (const auto& [client_id, p] : pending)
                m_engine.network().cancel(client_id);
        });
    }

    quint64 tokenize(const QString& text) override
    {
        const quint64 id = m_engine.requests().next();
        Pending& p = m_pending[m_engine.network().tokenize(text, true)];
        p.id = id;
        p.text = text; // for the byte spans of the answer
        p.clock.start();
        return id;
    }

    quint64 analyzeText(const QString&, const QString&) override
    {
        return m_engine.refuse(&m_client, &AnalysisClient::textAnalyzed,
                               QObject::tr("The text analysis (every position's logits)"));
    }

    quint64 analyzeKvCache(const QString&, engine::KvCacheTypes) override
    {
        return m_engine.refuse(&m_client, &AnalysisClient::textAnalyzed,
                               QObject::tr("Measuring a quantized KV cache (every position's logits, twice)"));
    }

private:
    struct Pending {
        quint64 id = 0;
        QString text;
        QElapsedTimer clock;
    };

    std::shared_ptr<const Tokenization> tokenization(const Pending& p, const std::vector<er::RemoteToken>& tokens) const
    {
        auto t = std::make_shared<Tokenization>();
        t->request_id = p.id;
        t->ms = double(p.clock.nsecsElapsed()) / 1e6;
        const auto server = m_engine.server();
        t->source = QObject::tr("the server (%1)").arg(server ? server->kind_name : QString());
        t->text = p.text;
        t->utf8 = p.text.toUtf8();
        // Byte spans: each piece found where the text continues; a piece that is not there (a control
        // token the server added, such as BOS) gets an empty span.
        int at = 0;
        for (const auto& rt : tokens) {
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
        return t;
    }

    AnalysisClient& m_client;
    EngineController& m_engine;
    std::map<quint64, Pending> m_pending; // network request → the tokenize request it answers
};

} // namespace

std::unique_ptr<AnalysisClient::Source> make_remote_analysis(AnalysisClient& client, EngineController& engine)
{
    return std::make_unique<RemoteAnalysis>(client, engine);
}

} // namespace tokenscope::ui
