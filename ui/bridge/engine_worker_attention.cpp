// SPDX-License-Identifier: GPL-3.0-or-later
// The attention explorer's side of the engine thread: one forward pass over a sequence with the
// attention of the requested layers captured, on a session of its own.
#include "bridge/engine_worker.h"

#include "backend/backend.h"
#include "bridge/token_text.h"
#include "model/model.h"
#include "session/session.h"
#include "session/stepper.h"
#include "util/error.h"

#include <QElapsedTimer>
#include <spdlog/spdlog.h>

namespace tokenscope::ui {

const engine::CaptureRequest& EngineWorker::recordingRequest(uint32_t next_length)
{
    static const engine::CaptureRequest nothing;
    if (!m_attention_watched)
        return nothing; // no view shows attention: the passes record nothing
    return m_recorder.request(m_model->config(), std::min<uint32_t>(next_length, m_n_ctx));
}

void EngineWorker::setAttentionWatched(bool watched)
{
    m_attention_watched = watched;
    if (!watched)
        m_recorder.clear(); // what a closed view would show later is recomputed on demand
}

void EngineWorker::record()
{
    if (m_active && m_active->last_captures())
        m_recorder.add(*m_active->last_captures());
    if (m_active)
        m_recorder.truncate(uint32_t(m_active->tokens().size()));
}

bool EngineWorker::snapshotFromRecording(AttentionSnapshot& s, const QList<int>& layers, int prompt_length)
{
    const auto& config = m_model->config();
    const uint32_t n = uint32_t(m_active->tokens().size());
    if (m_recorder.length() != n || n == 0)
        return false;
    std::vector<const engine::AttentionRecorder::Head*> heads;
    for (uint32_t il = 0; il < config.n_layer; ++il)
        if (layers.isEmpty() || layers.contains(int(il)))
            for (uint32_t h = 0; h < config.n_head[il]; ++h) {
                const auto* head = m_recorder.complete(il, h);
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
        const engine::AttentionRecorder::KeysValues& kv = m_recorder.keys_values(*r);
        h.k.assign(kv.k.begin(), kv.k.begin() + std::ptrdiff_t(std::size_t(n) * r->head_dim));
        h.v.assign(kv.v.begin(), kv.v.begin() + std::ptrdiff_t(std::size_t(n) * r->head_dim));
        s.bytes += quint64(h.weights.size() + h.q.size() + h.k.size() + h.v.size()) * sizeof(float);
        s.heads.push_back(std::move(h));
    }
    s.source = "recorded";
    (void)prompt_length;
    return true;
}

namespace {

// Longest sequence one capture pass takes: 2,048 tokens keep a head's matrix at 16 MiB.
constexpr int kMaxAttentionTokens = 2048;

} // namespace

void EngineWorker::captureAttention(quint64 request_id, const QString& text, bool current_sequence,
                                    const QList<int>& layers, CancelToken cancel)
{
    auto s = std::make_shared<AttentionSnapshot>();
    s->request_id = request_id;
    s->source = current_sequence ? "sequence" : "prompt";
    s->text = text;
    if (cancel->load()) { // stopped while it waited in the queue: nothing runs
        s->error = tr("Stopped before it started.");
        emit attentionReady(std::move(s));
        return;
    }
    if (!m_model) {
        s->error = tr("No model is loaded: open a GGUF file first.");
        emit attentionReady(std::move(s));
        return;
    }
    try {
        const engine::Tokenizer& tokenizer = m_model->tokenizer();
        const auto& config = m_model->config();
        std::vector<int32_t> ids;
        int prompt_length = 0;
        if (current_sequence) {
            if (m_active)
                ids = m_active->tokens();
            prompt_length = activePromptLength();
            if (ids.empty())
                throw engine::Error(
                    tr("The model has no sequence yet: chat or step first, or type a prompt here.").toStdString());
        } else {
            if (text.trimmed().isEmpty())
                throw engine::Error(tr("The prompt is empty: type some text to see its attention.").toStdString());
            ids = tokenizer.encode_ids(text.toStdString());
            prompt_length = int(ids.size());
        }
        // The model's shape (heads per layer, windows) and the tokens, for either source.
        const auto describe = [&](const engine::Backend& backend) {
            s->n_layers = int(config.n_layer);
            for (uint32_t il = 0; il < config.n_layer; ++il) {
                s->heads_per_layer.push_back(int(config.n_head[il]));
                s->kv_heads_per_layer.push_back(int(config.n_head_kv[il]));
            }
            for (uint32_t w : backend.kv_cache().config().window)
                s->window.push_back(int(w));
            s->tokens = tokensOf(ids, prompt_length);
        };
        if (current_sequence) {
            // The weights of the passes that really ran (the prefill's batches, each decode step),
            // when they were recorded for these layers; otherwise one pass over the same tokens.
            std::vector<uint32_t> focus;
            for (int l : layers)
                focus.push_back(uint32_t(l));
            m_recorder.set_focus(focus);
            if (snapshotFromRecording(*s, layers, prompt_length)) {
                describe(m_active->backend());
                emit attentionReady(std::move(s));
                return;
            }
        }
        if (int(ids.size()) > kMaxAttentionTokens)
            throw engine::Error(tr("%1 tokens: the attention explorer takes at most %2 (a head's matrix grows with the "
                                   "square of the length).")
                                    .arg(ids.size())
                                    .arg(kMaxAttentionTokens)
                                    .toStdString());
        if (!m_attention_session)
            m_attention_session = std::make_unique<engine::Session>(
                m_model,
                engine::make_cpu_backend(m_model, {.threads = m_threads, .n_ctx = uint32_t(kMaxAttentionTokens)}),
                uint32_t(kMaxAttentionTokens));
        engine::CaptureRequest capture;
        for (uint32_t il = 0; il < config.n_layer; ++il)
            if (layers.isEmpty() || layers.contains(int(il)))
                for (uint32_t h = 0; h < config.n_head[il]; ++h)
                    capture.heads.emplace_back(il, h);
        // A fresh pass over every token (no cached prefix), all positions in one batch: each
        // captured head then holds the whole query × key matrix.
        m_attention_session->truncate(0);
        QElapsedTimer timer;
        timer.start();
        m_attention_session->prefill(ids, &capture);
        s->ms = double(timer.nsecsElapsed()) / 1e6;
        const auto& captures = m_attention_session->last_captures();
        describe(m_attention_session->backend());
        if (captures)
            for (engine::AttentionCapture& c : captures->attention) {
                AttentionHead h;
                h.layer = int(c.layer);
                h.head = int(c.head);
                h.kv_head = int(c.kv_head);
                h.scale = c.scale;
                h.n = int(c.n_queries);
                h.head_dim = int(c.head_dim);
                h.weights = c.weights;
                h.q = c.q;
                h.k = c.k;
                h.v = c.v;
                s->bytes += quint64(h.weights.size() + h.q.size() + h.k.size() + h.v.size()) * sizeof(float);
                s->heads.push_back(std::move(h));
            }
        spdlog::debug("attention: {} tokens, {} heads, {:.1f} MiB, {:.1f} ms", ids.size(), s->heads.size(),
                      double(s->bytes) / 1048576.0, s->ms);
    } catch (const std::exception& e) {
        s->error = QString::fromUtf8(e.what());
    }
    emit attentionReady(std::move(s));
}

} // namespace tokenscope::ui
