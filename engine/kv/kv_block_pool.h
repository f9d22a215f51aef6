// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "kv/kv_cache.h"
#include "tokenizer/vocab.h"

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace engine {

// The blocks of a serving engine's KV cache, shared by every sequence (PagedAttention): a fixed
// number of blocks of `block_tokens` positions, each holding every layer's keys and values of those
// positions (per layer: [K|V][kv_head][token][head_dim], F16). Sequences hold blocks by reference
// count. A full block can be published under the hash of the token prefix it ends: a later sequence
// with the same prefix takes the block instead of computing it again (prefix caching). A published
// block nobody holds stays cached until its room is needed (the least recently released goes first).
class KvBlockPool {
public:
    static constexpr uint32_t kNoOwner = UINT32_MAX;

    struct BlockInfo {
        uint32_t refs = 0;
        uint32_t owner = kNoOwner; // the sequence that computed it (for the pool's map)
        bool published = false;    // holds a prefix other sequences can take
        bool cached = false;       // published, held by nobody, kept until its room is needed
    };
    struct Counters {
        uint64_t prefix_hits = 0; // blocks taken from the prefix cache instead of computed
        uint64_t cow_copies = 0;  // blocks copied because a sequence wrote into a shared one
        uint64_t evictions = 0;   // cached prefix blocks given up for room
        uint64_t allocations = 0; // blocks handed out to be computed
    };

    // `layout` gives the layers, heads and block size (its n_ctx and windows are not used).
    KvBlockPool(const KvCacheConfig& layout, uint32_t n_blocks);

    uint32_t n_blocks() const { return uint32_t(m_info.size()); }
    uint32_t block_tokens() const { return m_layout.block_tokens; }
    // Blocks a sequence could take now: free ones and cached prefixes nobody holds.
    uint32_t n_available() const { return uint32_t(m_free.size() + m_cached_order.size()); }
    uint32_t n_held() const { return n_blocks() - n_available(); }
    uint32_t n_cached() const { return uint32_t(m_cached_order.size()); }
    uint64_t bytes_per_block() const { return m_block_elems * sizeof(uint16_t); }
    const BlockInfo& info(uint32_t block) const { return m_info.at(block); }
    const Counters& counters() const { return m_counters; }

    // A block for `owner` to compute (refs 1), evicting the least recently released cached prefix
    // when no block is free; nullopt when every block is held.
    std::optional<uint32_t> allocate(uint32_t owner);
    void retain(uint32_t block);
    // One reference fewer; at zero the block is free again, or cached when it is published.
    void release(uint32_t block);

    // The chained hash of a block's tokens after the prefix hashed as `parent` (0: the first block).
    static uint64_t prefix_hash(uint64_t parent, std::span<const TokenId> block_tokens);
    // A published block ending the prefix `hash` whose own tokens are `tokens`, retained for the
    // caller (and counted as a hit); nullopt when none.
    std::optional<uint32_t> take_prefix(uint64_t hash, uint64_t parent, std::span<const TokenId> tokens);
    // Makes a full, computed block available to later sequences under its prefix hash.
    void publish(uint32_t block, uint64_t hash, uint64_t parent, std::span<const TokenId> tokens);
    // Copies a block's contents into another (copy on write) and counts it.
    void copy_block(uint32_t from, uint32_t to);

    // One vector of a block (position `offset` within it).
    uint16_t* slot(uint32_t block, uint32_t layer, uint32_t offset, uint32_t kv_head, bool value);
    const uint16_t* slot(uint32_t block, uint32_t layer, uint32_t offset, uint32_t kv_head, bool value) const;
    // A whole block's contents (swapping out to the host store and back).
    std::span<const uint16_t> contents(uint32_t block) const;
    std::span<uint16_t> contents(uint32_t block);
    // FNV-1a over a block's bytes: tests check that a sequence's writes leave others' blocks alone.
    uint64_t checksum(uint32_t block) const;

private:
    struct Published {
        uint64_t parent = 0;
        std::vector<TokenId> tokens;
        uint32_t block = 0;
    };
    void unpublish(uint32_t block);

    KvCacheConfig m_layout;
    std::vector<std::size_t> m_layer_offset; // elements into a block where each layer starts
    std::size_t m_block_elems = 0;
    std::vector<uint16_t> m_storage;
    std::vector<BlockInfo> m_info;
    std::vector<uint64_t> m_hash_of;      // per block: its published hash
    std::vector<uint32_t> m_free;         // never-published free blocks (a stack)
    std::vector<uint32_t> m_cached_order; // cached prefixes, least recently released first
    std::unordered_map<uint64_t, Published> m_published;
    Counters m_counters;
};

} // namespace engine
