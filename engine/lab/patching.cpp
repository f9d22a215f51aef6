// SPDX-License-Identifier: GPL-3.0-or-later
#include "lab/patching.h"

#include "model/model.h"
#include "util/error.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <spdlog/fmt/fmt.h>

namespace engine {

double patch_metric(const PatchMetric& m, std::span<const float> logits, std::span<const float> clean)
{
    switch (m.kind) {
    case PatchMetric::Kind::LogitDiff:
        return double(logits[std::size_t(m.a)]) - double(logits[std::size_t(m.b)]);
    case PatchMetric::Kind::LogProb:
        return double(logits[std::size_t(m.a)]) - log_sum_exp(logits);
    case PatchMetric::Kind::KlToClean:
        return -kl_divergence(clean, logits);
    }
    return 0.0;
}

std::string_view metric_name(PatchMetric::Kind kind)
{
    switch (kind) {
    case PatchMetric::Kind::LogitDiff:
        return "logit difference";
    case PatchMetric::Kind::LogProb:
        return "log-probability";
    case PatchMetric::Kind::KlToClean:
        return "KL to the clean run";
    }
    return "?";
}

std::string_view patch_over_name(PatchOver over)
{
    switch (over) {
    case PatchOver::Residual:
        return "residual";
    case PatchOver::AttentionOut:
        return "attention";
    case PatchOver::MlpOut:
        return "mlp";
    case PatchOver::Heads:
        return "heads";
    case PatchOver::Routes:
        return "routes";
    }
    return "?";
}

std::optional<PatchOver> parse_patch_over(std::string_view name)
{
    for (PatchOver o :
         {PatchOver::Residual, PatchOver::AttentionOut, PatchOver::MlpOut, PatchOver::Heads, PatchOver::Routes})
        if (patch_over_name(o) == name)
            return o;
    return std::nullopt;
}

Site patch_site(PatchOver over)
{
    switch (over) {
    case PatchOver::Residual:
        return Site::Residual;
    case PatchOver::AttentionOut:
        return Site::AttentionOut;
    case PatchOver::MlpOut:
        return Site::MlpOut;
    case PatchOver::Heads:
        return Site::HeadOut;
    case PatchOver::Routes: // (patched at the router, not at a site: the block it changes)
        return Site::MlpOut;
    }
    return Site::Residual;
}

namespace {

// One layer's row of a route patch: each position of the corrupted run sent to the experts the clean
// run chose there. Where the two runs chose the same experts, forcing them changes no bit (test_moe):
// the effect is exactly 0 without a pass.
void patch_routes(Backend& backend, const PatchingRequest& req, const LabRun& clean, const LabRun& corrupted,
                  uint32_t il, double span, PatchingResult& out, const LabProgress& progress, uint32_t total)
{
    const RoutingCapture* cr = nullptr;
    const RoutingCapture* kr = nullptr;
    for (const RoutingCapture& r : clean.captures->routing)
        cr = r.layer == il ? &r : cr;
    for (const RoutingCapture& r : corrupted.captures->routing)
        kr = r.layer == il ? &r : kr;
    if (!cr || !kr)
        return; // a dense layer: no router (its cells stay NaN)
    const uint32_t k = cr->k;
    for (uint32_t col = 0; col < cr->n_tokens; ++col) {
        if (progress && !progress(out.runs, total)) {
            out.cancelled = true;
            return;
        }
        ExpertIntervention iv;
        iv.kind = ExpertIntervention::Kind::Force;
        iv.layer = int32_t(il);
        iv.first = col;
        iv.count = 1;
        for (uint32_t s = 0; s < k; ++s)
            iv.experts.push_back(uint32_t(cr->experts[std::size_t(col) * k + s]));
        std::vector<int32_t> a(cr->experts.begin() + std::ptrdiff_t(col * k),
                               cr->experts.begin() + std::ptrdiff_t((col + 1) * k));
        std::vector<int32_t> b(kr->experts.begin() + std::ptrdiff_t(col * k),
                               kr->experts.begin() + std::ptrdiff_t((col + 1) * k));
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        double m = out.corrupted_metric;
        if (a != b) {
            ForwardRequest run;
            run.tokens = req.corrupted;
            run.start_layer = il;
            if (il > 0)
                run.start_residual = corrupted.captures->residuals[il - 1];
            run.expert_interventions = std::span(&iv, 1);
            backend.kv_cache().clear();
            const ForwardResult patched = backend.forward(run);
            backend.kv_cache().clear();
            m = patch_metric(req.metric, patched.logits, clean.logits);
        }
        out.raw[il][col] = m;
        out.effect[il][col] = (m - out.corrupted_metric) / span;
        ++out.runs;
    }
}

} // namespace

PatchingResult run_patching(Backend& backend, const PatchingRequest& req, const LabProgress& progress)
{
    const auto t0 = std::chrono::steady_clock::now();
    const ModelConfig& c = backend.model().config();
    if (req.clean.empty() || req.corrupted.empty())
        throw Error("patching needs a clean and a corrupted prompt; one of them is empty");
    if (req.clean.size() != req.corrupted.size())
        throw Error(fmt::format("the clean prompt is {} tokens and the corrupted prompt {}: patching pairs positions, "
                                "so both must have the same number of tokens",
                                req.clean.size(), req.corrupted.size()));
    for (TokenId t : {req.metric.a, req.metric.b})
        if (t < 0 || uint32_t(t) >= c.n_vocab)
            throw Error(fmt::format("token id {} is outside the vocabulary", t));

    const bool routes = req.over == PatchOver::Routes;
    if (routes && !c.is_moe())
        throw Error(fmt::format("patching routes needs a mixture-of-experts model; this one ({}) is dense: it has "
                                "no router",
                                c.architecture));
    const auto n = uint32_t(req.clean.size());
    const Site site = patch_site(req.over);
    CaptureRequest capture;
    if (routes)
        capture.routing = true;
    else
        capture.sites = {site};
    const LabRun clean = run_fresh(backend, req.clean, &capture);
    // The corrupted run's residual stream after every layer: each patched run resumes from it at
    // the patched layer (the layers below compute exactly this again), which halves a grid's cost.
    CaptureRequest residuals;
    residuals.residuals = true;
    residuals.routing = routes;
    const LabRun corrupted = run_fresh(backend, req.corrupted, &residuals);

    PatchingResult out;
    out.over = req.over;
    out.metric = req.metric;
    out.n_layers = c.n_layer;
    out.clean_metric = patch_metric(req.metric, clean.logits, clean.logits);
    out.corrupted_metric = patch_metric(req.metric, corrupted.logits, clean.logits);
    const double span = out.clean_metric - out.corrupted_metric;
    if (!(std::abs(span) > 1e-9))
        throw Error(fmt::format("the {} is the same for the clean and the corrupted prompt ({:.6g}): there is no "
                                "difference for patching to explain",
                                metric_name(req.metric.kind), out.clean_metric));

    uint32_t max_heads = 0;
    for (uint32_t h : c.n_head)
        max_heads = std::max(max_heads, h);
    out.n_columns = req.over == PatchOver::Heads ? max_heads : n;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    out.effect.assign(c.n_layer, std::vector<double>(out.n_columns, nan));
    out.raw = out.effect;

    uint32_t total = 0;
    for (uint32_t il = 0; il < c.n_layer; ++il)
        total += req.over == PatchOver::Heads ? c.n_head[il] : n;
    for (uint32_t il = 0; il < c.n_layer && !out.cancelled; ++il) {
        if (routes) {
            patch_routes(backend, req, clean, corrupted, il, span, out, progress, total);
            continue;
        }
        const std::vector<float>& rows = clean.captures->at(site, il);
        const uint32_t width = site_width(c, site, il);
        const uint32_t columns = req.over == PatchOver::Heads ? c.n_head[il] : n;
        for (uint32_t col = 0; col < columns; ++col) {
            if (progress && !progress(out.runs, total)) {
                out.cancelled = true;
                break;
            }
            Intervention iv;
            iv.site = site;
            iv.layer = il;
            ForwardRequest run;
            run.tokens = req.corrupted;
            run.start_layer = il;
            std::vector<float> start;
            if (il > 0)
                run.start_residual = corrupted.captures->residuals[il - 1];
            if (req.over == PatchOver::Residual) {
                // the patched residual after layer il is where the run resumes
                start = corrupted.captures->residuals[il];
                std::copy_n(rows.begin() + std::ptrdiff_t(std::size_t(col) * width), width,
                            start.begin() + std::ptrdiff_t(std::size_t(col) * width));
                run.start_layer = il + 1;
                run.start_residual = start;
            } else if (req.over == PatchOver::Heads) {
                // this head's columns of every position
                const uint32_t D = c.head_dim_k;
                iv.head = int32_t(col);
                iv.first = 0;
                iv.count = n;
                iv.values.resize(std::size_t(n) * D);
                for (uint32_t t = 0; t < n; ++t)
                    std::copy_n(rows.begin() + std::ptrdiff_t(std::size_t(t) * width + col * D), D,
                                iv.values.begin() + std::ptrdiff_t(std::size_t(t) * D));
            } else {
                iv.first = col;
                iv.count = 1;
                iv.values.assign(rows.begin() + std::ptrdiff_t(std::size_t(col) * width),
                                 rows.begin() + std::ptrdiff_t(std::size_t(col + 1) * width));
            }
            if (req.over != PatchOver::Residual)
                run.interventions = std::span(&iv, 1);
            backend.kv_cache().clear();
            const ForwardResult patched = backend.forward(run);
            backend.kv_cache().clear();
            const double m = patch_metric(req.metric, patched.logits, clean.logits);
            out.raw[il][col] = m;
            out.effect[il][col] = (m - out.corrupted_metric) / span;
            ++out.runs;
        }
    }
    if (progress && !out.cancelled)
        progress(out.runs, total);
    out.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

} // namespace engine
