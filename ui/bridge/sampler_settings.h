// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/engine_types.h"
#include "remote/remote_protocol.h"
#include "sampling/sampler.h"

namespace tokenscope::ui {

// The engine's sampler configuration for the UI's settings (chat and stepper alike).
engine::SamplerConfig sampler_config(const SamplingSettings& settings, bool greedy = false);
// The same settings as a server request's (temperature 0 when greedy).
engine::remote::SamplingRequest sampling_request(const SamplingSettings& settings, bool greedy = false);

} // namespace tokenscope::ui
