// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// The serving lab's part of a saved run ("serving"): the workload's settings and each batching mode's
// run — its options, summary, every request (prompt and reply ids, times, preemptions), every step
// (the requests in its pass, its events) and the block pool after the last step. Written and parsed
// here (run_document_*.cpp call these for the "serving" key); run_validate.cpp checks it against
// ServingLimits with the rules every part shares.
#include "serve/serve_run.h"
#include "serve/workload.h"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace engine::run {

class Fields; // run_json.h (not included here: run_validate.cpp has a refuse() of its own)

struct ServingDoc {
    std::string model, backend;
    bool cancelled = false;
    WorkloadSpec workload;
    std::vector<ServeRunResult> runs;
};

struct ServingLimits {
    static constexpr int64_t kRuns = 8;                         // batching modes of one saved lab run
    static constexpr int64_t kRequests = 65536;                 // requests of one run (replies included)
    static constexpr int64_t kSteps = int64_t(1) << 20;         // passes of one run
    static constexpr int64_t kSlices = int64_t(1) << 24;        // requests-in-a-pass over all passes
    static constexpr int64_t kEvents = int64_t(1) << 24;        // events over all passes
    static constexpr int64_t kBlocks = int64_t(1) << 20;        // blocks of the pool
    static constexpr int64_t kTokens = int64_t(1) << 26;        // prompt and reply ids over all runs
    static constexpr int64_t kRequestTokens = int64_t(1) << 17; // one request's prompt or reply
};

nlohmann::ordered_json serving_json(const ServingDoc& doc);
// Types and shapes (FormatError naming the field).
ServingDoc serving_from(const Fields& o);

} // namespace engine::run
