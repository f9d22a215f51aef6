// SPDX-License-Identifier: GPL-3.0-or-later
#include "lab/ablation_scan.h"

#include "model/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace engine {

AblationScan scan_head_ablations(Backend& backend, std::span<const TokenId> tokens, AblationMode mode,
                                 std::span<const TokenId> reference, std::optional<TokenId> token,
                                 const LabProgress& progress)
{
    const auto t0 = std::chrono::steady_clock::now();
    const ModelConfig& c = backend.model().config();
    // The base run's residual stream: each ablated run resumes at its head's layer from it (the
    // layers below compute those bits again).
    CaptureRequest residuals;
    residuals.residuals = true;
    const LabRun base = run_fresh(backend, tokens, &residuals);
    AblationScan out;
    out.token = token.value_or(TokenId(std::max_element(base.logits.begin(), base.logits.end()) - base.logits.begin()));
    out.base_logit = base.logits[std::size_t(out.token)];
    std::vector<HeadRef> all;
    for (uint32_t il = 0; il < c.n_layer; ++il)
        for (uint32_t h = 0; h < c.n_head[il]; ++h)
            all.push_back({il, h});
    // every head's ablation values at once (one reference pass)
    const std::vector<Intervention> ivs = head_ablations(backend, all, mode, uint32_t(tokens.size()), reference);
    const auto total = uint32_t(all.size());
    for (uint32_t i = 0; i < total; ++i) {
        if (progress && !progress(i, total)) {
            out.cancelled = true;
            break;
        }
        ForwardRequest run;
        run.tokens = tokens;
        run.interventions = std::span(&ivs[i], 1);
        run.start_layer = all[i].layer;
        if (all[i].layer > 0)
            run.start_residual = base.captures->residuals[all[i].layer - 1];
        backend.kv_cache().clear();
        const ForwardResult r = backend.forward(run);
        backend.kv_cache().clear();
        out.heads.push_back({all[i].layer, all[i].head, kl_divergence(base.logits, r.logits),
                             double(r.logits[std::size_t(out.token)]) - out.base_logit});
        ++out.runs;
    }
    if (progress && !out.cancelled)
        progress(total, total);
    out.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

} // namespace engine
