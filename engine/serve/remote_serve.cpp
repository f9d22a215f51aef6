// SPDX-License-Identifier: GPL-3.0-or-later
#include "serve/remote_serve.h"

#include "util/error.h"

#include <algorithm>
#include <spdlog/fmt/fmt.h>

namespace engine {

void check_remote_workload(std::span<const TextRequest> requests, const RemoteServeLimits& limits)
{
    if (limits.max_concurrent == 0 || limits.max_concurrent > RemoteServeLimits::kMostConcurrent)
        throw Error(fmt::format("{} requests at once: 1 to {} are possible", limits.max_concurrent,
                                RemoteServeLimits::kMostConcurrent));
    if (limits.max_requests == 0 || limits.max_requests > RemoteServeLimits::kMostRequests)
        throw Error(fmt::format("{} requests in a run: 1 to {} are possible", limits.max_requests,
                                RemoteServeLimits::kMostRequests));
    if (requests.empty())
        throw Error("the workload has no request to send");
    if (requests.size() > limits.max_requests)
        throw Error(fmt::format("the workload is {} requests (clients × replies per prompt) and a run on a server "
                                "sends at most {}: lower the clients or raise the limit",
                                requests.size(), limits.max_requests));
}

void summarize_remote_run(RemoteServeResult& run)
{
    std::vector<double> ttft, itl, latency;
    double first = -1, last = 0;
    run.generated_tokens = 0;
    run.finished = run.failed = 0;
    for (std::size_t i = 0; i < run.results.size() && i < run.requests.size(); ++i) {
        const RemoteRequestResult& r = run.results[i];
        if (r.sent_s >= 0)
            first = first < 0 ? r.sent_s : std::min(first, r.sent_s);
        if (!r.done())
            continue;
        last = std::max(last, r.done_s);
        if (!r.error.empty()) {
            ++run.failed;
            continue;
        }
        ++run.finished;
        run.generated_tokens += r.tokens;
        const double arrival = run.requests[i].arrival_s;
        if (r.first_token_s >= 0)
            ttft.push_back(r.first_token_s - arrival);
        for (std::size_t k = 1; k < r.token_s.size(); ++k)
            itl.push_back(r.token_s[k] - r.token_s[k - 1]);
        latency.push_back(r.done_s - arrival);
    }
    run.makespan_s = first >= 0 && last > first ? last - first : 0;
    run.ttft = percentiles(std::move(ttft));
    run.itl = percentiles(std::move(itl));
    run.latency = percentiles(std::move(latency));
}

} // namespace engine
