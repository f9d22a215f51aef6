// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "kv/kv_cache.h"
#include "sampling/sampler.h"
#include "sampling/stop_condition.h"
#include "session/session.h"

#include <atomic>
#include <functional>
#include <string>
#include <vector>

namespace engine {

// What one generation did, for the timeline and KV panels and for `trace --json`.
struct StepTrace {
    uint32_t step = 0;
    TokenId token = 0;
    float probability = 0.0f;
    double ms = 0.0;                 // decode time of this step (the forward pass of the token before)
    std::vector<Candidate> top;      // top candidates of the final distribution
    KvAccounting kv;                 // after the step
};

struct GenerationTrace {
    uint32_t prompt_tokens = 0;
    PrefillReport prefill;
    double tokenize_ms = 0.0;
    double detokenize_ms = 0.0;
    double ttft_ms = 0.0;            // prompt submitted → first token sampled
    std::vector<StepTrace> steps;
    StopReason stop = StopReason::None;
    std::string text;                // generated text
    bool cancelled = false;          // the cancel flag ended it (during prefill or between tokens)
    double decode_tokens_per_second() const;
    double prefill_tokens_per_second() const;
};

struct GenerationOptions {
    uint32_t max_tokens = 128;
    std::vector<std::string> stop_strings;
    const std::atomic<bool>* cancel = nullptr; // checked between tokens and between prefill batches
    std::function<void(uint32_t done, uint32_t total)> on_prefill_progress;
    std::size_t top_candidates = 10;           // kept per step in the trace
};

// Text shown as it becomes final (stop strings being formed are held back).
using TextCallback = std::function<void(std::string_view delta)>;

// prompt → tokens → prefill → (sample → append → decode)* until a stop condition.
GenerationTrace generate(Session& session, Sampler& sampler, std::string_view prompt, const GenerationOptions& options,
                         const TextCallback& on_text = {});

std::string_view stop_reason_name(StopReason reason);

} // namespace engine
