// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/engine_types.h"
#include "sampling/sampler.h"

namespace tokenscope::ui {

// The engine's sampler configuration for the UI's settings (chat and stepper alike).
engine::SamplerConfig sampler_config(const SamplingSettings& settings, bool greedy = false);

} // namespace tokenscope::ui
