// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// The serving lab's workload sent to a server (llama-server, vLLM, SGLang…): what one run asked and
// what came back — each request's times on the run's clock (seconds from its start), the tokens it
// streamed and how it ended — and what the server reported of itself meanwhile (/metrics: requests
// running and waiting, cache usage). The sending itself is the app's network client's
// (ui/bridge/serving_remote.*); this holds the plan, the limits and the figures.

#include "serve/serve_run.h"
#include "serve/workload.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace engine {

// A run on someone's server only goes as far as these allow (the panel asks before it starts).
struct RemoteServeLimits {
    uint32_t max_concurrent = 16; // requests in flight at once
    uint32_t max_requests = 200;  // requests in one run
    static constexpr uint32_t kMostConcurrent = 64, kMostRequests = 1000;
};

// Throws Error naming the limit a workload of these requests would pass (or limits out of range).
void check_remote_workload(std::span<const TextRequest> requests, const RemoteServeLimits& limits);

struct RemoteRequestResult {
    double sent_s = -1, first_token_s = -1, done_s = -1; // -1: not (yet)
    std::vector<double> token_s;                         // each streamed chunk's arrival
    uint32_t tokens = 0;                                 // the server's count when it gives one, else chunks
    std::string finish_reason;                           // as the server said ("stop", "length", …)
    std::string error;                                   // why it failed or was cut off (empty: it finished)
    bool done() const { return done_s >= 0; }
};

struct MetricsSample {
    double t_s = 0;
    std::optional<double> running, waiting, kv_cache_usage; // what the server reported (cache: 0 … 1)
};

struct RemoteServeResult {
    std::string server; // "llama.cpp (llama-server) at http://…"
    RemoteServeLimits limits;
    std::vector<TextRequest> requests; // the plan
    std::vector<RemoteRequestResult> results;
    std::vector<MetricsSample> metrics;
    uint32_t in_flight = 0, max_in_flight = 0;
    bool cancelled = false;
    // summarize_remote_run:
    double makespan_s = 0; // first send to last answer
    uint64_t generated_tokens = 0;
    uint32_t finished = 0, failed = 0;
    Percentiles ttft, itl, latency; // seconds: arrival → first token, between chunks, arrival → end
    double generated_per_s() const { return makespan_s > 0 ? double(generated_tokens) / makespan_s : 0; }
};

// Fills the totals and percentiles from the requests that have ended.
void summarize_remote_run(RemoteServeResult& run);

} // namespace engine
