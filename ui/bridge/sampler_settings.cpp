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

engine::remote::SamplingRequest sampling_request(const SamplingSettings& sampling, bool greedy)
{
    engine::remote::SamplingRequest s;
    s.temperature = greedy ? 0.0 : sampling.temperature;
    s.top_k = sampling.top_k;
    s.top_p = sampling.top_p;
    s.min_p = sampling.min_p;
    s.repeat_penalty = sampling.repeat_penalty;
    s.seed = static_cast<int64_t>(sampling.seed);
    s.max_tokens = sampling.max_tokens;
    return s;
}

} // namespace tokenscope::ui
