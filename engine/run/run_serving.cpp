// SPDX-License-Identifier: GPL-3.0-or-later
#include "run/run_serving.h"
#include "run/run_json.h"

#include <spdlog/fmt/fmt.h>
#include <tuple>

namespace engine::run {

namespace {

using L = ServingLimits;
constexpr int64_t kNoOwner = -1; // a free block's owner as written

std::string item(const std::string& path, std::size_t i)
{
    return fmt::format("{}[{}]", path, i);
}

json percentiles_json(const Percentiles& p)
{
    return {{"p50", num(p.p50)}, {"p90", num(p.p90)}, {"p99", num(p.p99)}, {"max", num(p.max)}, {"count", p.count}};
}

Percentiles percentiles_from(const Fields& o)
{
    Percentiles p;
    p.p50 = o.number("p50");
    p.p90 = o.number("p90");
    p.p99 = o.number("p99");
    p.max = o.number("max");
    p.count = o.count("count");
    return p;
}

json request_json(const RequestState& r)
{
    const ServeRequest& q = r.request;
    json times = json::array();
    for (double t : r.token_times)
        times.push_back(num(t));
    return {{"id", r.id},
            {"parent", r.parent ? int64_t(*r.parent) : int64_t(-1)},
            {"prompt", q.prompt},
            {"max_new_tokens", q.max_new_tokens},
            {"arrival_s", num(q.arrival_s)},
            {"temperature", num(q.sampling.temperature)},
            {"seed", q.sampling.seed},
            {"samples", q.samples},
            {"phase", std::string(request_phase_name(r.phase))},
            {"output", r.output},
            {"n_computed", r.n_computed},
            {"reused_tokens", r.reused_tokens},
            {"computed_tokens", r.computed_tokens},
            {"preemptions", r.preemptions},
            {"swaps", r.swaps},
            {"admitted_s", num(r.admitted_s)},
            {"first_token_s", num(r.first_token_s)},
            {"finish_s", num(r.finish_s)},
            {"token_times", times},
            {"finish_reason", r.finish_reason}};
}

json step_json(const ServeStep& s)
{
    json slices = json::array(), events = json::array();
    for (const ServeSlice& x : s.slices)
        slices.push_back({x.request, x.n_tokens, x.prefill, x.sampled});
    for (const ServeEvent& e : s.events)
        events.push_back({std::string(serve_event_name(e.kind)), e.request, e.count});
    return {{"start_s", num(s.start_s)},
            {"end_s", num(s.end_s)},
            {"tokens", s.tokens},
            {"running", s.running},
            {"waiting", s.waiting},
            {"blocks_held", s.blocks_held},
            {"blocks_cached", s.blocks_cached},
            {"host_store_bytes", s.host_store_bytes},
            {"slices", slices},
            {"events", events}};
}

json run_json(const ServeRunResult& r)
{
    const ServingOptions& o = r.options;
    json requests = json::array(), steps = json::array(), blocks = json::array();
    for (const RequestState& q : r.requests)
        requests.push_back(request_json(q));
    for (const ServeStep& s : r.steps)
        steps.push_back(step_json(s));
    for (const PoolSnapshot::Block& b : r.pool.blocks)
        blocks.push_back({b.owner == KvBlockPool::kNoOwner ? kNoOwner : int64_t(b.owner), b.refs, b.cached});
    const KvBlockPool::Counters& c = r.pool.counters;
    return {{"mode", std::string(batching_mode_name(o.mode))},
            {"options",
             {{"max_running", o.max_running},
              {"step_tokens", o.step_tokens},
              {"pool_blocks", o.pool_blocks},
              {"block_tokens", o.block_tokens},
              {"preemption", std::string(preemption_name(o.preemption))},
              {"host_store_bytes", o.host_store_bytes},
              {"prefix_caching", o.prefix_caching},
              {"deterministic", o.deterministic},
              {"n_ctx", o.n_ctx}}},
            {"cancelled", r.cancelled},
            {"makespan_s", num(r.makespan_s)},
            {"busy_s", num(r.busy_s)},
            {"prompt_tokens", r.prompt_tokens},
            {"generated_tokens", r.generated_tokens},
            {"computed_tokens", r.computed_tokens},
            {"reused_tokens", r.reused_tokens},
            {"preemptions", r.preemptions},
            {"swaps", r.swaps},
            {"max_batch_sequences", r.max_batch_sequences},
            {"max_batch_tokens", r.max_batch_tokens},
            {"ttft", percentiles_json(r.ttft)},
            {"itl", percentiles_json(r.itl)},
            {"latency", percentiles_json(r.latency)},
            {"pool",
             {{"blocks", blocks},
              {"prefix_hits", c.prefix_hits},
              {"cow_copies", c.cow_copies},
              {"evictions", c.evictions},
              {"allocations", c.allocations}}},
            {"requests", requests},
            {"steps", steps}};
}

[[noreturn]] void refused(const std::string& field, const std::string& why);

template <typename Enum, typename NameOf>
Enum enum_from(const std::string& text, const std::string& path, std::initializer_list<Enum> values, NameOf name_of)
{
    for (Enum v : values)
        if (text == name_of(v))
            return v;
    refuse(path, "'" + text + "' is not one of the names it can take");
}

uint32_t u32(const Fields& o, const char* key)
{
    return uint32_t(o.integer(key, 0, 0, UINT32_MAX));
}

std::vector<TokenId> ids_from(const json& a, const std::string& path)
{
    std::vector<TokenId> out;
    out.reserve(a.size());
    for (std::size_t i = 0; i < a.size(); ++i)
        out.push_back(TokenId(Fields::integer_value(a[i], item(path, i))));
    return out;
}

RequestState request_from(const Fields& o)
{
    RequestState r;
    r.id = u32(o, "id");
    const int64_t parent = o.integer("parent", -1, -1, UINT32_MAX);
    if (parent >= 0)
        r.parent = uint32_t(parent);
    r.request.prompt = ids_from(o.array("prompt"), o.at("prompt"));
    r.request.max_new_tokens = u32(o, "max_new_tokens");
    r.request.arrival_s = o.number("arrival_s");
    r.request.sampling.temperature = float(o.number("temperature"));
    r.request.sampling.seed = o.count("seed");
    r.request.samples = u32(o, "samples");
    r.phase = enum_from<RequestPhase>(o.string("phase"), o.at("phase"),
                                      {RequestPhase::Queued, RequestPhase::Prefill, RequestPhase::Decode,
                                       RequestPhase::Preempted, RequestPhase::Done},
                                      request_phase_name);
    r.output = ids_from(o.array("output"), o.at("output"));
    r.n_computed = u32(o, "n_computed");
    r.reused_tokens = u32(o, "reused_tokens");
    r.computed_tokens = u32(o, "computed_tokens");
    r.preemptions = u32(o, "preemptions");
    r.swaps = u32(o, "swaps");
    r.admitted_s = o.number("admitted_s", -1);
    r.first_token_s = o.number("first_token_s", -1);
    r.finish_s = o.number("finish_s", -1);
    r.token_times = number_list(o.array("token_times"), o.at("token_times"));
    r.finish_reason = o.string("finish_reason");
    return r;
}

ServeStep step_from(const Fields& o, uint32_t index)
{
    ServeStep s;
    s.index = index;
    s.start_s = o.number("start_s");
    s.end_s = o.number("end_s");
    s.tokens = u32(o, "tokens");
    s.running = u32(o, "running");
    s.waiting = u32(o, "waiting");
    s.blocks_held = u32(o, "blocks_held");
    s.blocks_cached = u32(o, "blocks_cached");
    s.host_store_bytes = o.count("host_store_bytes");
    const json& slices = o.array("slices");
    for (std::size_t i = 0; i < slices.size(); ++i) {
        const std::string at = item(o.at("slices"), i);
        const json& x = Fields::array_value(slices[i], at, 4);
        ServeSlice slice;
        slice.request = uint32_t(Fields::integer_value(x[0], at + "[0]", 0, UINT32_MAX));
        slice.n_tokens = uint32_t(Fields::integer_value(x[1], at + "[1]", 0, UINT32_MAX));
        if (!x[2].is_boolean() || !x[3].is_boolean())
            refuse(at, "expected [request, tokens, prefill (true/false), sampled (true/false)]");
        slice.prefill = x[2].get<bool>();
        slice.sampled = x[3].get<bool>();
        s.slices.push_back(slice);
    }
    const json& events = o.array("events");
    for (std::size_t i = 0; i < events.size(); ++i) {
        const std::string at = item(o.at("events"), i);
        const json& x = Fields::array_value(events[i], at, 3);
        ServeEvent e;
        e.kind = enum_from<ServeEvent::Kind>(Fields::string_value(x[0], at + "[0]"), at + "[0]",
                                             {ServeEvent::Kind::Admitted, ServeEvent::Kind::PrefixReused,
                                              ServeEvent::Kind::Preempted, ServeEvent::Kind::SwappedOut,
                                              ServeEvent::Kind::SwappedIn, ServeEvent::Kind::Forked,
                                              ServeEvent::Kind::CopyOnWrite, ServeEvent::Kind::Finished},
                                             serve_event_name);
        e.request = uint32_t(Fields::integer_value(x[1], at + "[1]", 0, UINT32_MAX));
        e.count = uint32_t(Fields::integer_value(x[2], at + "[2]", 0, UINT32_MAX));
        s.events.push_back(e);
    }
    return s;
}

ServeRunResult run_from(const Fields& o)
{
    ServeRunResult r;
    ServingOptions& opt = r.options;
    opt.mode = enum_from<BatchingMode>(o.string("mode"), o.at("mode"),
                                       {BatchingMode::OneAtATime, BatchingMode::Static, BatchingMode::Continuous},
                                       batching_mode_name);
    const Fields oo = o.object("options");
    opt.max_running = u32(oo, "max_running");
    opt.step_tokens = u32(oo, "step_tokens");
    opt.pool_blocks = u32(oo, "pool_blocks");
    opt.block_tokens = u32(oo, "block_tokens");
    opt.preemption =
        enum_from<PreemptionPolicy>(oo.string("preemption"), oo.at("preemption"),
                                    {PreemptionPolicy::Recompute, PreemptionPolicy::Swap}, preemption_name);
    opt.host_store_bytes = oo.count("host_store_bytes");
    opt.prefix_caching = oo.boolean("prefix_caching", true);
    opt.deterministic = oo.boolean("deterministic");
    opt.n_ctx = u32(oo, "n_ctx");
    r.cancelled = o.boolean("cancelled");
    r.makespan_s = o.number("makespan_s");
    r.busy_s = o.number("busy_s");
    r.prompt_tokens = o.count("prompt_tokens");
    r.generated_tokens = o.count("generated_tokens");
    r.computed_tokens = o.count("computed_tokens");
    r.reused_tokens = o.count("reused_tokens");
    r.preemptions = u32(o, "preemptions");
    r.swaps = u32(o, "swaps");
    r.max_batch_sequences = u32(o, "max_batch_sequences");
    r.max_batch_tokens = u32(o, "max_batch_tokens");
    r.ttft = percentiles_from(o.object("ttft"));
    r.itl = percentiles_from(o.object("itl"));
    r.latency = percentiles_from(o.object("latency"));
    const Fields pool = o.object("pool");
    const json& blocks = pool.array("blocks");
    const json& requests = o.array("requests");
    const json& steps = o.array("steps");
    // the counts before the entries: each is read into a structure of its own
    for (const auto& [field, n, limit, what] : {std::tuple{pool.at("blocks"), blocks.size(), L::kBlocks, "blocks"},
                                                std::tuple{o.at("requests"), requests.size(), L::kRequests, "requests"},
                                                std::tuple{o.at("steps"), steps.size(), L::kSteps, "steps"}})
        if (int64_t(n) > limit)
            refused(field, fmt::format("holds {} {}, more than the limit of {}", n, what, limit));
    for (std::size_t i = 0; i < blocks.size(); ++i) {
        const std::string at = item(pool.at("blocks"), i);
        const json& x = Fields::array_value(blocks[i], at, 3);
        PoolSnapshot::Block b;
        const int64_t owner = Fields::integer_value(x[0], at + "[0]", -1, UINT32_MAX);
        b.owner = owner < 0 ? KvBlockPool::kNoOwner : uint32_t(owner);
        b.refs = uint32_t(Fields::integer_value(x[1], at + "[1]", 0, UINT32_MAX));
        if (!x[2].is_boolean())
            refuse(at + "[2]", "expected true or false");
        b.cached = x[2].get<bool>();
        r.pool.blocks.push_back(b);
    }
    r.pool.counters.prefix_hits = pool.count("prefix_hits");
    r.pool.counters.cow_copies = pool.count("cow_copies");
    r.pool.counters.evictions = pool.count("evictions");
    r.pool.counters.allocations = pool.count("allocations");
    for (std::size_t i = 0; i < requests.size(); ++i)
        r.requests.push_back(request_from(Fields(requests[i], item(o.at("requests"), i))));
    for (std::size_t i = 0; i < steps.size(); ++i)
        r.steps.push_back(step_from(Fields(steps[i], item(o.at("steps"), i)), uint32_t(i)));
    return r;
}

[[noreturn]] void refused(const std::string& field, const std::string& why)
{
    throw FormatError("the run is refused: " + field + " " + why);
}

} // namespace

json serving_json(const ServingDoc& d)
{
    const WorkloadSpec& w = d.workload;
    json runs = json::array();
    for (const ServeRunResult& r : d.runs)
        runs.push_back(run_json(r));
    return {{"model", d.model},
            {"backend", d.backend},
            {"cancelled", d.cancelled},
            {"workload",
             {{"clients", w.clients},
              {"arrival_rate", num(w.arrival_rate)},
              {"prompt_min", w.prompt_min},
              {"prompt_max", w.prompt_max},
              {"output_min", w.output_min},
              {"output_max", w.output_max},
              {"shared_fraction", num(w.shared_fraction)},
              {"shared_tokens", w.shared_tokens},
              {"prompts", w.prompts},
              {"temperature", num(w.temperature)},
              {"seed", w.seed},
              {"samples", w.samples}}},
            {"runs", runs}};
}

ServingDoc serving_from(const Fields& o)
{
    ServingDoc d;
    d.model = o.string("model");
    d.backend = o.string("backend");
    d.cancelled = o.boolean("cancelled");
    const Fields w = o.object("workload");
    d.workload.clients = u32(w, "clients");
    d.workload.arrival_rate = w.number("arrival_rate");
    d.workload.prompt_min = u32(w, "prompt_min");
    d.workload.prompt_max = u32(w, "prompt_max");
    d.workload.output_min = u32(w, "output_min");
    d.workload.output_max = u32(w, "output_max");
    d.workload.shared_fraction = w.number("shared_fraction");
    d.workload.shared_tokens = u32(w, "shared_tokens");
    d.workload.prompts = string_list(w.array("prompts"), w.at("prompts"));
    d.workload.temperature = float(w.number("temperature"));
    d.workload.seed = w.count("seed");
    d.workload.samples = uint32_t(w.integer("samples", 1, 0, 64));
    const json& runs = o.array("runs");
    if (int64_t(runs.size()) > L::kRuns) // before reading them: each may be large
        refused(o.at("runs"), fmt::format("holds {} runs, more than the limit of {}", runs.size(), L::kRuns));
    for (std::size_t i = 0; i < runs.size(); ++i)
        d.runs.push_back(run_from(Fields(runs[i], item(o.at("runs"), i))));
    return d;
}

} // namespace engine::run
