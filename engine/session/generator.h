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

// One stretch of a generation's wall-clock time. The events of a trace are contiguous: each begins
// where the one before ended (the few instructions between two stages count to the earlier one), so
// durations add up exactly to the times they span.
// Draft and Verify: speculative decoding's passes (the drafter's, the target's check of a draft).
enum class TimelineStage { Tokenize, Prefill, Decode, Sample, Detokenize, Draft, Verify };
struct TimelineEvent {
    TimelineStage stage = TimelineStage::Tokenize;
    int32_t step = -1;    // the generated token it belongs to (-1: tokenize and prefill)
    int64_t begin_ns = 0; // since the generation started
    int64_t end_ns = 0;
    double ms() const { return double(end_ns - begin_ns) / 1e6; }
};
std::string_view timeline_stage_name(TimelineStage stage);

// What one generation did, for the timeline and KV panels and for `trace --json`. Token 0 is
// sampled from the prefill's logits; decode step k forwards token k−1 and token k is sampled from
// its logits.
struct StepTrace {
    uint32_t step = 0;
    TokenId token = 0;
    float probability = 0.0f;
    double ms = 0.0; // the forward pass that produced this token's logits (0 for token 0: the prefill)
    double sample_ms = 0.0;
    double detokenize_ms = 0.0; // piece, stop check and text delivery
    double latency_ms = 0.0;    // token 0: TTFT; then the inter-token latency (forward + sample + detokenize)
    std::vector<Candidate> top; // top candidates of the final distribution
    KvAccounting kv;            // after the step
};

struct GenerationTrace {
    uint32_t prompt_tokens = 0;
    std::vector<TokenId> prompt_ids; // the prompt as the model received it (BOS included where added)
    PrefillReport prefill;
    double tokenize_ms = 0.0;
    double detokenize_ms = 0.0;
    double ttft_ms = 0.0; // prompt submitted → first token's text delivered (tokenize + prefill + sample + detokenize)
    std::vector<TimelineEvent> events; // contiguous, in order
    std::vector<StepTrace> steps;
    StopReason stop = StopReason::None;
    std::string text;       // generated text
    bool cancelled = false; // the cancel flag ended it (during prefill or between tokens)
    double decode_tokens_per_second() const;
    double prefill_tokens_per_second() const;
};

struct GenerationOptions {
    uint32_t max_tokens = 128;
    std::vector<std::string> stop_strings;
    const std::atomic<bool>* cancel = nullptr; // checked between tokens and between prefill batches
    std::function<void(uint32_t done, uint32_t total)> on_prefill_progress;
    std::size_t top_candidates = 10; // kept per step in the trace
    // Captures taken on every pass (prefill batches and decode steps); read them with
    // session.last_captures() from on_prefill_progress and on_step.
    const CaptureRequest* capture = nullptr;
    // After each token, with the step as traced so far (live KV gauges and timeline).
    std::function<void(const StepTrace& step, const GenerationTrace& trace)> on_step;
    // The prompt's tokens when the caller has them already (a chat prompt is tokenized once, while it
    // is built): the text is then not tokenized again and the trace's tokenize stage is empty.
    const std::vector<TokenId>* prompt_ids = nullptr;
    // Only the prompt is evaluated, nothing is generated (llama.cpp's -n 0).
    bool prompt_only = false;
};

// Text shown as it becomes final (stop strings being formed are held back).
using TextCallback = std::function<void(std::string_view delta)>;

// prompt → tokens → prefill → (sample → append → decode)* until a stop condition.
GenerationTrace generate(Session& session, Sampler& sampler, std::string_view prompt, const GenerationOptions& options,
                         const TextCallback& on_text = {});

std::string_view stop_reason_name(StopReason reason);

} // namespace engine
