// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "sampling/sampling_settings.h"

#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace engine {

// The sampling stage of the decode loop. The stages run in the order of llama.cpp's default
// common sampler chain (common/common.h, common_params_sampling::samplers, built by
// common_sampler_init in common/sampling.cpp), restricted to the stages we implement:
//
//     penalties → top-k → top-p → min-p → temperature → dist
//
// (llama.cpp also has DRY, top-n-sigma, typical-p and XTC between them; all are off by default.)
// Filters therefore see the untempered logits, and temperature only reshapes the survivors.
// The user's settings (max_tokens is not read here) and what only the sampler needs.
struct SamplerConfig : SamplingSettings {
    int32_t repeat_last_n = 64; // history tokens the penalty looks at; 0 = off, < 0 = all of it
    bool greedy = false;
    // Candidates kept in each StageView for the UI; 0 records no stages at all, which also skips
    // the full-vocabulary softmaxes that only the views need.
    std::size_t stage_view_size = 20;
};

struct Candidate {
    int32_t id = 0;
    float logit = 0.0f;       // the logit as this stage leaves it (penalised, scaled, …)
    float probability = 0.0f; // softmax of those logits over this stage's survivors
};

// The distribution after one stage, for the decode stepper.
struct StageView {
    std::string name;           // "logits", "repetition penalty", "top-k", "top-p", "min-p", "temperature", "final"
    std::vector<Candidate> top; // the best survivors, by probability desc (ties: lowest id first)
    std::size_t survivors = 0;
    // False when the configuration switches this stage off (or greedy skips it): the view then
    // repeats the previous one, so the stepper always has the same seven stages to show.
    bool applied = true;
};

struct SampleResult {
    int32_t token = -1;       // -1 only for an empty logits span
    float probability = 0.0f; // of the chosen token in the final distribution (1 when greedy)
    std::vector<StageView> stages;
};

// Uniform double in [0, 1) from the top 53 bits of one draw. Our own conversion, because
// std::uniform_real_distribution's algorithm differs between standard libraries and
// std::mt19937_64's output is fixed by the standard: the same seed samples the same tokens on
// every platform.
double uniform_unit(std::mt19937_64& rng);

// The valid ranges, checked where settings enter (CLI, GUI, stepper) by validate_sampler_config:
// an Error names the setting, the value and the range. A temperature below the minimum would divide
// logits into infinities (sampling uniformly), so it is refused rather than silently greedy.
inline constexpr float kMinTemperature = 0.001f;
inline constexpr float kMaxTemperature = 100.0f;
inline constexpr float kMaxRepeatPenalty = 100.0f;
void validate_sampler_config(const SamplerConfig& config);

// The sampler's configuration for these settings (greedy: always the most likely token).
SamplerConfig sampler_config(const SamplingSettings& settings, bool greedy = false);

class Sampler {
public:
    explicit Sampler(SamplerConfig config = {});

    // logits: (n_vocab) raw logits of the next token; history: the tokens so far (prompt and
    // generated), read for the repetition penalty. NaN logits count as -inf. Each non-greedy call
    // takes exactly one draw from the RNG, so a sequence depends only on the seed and the logits.
    SampleResult sample(std::span<const float> logits, std::span<const int32_t> history);
    void reseed(uint64_t seed);
    // The distribution sample() draws from for these logits: every survivor of the filters with its
    // probability after temperature (summing to 1), by probability desc (ties: lowest id first);
    // greedy: the argmax alone at 1. No draw is taken. Speculative sampling's p and q.
    std::vector<Candidate> distribution(std::span<const float> logits, std::span<const int32_t> history);
    // The generator sample() draws from, for the draws around it that must share its seed (speculative
    // sampling's acceptance tests and residual draws).
    std::mt19937_64& rng() { return m_rng; }

    const SamplerConfig& config() const { return m_config; }

private:
    SamplerConfig m_config;
    std::mt19937_64 m_rng;
    // Working buffers, reused between calls. The full vocabulary is copied only when top-k is off; otherwise one pass
    // over the caller's logits finds the few best and the penalty is laid over them.
    std::vector<int32_t> m_penalised_ids; // (n_penalised) distinct ids of the penalty window, ascending
    std::vector<Candidate> m_penalised;   // (n_penalised) those tokens with penalised logits, best first
    std::vector<Candidate> m_raw_best;    // (needed + n_penalised) best raw logits, best first
    std::vector<Candidate> m_cands;       // (survivors) what the filters still keep
};

} // namespace engine
