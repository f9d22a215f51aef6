// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "kv/kv_block_pool.h"
#include "kv/kv_store.h"

#include <memory>
#include <span>
#include <vector>

namespace engine {

// One sequence's KV cache in a shared KvBlockPool: a block table (logical block → pool block).
// Blocks another sequence also holds are never written: a write into one (a fork's shared last
// block) copies it first (copy on write). Positions are never freed by sliding windows here (the
// pool's blocks hold every layer); attention masks them as usual.
class PooledSequence final : public KvStore {
public:
    PooledSequence(KvBlockPool& pool, uint32_t owner, uint32_t n_ctx);
    ~PooledSequence() override;
    PooledSequence(const PooledSequence&) = delete;
    PooledSequence& operator=(const PooledSequence&) = delete;

    uint32_t owner() const { return m_owner; }
    const std::vector<uint32_t>& block_table() const { return m_table; }

    // On an empty sequence: takes the published blocks that hold the leading full blocks of
    // `tokens` (prefix caching), never the block of the last token (whose logits the caller needs).
    // Returns the positions now cached.
    uint32_t adopt_prefix(std::span<const TokenId> tokens);
    // Pool blocks reserve_until(new_end) would take (new ones and copies of shared ones).
    uint32_t blocks_needed(uint32_t new_end) const;
    // reserve_until without throwing: false, and nothing changed, when the pool is short.
    bool try_reserve(uint32_t new_end);
    // Publishes every full block not published yet; `tokens` are the sequence's (≥ n_cached of them).
    void publish_full_blocks(std::span<const TokenId> tokens);
    // A second sequence sharing every block of this one (parallel sampling of one prompt).
    std::unique_ptr<PooledSequence> fork(uint32_t owner) const;
    // Gives every block back: the sequence is empty.
    void release_blocks();

    // The contents of the sequence's blocks, moved out of the pool (preemption by swapping).
    struct Swapped {
        uint32_t n_cached = 0;
        std::vector<uint16_t> data; // blocks one after another
        uint64_t bytes() const { return data.size() * sizeof(uint16_t); }
    };
    Swapped swap_out();
    // Back into fresh pool blocks; false (and nothing changed) when the pool is short.
    bool swap_in(const Swapped& swapped);

    // KvStore
    uint32_t n_cached() const override { return m_n_cached; }
    void reserve_until(uint32_t new_end) override;
    void commit(uint32_t new_end) override;
    uint16_t* key(uint32_t layer, uint32_t pos, uint32_t kv_head) override;
    uint16_t* value(uint32_t layer, uint32_t pos, uint32_t kv_head) override;
    const uint16_t* key(uint32_t layer, uint32_t pos, uint32_t kv_head) const override;
    const uint16_t* value(uint32_t layer, uint32_t pos, uint32_t kv_head) const override;
    bool holds(uint32_t layer, uint32_t pos) const override;

private:
    KvBlockPool& m_pool;
    uint32_t m_owner;
    uint32_t m_n_ctx;
    uint32_t m_n_cached = 0;
    std::vector<uint32_t> m_table;
    uint32_t m_published = 0; // leading blocks published (or taken from the prefix cache)
    uint64_t m_last_hash = 0; // prefix hash of block m_published − 1 (0 before the first)
};

} // namespace engine
