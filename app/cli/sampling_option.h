// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "sampling/sampler.h"

#include <CLI/CLI.hpp>
#include <cstdint>

// --temp, --top-k, --top-p, --min-p, --repeat-penalty and --seed, shared by the commands that sample
// (generate, trace, chat); the engine validates the values (validate_sampler_config).
struct SamplingArgs {
    float temperature = 0.8f;
    int32_t top_k = 40;
    float top_p = 0.95f;
    float min_p = 0.05f;
    float repeat_penalty = 1.0f;
    uint64_t seed = 0;
};

void add_sampling_options(CLI::App* cmd, SamplingArgs& a);
engine::SamplerConfig sampler_config(const SamplingArgs& a);
