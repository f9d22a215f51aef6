// SPDX-License-Identifier: GPL-3.0-or-later
#include "bridge/sampler_settings.h"

namespace tokenscope::ui {

engine::SamplerConfig sampler_config(const SamplingSettings& s, bool greedy)
{
    engine::SamplerConfig c;
    c.temperature = s.temperature;
    c.top_k = s.top_k;
    c.top_p = s.top_p;
    c.min_p = s.min_p;
    c.repeat_penalty = s.repeat_penalty;
    c.seed = s.seed;
    c.greedy = greedy;
    return c;
}

} // namespace tokenscope::ui
