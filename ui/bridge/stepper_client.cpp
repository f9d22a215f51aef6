// SPDX-License-Identifier: GPL-3.0-or-later
// The decode stepper on the engine here: Prefill, Step and Back on the engine's Stepper (a session
// of its own, so a chat reply leaves its sequence alone), each answered with one immutable
// StepperState, then the KV gauges and the stepper's timeline.
#include "bridge/stepper_client.h"
#include "widgets/count_text.h"

#include "bridge/token_text.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "session/generator.h"
#include "session/session.h"
#include "session/stepper.h"
#include "session/stepper_timeline.h"
#include "util/error.h"

#include <QElapsedTimer>
#include <spdlog/spdlog.h>

namespace tokenscope::ui {

namespace {

engine::StopCondition stop_condition(const engine::Model& model, const StepperSettings& s)
{
    std::vector<std::string> stops;
    for (const QString& text : s.stop_strings)
        if (!text.isEmpty())
            stops.push_back(text.toStdString());
    return engine::StopCondition(model.tokenizer().vocab().end_of_generation,
                                 std::size_t(std::max(0, s.sampling.max_tokens)), std::move(stops));
}

// An answer that is only a reason (thrown by the work, turned into an error state by run()).
[[noreturn]] void refuse(const QString& message)
{
    throw engine::Error(message.toStdString());
}

std::shared_ptr<StepperState> state_of(EngineContext& context, const QString& action, const StepperSettings& settings)
{
    const engine::Model& model = *context.model;
    const engine::Tokenizer& tokenizer = model.tokenizer();
    const engine::Stepper& stepper = *context.stepper;
    auto state = std::make_shared<StepperState>();
    state->action = action;
    const engine::Session& session = *context.stepper_session;
    const auto& tokens = session.tokens();
    state->prompt_length = int(stepper.prompt_length());
    state->steps = int(stepper.steps().size());
    state->tokens = context.tokensOf(tokens, state->prompt_length);
    for (const engine::StepRecord& r : stepper.steps())
        if (r.position < state->tokens.size()) {
            state->tokens[r.position].forced = r.forced;
            state->tokens[r.position].probability = r.probability;
        }
    const engine::PrefillReport& p = stepper.prefill_report();
    state->prefill_computed = int(p.computed);
    state->prefill_reused = int(p.reused);
    state->prefill_batches = p.computed ? int((p.computed + 127) / 128) : 0;
    state->prefill_ms = p.ms;

    const auto& config = model.config();
    const engine::KvAccounting kv = session.backend().kv_cache().accounting();
    state->n_layers = int(config.n_layer);
    state->n_kv_heads = config.n_head_kv.empty() ? 0 : int(config.n_head_kv.front());
    state->kv_tokens = int(kv.tokens_cached);
    state->kv_bytes_in_use = kv.bytes_in_use;
    for (const auto& layer : kv.layers)
        state->kv_layer_tokens.push_back(int(layer.tokens_in_use));
    for (uint32_t w : session.backend().kv_cache().config().window)
        state->layer_window.push_back(int(w));
    if (!stepper.steps().empty()) {
        state->last_reused = int(stepper.steps().back().reused);
        state->last_ms = stepper.steps().back().ms;
    }
    state->logits = std::make_shared<const std::vector<float>>(session.logits().begin(), session.logits().end());
    state->history.assign(tokens.begin(), tokens.end());
    state->tokenizer = std::shared_ptr<const engine::Tokenizer>(context.model, &tokenizer);
    if (settings.logit_lens)
        for (const engine::LensRow& row : context.stepper->logit_lens(std::size_t(std::max(1, settings.lens_top)))) {
            std::vector<LensCandidate> cells;
            for (const engine::Candidate& c : row.top)
                cells.push_back({c.id, token_display_text(tokenizer, c.id), c.probability});
            state->lens.push_back(std::move(cells));
        }
    for (const engine::StepperBranch& b : stepper.branches()) {
        QString text;
        for (engine::TokenId id : b.abandoned)
            text += token_display_text(tokenizer, id);
        const QString count =
            b.abandoned.size() == 1 ? QObject::tr("1 token") : QObject::tr("%1 tokens").arg(b.abandoned.size());
        state->branches << QObject::tr("at position %1: “%2” (%3)").arg(b.position).arg(text, count);
    }
    if (stepper.stop_reason() != engine::StopReason::None)
        state->stop_reason = QString::fromUtf8(engine::stop_reason_name(stepper.stop_reason()).data());
    state->generated_text = QString::fromStdString(stepper.generated_text());
    return state;
}

// The stepper waits for the user between steps: the timeline shows the measured stages end to end,
// the waiting left out.
std::shared_ptr<const TimelineSnapshot> timeline_of(const EngineContext& context)
{
    const engine::Stepper& stepper = *context.stepper;
    const engine::Model& model = *context.model;
    auto t = std::make_shared<TimelineSnapshot>();
    t->source = "stepper";
    t->note = QObject::tr("Decode stepper: the time between your clicks is left out.");
    const engine::PrefillReport& p = stepper.prefill_report();
    t->tokenize_ms = context.stepper_tokenize_ms;
    t->prefill_ms = p.ms;
    t->prompt_tokens = int(stepper.prompt_length());
    t->prefill_computed = int(p.computed);
    const engine::StepperTimeline timeline = engine::stepper_timeline(model, stepper, context.stepper_tokenize_ms);
    t->prefill_flops = timeline.prefill_flops;
    t->prefill_bytes = timeline.prefill_bytes;
    for (const engine::TimelineEvent& e : timeline.events)
        t->events.push_back({int(e.stage), e.step, e.begin_ns, e.end_ns});
    for (const engine::StepperTimelineStep& s : timeline.steps)
        t->steps.push_back({s.token, token_display_text(model.tokenizer(), s.token), s.forward_ms, s.sample_ms, 0.0,
                            s.latency_ms, s.flops, s.bytes_read});
    t->ttft_ms = timeline.ttft_ms;
    return t;
}

// The stepper must have a prefilled prompt; its session becomes the active one.
void require_started(EngineContext& context)
{
    context.requireModel();
    if (!context.stepper || !context.stepper->started())
        refuse(QObject::tr("Press Prefill first: the stepper needs a prompt."));
    context.activate(*context.stepper_session);
}

class LocalStepper final : public StepperClient::Source {
public:
    LocalStepper(StepperClient& client, EngineController& engine) : m_client(client), m_engine(engine) {}

    quint64 start(const QString& prompt, const StepperSettings& settings) override
    {
        return prefill(prompt, settings, {});
    }

    quint64 startTokens(const std::vector<int32_t>& ids, const QString& text, const StepperSettings& settings) override
    {
        return prefill(text, settings, ids);
    }

    quint64 step(const StepperSettings& settings, int forced_token) override
    {
        return run("step", settings, [settings, forced_token](EngineContext& context, const RequestBook::Ticket&) {
            require_started(context);
            std::optional<engine::TokenId> forced;
            if (forced_token >= 0)
                forced = forced_token;
            context.stepper->set_attention_capture(
                context.recordingRequest(uint32_t(context.stepper_session->tokens().size()) + 1));
            context.stepper->step(engine::sampler_config(settings.sampling, settings.greedy), forced);
            context.record();
        });
    }

    quint64 back(const StepperSettings& settings) override
    {
        return run("back", settings, [](EngineContext& context, const RequestBook::Ticket&) {
            require_started(context);
            context.stepper->set_attention_capture(
                context.recordingRequest(uint32_t(context.stepper_session->tokens().size())));
            if (!context.stepper->back())
                refuse(QObject::tr("Only the prompt is left: there is no step to undo."));
            context.record();
        });
    }

private:
    // Runs `work` on the engine thread, then answers with the stepper's state after it (or with the
    // reason it failed), then the KV gauges and the timeline.
    template <typename Work> quint64 run(const QString& action, const StepperSettings& settings, Work work)
    {
        const RequestBook::Ticket ticket = m_engine.requests().open();
        m_engine.post([this, action, settings, ticket, work = std::move(work)](EngineContext& context) {
            std::shared_ptr<StepperState> state;
            bool done = false;
            try {
                work(context, ticket);
                state = state_of(context, action, settings);
                done = true;
            } catch (const std::exception& e) {
                spdlog::debug("stepper {}: {}", action.toStdString(), e.what());
                state = std::make_shared<StepperState>();
                state->action = "error";
                state->error = QString::fromUtf8(e.what());
            }
            state->request_id = ticket.id;
            m_engine.deliver(&m_client, &StepperClient::stepperState, std::shared_ptr<const StepperState>(state));
            if (done) {
                context.publishKv("stepper", int(context.stepper->prompt_length()),
                                  int(context.stepper->prefill_report().reused));
                context.publishTimeline(timeline_of(context));
            }
        });
        return ticket.id;
    }

    quint64 prefill(const QString& prompt, const StepperSettings& settings, const std::vector<int32_t>& given)
    {
        StepperClient* client = &m_client;
        return run(
            "prefill", settings,
            [client, prompt, settings, given](EngineContext& context, const RequestBook::Ticket& ticket) {
                const CancelToken& cancel = ticket.cancel;
                if (cancel->load()) // stopped while it waited in the queue: nothing runs
                    refuse(QObject::tr("Prefill cancelled before it started."));
                context.requireModel();
                QElapsedTimer tokenize_timer;
                tokenize_timer.start();
                const auto ids = given.empty() ? context.model->tokenizer().encode_ids(prompt.toStdString()) : given;
                context.stepper_tokenize_ms = double(tokenize_timer.nsecsElapsed()) / 1e6;
                if ((given.empty() && prompt.trimmed().isEmpty()) || ids.empty())
                    refuse(QObject::tr("The prompt is empty: type some text to prefill."));
                engine::Session& session = context.stepperSession();
                context.activate(session);
                if (!given.empty()) // a position of an analysed text: its probabilities as the analysis computed them
                    session.truncate(0);
                if (!context.stepper)
                    context.stepper = std::make_unique<engine::Stepper>(session);
                context.stepper->set_attention_capture(context.recordingRequest(
                    uint32_t(ids.size()) + uint32_t(std::max(0, settings.sampling.max_tokens))));
                const quint64 id = ticket.id;
                const auto report = context.stepper->start(
                    ids, stop_condition(*context.model, settings), [&](uint32_t done, uint32_t total) {
                        context.record();
                        EngineController::toUi(client, [client, id, done, total] {
                            emit client->prefillProgress(id, int(done), int(total));
                        });
                        return !cancel->load();
                    });
                if (report.cancelled)
                    refuse(QObject::tr("Prefill cancelled after %1 of %2 tokens.")
                               .arg(numberText(qint64(report.computed)), numberText(qint64(ids.size()))));
            });
    }

    StepperClient& m_client;
    EngineController& m_engine;
};

} // namespace

StepperClient::StepperClient(EngineController& engine)
    : m_engine(engine), m_local(std::make_unique<LocalStepper>(*this, engine)),
      m_remote(make_remote_stepper(*this, engine))
{
}

StepperClient::~StepperClient() = default;

} // namespace tokenscope::ui
