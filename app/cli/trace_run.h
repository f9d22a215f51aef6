// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// `trace --run FILE.tsrun`: the run taken as the app's decode stepper takes it (prefill, then one
// step at a time with every sampling stage recorded), written as a saved run that the app opens
// (File → Open run) without the model: the stepper, the KV accounting, the timeline and, when
// asked, the attention of the whole sequence.

#include "backend/backend.h"
#include "sampling/sampler.h"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace engine {
class Model;
class Session;
} // namespace engine

struct TraceRunRequest {
    std::filesystem::path model_path;
    std::string prompt;
    engine::SamplerConfig sampling;
    bool greedy = false;
    uint32_t n_predict = 0;
    std::vector<std::string> stop;
    engine::CaptureRequest attention; // empty: none recorded
    std::filesystem::path out;
};

// Returns the number of steps taken; throws engine::Error.
std::size_t write_trace_run(const std::shared_ptr<const engine::Model>& model, engine::Session& stepper_session,
                            engine::Session& attention_session, const TraceRunRequest& request);
