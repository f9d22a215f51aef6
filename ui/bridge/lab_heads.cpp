// SPDX-License-Identifier: GPL-3.0-or-later
// The lab's head tools on the engine thread (no request bookkeeping here: lab_client.cpp runs them): classification on
// the repeated-tokens probe, an ablation scan of every head (progress, Stop), one ablation's before/after distribution,
// and steering (side-by-side continuations on sessions of their own; applied to the chat's and the stepper's sessions
// on request).
#include "bridge/lab_client.h"

#include "bridge/token_text.h"
#include "lab/ablation_scan.h"
#include "lab/head_classes.h"
#include "lab/steering.h"
#include "model/model.h"
#include "session/generator.h"
#include "session/session.h"
#include "session/stepper.h"
#include "util/error.h"

#include <QElapsedTimer>
#include <algorithm>
#include <cmath>

namespace tokenscope::ui {

namespace {

std::vector<CandidateUi> top_candidates(const engine::Tokenizer& tok, std::span<const float> logits, std::size_t n)
{
    std::vector<int32_t> ids(logits.size());
    for (std::size_t i = 0; i < ids.size(); ++i)
        ids[i] = int32_t(i);
    n = std::min(n, ids.size());
    std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(n), ids.end(),
                      [&](int32_t a, int32_t b) { return logits[std::size_t(a)] > logits[std::size_t(b)]; });
    const double lse = engine::log_sum_exp(logits);
    std::vector<CandidateUi> out;
    for (std::size_t i = 0; i < n; ++i)
        out.push_back({ids[i], token_display_text(tok, ids[i]), std::exp(double(logits[std::size_t(ids[i])]) - lse)});
    return out;
}

} // namespace

std::shared_ptr<HeadsSnapshot> classify_heads(EngineContext& context, int repeat, quint64 seed)
{
    auto s = std::make_shared<HeadsSnapshot>();
    s->kind = "classes";
    try {
        if (!context.model)
            throw engine::Error(QObject::tr("No model is loaded: open a GGUF file first.").toStdString());
        QElapsedTimer timer;
        timer.start();
        const engine::HeadProbe probe = engine::make_head_probe(context.model->tokenizer(), uint32_t(repeat), seed);
        const auto scores = engine::classify_heads(context.labBackend(), probe);
        const engine::ModelConfig& c = context.model->config();
        s->n_layers = int(c.n_layer);
        s->n_heads = int(*std::max_element(c.n_head.begin(), c.n_head.end()));
        s->heads.resize(std::size_t(s->n_layers * s->n_heads));
        for (const auto& h : scores) {
            HeadInfo& info = s->heads[std::size_t(h.layer) * std::size_t(s->n_heads) + h.head];
            info.layer = int(h.layer);
            info.head = int(h.head);
            info.cls = int(h.cls);
            info.scores.assign(h.score.begin(), h.score.end());
            info.entropy = h.entropy;
        }
        s->runs = 1;
        s->ms = double(timer.nsecsElapsed()) / 1e6;
    } catch (const std::exception& e) {
        s->error = QString::fromUtf8(e.what());
    }
    return s;
}

std::shared_ptr<HeadsSnapshot> scan_ablations(EngineContext& context, const AblationSettings& settings,
                                              const LabProgress& progress)
{
    auto s = std::make_shared<HeadsSnapshot>();
    s->kind = "scan";
    try {
        if (!context.model)
            throw engine::Error(QObject::tr("No model is loaded: open a GGUF file first.").toStdString());
        const auto ids = context.labTokens(settings.prompt, "");
        std::vector<int32_t> reference;
        if (!settings.reference.trimmed().isEmpty())
            reference = context.labTokens(settings.reference, "reference");
        const engine::AblationScan scan = engine::scan_head_ablations(
            context.labBackend(), ids, engine::AblationMode(std::clamp(settings.mode, 0, 2)), reference, {}, progress);
        const engine::ModelConfig& c = context.model->config();
        s->n_layers = int(c.n_layer);
        s->n_heads = int(*std::max_element(c.n_head.begin(), c.n_head.end()));
        s->heads.resize(std::size_t(s->n_layers * s->n_heads));
        for (int l = 0; l < s->n_layers; ++l)
            for (int h = 0; h < s->n_heads; ++h) {
                s->heads[std::size_t(l * s->n_heads + h)].layer = l;
                s->heads[std::size_t(l * s->n_heads + h)].head = h;
            }
        for (const engine::HeadEffect& e : scan.heads) {
            HeadInfo& info = s->heads[std::size_t(e.layer) * std::size_t(s->n_heads) + e.head];
            info.kl = e.kl;
            info.logit_change = e.logit_change;
        }
        s->token = token_display_text(context.model->tokenizer(), scan.token);
        s->runs = int(scan.runs);
        s->cancelled = scan.cancelled;
        s->ms = scan.ms;
    } catch (const std::exception& e) {
        s->error = QString::fromUtf8(e.what());
    }
    return s;
}

std::shared_ptr<AblationSnapshot> ablate_heads(EngineContext& context, const AblationSettings& settings)
{
    auto s = std::make_shared<AblationSnapshot>();
    try {
        if (!context.model)
            throw engine::Error(QObject::tr("No model is loaded: open a GGUF file first.").toStdString());
        auto ids = settings.ids.empty() ? context.labTokens(settings.prompt, "") : settings.ids;
        if (ids.size() > 256)
            ids.erase(ids.begin(), ids.end() - 256); // the lab's limit: the sequence's last tokens
        s->positions = int(ids.size());
        s->heads = settings.heads;
        std::vector<int32_t> reference;
        if (!settings.reference.trimmed().isEmpty())
            reference = context.labTokens(settings.reference, "reference");
        std::vector<engine::HeadRef> heads;
        for (const auto& [l, h] : settings.heads)
            heads.push_back({uint32_t(l), uint32_t(h)});
        engine::Backend& backend = context.labBackend();
        const auto ivs = engine::head_ablations(backend, heads, engine::AblationMode(std::clamp(settings.mode, 0, 2)),
                                                uint32_t(ids.size()), reference);
        const auto base = engine::run_fresh(backend, ids).logits;
        const auto ablated = engine::run_fresh(backend, ids, nullptr, ivs).logits;
        const engine::Tokenizer& tok = context.model->tokenizer();
        s->before = top_candidates(tok, base, 10);
        s->after = top_candidates(tok, ablated, 10);
        s->kl = engine::kl_divergence(base, ablated);
        const int best = settings.token >= 0 ? settings.token : s->before.front().id;
        s->token = token_display_text(tok, best);
        s->logit = base[std::size_t(best)];
        s->ablated_logit = ablated[std::size_t(best)];
    } catch (const std::exception& e) {
        s->error = QString::fromUtf8(e.what());
    }
    return s;
}

std::shared_ptr<SteeringSnapshot> steer(EngineContext& context, const SteeringSettings& settings,
                                        const CancelToken& cancel)
{
    auto s = std::make_shared<SteeringSnapshot>();
    s->settings = settings;
    try {
        if (!context.model)
            throw engine::Error(QObject::tr("No model is loaded: open a GGUF file first.").toStdString());
        const auto plus = context.labTokens(settings.plus, "positive");
        const auto minus = context.labTokens(settings.minus, "negative");
        const engine::SteeringVector v =
            engine::steering_vector(context.labBackend(), plus, minus, uint32_t(settings.layer));
        s->direction = v.direction;
        double norm = 0;
        for (float x : v.direction)
            norm += double(x) * x;
        s->norm = std::sqrt(norm);
        s->architecture = QString::fromStdString(context.model->config().architecture);
        s->n_layers = int(context.model->config().n_layer);
        const auto prompt = context.labTokens(settings.prompt, "");
        const uint32_t n_ctx = uint32_t(prompt.size()) + uint32_t(std::max(1, settings.tokens)) + 2;
        engine::SamplerConfig greedy;
        greedy.temperature = 0.0f; // the same (greedy) draw on both sides
        std::vector<float> first[2];
        QString texts[2];
        for (int side = 0; side < 2; ++side) {
            engine::Session session(context.model, engine::make_cpu_backend(context.model, context.cpuOptions(n_ctx)));
            if (side == 1)
                session.set_interventions({engine::steering_intervention(v, float(settings.strength))});
            engine::Sampler sampler(greedy);
            engine::GenerationOptions options;
            options.max_tokens = uint32_t(std::max(1, settings.tokens));
            options.cancel = cancel.get();
            const auto trace = engine::generate(session, sampler, settings.prompt.toStdString(), options);
            texts[side] = QString::fromStdString(trace.text);
            session.truncate(uint32_t(trace.prompt_ids.size()));
            first[side].assign(session.logits().begin(), session.logits().end());
        }
        s->default_text = texts[0];
        s->steered_text = texts[1];
        s->kl = engine::kl_divergence(first[0], first[1]);
    } catch (const std::exception& e) {
        s->error = QString::fromUtf8(e.what());
    }
    return s;
}

bool apply_steering(EngineContext& context, bool on, const SteeringSettings& settings)
{
    std::vector<engine::Intervention> ivs;
    if (on && context.model) {
        const auto plus = context.labTokens(settings.plus, "positive");
        const auto minus = context.labTokens(settings.minus, "negative");
        const engine::SteeringVector v =
            engine::steering_vector(context.labBackend(), plus, minus, uint32_t(settings.layer));
        ivs.push_back(engine::steering_intervention(v, float(settings.strength)));
    }
    // The cache was computed without (or with other) steering: both sequences start again.
    if (context.session)
        context.session->set_interventions(ivs);
    if (context.stepper_session) {
        context.stepper.reset();
        context.stepper_session->set_interventions(ivs);
    }
    context.recorder.clear();
    context.steering = !ivs.empty();
    return context.steering;
}

} // namespace tokenscope::ui
