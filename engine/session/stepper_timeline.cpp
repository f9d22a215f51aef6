// SPDX-License-Identifier: GPL-3.0-or-later
#include "session/stepper_timeline.h"

#include "model/forward_cost.h"
#include "session/stepper.h"

namespace engine {

StepperTimeline stepper_timeline(const Model& model, const Stepper& stepper, double tokenize_ms)
{
    StepperTimeline t;
    const PrefillReport& p = stepper.prefill_report();
    const ForwardCost prefill_cost = forward_cost(model, p.computed, p.reused);
    t.prefill_flops = prefill_cost.flops;
    t.prefill_bytes = prefill_cost.weight_bytes + prefill_cost.kv_bytes_read;
    int64_t clock = 0;
    const auto add = [&](TimelineStage stage, int32_t step, double ms) {
        const auto ns = int64_t(ms * 1e6);
        t.events.push_back({stage, step, clock, clock + ns});
        clock += ns;
    };
    add(TimelineStage::Tokenize, -1, tokenize_ms);
    add(TimelineStage::Prefill, -1, p.ms);
    const auto& steps = stepper.steps();
    for (std::size_t i = 0; i < steps.size(); ++i) {
        const StepRecord& r = steps[i];
        StepperTimelineStep s;
        s.token = r.token;
        s.sample_ms = r.sample_ms;
        // Token i was drawn from the logits of the pass before it: the prefill for token 0, else
        // the previous step's forward pass.
        s.forward_ms = i == 0 ? 0.0 : steps[i - 1].ms;
        if (i > 0)
            add(TimelineStage::Decode, int32_t(i), s.forward_ms);
        add(TimelineStage::Sample, int32_t(i), s.sample_ms);
        const ForwardCost c = forward_cost(model, 1, r.position > 0 ? r.position - 1 : 0);
        s.flops = i == 0 ? 0.0 : c.flops;
        s.bytes_read = i == 0 ? 0.0 : c.weight_bytes + c.kv_bytes_read;
        s.latency_ms = i == 0 ? tokenize_ms + p.ms + s.sample_ms : s.forward_ms + s.sample_ms;
        t.steps.push_back(s);
    }
    t.ttft_ms = t.steps.empty() ? 0.0 : t.steps.front().latency_ms;
    return t;
}

} // namespace engine
