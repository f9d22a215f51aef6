// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// The speculation view's part of a saved run ("speculation"): what was compared (prompt, draft source,
// k, sampling), the speculative run step by step — the token that opened each step, the draft, every
// examined drafted token's verdict with both probabilities — and the plain loop's tokens and times
// beside it. Written and parsed here; run_validate.cpp checks it (the steps must rebuild the tokens).
#include "speculative/speculative.h"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace engine::run {

class Fields;

struct SpeculationDoc {
    std::string model, drafter, source, backend;
    bool deterministic = false, cancelled = false;
    uint32_t draft_max = 1;
    float temperature = 0.0f;
    uint64_t seed = 0;
    std::string prompt_text;
    std::vector<TokenId> prompt;
    SpeculativeResult result; // tokens, steps (drafted/accepted/passes follow from the steps)
    std::vector<TokenId> plain_tokens;
    double speculative_s = 0, plain_s = 0;
    int32_t parted = -1;
    // where they part: each run's chosen token and its two best logits there
    TokenChoice parted_speculative, parted_plain;
};

struct SpeculationLimits {
    static constexpr int64_t kTokens = 1 << 16; // generated tokens (and the plain loop's)
    static constexpr int64_t kPrompt = 1 << 17; // prompt tokens
    static constexpr int64_t kDraftMax = 64;    // drafted tokens per step
    static constexpr int64_t kTextBytes = 1 << 22;
};

nlohmann::ordered_json speculation_json(const SpeculationDoc& doc);
// Types and shapes (FormatError naming the field).
SpeculationDoc speculation_from(const Fields& o);

} // namespace engine::run
