// SPDX-License-Identifier: GPL-3.0-or-later
// The decode stepper over a server that gives next-token probabilities (llama-server): Prefill
// tokenizes on the server, every action asks it for the next token's top-N and its draw with the
// settings, and Step takes that draw (or the token the user forced).
#include "bridge/stepper_client.h"
#include "bridge/token_text.h"

#include <cmath>
#include <optional>

namespace tokenscope::ui {

namespace er = engine::remote;

namespace {

constexpr int kServerTopN = 20; // what OpenAI-style servers allow; llama-server takes more

QString piece_display(const std::string& piece)
{
    return visible_whitespace(QString::fromUtf8(piece.data(), qsizetype(piece.size())));
}

class RemoteStepper final : public QObject, public StepperClient::Source {
public:
    RemoteStepper(StepperClient& client, EngineController& engine) : m_client(client), m_engine(engine)
    {
        remote::Client* net = &engine.network();
        connect(net, &remote::Client::tokenized, this,
                [this](quint64 client_id, std::shared_ptr<const std::vector<er::RemoteToken>> tokens) {
                    if (client_id && client_id == m_tokenize)
                        onPromptTokens(*tokens);
                });
        connect(net, &remote::Client::nextTokenReady, this,
                [this](quint64 client_id, std::shared_ptr<const er::TokenLogprob> next) {
                    if (client_id && client_id == m_next)
                        onNextToken(*next);
                });
        connect(net, &remote::Client::failed, this, [this](quint64 client_id, const QString& message) {
            if (!client_id || (client_id != m_tokenize && client_id != m_next))
                return;
            m_tokenize = m_next = 0;
            answerError(m_request, message);
        });
        connect(&engine, &EngineController::serverClosing, this, [this] {
            for (quint64 client_id : {m_tokenize, m_next})
                if (client_id)
                    m_engine.network().cancel(client_id);
            if (m_tokenize || m_next)
                m_engine.requests().close(m_request);
            m_tokenize = m_next = 0;
            m_tokens.clear();
            m_steps = 0;
        });
    }

    quint64 start(const QString& prompt, const StepperSettings& settings) override
    {
        if (const auto why = refusal())
            return answerError(m_engine.requests().next(), *why);
        const quint64 id = begin("prefill", settings);
        m_tokens.clear();
        m_steps = 0;
        m_top.clear();
        m_drawn = -1;
        m_tokenize = m_engine.network().tokenize(prompt, true);
        return id;
    }

    quint64 startTokens(const std::vector<int32_t>&, const QString&, const StepperSettings&) override
    {
        return m_engine.refuse(&m_client, &StepperClient::stepperState, QObject::tr("The decode stepper"));
    }

    quint64 step(const StepperSettings& settings, int forced_token) override
    {
        if (const auto why = refusal())
            return answerError(m_engine.requests().next(), *why);
        const quint64 id = begin("step", settings);
        if (m_tokens.empty())
            return answerError(id, QObject::tr("Prefill a prompt first."));
        StepperToken t;
        t.prompt = false;
        t.forced = forced_token >= 0;
        t.id = t.forced ? forced_token : m_drawn;
        t.text = m_drawn_text;
        t.probability = 0.0f;
        for (const auto& c : m_top)
            if (c.id == t.id) {
                t.probability = c.probability;
                if (t.forced)
                    t.text = c.text;
            }
        if (t.forced && t.probability == 0.0f)
            t.text = QString("#%1").arg(forced_token);
        m_tokens.push_back(t);
        ++m_steps;
        askForNextToken();
        return id;
    }

    quint64 back(const StepperSettings& settings) override
    {
        if (const auto why = refusal())
            return answerError(m_engine.requests().next(), *why);
        const quint64 id = begin("back", settings);
        if (m_tokens.empty())
            return answerError(id, QObject::tr("Prefill a prompt first."));
        if (m_steps > 0) {
            m_tokens.pop_back();
            --m_steps;
        }
        askForNextToken();
        return id;
    }

private:
    // Why this server cannot step, if it cannot: it gives no next-token probabilities.
    std::optional<QString> refusal() const
    {
        const auto server = m_engine.server();
        if (server && server->next_token_probs)
            return std::nullopt;
        return server ? remote::Client::noNextTokenReason(*server) : QObject::tr("No server is connected.");
    }

    // The request now being answered (one at a time: the panel waits for each state).
    quint64 begin(const QString& action, const StepperSettings& settings)
    {
        m_request = m_engine.requests().open().id;
        m_action = action;
        m_settings = settings;
        return m_request;
    }

    quint64 answerError(quint64 id, const QString& message)
    {
        return m_engine.answer(&m_client, &StepperClient::stepperState, id, message);
    }

    void onPromptTokens(const std::vector<er::RemoteToken>& tokens)
    {
        m_tokenize = 0;
        for (const auto& rt : tokens) {
            StepperToken t;
            t.id = rt.id;
            t.text = piece_display(rt.piece);
            t.prompt = true;
            m_tokens.push_back(t);
        }
        m_prompt_length = int(m_tokens.size());
        askForNextToken();
    }

    void askForNextToken()
    {
        std::vector<int32_t> ids;
        for (const auto& t : m_tokens)
            ids.push_back(t.id);
        const er::SamplingRequest s = engine::remote::sampling_request(m_settings.sampling, m_settings.greedy);
        m_next = m_engine.network().nextToken(ids, kServerTopN, &s);
    }

    void onNextToken(const er::TokenLogprob& next)
    {
        m_next = 0;
        m_top.clear();
        for (const auto& c : next.top)
            m_top.push_back({c.id, piece_display(c.token), float(std::exp(c.logprob))});
        m_drawn = next.id;
        m_drawn_text = piece_display(next.token);
        auto state = std::make_shared<StepperState>();
        state->request_id = m_request;
        state->action = m_action;
        state->tokens = m_tokens;
        state->prompt_length = m_prompt_length;
        state->steps = m_steps;
        const auto server = m_engine.server();
        state->server = server ? server->kind_name : QString();
        state->server_top = m_top;
        state->server_drawn = m_drawn;
        state->server_drawn_text = m_drawn_text;
        for (std::size_t i = std::size_t(m_prompt_length); i < m_tokens.size(); ++i)
            state->generated_text += m_tokens[i].text;
        m_engine.requests().close(m_request);
        emit m_client.stepperState(state);
    }

    StepperClient& m_client;
    EngineController& m_engine;
    std::vector<StepperToken> m_tokens;
    int m_prompt_length = 0;
    int m_steps = 0;
    std::vector<ServerCandidate> m_top; // for the next token
    int m_drawn = -1;
    QString m_drawn_text;
    quint64 m_request = 0; // the request being answered
    QString m_action;      // prefill | step | back
    quint64 m_tokenize = 0;
    quint64 m_next = 0;
    StepperSettings m_settings;
};

} // namespace

std::unique_ptr<StepperClient::Source> make_remote_stepper(StepperClient& client, EngineController& engine)
{
    return std::make_unique<RemoteStepper>(client, engine);
}

} // namespace tokenscope::ui
