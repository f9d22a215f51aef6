// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// The decode stepper's run as a timeline: the measured stages end to end, the time the stepper
// waited between steps left out. The app's timeline panel and `tokenscope-cli trace --run` both
// draw it from here.

#include "session/generator.h"

#include <vector>

namespace engine {

class Model;
class Stepper;

struct StepperTimelineStep {
    TokenId token = 0;
    double forward_ms = 0.0; // the pass whose logits it was drawn from (0 for the prefill's token)
    double sample_ms = 0.0;
    double latency_ms = 0.0; // TTFT for step 0, then the inter-token latency
    double flops = 0.0;      // of that forward pass
    double bytes_read = 0.0; // weights + KV it read
};

struct StepperTimeline {
    std::vector<TimelineEvent> events;
    std::vector<StepperTimelineStep> steps;
    double prefill_flops = 0.0, prefill_bytes = 0.0;
    double ttft_ms = 0.0;
};

StepperTimeline stepper_timeline(const Model& model, const Stepper& stepper, double tokenize_ms);

} // namespace engine
