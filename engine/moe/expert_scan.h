// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// The lab's ablation scan, per expert: for every (layer, expert) of a mixture-of-experts model, the
// prompt's next-token prediction with that expert removed (or its output zeroed) at that layer, as
// KL(base ‖ changed) and the change of the predicted token's logit. An expert no token of the prompt
// chose at a layer changes no bit when removed there (test_moe), so it costs no pass; every other
// pass resumes at its layer from the base run's residual stream.

#include "lab/lab_run.h"
#include "moe/routing.h"

namespace engine {

// One pass over `tokens` appended to the backend's cache with every router captured (and, when asked,
// the last position's weighted expert outputs), with `interventions` at the routers: what the experts
// view, the CLI's `experts` and the scan read.
ForwardResult forward_routed(Backend& backend, std::span<const TokenId> tokens,
                             std::span<const ExpertIntervention> interventions = {}, bool expert_outputs = false);

struct ExpertEffect {
    uint32_t layer = 0, expert = 0;
    uint32_t tokens = 0;       // tokens of the prompt routed to it at that layer (0: not run, no effect)
    double kl = 0.0;           // KL(base ‖ changed) of the last position, nats
    double logit_change = 0.0; // changed − base logit of the base run's most likely token
    bool ran = false;          // its pass ran (false: no token chose it, or the scan stopped first)
};

struct ExpertScan {
    TokenId token = 0;                 // the base run's most likely next token
    std::vector<ExpertEffect> effects; // every (layer, expert), in layer order then expert order
    uint32_t runs = 0, planned = 0;    // passes run, and needed (experts some token chose)
    double estimated_ms = 0.0;         // the plan's estimate, from the base pass's time and each pass's layers
    bool cancelled = false;
    double ms = 0.0;
};

// `mode`: ExpertIntervention::Kind::Remove or ZeroOutput (Force needs a token: not a scan). `planned`
// is called once before the first pass with the passes needed and their estimated time; `progress`
// after each (false stops the scan: the effects so far are kept).
ExpertScan scan_experts(Backend& backend, std::span<const TokenId> tokens, ExpertIntervention::Kind mode,
                        const std::function<void(uint32_t passes, double estimated_ms)>& planned = {},
                        const LabProgress& progress = {});

} // namespace engine
