// SPDX-License-Identifier: GPL-3.0-or-later
// The engine thread's side of the KV-cache, context and timeline panels: snapshots of the KV
// accounting after every forward pass, the cache's contents on request, the stepper's timeline, the
// machine probe and chat-turn token counts.
#include "bridge/engine_worker.h"

#include "chat/chat_prompt.h"

#include "bridge/token_text.h"
#include "chat/chat_prompt.h"
#include "chat/chat_template.h"
#include "chat/context_simulator.h"
#include "model/memory_plan.h"
#include "model/model.h"
#include "session/generator.h"
#include "session/stepper.h"
#include "session/stepper_timeline.h"
#include "util/machine_probe.h"

#include <spdlog/spdlog.h>

namespace tokenscope::ui {

std::vector<StepperToken> EngineWorker::sequenceTokens(int prompt_length) const
{
    return m_active ? tokensOf(m_active->tokens(), prompt_length) : std::vector<StepperToken>{};
}

int EngineWorker::activePromptLength() const
{
    if (m_stepper && m_active == m_stepper_session.get())
        return int(m_stepper->prompt_length());
    return m_last_prompt_tokens;
}

std::vector<StepperToken> EngineWorker::tokensOf(const std::vector<int32_t>& tokens, int prompt_length) const
{
    std::vector<StepperToken> out;
    const engine::Tokenizer& tokenizer = m_model->tokenizer();
    out.reserve(tokens.size());
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        StepperToken t;
        t.id = tokens[i];
        t.text = token_display_text(tokenizer, tokens[i]);
        t.type = QString::fromUtf8(engine::token_type_name(tokenizer.vocab().type_of(tokens[i])).data());
        t.prompt = int(i) < prompt_length;
        out.push_back(std::move(t));
    }
    return out;
}

void EngineWorker::emitKv(const QString& source, int prompt_tokens, int reused_tokens)
{
    if (!m_active)
        return;
    const auto& config = m_model->config();
    const engine::KvCache& cache = m_active->backend().kv_cache();
    const engine::KvAccounting kv = cache.accounting();
    const engine::BackendMemory memory = m_active->backend().memory();
    auto s = std::make_shared<KvSnapshot>();
    s->source = source;
    s->n_ctx = int(cache.config().n_ctx);
    s->block_tokens = int(cache.config().block_tokens);
    s->blocks_per_layer = (s->n_ctx + s->block_tokens - 1) / std::max(1, s->block_tokens);
    s->tokens_cached = int(kv.tokens_cached);
    s->prompt_tokens = prompt_tokens;
    s->reused_tokens = reused_tokens;
    s->n_layers = int(config.n_layer);
    s->n_kv_heads = config.n_head_kv.empty() ? 0 : int(config.n_head_kv.front());
    s->head_dim = int(cache.config().head_dim);
    s->bytes_in_use = kv.bytes_in_use;
    s->bytes_allocated = kv.bytes_allocated;
    s->bytes_per_block = cache.config().n_layer ? cache.bytes_per_block(0) : 0;
    s->weight_bytes = memory.weight_bytes;
    s->device_total = memory.device_total;
    s->device_available = engine::system_memory().available;
    s->device = QString::fromStdString(memory.device);
    for (std::size_t l = 0; l < kv.layers.size(); ++l) {
        const auto& a = kv.layers[l];
        s->layers.push_back({int(a.tokens_in_use), int(a.blocks_allocated), int(a.first_stored),
                             l < cache.config().window.size() ? int(cache.config().window[l]) : 0, a.bytes_in_use,
                             a.bytes_allocated});
    }
    emit kvChanged(std::move(s));
}

void EngineWorker::readKv(quint64 request_id, int layer, int kv_head)
{
    auto c = std::make_shared<KvContents>();
    c->request_id = request_id;
    c->layer = layer;
    c->kv_head = kv_head;
    if (!m_session) {
        c->error = tr("No model is loaded.");
        emit kvContents(std::move(c));
        return;
    }
    try {
        engine::KvReadback r =
            m_active->backend().read_kv(uint32_t(std::max(0, layer)), uint32_t(std::max(0, kv_head)));
        c->head_dim = int(r.head_dim);
        c->n_positions = int(r.n_positions);
        c->keys = std::move(r.keys);
        c->values = std::move(r.values);
        c->held = std::move(r.held);
        c->tokens = sequenceTokens(activePromptLength());
    } catch (const std::exception& e) {
        c->error = QString::fromUtf8(e.what());
    }
    emit kvContents(std::move(c));
}

void EngineWorker::probeMachine()
{
    const engine::MachinePeaks p = engine::probe_machine(m_threads > 0 ? m_threads : 0);
    spdlog::info("machine probe: {:.2f} GB/s read, {:.1f} GFLOP/s ({} threads, {})", p.read_bytes_per_second / 1e9,
                 p.flops_per_second / 1e9, p.threads, p.simd);
    emit machineProbed({p.read_bytes_per_second, p.flops_per_second, p.threads, QString::fromStdString(p.simd)});
}

void EngineWorker::countTurns(quint64 request_id, const QStringList& roles, const QStringList& texts)
{
    if (!m_model)
        return;
    std::vector<engine::ChatMessage> messages;
    for (qsizetype i = 0; i < roles.size() && i < texts.size(); ++i)
        messages.push_back({roles[i].toStdString(), texts[i].toStdString()});
    QList<int> counts;
    for (uint32_t n : engine::count_turn_tokens(m_model->tokenizer(), engine::model_chat_style(*m_model), messages))
        counts << int(n);
    emit turnsCounted(request_id, counts, int(m_model->config().n_ctx_train));
}

void EngineWorker::emitStepperTimeline()
{
    if (!m_stepper)
        return;
    // The stepper waits for the user between steps: the timeline shows the measured stages end to
    // end, the waiting left out.
    auto t = std::make_shared<TimelineSnapshot>();
    t->source = "stepper";
    t->note = tr("Decode stepper: the time between your clicks is left out.");
    const engine::PrefillReport& p = m_stepper->prefill_report();
    t->tokenize_ms = m_stepper_tokenize_ms;
    t->prefill_ms = p.ms;
    t->prompt_tokens = int(m_stepper->prompt_length());
    t->prefill_computed = int(p.computed);
    const engine::StepperTimeline timeline = engine::stepper_timeline(*m_model, *m_stepper, m_stepper_tokenize_ms);
    t->prefill_flops = timeline.prefill_flops;
    t->prefill_bytes = timeline.prefill_bytes;
    for (const engine::TimelineEvent& e : timeline.events)
        t->events.push_back({int(e.stage), e.step, e.begin_ns, e.end_ns});
    for (const engine::StepperTimelineStep& s : timeline.steps)
        t->steps.push_back({s.token, token_display_text(m_model->tokenizer(), s.token), s.forward_ms, s.sample_ms, 0.0,
                            s.latency_ms, s.flops, s.bytes_read});
    t->ttft_ms = timeline.ttft_ms;
    emit timelineChanged(std::move(t));
}

} // namespace tokenscope::ui
