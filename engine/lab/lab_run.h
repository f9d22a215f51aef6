// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// The interpretability lab's unit of work: a whole prompt evaluated from an empty cache in one
// batch, so that every run of an experiment sums in the same order and differences between runs
// come from the interventions alone.

#include "backend/backend.h"

#include <functional>
#include <span>
#include <string_view>
#include <vector>

namespace engine {

class Tokenizer;

struct LabRun {
    std::vector<float> logits;                 // [n_vocab] of the last position (soft-capped, as sampled)
    std::shared_ptr<ForwardCaptures> captures; // what `capture` asked for
};
// Clears the backend's cache and evaluates `tokens` at positions 0 … with `interventions`.
LabRun run_fresh(Backend& backend, std::span<const TokenId> tokens, const CaptureRequest* capture = nullptr,
                 std::span<const Intervention> interventions = {});

// Called with (runs done, runs in all); returning false stops the experiment.
using LabProgress = std::function<bool(uint32_t done, uint32_t total)>;

// The one token a user means by `text` ("Paris", " Paris" or "#123" for an id). Throws Error
// naming the pieces when the text is more (or less) than one token.
TokenId single_token(const Tokenizer& tokenizer, std::string_view text);

// log Σ exp(logits), in double.
double log_sum_exp(std::span<const float> logits);
// KL(p ‖ q) of the softmaxes of two logit rows, in nats (≥ 0).
double kl_divergence(std::span<const float> p_logits, std::span<const float> q_logits);

} // namespace engine
