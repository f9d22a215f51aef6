// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "sampling/sampler.h"
#include "sampling/stop_condition.h"
#include "session/session.h"

#include <optional>
#include <span>
#include <string>
#include <vector>

namespace engine {

// One decode step the stepper took: a token chosen from the distribution the previous forward
// pass left, appended, and evaluated.
struct StepRecord {
    uint32_t position = 0; // where the token went in the sequence
    TokenId token = 0;
    bool forced = false;      // picked by the user, not drawn
    float probability = 0.0f; // in the final distribution it came from (0 when a forced token was outside it)
    uint32_t reused = 0;      // K/V pairs per layer read from the cache (global layers; local ones see their window)
    uint32_t computed = 1;    // K/V pairs per layer written by this step
    double ms = 0.0;          // the forward pass of the token
    double sample_ms = 0.0;   // drawing it (all sampling stages)
};

// A continuation given up by stepping back and then choosing a different token.
struct StepperBranch {
    uint32_t position = 0;          // where the paths part
    std::vector<TokenId> abandoned; // the tokens that were there, first to last
};

// What the model would predict after one layer: the final norm and output head applied to that
// layer's residual stream at the last position.
struct LensRow {
    uint32_t layer = 0;
    std::vector<Candidate> top; // softmax over the whole vocabulary, best first
};

// The decode loop taken apart for the stepper panel: prefill once, then one token per call,
// with forcing, undo (the KV cache is truncated and the last position recomputed), branches and
// the logit lens. Sampling draws from an RNG seeded by (seed, position), so stepping back and
// stepping again with the same settings draws the same token. Owned by the engine thread.
class Stepper {
public:
    explicit Stepper(Session& session);

    // Makes the sequence exactly `prompt` (a cached prefix is reused) and forgets earlier steps.
    PrefillReport start(std::span<const TokenId> prompt, StopCondition stop, const PrefillProgress& progress = {});
    bool started() const { return m_prompt_length > 0; }

    // What step() with this configuration would draw, with every sampling stage's view.
    SampleResult preview(const SamplerConfig& config) const;
    // The same draw from a copy of the logits and history (the UI previews settings with it): the
    // RNG is seeded by (config.seed, history.size()).
    static SampleResult sample_at(std::span<const float> logits, std::span<const TokenId> history,
                                  const SamplerConfig& config);
    // Takes one step: `forced`, or a draw with `config`. Throws Error when the context is full.
    const StepRecord& step(const SamplerConfig& config, std::optional<TokenId> forced = {});
    // Undoes the last step; false when only the prompt is left.
    bool back();

    std::vector<LensRow> logit_lens(std::size_t top_n);
    // Attention heads to capture on the following passes (the residuals for the lens are always
    // captured); read them with session().last_captures() after each call.
    void set_attention_capture(const CaptureRequest& heads);

    uint32_t prompt_length() const { return m_prompt_length; }
    const std::vector<StepRecord>& steps() const { return m_steps; }
    const std::vector<StepperBranch>& branches() const { return m_branches; }
    StopReason stop_reason() const { return m_stop_reason; }
    std::string generated_text() const;
    const PrefillReport& prefill_report() const { return m_prefill; }
    Session& session() { return m_session; }
    const Session& session() const { return m_session; }

private:
    std::vector<TokenId> generated_ids() const;
    void keep_last_residuals();

    Session& m_session;
    uint32_t m_prompt_length = 0;
    StopCondition m_stop{{}, 0, {}};
    StopReason m_stop_reason = StopReason::None;
    PrefillReport m_prefill;
    std::vector<StepRecord> m_steps;
    std::vector<TokenId> m_undone; // tokens stepped back over, most recent last
    std::vector<StepperBranch> m_branches;
    std::vector<std::vector<float>> m_residuals; // per layer: the last position's residual stream
    CaptureRequest m_capture;
};

} // namespace engine
