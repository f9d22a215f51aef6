// SPDX-License-Identifier: GPL-3.0-or-later
#include "moe/expert_scan.h"

#include "model/model.h"
#include "util/error.h"

#include <algorithm>
#include <chrono>
#include <spdlog/fmt/fmt.h>

namespace engine {

ForwardResult forward_routed(Backend& backend, std::span<const TokenId> tokens,
                             std::span<const ExpertIntervention> interventions, bool expert_outputs)
{
    CaptureRequest capture;
    capture.routing = true;
    capture.expert_outputs = expert_outputs;
    ForwardRequest request;
    request.tokens = tokens;
    request.capture = &capture;
    request.expert_interventions = interventions;
    return backend.forward(request);
}

ExpertScan scan_experts(Backend& backend, std::span<const TokenId> tokens, ExpertIntervention::Kind mode,
                        const std::function<void(uint32_t, double)>& planned, const LabProgress& progress)
{
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    const ModelConfig& c = backend.model().config();
    if (!c.is_moe())
        throw Error(fmt::format("the model ({}) has no experts to scan: it is dense", c.architecture));
    if (mode == ExpertIntervention::Kind::Force)
        throw Error("a scan removes or zeroes each expert in turn; forcing needs a token and its experts");
    // The base run: its residual stream (each pass resumes at its layer) and its routing (which
    // experts need a pass at all).
    CaptureRequest capture;
    capture.residuals = true;
    capture.routing = true;
    const LabRun base = run_fresh(backend, tokens, &capture);
    const double base_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    ExpertScan out;
    out.token = TokenId(std::max_element(base.logits.begin(), base.logits.end()) - base.logits.begin());
    const double base_logit = base.logits[std::size_t(out.token)];
    for (const RoutingCapture& rc : base.captures->routing)
        for (uint32_t e = 0; e < c.n_expert; ++e) {
            ExpertEffect effect;
            effect.layer = rc.layer;
            effect.expert = e;
            effect.tokens = uint32_t(std::count(rc.experts.begin(), rc.experts.end(), int32_t(e)));
            out.effects.push_back(effect);
            if (effect.tokens) {
                ++out.planned;
                out.estimated_ms += base_ms * double(c.n_layer - rc.layer) / c.n_layer;
            }
        }
    if (planned)
        planned(out.planned, out.estimated_ms);
    for (ExpertEffect& effect : out.effects) {
        if (!effect.tokens)
            continue; // removing an expert no token chose changes no bit
        if (progress && !progress(out.runs, out.planned)) {
            out.cancelled = true;
            break;
        }
        ExpertIntervention iv;
        iv.kind = mode;
        iv.layer = int32_t(effect.layer);
        iv.experts = {effect.expert};
        ForwardRequest run;
        run.tokens = tokens;
        run.expert_interventions = std::span(&iv, 1);
        run.start_layer = effect.layer;
        if (effect.layer > 0)
            run.start_residual = base.captures->residuals[effect.layer - 1];
        backend.kv_cache().clear();
        const ForwardResult r = backend.forward(run);
        backend.kv_cache().clear();
        effect.kl = kl_divergence(base.logits, r.logits);
        effect.logit_change = double(r.logits[std::size_t(out.token)]) - base_logit;
        effect.ran = true;
        ++out.runs;
    }
    if (progress && !out.cancelled)
        progress(out.planned, out.planned);
    out.ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    return out;
}

} // namespace engine
