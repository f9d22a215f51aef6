// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// A whole serving run: a workload through a ServingEngine to the last token on the run's clock — the
// passes' measured time, with idle gaps until the next arrival skipped (so a run's numbers are the
// engine's, not the waiting's) — and what it measured: throughput, time to first token and
// inter-token latency percentiles, preemptions, prefix-cache hits. Exported as JSON and CSV.
#include "serve/serving_engine.h"

#include <atomic>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace engine {

struct Percentiles {
    double p50 = 0, p90 = 0, p99 = 0, max = 0;
    std::size_t count = 0;
};
// Nearest-rank percentiles of `values` (all zero when empty).
Percentiles percentiles(std::vector<double> values);

struct ServeRunResult {
    ServingOptions options;
    std::vector<RequestState> requests;
    std::vector<ServeStep> steps;
    PoolSnapshot pool; // after the last step
    bool cancelled = false;
    double makespan_s = 0;         // first arrival to last token (the run's clock)
    double busy_s = 0;             // time in passes
    uint64_t prompt_tokens = 0;    // asked for
    uint64_t generated_tokens = 0; // sampled
    uint64_t computed_tokens = 0;  // evaluated by passes (recomputation included)
    uint64_t reused_tokens = 0;    // taken from the prefix cache
    uint32_t preemptions = 0, swaps = 0, max_batch_sequences = 0, max_batch_tokens = 0;
    Percentiles ttft, itl, latency; // seconds: arrival → first token, between tokens, arrival → last token
    double generated_per_s() const { return makespan_s > 0 ? double(generated_tokens) / makespan_s : 0; }
    double computed_per_s() const { return busy_s > 0 ? double(computed_tokens) / busy_s : 0; }
};

// Called after every step with the engine (its requests and pool as they are now) and the step.
using ServeProgress = std::function<void(const ServingEngine& engine, const ServeStep& step)>;

// Runs `requests` to the end, or until `cancel` is set (the result says so; what finished is kept).
ServeRunResult run_serving(Backend& backend, const ServingOptions& options, std::span<const ServeRequest> requests,
                           const std::atomic<bool>* cancel = nullptr, const ServeProgress& progress = {});

struct RemoteServeResult;

// JSON of runs (one per batching mode): options, summary, each request's tokens, TTFT and finish reason;
// with `server`, the same workload's run on a server last (mode "server": its limits, summary, each
// request's times and how it ended, what /metrics said).
std::string serve_runs_json(std::span<const ServeRunResult> runs, const RemoteServeResult* server = nullptr);
// CSV, one row per request and run (a server's requests as mode "server", without the engine's counts).
std::string serve_runs_csv(std::span<const ServeRunResult> runs, const RemoteServeResult* server = nullptr);

} // namespace engine
