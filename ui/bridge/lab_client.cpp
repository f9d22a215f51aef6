// SPDX-License-Identifier: GPL-3.0-or-later
// The lab on the engine here: activation patching (progress after every run, Stop between runs)
// and direct logit attribution, the head tools of lab_heads.cpp, and on a server the reason none
// of them can run.
#include "bridge/lab_client.h"

#include "bridge/token_text.h"
#include "lab/attribution.h"
#include "lab/patching.h"
#include "model/model.h"
#include "util/error.h"

#include <QElapsedTimer>

namespace tokenscope::ui {

namespace {

std::shared_ptr<PatchingSnapshot> run_patching(EngineContext& context, const PatchingSettings& settings,
                                               const CancelToken& cancel, const LabProgress& progress)
{
    auto s = std::make_shared<PatchingSnapshot>();
    s->settings = settings;
    try {
        if (!context.model)
            throw engine::Error(QObject::tr("No model is loaded: open a GGUF file first.").toStdString());
        if (cancel->load())
            throw engine::Error(QObject::tr("Stopped before it started.").toStdString());
        const engine::Tokenizer& tok = context.model->tokenizer();
        engine::PatchingRequest req;
        req.clean = context.labTokens(settings.clean, "clean");
        req.corrupted = context.labTokens(settings.corrupted, "corrupted");
        for (int32_t id : req.clean)
            s->clean_pieces << token_display_text(tok, id);
        for (int32_t id : req.corrupted)
            s->corrupted_pieces << token_display_text(tok, id);
        req.metric.kind = engine::PatchMetric::Kind(std::clamp(settings.metric, 0, 2));
        if (req.metric.kind != engine::PatchMetric::Kind::KlToClean) {
            req.metric.a = engine::single_token(tok, settings.token_a.toStdString());
            s->token_a = token_display_text(tok, req.metric.a);
        }
        if (req.metric.kind == engine::PatchMetric::Kind::LogitDiff) {
            req.metric.b = engine::single_token(tok, settings.token_b.toStdString());
            s->token_b = token_display_text(tok, req.metric.b);
        }
        req.over = engine::PatchOver(std::clamp(settings.over, 0, 4));
        s->metric_name = QString::fromUtf8(engine::metric_name(req.metric.kind).data());
        s->over_name = QString::fromUtf8(engine::patch_over_name(req.over).data());
        engine::Backend& backend = context.labBackend();
        s->backend = QString::fromStdString(backend.name());
        const engine::PatchingResult r = engine::run_patching(backend, req, progress);
        s->n_layers = int(r.n_layers);
        s->n_columns = int(r.n_columns);
        s->effect = r.effect;
        s->raw = r.raw;
        s->clean_metric = r.clean_metric;
        s->corrupted_metric = r.corrupted_metric;
        s->runs = int(r.runs);
        s->cancelled = r.cancelled;
        s->ms = r.ms;
    } catch (const std::exception& e) {
        s->error = QString::fromUtf8(e.what());
    }
    return s;
}

std::shared_ptr<AttributionSnapshot> run_attribution(EngineContext& context, const AttributionSettings& settings,
                                                     const CancelToken& cancel)
{
    auto s = std::make_shared<AttributionSnapshot>();
    try {
        if (!context.model)
            throw engine::Error(QObject::tr("No model is loaded: open a GGUF file first.").toStdString());
        if (cancel->load())
            throw engine::Error(QObject::tr("Stopped before it started.").toStdString());
        QElapsedTimer timer;
        timer.start();
        const engine::Tokenizer& tok = context.model->tokenizer();
        std::vector<int32_t> ids = settings.ids;
        if (ids.empty())
            ids = context.labTokens(settings.prompt, "");
        if (int(ids.size()) > EngineContext::kMaxLabTokens)
            ids.erase(ids.begin(), ids.end() - EngineContext::kMaxLabTokens); // the sequence's last tokens
        engine::Backend& backend = context.labBackend();
        s->backend = QString::fromStdString(backend.name());
        int32_t token = settings.token;
        if (!settings.token_text.isEmpty())
            token = engine::single_token(tok, settings.token_text.toStdString());
        if (token < 0) { // the most likely next token
            const auto logits = engine::run_fresh(backend, ids).logits;
            token = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
        }
        std::optional<engine::TokenId> versus;
        if (!settings.versus_text.isEmpty())
            versus = engine::single_token(tok, settings.versus_text.toStdString());
        const engine::Attribution a = engine::attribute_logit(backend, ids, token, versus);
        s->token = token_display_text(tok, a.token);
        s->token_id = a.token;
        if (a.versus)
            s->versus = token_display_text(tok, *a.versus);
        s->position = int(a.position);
        s->logit = a.logit;
        s->final_norm_scale = a.final_norm_scale;
        for (const engine::AttributionPart& p : a.parts)
            s->parts.push_back({int(p.kind), QString::fromStdString(p.name), p.layer, p.head, p.value});
        s->ms = double(timer.nsecsElapsed()) / 1e6;
    } catch (const std::exception& e) {
        s->error = QString::fromUtf8(e.what());
    }
    return s;
}

class LocalLab final : public LabClient::Source {
public:
    LocalLab(LabClient& client, EngineController& engine) : m_client(client), m_engine(engine) {}

    quint64 runPatching(const PatchingSettings& settings) override
    {
        return m_engine.request(&m_client, &LabClient::patchingReady,
                                [this, settings](EngineContext& context, const RequestBook::Ticket& ticket) {
                                    return run_patching(context, settings, ticket.cancel, progress(ticket));
                                });
    }
    quint64 runAttribution(const AttributionSettings& settings) override
    {
        return m_engine.request(&m_client, &LabClient::attributionReady,
                                [settings](EngineContext& context, const RequestBook::Ticket& ticket) {
                                    return run_attribution(context, settings, ticket.cancel);
                                });
    }
    quint64 classifyHeads(int repeat, quint64 seed) override
    {
        return m_engine.request(&m_client, &LabClient::headsReady,
                                [repeat, seed](EngineContext& context, const RequestBook::Ticket&) {
                                    return classify_heads(context, repeat, seed);
                                });
    }
    quint64 scanAblations(const AblationSettings& settings) override
    {
        return m_engine.request(&m_client, &LabClient::headsReady,
                                [this, settings](EngineContext& context, const RequestBook::Ticket& ticket) {
                                    return scan_ablations(context, settings, progress(ticket));
                                });
    }
    quint64 ablateHeads(const AblationSettings& settings) override
    {
        return m_engine.request(
            &m_client, &LabClient::ablationReady,
            [settings](EngineContext& context, const RequestBook::Ticket&) { return ablate_heads(context, settings); });
    }
    quint64 steer(const SteeringSettings& settings) override
    {
        return m_engine.request(&m_client, &LabClient::steeringReady,
                                [settings](EngineContext& context, const RequestBook::Ticket& ticket) {
                                    return tokenscope::ui::steer(context, settings, ticket.cancel);
                                });
    }
    void setSteering(bool on, const SteeringSettings& settings) override
    {
        m_engine.post([client = &m_client, on, settings](EngineContext& context) {
            bool steered = context.steering;
            QString error;
            try {
                steered = apply_steering(context, on, settings);
            } catch (const std::exception& e) {
                error = QString::fromUtf8(e.what());
                steered = context.steering;
            }
            EngineController::toUi(client, [client, steered, error] { emit client->steeringApplied(steered, error); });
        });
    }

private:
    // labProgress after every run; false (stop) once the request is cancelled.
    LabProgress progress(const RequestBook::Ticket& ticket) const
    {
        return [client = &m_client, id = ticket.id, cancel = ticket.cancel](uint32_t done, uint32_t total) {
            EngineController::toUi(client,
                                   [client, id, done, total] { emit client->labProgress(id, int(done), int(total)); });
            return !cancel->load();
        };
    }

    LabClient& m_client;
    EngineController& m_engine;
};

class RemoteLab final : public LabClient::Source {
public:
    RemoteLab(LabClient& client, EngineController& engine) : m_client(client), m_engine(engine) {}

    quint64 runPatching(const PatchingSettings&) override
    {
        return m_engine.refuse(&m_client, &LabClient::patchingReady, QObject::tr("Activation patching"));
    }
    quint64 runAttribution(const AttributionSettings&) override
    {
        return m_engine.refuse(&m_client, &LabClient::attributionReady, QObject::tr("Attribution"));
    }
    quint64 classifyHeads(int, quint64) override
    {
        return m_engine.refuse(&m_client, &LabClient::headsReady, QObject::tr("Head classification"));
    }
    quint64 scanAblations(const AblationSettings&) override
    {
        return m_engine.refuse(&m_client, &LabClient::headsReady, QObject::tr("Ablation"));
    }
    quint64 ablateHeads(const AblationSettings&) override
    {
        return m_engine.refuse(&m_client, &LabClient::ablationReady, QObject::tr("Ablation"));
    }
    quint64 steer(const SteeringSettings&) override
    {
        return m_engine.refuse(&m_client, &LabClient::steeringReady, QObject::tr("Steering"));
    }
    void setSteering(bool, const SteeringSettings&) override
    {
        const QString why = EngineController::unavailableOnServer(QObject::tr("Steering"));
        EngineController::toUi(&m_client, [client = &m_client, why] { emit client->steeringApplied(false, why); });
    }

private:
    LabClient& m_client;
    EngineController& m_engine;
};

} // namespace

LabClient::LabClient(EngineController& engine)
    : m_engine(engine), m_local(std::make_unique<LocalLab>(*this, engine)),
      m_remote(std::make_unique<RemoteLab>(*this, engine))
{
}

LabClient::~LabClient() = default;

} // namespace tokenscope::ui
