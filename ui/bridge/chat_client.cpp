// SPDX-License-Identifier: GPL-3.0-or-later
// The chat on the engine here: the reply streamed token by token on the chat's session (the KV
// gauges after every token, the timeline a few times a second), the fit check, the turn counts.
#include "bridge/chat_client.h"

#include "bridge/token_text.h"
#include "chat/chat_prompt.h"
#include "chat/chat_template.h"
#include "chat/context_simulator.h"
#include "model/forward_cost.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "session/generator.h"
#include "session/session.h"

#include <QElapsedTimer>
#include <spdlog/spdlog.h>

namespace tokenscope::ui {

namespace {

// The chat reply's timeline as the panel draws it, with each forward pass's work (for achieved
// FLOP/s and bytes/s).
std::shared_ptr<TimelineSnapshot> timeline_of(const engine::GenerationTrace& trace, const engine::Model& model,
                                              bool live)
{
    auto t = std::make_shared<TimelineSnapshot>();
    t->source = "chat";
    t->live = live;
    for (const engine::TimelineEvent& e : trace.events)
        t->events.push_back({int(e.stage), e.step, e.begin_ns, e.end_ns});
    t->tokenize_ms = trace.tokenize_ms;
    t->prefill_ms = trace.prefill.ms;
    t->prompt_tokens = int(trace.prompt_tokens);
    t->prefill_computed = int(trace.prefill.computed);
    const engine::ForwardCost prefill = engine::forward_cost(model, trace.prefill.computed, trace.prefill.reused);
    t->prefill_flops = prefill.flops;
    t->prefill_bytes = prefill.weight_bytes + prefill.kv_bytes_read;
    t->ttft_ms = trace.ttft_ms;
    for (std::size_t i = 0; i < trace.steps.size(); ++i) {
        const engine::StepTrace& s = trace.steps[i];
        TimelineStepUi u;
        u.token = s.token;
        u.text = token_display_text(model.tokenizer(), s.token);
        u.forward_ms = s.ms;
        u.sample_ms = s.sample_ms;
        u.detokenize_ms = s.detokenize_ms;
        u.latency_ms = s.latency_ms;
        if (i > 0) { // the pass that forwarded token i − 1 at position prompt + i − 1
            const engine::ForwardCost c = engine::forward_cost(model, 1, trace.prompt_tokens + uint32_t(i) - 1);
            u.flops = c.flops;
            u.bytes_read = c.weight_bytes + c.kv_bytes_read;
        }
        t->steps.push_back(std::move(u));
    }
    return t;
}

std::vector<engine::ChatMessage> to_messages(const std::vector<ChatTurn>& turns)
{
    std::vector<engine::ChatMessage> out;
    for (const auto& t : turns)
        out.push_back({t.role.toStdString(), t.content.toStdString()});
    return out;
}

// What the user should read about a prompt: the context policy's message and, when the model's own
// template could not render it, which layout was used instead and why.
std::string prompt_notice(const engine::ChatPrompt& chat)
{
    if (chat.template_notice.empty())
        return chat.fit.notice;
    if (chat.fit.notice.empty())
        return chat.template_notice;
    return chat.fit.notice + "\n" + chat.template_notice;
}

class LocalChat final : public ChatClient::Source {
public:
    LocalChat(ChatClient& client, EngineController& engine) : m_client(client), m_engine(engine) {}

    quint64 sendChat(std::vector<ChatTurn> turns, const SamplingSettings& sampling) override
    {
        const RequestBook::Ticket ticket = m_engine.requests().open();
        m_engine.setBusy(true);
        m_engine.post([this, ticket, turns = std::move(turns), sampling](EngineContext& context) {
            generate(context, ticket, turns, sampling);
        });
        return ticket.id;
    }

    quint64 checkFit(std::vector<ChatTurn> turns, const SamplingSettings& sampling) override
    {
        const quint64 id = m_engine.requests().next();
        m_engine.post([this, id, turns = std::move(turns), sampling](EngineContext& context) {
            if (!context.model)
                return;
            const auto chat = context.prompts.build(*context.model, to_messages(turns), context.n_ctx,
                                                    size_t(std::max(16, sampling.max_tokens)));
            const QString notice = QString::fromStdString(prompt_notice(*chat));
            EngineController::toUi(&m_client,
                                   [client = &m_client, id, notice] { emit client->fitChecked(id, notice); });
        });
        return id;
    }

    quint64 countTurns(const QStringList& roles, const QStringList& texts) override
    {
        const quint64 id = m_engine.requests().next();
        m_engine.post([this, id, roles, texts](EngineContext& context) {
            if (!context.model)
                return;
            std::vector<engine::ChatMessage> messages;
            for (qsizetype i = 0; i < roles.size() && i < texts.size(); ++i)
                messages.push_back({roles[i].toStdString(), texts[i].toStdString()});
            QList<int> counts;
            const engine::Model& model = *context.model;
            for (uint32_t n : engine::count_turn_tokens(model.tokenizer(), engine::model_chat_style(model), messages))
                counts << int(n);
            const int window = int(model.config().n_ctx_train);
            EngineController::toUi(
                &m_client, [client = &m_client, id, counts, window] { emit client->turnsCounted(id, counts, window); });
        });
        return id;
    }

    void resetConversation() override
    {
        m_engine.post([](EngineContext& context) {
            if (!context.session)
                return;
            context.session->truncate(0);
            context.activate(*context.session);
            context.recorder.clear();
            context.publishKv("reset", 0, 0);
        });
    }

private:
    // On the UI thread: the reply's end (closes its request, clears busy, then `emit_end`).
    template <typename Emit> void finish(quint64 id, Emit emit_end)
    {
        EngineController::toUi(&m_client, [engine = &m_engine, id, emit_end] {
            engine->requests().close(id);
            engine->setBusy(false);
            emit_end();
        });
    }
    void fail(quint64 id, const QString& message)
    {
        finish(id, [client = &m_client, id, message] { emit client->replyFailed(id, message); });
    }
    void succeed(std::shared_ptr<const ReplyStats> stats)
    {
        finish(stats->request_id, [client = &m_client, stats] { emit client->replyFinished(stats); });
    }

    // On the engine thread.
    void generate(EngineContext& context, const RequestBook::Ticket& ticket, const std::vector<ChatTurn>& turns,
                  const SamplingSettings& sampling)
    {
        ChatClient* client = &m_client;
        const quint64 id = ticket.id;
        if (!context.session)
            return fail(id, QObject::tr("No model is loaded: open a GGUF file first."));
        EngineController::toUi(client, [client, id] { emit client->replyStarted(id); });
        context.activate(*context.session);
        if (ticket.cancel->load()) { // stopped while it waited in the queue: nothing runs
            auto stats = std::make_shared<ReplyStats>();
            stats->request_id = id;
            stats->cancelled = true;
            stats->stop_reason = QObject::tr("stopped by you");
            return succeed(std::move(stats));
        }
        try {
            const engine::Model& model = *context.model;
            const int reserve = std::max(16, sampling.max_tokens);
            // The prompt the fit check built for this conversation, if it did; else built here, once.
            const engine::ChatPromptBuilder::Counters before = context.prompts.counters();
            const std::shared_ptr<const engine::ChatPrompt> built =
                context.prompts.build(model, to_messages(turns), context.n_ctx, size_t(reserve));
            const engine::ChatPromptBuilder::Counters& after = context.prompts.counters();
            const engine::ChatPrompt& chat = *built;
            const std::vector<engine::TokenId> prompt_ids = chat.ids();
            const engine::FitResult& fit = chat.fit;
            if (!fit.fits)
                return fail(id, QString::fromStdString(fit.notice));
            const std::string& prompt = chat.text;

            engine::Sampler sampler(engine::sampler_config(sampling));
            engine::GenerationOptions options;
            options.max_tokens = static_cast<uint32_t>(sampling.max_tokens);
            options.stop_strings = chat.stop_strings;
            options.cancel = ticket.cancel.get();
            options.prompt_ids = &prompt_ids;
            options.on_prefill_progress = [&](uint32_t done, uint32_t total) {
                context.record();
                EngineController::toUi(
                    client, [client, id, done, total] { emit client->prefillProgress(id, int(done), int(total)); });
            };
            // The attention explorer's recording: every prefill batch and decode step of this reply.
            options.capture = &context.recordingRequest(uint32_t(fit.prompt_tokens) + uint32_t(sampling.max_tokens));
            // Live views: the KV gauges after every token, the timeline a few times a second.
            QElapsedTimer since_timeline;
            since_timeline.start();
            options.on_step = [&](const engine::StepTrace&, const engine::GenerationTrace& so_far) {
                context.record();
                context.last_prompt_tokens = int(so_far.prompt_tokens);
                context.publishKv("chat", int(so_far.prompt_tokens), int(so_far.prefill.reused));
                if (since_timeline.elapsed() >= 200) {
                    context.publishTimeline(timeline_of(so_far, model, true));
                    since_timeline.restart();
                }
            };
            const engine::GenerationTrace trace =
                engine::generate(*context.session, sampler, prompt, options, [&](std::string_view delta) {
                    const QString text = QString::fromUtf8(delta.data(), qsizetype(delta.size()));
                    EngineController::toUi(client, [client, id, text] { emit client->replyDelta(id, text); });
                });

            context.last_prompt_tokens = int(trace.prompt_tokens);
            context.publishKv("chat", int(trace.prompt_tokens), int(trace.prefill.reused));
            if (!trace.events.empty())
                context.publishTimeline(timeline_of(trace, model, false));

            auto stats = std::make_shared<ReplyStats>();
            stats->request_id = id;
            stats->prompt_tokens = int(trace.prompt_tokens);
            stats->reused_tokens = int(trace.prefill.reused);
            stats->computed_tokens = int(trace.prefill.computed);
            stats->generated_tokens = int(trace.steps.size());
            stats->ttft_ms = trace.ttft_ms;
            stats->tokens_per_second = trace.decode_tokens_per_second();
            stats->cancelled = trace.cancelled;
            stats->stop_reason = stats->cancelled ? QObject::tr("stopped by you")
                                                  : QString::fromUtf8(engine::stop_reason_name(trace.stop).data());
            stats->prompt_text = QString::fromStdString(prompt);
            for (engine::TokenId t : trace.prompt_ids) // as the model received them, not tokenized again
                stats->prompt_pieces << token_display_text(model.tokenizer(), t); // as every other view shows tokens
            stats->notice = QString::fromStdString(prompt_notice(chat));
            stats->attention_bytes = context.recorder.bytes();
            stats->prompt_reused = after.reused > before.reused;
            stats->prompt_renders = int(after.renders - before.renders);
            stats->prompt_tokenizations = int(after.tokenizations - before.tokenizations);
            succeed(std::move(stats));
        } catch (const std::exception& e) {
            spdlog::warn("generation failed: {}", e.what());
            fail(id, QString::fromUtf8(e.what()));
        }
    }

    ChatClient& m_client;
    EngineController& m_engine;
};

} // namespace

ChatClient::ChatClient(EngineController& engine)
    : m_engine(engine), m_local(std::make_unique<LocalChat>(*this, engine)), m_remote(make_remote_chat(*this, engine))
{
}

ChatClient::~ChatClient() = default;

} // namespace tokenscope::ui
