// SPDX-License-Identifier: GPL-3.0-or-later
#include "serve/serve_run.h"

#include "serve/remote_serve.h"

#include "util/error.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <spdlog/fmt/fmt.h>

namespace engine {

Percentiles percentiles(std::vector<double> v)
{
    Percentiles p;
    p.count = v.size();
    if (v.empty())
        return p;
    std::sort(v.begin(), v.end());
    const auto rank = [&](double q) {
        const auto i = std::size_t(std::ceil(q * double(v.size())));
        return v[std::clamp<std::size_t>(i, 1, v.size()) - 1];
    };
    p.p50 = rank(0.50);
    p.p90 = rank(0.90);
    p.p99 = rank(0.99);
    p.max = v.back();
    return p;
}

ServeRunResult run_serving(Backend& backend, const ServingOptions& options, std::span<const ServeRequest> requests,
                           const std::atomic<bool>* cancel, const ServeProgress& progress)
{
    ServingEngine engine(backend, options);
    for (const ServeRequest& r : requests)
        engine.submit(r);
    ServeRunResult result;
    result.options = engine.options();
    double now = requests.empty() ? 0.0 : requests.front().arrival_s;
    for (const ServeRequest& r : requests)
        now = std::min(now, r.arrival_s);
    const double start = now;
    int idle_steps = 0; // steps that ran no pass: a schedule that never makes progress is an error, not a hang
    while (!engine.done()) {
        if (cancel && cancel->load()) {
            result.cancelled = true;
            break;
        }
        if (std::optional<ServeStep> step = engine.step(now)) {
            idle_steps = step->slices.empty() ? idle_steps + 1 : 0;
            if (idle_steps > 1000)
                throw Error("the serving engine made no progress for 1,000 steps: the pool cannot hold what the "
                            "running requests need (raise the pool)");
            now = step->end_s;
            result.busy_s += step->end_s - step->start_s;
            result.max_batch_sequences = std::max(result.max_batch_sequences, uint32_t(step->slices.size()));
            result.max_batch_tokens = std::max(result.max_batch_tokens, step->tokens);
            if (progress)
                progress(engine, *step);
            result.steps.push_back(std::move(*step));
        } else if (std::optional<double> next = engine.next_arrival(now)) {
            now = *next; // idle until the next client sends
        } else {
            throw std::logic_error("the serving engine neither runs nor waits for anything");
        }
    }
    result.makespan_s = now - start;
    result.requests = engine.requests();
    result.pool = engine.pool_snapshot();
    std::vector<double> ttft, itl, latency;
    for (const RequestState& r : result.requests) {
        if (!r.parent)
            result.prompt_tokens += r.request.prompt.size();
        result.generated_tokens += r.output.size();
        result.computed_tokens += r.computed_tokens;
        result.reused_tokens += r.reused_tokens;
        result.preemptions += r.preemptions;
        result.swaps += r.swaps;
        if (r.first_token_s >= 0)
            ttft.push_back(r.first_token_s - r.request.arrival_s);
        for (std::size_t i = 1; i < r.token_times.size(); ++i)
            itl.push_back(r.token_times[i] - r.token_times[i - 1]);
        if (r.finish_s >= 0)
            latency.push_back(r.finish_s - r.request.arrival_s);
    }
    result.ttft = percentiles(ttft);
    result.itl = percentiles(itl);
    result.latency = percentiles(latency);
    return result;
}

namespace {

nlohmann::json percentiles_json(const Percentiles& p)
{
    return {{"p50_ms", p.p50 * 1e3},
            {"p90_ms", p.p90 * 1e3},
            {"p99_ms", p.p99 * 1e3},
            {"max_ms", p.max * 1e3},
            {"count", p.count}};
}

} // namespace

std::string serve_runs_json(std::span<const ServeRunResult> runs, const RemoteServeResult* server)
{
    nlohmann::json all = nlohmann::json::array();
    for (const ServeRunResult& run : runs) {
        const ServingOptions& o = run.options;
        nlohmann::json j;
        j["mode"] = batching_mode_name(o.mode);
        j["options"] = {{"max_running", o.max_running},
                        {"step_tokens", o.step_tokens},
                        {"pool_blocks", o.pool_blocks},
                        {"block_tokens", o.block_tokens},
                        {"preemption", preemption_name(o.preemption)},
                        {"host_store_bytes", o.host_store_bytes},
                        {"prefix_caching", o.prefix_caching},
                        {"deterministic", o.deterministic}};
        j["cancelled"] = run.cancelled;
        j["summary"] = {{"makespan_s", run.makespan_s},
                        {"busy_s", run.busy_s},
                        {"steps", run.steps.size()},
                        {"prompt_tokens", run.prompt_tokens},
                        {"generated_tokens", run.generated_tokens},
                        {"computed_tokens", run.computed_tokens},
                        {"reused_tokens", run.reused_tokens},
                        {"generated_per_s", run.generated_per_s()},
                        {"computed_per_s", run.computed_per_s()},
                        {"preemptions", run.preemptions},
                        {"swaps", run.swaps},
                        {"max_batch_sequences", run.max_batch_sequences},
                        {"max_batch_tokens", run.max_batch_tokens},
                        {"prefix_hits", run.pool.counters.prefix_hits},
                        {"copy_on_write", run.pool.counters.cow_copies},
                        {"ttft", percentiles_json(run.ttft)},
                        {"inter_token", percentiles_json(run.itl)},
                        {"latency", percentiles_json(run.latency)}};
        nlohmann::json reqs = nlohmann::json::array();
        for (const RequestState& r : run.requests) {
            nlohmann::json q = {{"id", r.id},
                                {"arrival_s", r.request.arrival_s},
                                {"prompt_tokens", r.request.prompt.size()},
                                {"max_new_tokens", r.request.max_new_tokens},
                                {"tokens", r.output},
                                {"reused_tokens", r.reused_tokens},
                                {"computed_tokens", r.computed_tokens},
                                {"preemptions", r.preemptions},
                                {"swaps", r.swaps},
                                {"finish_reason", r.finish_reason}};
            if (r.parent)
                q["parent"] = *r.parent;
            q["ttft_ms"] = r.first_token_s >= 0 ? nlohmann::json((r.first_token_s - r.request.arrival_s) * 1e3)
                                                : nlohmann::json(nullptr);
            q["latency_ms"] =
                r.finish_s >= 0 ? nlohmann::json((r.finish_s - r.request.arrival_s) * 1e3) : nlohmann::json(nullptr);
            reqs.push_back(std::move(q));
        }
        j["requests"] = std::move(reqs);
        all.push_back(std::move(j));
    }
    if (server) {
        const RemoteServeResult& run = *server;
        const auto ms = [](double from, double to) {
            return from >= 0 && to >= 0 ? nlohmann::json((to - from) * 1e3) : nlohmann::json(nullptr);
        };
        nlohmann::json j;
        j["mode"] = "server";
        j["server"] = run.server;
        j["limits"] = {{"max_concurrent", run.limits.max_concurrent}, {"max_requests", run.limits.max_requests}};
        j["cancelled"] = run.cancelled;
        j["summary"] = {{"makespan_s", run.makespan_s},
                        {"generated_tokens", run.generated_tokens},
                        {"generated_per_s", run.generated_per_s()},
                        {"finished", run.finished},
                        {"failed", run.failed},
                        {"max_in_flight", run.max_in_flight},
                        {"ttft", percentiles_json(run.ttft)},
                        {"inter_token", percentiles_json(run.itl)},
                        {"latency", percentiles_json(run.latency)}};
        nlohmann::json reqs = nlohmann::json::array();
        for (std::size_t i = 0; i < run.results.size() && i < run.requests.size(); ++i) {
            const RemoteRequestResult& r = run.results[i];
            const TextRequest& q = run.requests[i];
            reqs.push_back({{"arrival_s", q.arrival_s},
                            {"prompt_words", q.prompt_words},
                            {"max_new_tokens", q.max_new_tokens},
                            {"tokens", r.tokens},
                            {"wait_ms", ms(q.arrival_s, r.sent_s)},
                            {"ttft_ms", ms(q.arrival_s, r.first_token_s)},
                            {"latency_ms", ms(q.arrival_s, r.done_s)},
                            {"finish_reason", r.finish_reason},
                            {"error", r.error}});
        }
        j["requests"] = std::move(reqs);
        nlohmann::json metrics = nlohmann::json::array();
        for (const MetricsSample& m : run.metrics) {
            const auto value = [](const std::optional<double>& v) {
                return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
            };
            metrics.push_back({{"t_s", m.t_s},
                               {"running", value(m.running)},
                               {"waiting", value(m.waiting)},
                               {"kv_cache_usage", value(m.kv_cache_usage)}});
        }
        j["metrics"] = std::move(metrics);
        all.push_back(std::move(j));
    }
    return all.dump(2);
}

std::string serve_runs_csv(std::span<const ServeRunResult> runs, const RemoteServeResult* server)
{
    std::string out = "mode,request,parent,arrival_s,prompt_tokens,output_tokens,reused_tokens,computed_tokens,"
                      "preemptions,swaps,ttft_ms,latency_ms,finish_reason\n";
    for (const ServeRunResult& run : runs)
        for (const RequestState& r : run.requests)
            out += fmt::format(
                "{},{},{},{:.6f},{},{},{},{},{},{},{},{},{}\n", batching_mode_name(run.options.mode), r.id,
                r.parent ? std::to_string(*r.parent) : std::string(), r.request.arrival_s, r.request.prompt.size(),
                r.output.size(), r.reused_tokens, r.computed_tokens, r.preemptions, r.swaps,
                r.first_token_s >= 0 ? fmt::format("{:.3f}", (r.first_token_s - r.request.arrival_s) * 1e3)
                                     : std::string(),
                r.finish_s >= 0 ? fmt::format("{:.3f}", (r.finish_s - r.request.arrival_s) * 1e3) : std::string(),
                r.finish_reason.empty() ? std::string("unfinished") : r.finish_reason);
    if (server)
        for (std::size_t i = 0; i < server->results.size() && i < server->requests.size(); ++i) {
            const RemoteRequestResult& r = server->results[i];
            const TextRequest& q = server->requests[i];
            const auto ms = [&](double t) {
                return t >= 0 ? fmt::format("{:.3f}", (t - q.arrival_s) * 1e3) : std::string();
            };
            // the prompt in words (the server counts its tokens); no engine counts for a server
            out += fmt::format("server,{},,{:.6f},{},{},,,,,{},{},{}\n", i, q.arrival_s, q.prompt_words, r.tokens,
                               ms(r.first_token_s), ms(r.done_s),
                               !r.error.empty()          ? "error"
                               : r.finish_reason.empty() ? "unfinished"
                                                         : r.finish_reason);
        }
    return out;
}

} // namespace engine
