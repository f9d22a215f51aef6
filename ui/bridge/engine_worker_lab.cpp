// SPDX-License-Identifier: GPL-3.0-or-later
// The interpretability lab's side of the engine thread: activation patching and direct logit
// attribution on a CPU backend of their own (the chat's and the stepper's caches are left alone),
// each answered with one immutable snapshot; patching reports progress after every run and stops
// at its cancel token.
#include "bridge/engine_worker.h"

#include "bridge/token_text.h"
#include "lab/attribution.h"
#include "lab/patching.h"
#include "model/model.h"
#include "util/error.h"

#include <QElapsedTimer>

namespace tokenscope::ui {

namespace {

// A lab prompt is evaluated many times over: long ones would take minutes per experiment.
constexpr int kMaxLabTokens = 256;

} // namespace

engine::Backend& EngineWorker::labBackend()
{
    if (!m_lab_backend)
        m_lab_backend = engine::make_cpu_backend(m_model, {.threads = m_threads, .n_ctx = uint32_t(kMaxLabTokens) + 1});
    return *m_lab_backend;
}

std::vector<int32_t> EngineWorker::labTokens(const QString& text, const char* what) const
{
    if (text.trimmed().isEmpty())
        throw engine::Error(tr("The %1 prompt is empty.").arg(tr(what)).toStdString());
    auto ids = m_model->tokenizer().encode_ids(text.toStdString());
    if (int(ids.size()) > kMaxLabTokens)
        throw engine::Error(tr("The %1 prompt is %2 tokens; the lab takes at most %3 (every experiment evaluates it "
                               "once per cell).")
                                .arg(tr(what))
                                .arg(ids.size())
                                .arg(kMaxLabTokens)
                                .toStdString());
    return ids;
}

void EngineWorker::runPatching(quint64 request_id, const PatchingSettings& settings, CancelToken cancel)
{
    auto s = std::make_shared<PatchingSnapshot>();
    s->request_id = request_id;
    s->settings = settings;
    try {
        if (!m_model)
            throw engine::Error(tr("No model is loaded: open a GGUF file first.").toStdString());
        if (cancel->load())
            throw engine::Error(tr("Stopped before it started.").toStdString());
        const engine::Tokenizer& tok = m_model->tokenizer();
        engine::PatchingRequest req;
        req.clean = labTokens(settings.clean, "clean");
        req.corrupted = labTokens(settings.corrupted, "corrupted");
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
        req.over = engine::PatchOver(std::clamp(settings.over, 0, 3));
        s->metric_name = QString::fromUtf8(engine::metric_name(req.metric.kind).data());
        s->over_name = QString::fromUtf8(engine::patch_over_name(req.over).data());
        engine::Backend& backend = labBackend();
        s->backend = QString::fromStdString(backend.name());
        const engine::PatchingResult r = engine::run_patching(backend, req, [&](uint32_t done, uint32_t total) {
            emit labProgress(request_id, int(done), int(total));
            return !cancel->load();
        });
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
    emit patchingReady(std::move(s));
}

void EngineWorker::runAttribution(quint64 request_id, const AttributionSettings& settings, CancelToken cancel)
{
    auto s = std::make_shared<AttributionSnapshot>();
    s->request_id = request_id;
    try {
        if (!m_model)
            throw engine::Error(tr("No model is loaded: open a GGUF file first.").toStdString());
        if (cancel->load())
            throw engine::Error(tr("Stopped before it started.").toStdString());
        QElapsedTimer timer;
        timer.start();
        const engine::Tokenizer& tok = m_model->tokenizer();
        std::vector<int32_t> ids = settings.ids;
        if (ids.empty())
            ids = labTokens(settings.prompt, "");
        if (int(ids.size()) > kMaxLabTokens)
            ids.erase(ids.begin(), ids.end() - kMaxLabTokens); // the sequence's last tokens
        engine::Backend& backend = labBackend();
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
    emit attributionReady(std::move(s));
}

} // namespace tokenscope::ui
