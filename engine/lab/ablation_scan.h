// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// Ranking every head by what turning it off does to the next-token prediction of a prompt: one
// forward pass per head with that head ablated; KL(base ‖ ablated) of the last position and the
// change of a chosen token's logit (the base run's most likely token unless named).

#include "lab/ablation.h"

namespace engine {

struct HeadEffect {
    uint32_t layer = 0, head = 0;
    double kl = 0.0;           // KL(base ‖ ablated), nats
    double logit_change = 0.0; // ablated − base logit of the chosen token
};

struct AblationScan {
    TokenId token = 0; // whose logit change is reported
    double base_logit = 0.0;
    std::vector<HeadEffect> heads; // every head scanned, in layer order (sort as you like)
    uint32_t runs = 0;
    bool cancelled = false;
    double ms = 0.0;
};

AblationScan scan_head_ablations(Backend& backend, std::span<const TokenId> tokens, AblationMode mode,
                                 std::span<const TokenId> reference = {}, std::optional<TokenId> token = {},
                                 const LabProgress& progress = {});

} // namespace engine
