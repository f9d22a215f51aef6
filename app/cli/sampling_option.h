// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "sampling/sampler.h"

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

// --temp, --top-k, --top-p, --min-p, --repeat-penalty and --seed, shared by the commands that sample
// (generate, trace, chat); the engine validates the values (validate_sampler_config).
void add_sampling_options(CLI::App* cmd, engine::SamplingSettings& a); // max_tokens is the command's -n

// -n, as llama.cpp reads it: at most N tokens; 0: only the prompt is read, nothing is generated;
// -1: no limit (the end of text, or a full context).
void add_n_predict_option(CLI::App* cmd, int32_t& n, const std::string& what);
// The engine's budget for -n (where 0 means no limit); -n 0 is GenerationOptions::prompt_only.
inline uint32_t max_tokens_of(int32_t n)
{
    return n > 0 ? static_cast<uint32_t>(n) : 0;
}
