// SPDX-License-Identifier: GPL-3.0-or-later
#include "serve/serving_engine.h"

#include "kv/kv_sizing.h"
#include "model/model.h"
#include "util/error.h"

#include <algorithm>
#include <spdlog/fmt/fmt.h>

namespace engine {

std::string_view batching_mode_name(BatchingMode mode)
{
    switch (mode) {
    case BatchingMode::OneAtATime:
        return "one-at-a-time";
    case BatchingMode::Static:
        return "static";
    case BatchingMode::Continuous:
        return "continuous";
    }
    return "?";
}

std::string_view preemption_name(PreemptionPolicy policy)
{
    return policy == PreemptionPolicy::Swap ? "swap" : "recompute";
}

BatchingMode parse_batching_mode(std::string_view text)
{
    for (BatchingMode m : {BatchingMode::OneAtATime, BatchingMode::Static, BatchingMode::Continuous})
        if (text == batching_mode_name(m))
            return m;
    throw Error(fmt::format("unknown batching mode '{}' (one-at-a-time, static or continuous)", text));
}

PreemptionPolicy parse_preemption(std::string_view text)
{
    for (PreemptionPolicy p : {PreemptionPolicy::Recompute, PreemptionPolicy::Swap})
        if (text == preemption_name(p))
            return p;
    throw Error(fmt::format("unknown preemption policy '{}' (recompute or swap)", text));
}

std::string_view request_phase_name(RequestPhase phase)
{
    switch (phase) {
    case RequestPhase::Queued:
        return "queued";
    case RequestPhase::Prefill:
        return "prefill";
    case RequestPhase::Decode:
        return "decode";
    case RequestPhase::Preempted:
        return "preempted";
    case RequestPhase::Done:
        return "done";
    }
    return "?";
}

std::string_view serve_event_name(ServeEvent::Kind kind)
{
    switch (kind) {
    case ServeEvent::Kind::Admitted:
        return "admitted";
    case ServeEvent::Kind::PrefixReused:
        return "prefix reused";
    case ServeEvent::Kind::Preempted:
        return "preempted";
    case ServeEvent::Kind::SwappedOut:
        return "swapped out";
    case ServeEvent::Kind::SwappedIn:
        return "swapped in";
    case ServeEvent::Kind::Forked:
        return "forked";
    case ServeEvent::Kind::CopyOnWrite:
        return "copy on write";
    case ServeEvent::Kind::Finished:
        return "finished";
    }
    return "?";
}

std::vector<TokenId> RequestState::tokens() const
{
    std::vector<TokenId> all = request.prompt;
    all.insert(all.end(), output.begin(), output.end());
    return all;
}

uint64_t request_blocks(const ServeRequest& r, uint32_t block_tokens)
{
    if (block_tokens == 0)
        throw Error("a KV block must hold at least one position");
    const auto blocks = [&](uint64_t positions) { return (positions + block_tokens - 1) / block_tokens; };
    return blocks(r.prompt.size() + r.max_new_tokens) +
           uint64_t(std::max(1u, r.samples) - 1) * (blocks(r.max_new_tokens) + 1);
}

WorkloadRoom room_for(std::span<const ServeRequest> requests, uint32_t block_tokens)
{
    WorkloadRoom room;
    uint64_t blocks = 0;
    for (const ServeRequest& r : requests) {
        room.longest = std::max(room.longest, uint32_t(r.prompt.size() + r.max_new_tokens));
        blocks += request_blocks(r, block_tokens);
    }
    room.blocks = uint32_t(std::min<uint64_t>(blocks, uint64_t(1) << 20));
    return room;
}

// A request's sequence, its sampler (its own seed: its replies do not depend on the others') and its
// blocks while swapped out.
struct ServingEngine::Slot {
    Slot(std::unique_ptr<PooledSequence> sequence, const SamplingSettings& sampling)
        : seq(std::move(sequence)), sampler([&] {
              SamplerConfig c = sampler_config(sampling, sampling.temperature <= 0.0f);
              c.stage_view_size = 0; // nobody looks at the stages: no full-vocabulary softmaxes for them
              return c;
          }())
    {
    }
    std::unique_ptr<PooledSequence> seq;
    Sampler sampler;
    std::optional<PooledSequence::Swapped> swapped;
};

ServingEngine::ServingEngine(Backend& backend, ServingOptions options) : m_backend(backend), m_options(options)
{
    if (!backend.multi_sequence_capable())
        throw UnsupportedError(fmt::format("{}: the serving lab's passes over several sequences run on the CPU "
                                           "backend only",
                                           backend.name()));
    if (m_options.deterministic)
        require_batch_invariant(backend);
    const ModelConfig& c = backend.model().config();
    if (m_options.n_ctx == 0)
        m_options.n_ctx = c.n_ctx_train ? c.n_ctx_train : 4096;
    if (m_options.max_running == 0 || m_options.step_tokens == 0 || m_options.block_tokens == 0)
        throw Error("the serving engine needs at least one running request, one token per step and one token "
                    "per block");
    KvCacheConfig layout = kv_cache_config_for(c, m_options.n_ctx);
    layout.block_tokens = m_options.block_tokens;
    m_pool = std::make_unique<KvBlockPool>(layout, m_options.pool_blocks);
    m_stop_tokens = backend.model().tokenizer().vocab().end_of_generation;
}

ServingEngine::~ServingEngine() = default;

uint32_t ServingEngine::blocks_for(uint32_t positions) const
{
    return (positions + m_options.block_tokens - 1) / m_options.block_tokens;
}

uint32_t ServingEngine::submit(ServeRequest request)
{
    const ModelConfig& c = m_backend.model().config();
    const auto id = uint32_t(m_requests.size());
    if (request.prompt.empty())
        throw Error(fmt::format("request {} has an empty prompt: there is nothing to continue", id));
    for (TokenId t : request.prompt)
        if (t < 0 || uint32_t(t) >= c.n_vocab)
            throw Error(
                fmt::format("request {}: token id {} is outside the vocabulary (0 … {})", id, t, c.n_vocab - 1));
    if (request.max_new_tokens == 0)
        throw Error(fmt::format("request {} asks for no tokens", id));
    if (request.samples == 0 || request.samples > 64)
        throw Error(fmt::format("request {} asks for {} replies: 1 to 64 are possible", id, request.samples));
    const uint64_t positions = uint64_t(request.prompt.size()) + request.max_new_tokens;
    if (positions > m_options.n_ctx)
        throw Error(
            fmt::format("request {} needs {} positions ({} prompt + {} new tokens); a sequence holds at most {}", id,
                        positions, request.prompt.size(), request.max_new_tokens, m_options.n_ctx));
    const uint64_t alone = request_blocks(request, m_options.block_tokens);
    if (alone > m_pool->n_blocks())
        throw Error(fmt::format("request {} needs {} KV blocks even alone; the pool has {} (raise the pool or shorten "
                                "the request)",
                                id, alone, m_pool->n_blocks()));
    auto slot = std::make_unique<Slot>(nullptr, request.sampling); // throws for sampling settings out of range
    RequestState& r = m_requests.emplace_back();
    r.id = id;
    r.request = std::move(request);
    m_slots.push_back(std::move(slot));
    return id;
}

bool ServingEngine::done() const
{
    return std::all_of(m_requests.begin(), m_requests.end(),
                       [](const RequestState& r) { return r.phase == RequestPhase::Done; });
}

std::optional<double> ServingEngine::next_arrival(double now) const
{
    std::optional<double> next;
    for (const RequestState& r : m_requests)
        if (r.phase == RequestPhase::Queued && r.request.arrival_s > now)
            next = std::min(next.value_or(r.request.arrival_s), r.request.arrival_s);
    return next;
}

bool ServingEngine::admit(RequestState& r, double now, uint32_t& reserved, std::vector<ServeEvent>& events)
{
    Slot& slot = *m_slots[r.id];
    if (!slot.seq)
        slot.seq = std::make_unique<PooledSequence>(*m_pool, r.id, m_options.n_ctx);
    const std::vector<TokenId> tokens = r.tokens();
    const uint32_t free_now = m_pool->n_available() > reserved ? m_pool->n_available() - reserved : 0;
    if (slot.swapped) {
        // its blocks back, and room for what it computes next (a decode token or a prompt chunk)
        const auto remaining = uint32_t(tokens.size() - slot.swapped->n_cached);
        const uint32_t need = blocks_for(slot.swapped->n_cached + std::min(remaining, m_options.step_tokens));
        if (need > free_now || !slot.seq->swap_in(*slot.swapped))
            return false;
        reserved += need - blocks_for(slot.swapped->n_cached); // the blocks it took back are held already
        events.push_back({ServeEvent::Kind::SwappedIn, r.id, blocks_for(slot.swapped->n_cached)});
        m_host_bytes -= slot.swapped->bytes();
        slot.swapped.reset();
    } else {
        const uint32_t available_before = m_pool->n_available();
        const uint32_t reused = m_options.prefix_caching ? slot.seq->adopt_prefix(tokens) : 0;
        const uint32_t first_end = std::min<uint32_t>(uint32_t(tokens.size()), reused + m_options.step_tokens);
        // taking cached prefix blocks uses room as well (they were counted as available)
        const uint32_t taken = available_before - m_pool->n_available();
        const uint32_t need = slot.seq->blocks_needed(first_end);
        if (need + taken > free_now) {
            slot.seq->release_blocks(); // not now: the taken prefix goes back to the cache
            return false;
        }
        reserved += need;
        r.n_computed = reused;
        r.reused_tokens += reused;
        if (reused)
            events.push_back({ServeEvent::Kind::PrefixReused, r.id, reused});
    }
    r.phase = tokens.size() - r.n_computed > 1 || r.output.empty() ? RequestPhase::Prefill : RequestPhase::Decode;
    if (r.admitted_s < 0) { // a resumed request keeps its place: preempting it again first would thrash
        r.admitted_s = now;
        r.admission = m_next_admission++;
    }
    events.push_back({ServeEvent::Kind::Admitted, r.id, 0});
    return true;
}

void ServingEngine::preempt(RequestState& r, std::vector<ServeEvent>& events)
{
    Slot& slot = *m_slots[r.id];
    ++r.preemptions;
    const uint64_t bytes = uint64_t(blocks_for(r.n_computed)) * m_pool->bytes_per_block();
    if (m_options.preemption == PreemptionPolicy::Swap && m_host_bytes + bytes <= m_options.host_store_bytes) {
        slot.swapped = slot.seq->swap_out();
        m_host_bytes += slot.swapped->bytes();
        ++r.swaps;
        events.push_back({ServeEvent::Kind::SwappedOut, r.id, blocks_for(r.n_computed)});
    } else { // recompute: its full blocks stay in the prefix cache until their room is needed
        slot.seq->release_blocks();
        r.n_computed = 0;
        events.push_back({ServeEvent::Kind::Preempted, r.id, 0});
    }
    r.phase = RequestPhase::Preempted;
}

void ServingEngine::finish(RequestState& r, double now, std::string reason, std::vector<ServeEvent>& events)
{
    r.phase = RequestPhase::Done;
    r.finish_s = now;
    r.finish_reason = std::move(reason);
    m_slots[r.id]->seq.reset(); // its published blocks stay cached for later prompts
    events.push_back({ServeEvent::Kind::Finished, r.id, uint32_t(r.output.size())});
}

std::optional<ServeStep> ServingEngine::step(double now)
{
    ServeStep record;
    record.start_s = now;
    std::vector<ServeEvent>& events = record.events;

    // ---- admissions: preempted requests first (in their old order), then arrivals in order
    const auto count_running = [&] {
        return uint32_t(std::count_if(m_requests.begin(), m_requests.end(), [&](const auto& r) { return running(r); }));
    };
    uint32_t n_running = count_running();
    const bool any_preempted = std::any_of(m_requests.begin(), m_requests.end(),
                                           [](const auto& r) { return r.phase == RequestPhase::Preempted; });
    if (m_options.mode == BatchingMode::Static && n_running == 0 && !any_preempted)
        m_static_batch_open = true;
    const uint32_t limit = m_options.mode == BatchingMode::OneAtATime ? 1 : m_options.max_running;
    std::vector<uint32_t> candidates;
    for (const RequestState& r : m_requests)
        if (r.phase == RequestPhase::Preempted)
            candidates.push_back(r.id);
    std::sort(candidates.begin(), candidates.end(),
              [&](uint32_t a, uint32_t b) { return m_requests[a].admission < m_requests[b].admission; });
    std::vector<uint32_t> arrived;
    for (const RequestState& r : m_requests)
        if (r.phase == RequestPhase::Queued && r.request.arrival_s <= now)
            arrived.push_back(r.id);
    std::stable_sort(arrived.begin(), arrived.end(), [&](uint32_t a, uint32_t b) {
        return m_requests[a].request.arrival_s < m_requests[b].request.arrival_s;
    });
    candidates.insert(candidates.end(), arrived.begin(), arrived.end());
    // Room the running requests' next tokens take this step: a request is admitted only into what is
    // left (else the newcomer, admitted last, would be the first preempted in the same step)
    uint32_t reserved = 0;
    for (const RequestState& r : m_requests)
        if (running(r)) {
            const auto remaining = uint32_t(r.request.prompt.size() + r.output.size() - r.n_computed);
            reserved += m_slots[r.id]->seq->blocks_needed(r.n_computed + std::min(remaining, m_options.step_tokens));
        }
    bool admitted_new = false;
    for (uint32_t id : candidates) {
        RequestState& r = m_requests[id];
        if (n_running >= limit)
            break;
        if (r.phase == RequestPhase::Queued && m_options.mode == BatchingMode::Static && !m_static_batch_open)
            break;
        if (!admit(r, now, reserved, events))
            break; // first come, first served: a later request does not overtake one that waits for room
        admitted_new |= !r.parent && r.preemptions == 0;
        ++n_running;
    }
    if (m_options.mode == BatchingMode::Static && admitted_new)
        m_static_batch_open = false;

    // ---- the step's slices: a decode token for every decoding request, then prompt chunks
    std::vector<uint32_t> order;
    for (const RequestState& r : m_requests)
        if (running(r))
            order.push_back(r.id);
    std::sort(order.begin(), order.end(),
              [&](uint32_t a, uint32_t b) { return m_requests[a].admission < m_requests[b].admission; });
    uint32_t budget = m_options.step_tokens;
    std::vector<ServeSlice>& slices = record.slices;
    for (const bool decode : {true, false})
        for (uint32_t id : order) {
            const RequestState& r = m_requests[id];
            if ((r.phase == RequestPhase::Decode) != decode || budget == 0)
                continue;
            const auto remaining = uint32_t(r.request.prompt.size() + r.output.size() - r.n_computed);
            const uint32_t n = std::min(remaining, budget);
            slices.push_back({id, n, !decode, false});
            budget -= n;
        }

    // ---- room for every slice; when the pool is short, the request admitted last is preempted
    for (std::size_t i = 0; i < slices.size();) {
        RequestState& r = m_requests[slices[i].request];
        PooledSequence& seq = *m_slots[r.id]->seq;
        const uint64_t copies = m_pool->counters().cow_copies;
        if (seq.try_reserve(r.n_computed + slices[i].n_tokens)) {
            if (m_pool->counters().cow_copies != copies)
                events.push_back({ServeEvent::Kind::CopyOnWrite, r.id, 1});
            ++i;
            continue;
        }
        uint32_t victim = r.id;
        for (const RequestState& other : m_requests)
            if (running(other) && other.admission > m_requests[victim].admission)
                victim = other.id;
        preempt(m_requests[victim], events);
        const auto at = std::find_if(slices.begin(), slices.end(), [&](const auto& s) { return s.request == victim; });
        if (at != slices.end()) {
            if (std::size_t(at - slices.begin()) < i)
                --i;
            slices.erase(at);
        }
    }

    if (slices.empty() && events.empty())
        return std::nullopt;

    // ---- one pass over every slice
    std::vector<std::vector<TokenId>> tokens(slices.size());
    BatchRequest batch;
    batch.batch_invariant = m_options.deterministic;
    for (std::size_t i = 0; i < slices.size(); ++i) {
        const RequestState& r = m_requests[slices[i].request];
        tokens[i] = r.tokens();
        BatchSequence s;
        s.kv = m_slots[r.id]->seq.get();
        s.tokens = std::span(tokens[i]).subspan(r.n_computed, slices[i].n_tokens);
        s.logits = r.n_computed + slices[i].n_tokens == tokens[i].size();
        batch.sequences.push_back(s);
        record.tokens += slices[i].n_tokens;
    }
    const auto t0 = std::chrono::steady_clock::now();
    BatchResult result;
    if (!batch.sequences.empty())
        result = m_backend.forward_batch(batch);
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    record.end_s = now + elapsed;

    // ---- what the pass produced: caches advanced, tokens sampled, requests finished or forked
    struct Reply {
        RequestState state;
        std::unique_ptr<Slot> slot;
    };
    std::vector<Reply> forks;
    for (std::size_t i = 0; i < slices.size(); ++i) {
        RequestState& r = m_requests[slices[i].request];
        Slot& slot = *m_slots[r.id];
        r.n_computed += slices[i].n_tokens;
        r.computed_tokens += slices[i].n_tokens;
        if (m_options.prefix_caching)
            slot.seq->publish_full_blocks(tokens[i]);
        if (!batch.sequences[i].logits)
            continue;
        const std::vector<float>& logits = result.logits[i];
        const auto sample = [&](RequestState& who, Slot& from) {
            const TokenId token = from.sampler.sample(logits, who.tokens()).token;
            who.output.push_back(token);
            who.token_times.push_back(record.end_s);
            if (who.first_token_s < 0)
                who.first_token_s = record.end_s;
            who.phase = RequestPhase::Decode;
        };
        // parallel sampling: the other replies draw their first token from the same logits and share
        // every block of the prompt (the last one is copied when a reply writes into it)
        if (r.request.samples > 1 && !r.parent && r.output.empty()) {
            for (uint32_t k = 1; k < r.request.samples; ++k) {
                Reply reply;
                reply.state.id = uint32_t(m_requests.size() + forks.size());
                reply.state.parent = r.id;
                reply.state.request = r.request;
                reply.state.request.samples = 1;
                reply.state.request.sampling.seed = r.request.sampling.seed + k;
                reply.state.n_computed = r.n_computed;
                reply.state.admitted_s = r.admitted_s;
                reply.state.admission = m_next_admission++;
                reply.slot = std::make_unique<Slot>(slot.seq->fork(reply.state.id), reply.state.request.sampling);
                sample(reply.state, *reply.slot);
                forks.push_back(std::move(reply));
            }
            events.push_back({ServeEvent::Kind::Forked, r.id, r.request.samples - 1});
        }
        sample(r, slot);
        slices[i].sampled = true;
    }
    for (Reply& reply : forks) {
        m_requests.push_back(std::move(reply.state));
        m_slots.push_back(std::move(reply.slot));
    }
    for (RequestState& r : m_requests) {
        if (r.phase != RequestPhase::Decode || r.token_times.empty() || r.token_times.back() != record.end_s)
            continue;
        const TokenId last = r.output.back();
        if (r.request.stop_at_end_of_generation &&
            std::find(m_stop_tokens.begin(), m_stop_tokens.end(), last) != m_stop_tokens.end())
            finish(r, record.end_s, "end of generation", events);
        else if (r.output.size() >= r.request.max_new_tokens)
            finish(r, record.end_s, "length", events);
        else if (r.request.prompt.size() + r.output.size() >= m_options.n_ctx)
            finish(r, record.end_s, "context full", events);
    }

    record.index = m_step++;
    record.running = count_running();
    for (const RequestState& r : m_requests)
        record.waiting += r.phase == RequestPhase::Preempted ||
                          (r.phase == RequestPhase::Queued && r.request.arrival_s <= record.end_s);
    record.blocks_held = m_pool->n_held();
    record.blocks_cached = m_pool->n_cached();
    record.host_store_bytes = m_host_bytes;
    return record;
}

const KvStore* ServingEngine::sequence(uint32_t request) const
{
    if (request >= m_slots.size() || !m_slots[request]->seq || m_requests[request].phase == RequestPhase::Preempted)
        return nullptr;
    return m_slots[request]->seq.get();
}

PoolSnapshot ServingEngine::pool_snapshot() const
{
    PoolSnapshot s;
    s.counters = m_pool->counters();
    for (uint32_t b = 0; b < m_pool->n_blocks(); ++b) {
        const KvBlockPool::BlockInfo& info = m_pool->info(b);
        s.blocks.push_back({info.owner, info.refs, info.cached});
    }
    return s;
}

} // namespace engine
