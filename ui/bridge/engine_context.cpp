// SPDX-License-Identifier: GPL-3.0-or-later
#include "bridge/engine_context.h"
#include "widgets/count_text.h"

#include "backend/backend.h"
#include "backend/backend_factory.h"
#include "bridge/inspection_client.h"
#include "bridge/token_text.h"
#include "model/memory_plan.h"
#include "model/model.h"
#include "session/session.h"
#include "session/stepper.h"
#include "util/error.h"

#include <QMetaObject>
#include <QObject>
#include <spdlog/spdlog.h>

namespace tokenscope::ui {

EngineContext::EngineContext(InspectionClient* views) : m_views(views) {}

EngineContext::~EngineContext() = default;

void EngineContext::requireModel() const
{
    if (!model)
        throw engine::Error(QObject::tr("No model is loaded: open a GGUF file first.").toStdString());
}

void EngineContext::replaceModel(std::shared_ptr<const engine::Model> loaded, std::unique_ptr<engine::Session> chat,
                                 int threads_, quint32 n_ctx_, const QString& backend_name_, int device_)
{
    stepper.reset(); // it refers to the session being replaced
    stepper_session.reset();
    attention_session.reset();
    lab_backend.reset();
    steering = false; // the new sessions are not steered
    recorder.clear();
    prompts.clear();
    session = std::move(chat);
    active = session.get();
    model = std::move(loaded);
    threads = threads_;
    n_ctx = n_ctx_;
    backend_name = backend_name_;
    device = device_;
}

void EngineContext::activate(engine::Session& s)
{
    if (active != &s) {
        recorder.clear(); // the recording was of the other sequence
        active = &s;
    }
}

engine::Session& EngineContext::stepperSession()
{
    if (!stepper_session) {
        const engine::BackendChoice choice =
            engine::parse_backend_choice(backend_name.toStdString()).value_or(engine::BackendChoice{});
        std::string fallback;
        auto backend = engine::make_backend(choice.kind, model, n_ctx, threads, &fallback, device, choice.vulkan_exact,
                                            choice.cpu_order, kv_types, choice.flash_attention);
        spdlog::info("stepper: a session of its own on {}", backend->name());
        stepper_session = std::make_unique<engine::Session>(model, std::move(backend), 128);
        stepper_session->set_batch_invariant(choice.deterministic);
    }
    return *stepper_session;
}

engine::WeightOrder EngineContext::cpuOrder() const
{
    return engine::parse_backend_choice(backend_name.toStdString()).value_or(engine::BackendChoice{}).cpu_order;
}

bool EngineContext::cpuFlash() const
{
    return engine::parse_backend_choice(backend_name.toStdString()).value_or(engine::BackendChoice{}).flash_attention;
}

bool EngineContext::deterministic() const
{
    return engine::parse_backend_choice(backend_name.toStdString()).value_or(engine::BackendChoice{}).deterministic;
}

engine::CpuBackendOptions EngineContext::cpuOptions(uint32_t positions) const
{
    return {.threads = threads,
            .n_ctx = positions,
            .order = cpuOrder(),
            .batch_invariant = deterministic(),
            .flash_attention = cpuFlash()};
}

engine::Backend& EngineContext::labBackend()
{
    if (!lab_backend)
        lab_backend = engine::make_cpu_backend(model, cpuOptions(uint32_t(kMaxLabTokens) + 1));
    return *lab_backend;
}

std::vector<int32_t> EngineContext::labTokens(const QString& text, const char* what) const
{
    if (text.trimmed().isEmpty())
        throw engine::Error(QObject::tr("The %1 prompt is empty.").arg(QObject::tr(what)).toStdString());
    auto ids = model->tokenizer().encode_ids(text.toStdString());
    if (int(ids.size()) > kMaxLabTokens)
        throw engine::Error(QObject::tr("The %1 prompt is %2 tokens; the lab takes at most %3 (every experiment "
                                        "evaluates it once per cell).")
                                .arg(QObject::tr(what))
                                .arg(numberText(qint64(ids.size())), numberText(kMaxLabTokens))
                                .toStdString());
    return ids;
}

std::vector<StepperToken> EngineContext::tokensOf(const std::vector<int32_t>& ids, int prompt_length) const
{
    std::vector<StepperToken> out;
    const engine::Tokenizer& tokenizer = model->tokenizer();
    out.reserve(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
        StepperToken t;
        t.id = ids[i];
        t.text = token_display_text(tokenizer, ids[i]);
        t.type = QString::fromUtf8(engine::token_type_name(tokenizer.vocab().type_of(ids[i])).data());
        t.prompt = int(i) < prompt_length;
        out.push_back(std::move(t));
    }
    return out;
}

std::vector<StepperToken> EngineContext::sequenceTokens(int prompt_length) const
{
    return active ? tokensOf(active->tokens(), prompt_length) : std::vector<StepperToken>{};
}

int EngineContext::activePromptLength() const
{
    if (stepper && active == stepper_session.get())
        return int(stepper->prompt_length());
    return last_prompt_tokens;
}

EngineContext::ViewedTokens EngineContext::viewedTokens(const QString& text, bool current_sequence,
                                                        const QString& no_sequence, const QString& empty_text) const
{
    requireModel();
    ViewedTokens v;
    if (current_sequence) {
        if (active)
            v.ids = active->tokens();
        v.prompt_length = activePromptLength();
        if (v.ids.empty())
            throw engine::Error(no_sequence.toStdString());
    } else {
        if (text.trimmed().isEmpty())
            throw engine::Error(empty_text.toStdString());
        v.ids = model->tokenizer().encode_ids(text.toStdString());
        v.prompt_length = int(v.ids.size());
    }
    return v;
}

const engine::CaptureRequest& EngineContext::recordingRequest(uint32_t next_length)
{
    static const engine::CaptureRequest nothing;
    if (!attention_watched)
        return nothing; // no view shows attention: the passes record nothing
    return recorder.request(model->config(), std::min<uint32_t>(next_length, n_ctx));
}

void EngineContext::record()
{
    if (active && active->last_captures())
        recorder.add(*active->last_captures());
    if (active)
        recorder.truncate(uint32_t(active->tokens().size()));
}

bool EngineContext::snapshotFromRecording(AttentionSnapshot& s, const QList<int>& layers)
{
    const auto& config = model->config();
    const uint32_t n = uint32_t(active->tokens().size());
    if (recorder.length() != n || n == 0)
        return false;
    std::vector<const engine::AttentionRecorder::Head*> heads;
    for (uint32_t il = 0; il < config.n_layer; ++il)
        if (layers.isEmpty() || layers.contains(int(il)))
            for (uint32_t h = 0; h < config.n_head[il]; ++h) {
                const auto* head = recorder.complete(il, h);
                if (!head)
                    return false;
                heads.push_back(head);
            }
    for (const auto* r : heads) {
        AttentionHead h;
        h.layer = int(r->layer);
        h.head = int(r->head);
        h.kv_head = int(r->kv_head);
        h.scale = r->scale;
        h.n = int(n);
        h.head_dim = int(r->head_dim);
        h.weights.assign(std::size_t(n) * n, 0.0f);
        h.q.assign(std::size_t(n) * r->head_dim, 0.0f);
        for (uint32_t i = 0; i < n; ++i) {
            std::copy(r->rows[i].begin(), r->rows[i].end(), h.weights.begin() + std::ptrdiff_t(std::size_t(i) * n));
            std::copy(r->q[i].begin(), r->q[i].end(), h.q.begin() + std::ptrdiff_t(std::size_t(i) * r->head_dim));
        }
        const engine::AttentionRecorder::KeysValues& kv = recorder.keys_values(*r);
        h.k.assign(kv.k.begin(), kv.k.begin() + std::ptrdiff_t(std::size_t(n) * r->head_dim));
        h.v.assign(kv.v.begin(), kv.v.begin() + std::ptrdiff_t(std::size_t(n) * r->head_dim));
        s.bytes += quint64(h.weights.size() + h.q.size() + h.k.size() + h.v.size()) * sizeof(float);
        s.heads.push_back(std::move(h));
    }
    s.source = "recorded";
    return true;
}

void EngineContext::publishKv(const QString& source, int prompt_tokens, int reused_tokens)
{
    if (!active)
        return;
    const auto& config = model->config();
    const engine::KvCache& cache = active->backend().kv_cache();
    const engine::KvAccounting kv = cache.accounting();
    const engine::BackendMemory memory = active->backend().memory();
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
    const engine::KvCacheTypes types = cache.config().types;
    s->cache_types = QString::fromStdString(engine::kv_cache_types_name(types));
    s->key_bytes_per_value = double(engine::kv_row_bytes(types.k, 32)) / 32.0;
    s->value_bytes_per_value = double(engine::kv_row_bytes(types.v, 32)) / 32.0;
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
    std::shared_ptr<const KvSnapshot> out = std::move(s);
    QMetaObject::invokeMethod(
        m_views, [views = m_views, out] { emit views->kvChanged(out); }, Qt::QueuedConnection);
}

void EngineContext::publishTimeline(std::shared_ptr<const TimelineSnapshot> timeline)
{
    QMetaObject::invokeMethod(
        m_views, [views = m_views, timeline] { emit views->timelineChanged(timeline); }, Qt::QueuedConnection);
}

} // namespace tokenscope::ui
