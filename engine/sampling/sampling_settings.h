// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <cstdint>

namespace engine {

// How the next token is drawn and how many are generated: what a user picks. The chat, the stepper,
// the CLI and a request to a server all carry this one struct; the sampler's own configuration
// (SamplerConfig) and a server request (remote::SamplingRequest) are built on it.
struct SamplingSettings {
    float temperature = 0.8f;    // <= 0 means greedy
    int32_t top_k = 40;          // <= 0 means off
    float top_p = 0.95f;         // >= 1 means off
    float min_p = 0.05f;         // <= 0 means off
    float repeat_penalty = 1.0f; // == 1 means off
    uint64_t seed = 0;
    int32_t max_tokens = 256; // the reply's length (the generation's, not the sampler's business)
};

} // namespace engine
