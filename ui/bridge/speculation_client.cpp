// SPDX-License-Identifier: GPL-3.0-or-later
// The speculation comparison on the engine thread: the drafter made first (a refused draft model or
// depth is the snapshot's error before anything runs), the speculative run with a snapshot posted at
// most every 80 ms, then the plain loop on the same prompt and seed for the speedup. Every session is
// the comparison's own, on the CPU (deterministic mode as the app's setting says).
#include "bridge/speculation_client.h"

#include "backend/backend.h"
#include "bridge/engine_context.h"
#include "bridge/token_text.h"
#include "model/model.h"
#include "session/generator.h"
#include "session/session.h"
#include "util/error.h"

#include <chrono>

namespace tokenscope::ui {

namespace {

using clock = std::chrono::steady_clock;

// The speculative run for the Timeline panel: the prompt's prefill, then each step's draft and its
// verification pass as lanes; every token kept by a pass arrives at that pass's end.
std::shared_ptr<TimelineSnapshot> speculation_timeline(const SpeculationSnapshot& s, double prefill_ms,
                                                       const engine::Tokenizer& tok)
{
    auto tl = std::make_shared<TimelineSnapshot>();
    tl->source = "speculation";
    tl->prompt_tokens = tl->prefill_computed = s.prompt_tokens;
    tl->prefill_ms = prefill_ms;
    const auto ns = [](double ms) { return qint64(ms * 1e6); };
    tl->events.push_back({int(engine::TimelineStage::Prefill), -1, 0, ns(prefill_ms)});
    double t = prefill_ms, last_arrival = 0.0; // the first token's latency is the time to it (TTFT)
    std::size_t token = 0;
    const auto arrive = [&](double at) { // the next generated token, kept by a pass ending at `at`
        if (token >= s.result.tokens.size())
            return;
        TimelineStepUi step;
        step.token = s.result.tokens[token];
        step.text = token_display_text(tok, step.token);
        step.latency_ms = at - last_arrival;
        last_arrival = at;
        tl->steps.push_back(step);
        ++token;
    };
    arrive(t); // the first token: drawn from the prompt's logits
    for (const engine::SpeculativeStep& st : s.result.steps) {
        const int first = int(token); // the pass's first new token
        if (st.draft_ms > 0)
            tl->events.push_back({int(engine::TimelineStage::Draft), first, ns(t), ns(t + st.draft_ms)});
        t += st.draft_ms;
        tl->events.push_back({int(engine::TimelineStage::Verify), first, ns(t), ns(t + st.verify_ms)});
        t += st.verify_ms;
        for (uint32_t i = 0; i <= st.acceptance.accepted; ++i) // the accepted drafts and the token after them
            arrive(t);
    }
    tl->ttft_ms = tl->steps.empty() ? prefill_ms : tl->steps.front().latency_ms;
    tl->note = QObject::tr("%1: %2 drafted, %3 accepted (%4%) · %5 tokens/s against the plain loop's %6 on the same "
                           "prompt: %7×")
                   .arg(s.drafter)
                   .arg(s.result.drafted)
                   .arg(s.result.accepted)
                   .arg(qRound(100.0 * s.result.acceptance()))
                   .arg(s.tokensPerSecond(), 0, 'f', 1)
                   .arg(s.plainTokensPerSecond(), 0, 'f', 1)
                   .arg(s.speedup(), 0, 'f', 2);
    return tl;
}

} // namespace

void fill_pieces(SpeculationSnapshot& s, const engine::Tokenizer& tok)
{
    const auto add = [&](int32_t id) { // a larger draft vocabulary's ids stay numbers
        if (!s.pieces.contains(id) && id >= 0 && std::size_t(id) < tok.vocab().size())
            s.pieces.emplace(id, token_display_text(tok, id));
    };
    for (int32_t id : s.result.tokens)
        add(id);
    for (const engine::SpeculativeStep& st : s.result.steps) {
        for (int32_t id : st.drafted)
            add(id);
        for (const engine::DraftVerdict& v : st.acceptance.verdicts)
            add(v.target_top);
        add(st.acceptance.next);
    }
    for (int32_t id : s.plain_tokens)
        add(id);
    for (const auto* choices : {&s.result.choices, &s.plain_choices})
        for (const engine::TokenChoice& c : *choices) {
            add(c.best);
            add(c.second);
        }
}

SpeculationClient::SpeculationClient(EngineController& engine) : m_engine(engine)
{
    qRegisterMetaType<std::shared_ptr<const SpeculationSnapshot>>();
    connect(this, &SpeculationClient::speculationFinished, this,
            [this](const std::shared_ptr<const SpeculationSnapshot>& s) {
                if (s->request_id == m_running)
                    m_running = 0;
            });
}

void SpeculationClient::stop()
{
    if (m_running)
        m_engine.cancel(m_running);
}

quint64 SpeculationClient::run(const SpeculationSettings& settings)
{
    stop(); // a changed setting starts the comparison again
    if (m_engine.remote())
        return m_running = m_engine.refuse(this, &SpeculationClient::speculationFinished, tr("Speculative decoding"));
    SpeculationClient* client = this;
    m_running = m_engine.request(
        client, &SpeculationClient::speculationFinished,
        [client, settings](EngineContext& context, const RequestBook::Ticket& ticket) {
            context.requireModel();
            auto s = std::make_shared<SpeculationSnapshot>();
            s->settings = settings;
            const auto& model = context.model;
            const engine::Tokenizer& tok = model->tokenizer();
            s->model = QString::fromStdString(model->config().name);
            std::vector<int32_t> ids;
            int n_new = settings.tokens;
            if (settings.from_chat) { // the chat's last request: its prompt, and its reply's length
                const int prompt_length = context.last_prompt_tokens;
                if (!context.session || prompt_length <= 0 || context.session->tokens().size() <= size_t(prompt_length))
                    throw engine::Error(tr("No chat reply yet: send a message in the chat first.").toStdString());
                const auto& seq = context.session->tokens();
                ids.assign(seq.begin(), seq.begin() + prompt_length);
                n_new = std::min(256, int(seq.size()) - prompt_length);
                s->settings.tokens = n_new;
                s->prompt_text = QString::fromStdString(tok.decode(ids, {.remove_special = false}));
            } else {
                if (settings.prompt.trimmed().isEmpty()) // a BOS alone is no text to continue
                    throw engine::Error(
                        tr("The prompt is empty: type a text for the model to continue.").toStdString());
                ids = tok.encode_ids(settings.prompt.toStdString());
                s->prompt_text = settings.prompt;
            }
            if (ids.empty())
                throw engine::Error(tr("The prompt is empty: type a text for the model to continue.").toStdString());
            if (n_new < 1 || settings.draft_max < 1)
                throw engine::Error(tr("Generate at least one token, drafting at least one at a time.").toStdString());
            s->prompt_tokens = int(ids.size());
            s->prompt_ids = ids;
            const engine::DraftSource source = engine::parse_draft_source(settings.source.toStdString());
            engine::SamplerConfig config =
                engine::sampler_config(settings.sampling, settings.sampling.temperature <= 0);
            config.stage_view_size = 0;
            engine::validate_sampler_config(config);
            const auto n_ctx = uint32_t(ids.size() + n_new + settings.draft_max + 8);
            const engine::BackendFactory backend_for = [&](std::shared_ptr<const engine::Model> m) {
                engine::CpuBackendOptions options = context.cpuOptions(n_ctx);
                options.batch_invariant = false; // the comparison's sessions are set so (s->deterministic)
                return engine::make_cpu_backend(std::move(m), options);
            };
            s->deterministic = context.deterministic();
            const auto cancelled = [&] { return ticket.cancel->load(); };
            engine::Session target(model, backend_for(model));
            const std::unique_ptr<engine::Drafter> drafter =
                engine::make_drafter(source, model, backend_for, config, &target);
            s->drafter = QString::fromStdString(drafter->name());

            s->backend = QString::fromStdString(target.backend().name());
            target.set_batch_invariant(s->deterministic);
            const engine::PrefillReport prefilled =
                target.prefill(ids, nullptr, [&](uint32_t, uint32_t) { return !cancelled(); });
            if (cancelled()) {
                s->cancelled = true;
                return s;
            }
            engine::Sampler sampler(config);
            auto last_post = clock::now() - std::chrono::seconds(1);
            const auto t0 = clock::now();
            engine::SpeculativeOptions options{.draft_max = uint32_t(settings.draft_max), .record_kl = true};
            options.progress = [&](const engine::SpeculativeResult& r) {
                if (cancelled())
                    return false;
                if (clock::now() - last_post < std::chrono::milliseconds(80))
                    return true;
                last_post = clock::now();
                auto live = std::make_shared<SpeculationSnapshot>(*s);
                live->request_id = ticket.id;
                live->result = r;
                live->speculative_s = std::chrono::duration<double>(clock::now() - t0).count();
                fill_pieces(*live, tok);
                EngineController::toUi(client, [client, live] { emit client->speculationProgress(live); });
                return true;
            };
            s->result = engine::generate_speculative(target, uint32_t(n_new), *drafter, sampler, options);
            s->speculative_s = std::chrono::duration<double>(clock::now() - t0).count();
            if (cancelled()) {
                s->cancelled = true;
                fill_pieces(*s, tok);
                return s;
            }
            // the plain loop: one token per pass, the same prompt and seed
            engine::Session plain(model, backend_for(model));
            plain.set_batch_invariant(s->deterministic);
            plain.prefill(ids, nullptr, [&](uint32_t, uint32_t) { return !cancelled(); });
            engine::Sampler plain_sampler(config);
            const auto p0 = clock::now();
            if (!cancelled())
                s->plain_tokens = engine::generate_plain(plain, uint32_t(n_new), plain_sampler, &s->plain_choices,
                                                         [&] { return !cancelled(); });
            s->plain_s = std::chrono::duration<double>(clock::now() - p0).count();
            s->cancelled = cancelled();
            if (!s->cancelled && config.greedy)
                for (std::size_t i = 0; i < s->result.tokens.size() && i < s->plain_tokens.size(); ++i)
                    if (s->result.tokens[i] != s->plain_tokens[i]) {
                        s->parted = int(i);
                        break;
                    }
            s->finished = !s->cancelled;
            fill_pieces(*s, tok);
            if (s->finished) // the Timeline panel shows the run's passes as lanes
                context.publishTimeline(speculation_timeline(*s, prefilled.ms, tok));
            return s;
        });
    return m_running;
}

} // namespace tokenscope::ui
