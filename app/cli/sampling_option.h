// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "sampling/sampler.h"

#include <CLI/CLI.hpp>
#include <cstdint>

// --temp, --top-k, --top-p, --min-p, --repeat-penalty and --seed, shared by the commands that sample
// (generate, trace, chat); the engine validates the values (validate_sampler_config).
void add_sampling_options(CLI::App* cmd, engine::SamplingSettings& a); // max_tokens is the command's -n
