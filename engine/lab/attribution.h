// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// Direct logit attribution: the final residual stream at the last position is a sum of what the
// embedding and every block wrote into it. With the final norm's scale frozen at its value for this
// input, the logit is linear in that sum, so each writer's share of a token's logit (or of a logit
// difference) is its vector's dot product with the token's unembedding direction. The parts are
// exact where the arithmetic is linear; the rest is said by name:
//  - "attention, other" per layer: the layer's attention output minus its heads' float shares
//    (the 8-bit rounding of the output projection's input, its bias, and a post-norm's scale taken
//    from the heads' float sum), so that a layer's attention parts add up to its real output;
//  - "output head (quantized)": the real logit minus the float dot product of the final residual
//    with the token's output row (the output head rounds its input to 8 bits, as llama.cpp's);
//  - "final soft-cap": for models whose logits are soft-capped.

#include "lab/lab_run.h"

#include <optional>
#include <string>

namespace engine {

struct AttributionPart {
    // Expert: one chosen expert's weighted output at a mixture-of-experts layer (its Mlp part then
    // holds the rest of the layer's block: a shared expert and the float rounding of the sum).
    enum class Kind : uint8_t { Embedding, Head, AttentionOther, Mlp, OutputHead, SoftCap, Expert };
    Kind kind = Kind::Embedding;
    std::string name;
    int32_t layer = -1; // -1: not a layer's
    int32_t head = -1;  // Head only; Expert: the expert's id
    double value = 0.0;
};

struct Attribution {
    TokenId token = 0;
    std::optional<TokenId> versus; // attributing logit(token) − logit(versus)
    double logit = 0.0;            // the real logit (or difference) the parts add up to
    double final_norm_scale = 0.0; // 1 / rms of the final residual, frozen
    std::vector<AttributionPart> parts;
    // The unembedding direction d (n_embd): a vector v written into the final residual moves the
    // attributed logit by d · v (the final norm's weight and frozen scale folded in).
    std::vector<double> direction;
    uint32_t position = 0; // the attributed position (the prompt's last)
};

// Attributes the last position's logit of `token` (minus that of `versus`) over `tokens`.
Attribution attribute_logit(Backend& backend, std::span<const TokenId> tokens, TokenId token,
                            std::optional<TokenId> versus = std::nullopt);

// The sum of the parts, in the order given.
double sum_of_parts(const Attribution& a);

} // namespace engine
