// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// The serving lab's engine: many requests on one backend, as vLLM, SGLang and llama-server serve
// them (facts: shared/reference/serving.md). Every step admits what has arrived (continuous
// batching), gives each decoding request one token and the rest of the step's token budget to prompt
// chunks (chunked prefill), and runs them all in one multi-sequence pass (Backend::forward_batch)
// whose caches share one KvBlockPool (prefix caching, copy on write). When the pool is full the
// request admitted last is preempted — its blocks recomputed later, or swapped to a host store and
// back — and resumes where it was: no request is ever dropped.
#include "backend/backend.h"
#include "kv/kv_block_pool.h"
#include "kv/pooled_sequence.h"
#include "sampling/sampler.h"

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace engine {

enum class BatchingMode {
    OneAtATime, // one request from admission to its last token, then the next
    Static,     // a batch admitted together; the next only when all of it has finished
    Continuous, // admitted at every step
};
enum class PreemptionPolicy {
    Recompute, // give the blocks back; compute the request's tokens again when it resumes
    Swap,      // move the blocks' contents to a host store with its own budget, and back
};
std::string_view batching_mode_name(BatchingMode mode); // "one-at-a-time", "static", "continuous"
std::string_view preemption_name(PreemptionPolicy policy);
// Throw Error naming the accepted words.
BatchingMode parse_batching_mode(std::string_view text);
PreemptionPolicy parse_preemption(std::string_view text);

struct ServeRequest {
    std::vector<TokenId> prompt;
    uint32_t max_new_tokens = 16;
    double arrival_s = 0.0;    // when the client sends it (the run's clock)
    SamplingSettings sampling; // temperature <= 0: greedy; the seed makes a sampled reply reproducible
    bool stop_at_end_of_generation = true;
    // Replies drawn from one prompt (parallel sampling): the prompt is computed once, the replies
    // share its blocks and copy the last one when they write into it (copy on write).
    uint32_t samples = 1;
};

struct ServingOptions {
    BatchingMode mode = BatchingMode::Continuous;
    uint32_t max_running = 16;  // sequences in one pass at most
    uint32_t step_tokens = 256; // tokens one pass holds at most: decode steps first, prompt chunks the rest
    uint32_t pool_blocks = 256;
    uint32_t block_tokens = 32;
    PreemptionPolicy preemption = PreemptionPolicy::Recompute;
    uint64_t host_store_bytes = 256ull << 20; // the swap store's budget (full: recompute instead)
    bool prefix_caching = true;
    bool deterministic = false; // ForwardRequest::batch_invariant for every pass
    uint32_t n_ctx = 0;         // positions one sequence may hold; 0: the model's training context
};

// Pool blocks one request holds at its longest: its prompt and reply, and beside the shared prompt
// each forked reply's own blocks (one of them a copy of the prompt's last). Throws Error for blocks
// of 0 positions.
uint64_t request_blocks(const ServeRequest& request, uint32_t block_tokens);
// What a workload needs with every request held at once: its longest sequence, and the blocks of all
// (at most 2^20, the most a saved run keeps).
struct WorkloadRoom {
    uint32_t longest = 0;
    uint32_t blocks = 0;
};
WorkloadRoom room_for(std::span<const ServeRequest> requests, uint32_t block_tokens);

enum class RequestPhase { Queued, Prefill, Decode, Preempted, Done };
std::string_view request_phase_name(RequestPhase phase);

// One request (or one reply of a parallel-sampled one) as it goes through the engine.
struct RequestState {
    uint32_t id = 0;
    std::optional<uint32_t> parent; // a reply forked from another request's prompt
    ServeRequest request;
    RequestPhase phase = RequestPhase::Queued;
    std::vector<TokenId> output;
    uint32_t n_computed = 0;      // positions of prompt + output in its cache
    uint32_t reused_tokens = 0;   // positions taken from the prefix cache (every admission)
    uint32_t computed_tokens = 0; // positions evaluated by passes (recomputation included)
    uint32_t preemptions = 0;
    uint32_t swaps = 0; // preemptions that went to the host store
    double admitted_s = -1, first_token_s = -1, finish_s = -1;
    std::vector<double> token_times; // when each output token was sampled
    std::string finish_reason;       // "length", "end of generation", "context full"
    uint64_t admission = 0;          // order of first admission: the last admitted is preempted first

    // What its cache should hold once it has caught up: the prompt, then the output.
    std::vector<TokenId> tokens() const;
};

// One request's part in a step.
struct ServeSlice {
    uint32_t request = 0;
    uint32_t n_tokens = 0;
    bool prefill = false; // a prompt chunk (or a recomputation), not a decode step
    bool sampled = false; // produced a token
};

struct ServeEvent {
    enum class Kind { Admitted, PrefixReused, Preempted, SwappedOut, SwappedIn, Forked, CopyOnWrite, Finished };
    Kind kind = Kind::Admitted;
    uint32_t request = 0;
    uint32_t count = 0; // tokens reused, blocks swapped, replies forked
};
std::string_view serve_event_name(ServeEvent::Kind kind);

struct ServeStep {
    uint32_t index = 0;
    double start_s = 0, end_s = 0; // on the run's clock
    std::vector<ServeSlice> slices;
    std::vector<ServeEvent> events;
    uint32_t tokens = 0;      // tokens of the pass
    uint32_t running = 0;     // requests holding cache after the step
    uint32_t waiting = 0;     // arrived, not admitted (preempted ones included)
    uint32_t blocks_held = 0; // pool blocks held by a sequence after the step
    uint32_t blocks_cached = 0;
    uint64_t host_store_bytes = 0;
};

// The pool's blocks after a step, for the map: the request owning each (or none) and whether more
// than one sequence holds it.
struct PoolSnapshot {
    struct Block {
        uint32_t owner = KvBlockPool::kNoOwner;
        uint32_t refs = 0;
        bool cached = false;
    };
    std::vector<Block> blocks;
    KvBlockPool::Counters counters;
};

class ServingEngine {
public:
    // The backend must run multi-sequence passes (the CPU backend); throws UnsupportedError otherwise.
    ServingEngine(Backend& backend, ServingOptions options);
    ~ServingEngine();

    const ServingOptions& options() const { return m_options; }
    // Queues a request; returns its id. Throws Error for an empty prompt, a reply longer than a
    // sequence may be, or one that would not fit the pool even alone (named, with the numbers).
    uint32_t submit(ServeRequest request);
    // One step at time `now` on the run's clock: admissions, one pass, sampling. Returns nullopt when
    // nothing can run now (no request has arrived yet); the step's end is now + the pass's own time.
    std::optional<ServeStep> step(double now);
    bool done() const;
    // When the next queued request arrives (nullopt: every one has arrived).
    std::optional<double> next_arrival(double now) const;

    const std::vector<RequestState>& requests() const { return m_requests; }
    const KvBlockPool& pool() const { return *m_pool; }
    PoolSnapshot pool_snapshot() const;
    // A request's cache while it holds one (admitted, not preempted by recomputation, not done).
    const KvStore* sequence(uint32_t request) const;
    uint64_t host_store_bytes() const { return m_host_bytes; }

private:
    struct Slot; // a request's sequence, sampler and swapped blocks
    // Admits `r` into the room the pool has beyond `reserved` (blocks promised this step), adding what
    // its first chunk takes; false when it does not fit.
    bool admit(RequestState& r, double now, uint32_t& reserved, std::vector<ServeEvent>& events);
    void preempt(RequestState& r, std::vector<ServeEvent>& events);
    void finish(RequestState& r, double now, std::string reason, std::vector<ServeEvent>& events);
    void fork_replies(RequestState& r, std::vector<ServeEvent>& events);
    bool running(const RequestState& r) const
    {
        return r.phase == RequestPhase::Prefill || r.phase == RequestPhase::Decode;
    }
    uint32_t blocks_for(uint32_t positions) const;

    Backend& m_backend;
    ServingOptions m_options;
    std::unique_ptr<KvBlockPool> m_pool;
    std::vector<RequestState> m_requests;
    std::vector<std::unique_ptr<Slot>> m_slots; // by request id
    std::vector<TokenId> m_stop_tokens;
    uint64_t m_host_bytes = 0;
    uint64_t m_next_admission = 0;
    uint32_t m_step = 0;
    bool m_static_batch_open = true; // static batching: admissions allowed (nothing running)
};

} // namespace engine
