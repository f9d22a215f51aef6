// SPDX-License-Identifier: GPL-3.0-or-later
// Inspection on the engine here: one forward pass over a sequence with the attention of the
// requested layers captured, on a session of its own (or the recording of the passes that really
// ran), and the KV cache's contents. On a server: the reason neither can be had.
#include "bridge/inspection_client.h"

#include "backend/backend.h"
#include "model/model.h"
#include "session/session.h"
#include "util/error.h"
#include "widgets/count_text.h"

#include <QElapsedTimer>
#include <spdlog/spdlog.h>

namespace tokenscope::ui {

namespace {

// Longest sequence one capture pass takes: 2,048 tokens keep a head's matrix at 16 MiB.
constexpr int kMaxAttentionTokens = 2048;

std::shared_ptr<AttentionSnapshot> capture_attention(EngineContext& context, const QString& text, bool current_sequence,
                                                     const QList<int>& layers, const CancelToken& cancel)
{
    auto s = std::make_shared<AttentionSnapshot>();
    s->source = current_sequence ? "sequence" : "prompt";
    s->text = text;
    if (cancel->load()) { // stopped while it waited in the queue: nothing runs
        s->error = QObject::tr("Stopped before it started.");
        return s;
    }
    try {
        context.requireModel();
        const engine::Model& model = *context.model;
        const auto& config = model.config();
        const EngineContext::ViewedTokens viewed = context.viewedTokens(
            text, current_sequence,
            QObject::tr("The model has no sequence yet: chat or step first, or type a prompt here."),
            QObject::tr("The prompt is empty: type some text to see its attention."));
        const std::vector<int32_t>& ids = viewed.ids;
        const int prompt_length = viewed.prompt_length;
        // The model's shape (heads per layer, windows) and the tokens, for either source.
        const auto describe = [&](const engine::Backend& backend) {
            s->n_layers = int(config.n_layer);
            for (uint32_t il = 0; il < config.n_layer; ++il) {
                s->heads_per_layer.push_back(int(config.n_head[il]));
                s->kv_heads_per_layer.push_back(int(config.n_head_kv[il]));
            }
            for (uint32_t w : backend.kv_cache().config().window)
                s->window.push_back(int(w));
            s->tokens = context.tokensOf(ids, prompt_length);
        };
        if (current_sequence) {
            // The weights of the passes that really ran (the prefill's batches, each decode step),
            // when they were recorded for these layers; otherwise one pass over the same tokens.
            std::vector<uint32_t> focus;
            for (int l : layers)
                focus.push_back(uint32_t(l));
            context.recorder.set_focus(focus);
            if (context.snapshotFromRecording(*s, layers)) {
                describe(context.active->backend());
                return s;
            }
        }
        if (int(ids.size()) > kMaxAttentionTokens)
            throw engine::Error(QObject::tr("%1 tokens: the attention explorer takes at most %2 (a head's matrix grows "
                                            "with the square of the length).")
                                    .arg(numberText(qint64(ids.size())), numberText(kMaxAttentionTokens))
                                    .toStdString());
        if (!context.attention_session)
            context.attention_session = std::make_unique<engine::Session>(
                context.model,
                engine::make_cpu_backend(context.model, context.cpuOptions(uint32_t(kMaxAttentionTokens))),
                uint32_t(kMaxAttentionTokens));
        engine::CaptureRequest capture;
        for (uint32_t il = 0; il < config.n_layer; ++il)
            if (layers.isEmpty() || layers.contains(int(il)))
                for (uint32_t h = 0; h < config.n_head[il]; ++h)
                    capture.heads.emplace_back(il, h);
        // A fresh pass over every token (no cached prefix), all positions in one batch: each
        // captured head then holds the whole query × key matrix.
        engine::Session& session = *context.attention_session;
        session.truncate(0);
        QElapsedTimer timer;
        timer.start();
        session.prefill(ids, &capture);
        s->ms = double(timer.nsecsElapsed()) / 1e6;
        const auto& captures = session.last_captures();
        describe(session.backend());
        if (captures)
            for (engine::AttentionCapture& c : captures->attention) {
                AttentionHead h;
                h.layer = int(c.layer);
                h.head = int(c.head);
                h.kv_head = int(c.kv_head);
                h.scale = c.scale;
                h.softcap = c.softcap;
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
    return s;
}

std::shared_ptr<KvContents> read_kv(EngineContext& context, int layer, int kv_head)
{
    auto c = std::make_shared<KvContents>();
    c->layer = layer;
    c->kv_head = kv_head;
    if (!context.session || !context.active) {
        c->error = QObject::tr("No model is loaded.");
        return c;
    }
    try {
        engine::KvReadback r =
            context.active->backend().read_kv(uint32_t(std::max(0, layer)), uint32_t(std::max(0, kv_head)));
        c->head_dim = int(r.head_dim);
        c->n_positions = int(r.n_positions);
        c->keys = std::move(r.keys);
        c->values = std::move(r.values);
        c->held = std::move(r.held);
        c->tokens = context.sequenceTokens(context.activePromptLength());
    } catch (const std::exception& e) {
        c->error = QString::fromUtf8(e.what());
    }
    return c;
}

class LocalInspection final : public InspectionClient::Source {
public:
    LocalInspection(InspectionClient& client, EngineController& engine) : m_client(client), m_engine(engine) {}

    quint64 captureAttention(const QString& text, bool current_sequence, const QList<int>& layers) override
    {
        return m_engine.request(&m_client, &InspectionClient::attentionReady,
                                [=](EngineContext& context, const RequestBook::Ticket& ticket) {
                                    return capture_attention(context, text, current_sequence, layers, ticket.cancel);
                                });
    }

    quint64 readKv(int layer, int kv_head) override
    {
        return m_engine.request(
            &m_client, &InspectionClient::kvContents,
            [=](EngineContext& context, const RequestBook::Ticket&) { return read_kv(context, layer, kv_head); });
    }

private:
    InspectionClient& m_client;
    EngineController& m_engine;
};

class RemoteInspection final : public InspectionClient::Source {
public:
    RemoteInspection(InspectionClient& client, EngineController& engine) : m_client(client), m_engine(engine) {}

    quint64 captureAttention(const QString&, bool, const QList<int>&) override
    {
        return m_engine.refuse(&m_client, &InspectionClient::attentionReady, QObject::tr("Attention"));
    }

    quint64 readKv(int, int) override
    {
        return m_engine.refuse(&m_client, &InspectionClient::kvContents, QObject::tr("The KV cache contents"));
    }

private:
    InspectionClient& m_client;
    EngineController& m_engine;
};

} // namespace

InspectionClient::InspectionClient(EngineController& engine)
    : m_engine(engine), m_local(std::make_unique<LocalInspection>(*this, engine)),
      m_remote(std::make_unique<RemoteInspection>(*this, engine))
{
}

InspectionClient::~InspectionClient() = default;

void InspectionClient::setAttentionWatched(bool watched)
{
    m_engine.post([watched](EngineContext& context) {
        context.attention_watched = watched;
        if (!watched)
            context.recorder.clear(); // what a closed view would show later is recomputed on demand
    });
}

} // namespace tokenscope::ui
