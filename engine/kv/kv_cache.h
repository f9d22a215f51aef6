// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "kv/kv_store.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace engine {

struct KvCacheConfig {
    uint32_t n_layer = 0;
    std::vector<uint32_t> n_kv_heads; // per layer
    uint32_t head_dim = 0;
    std::vector<uint32_t> window; // per layer: sliding window in tokens, 0 = full attention
    uint32_t n_ctx = 0;           // positions the cache may hold
    uint32_t block_tokens = 32;   // paging granularity
    uint32_t reserve_blocks = 2;  // whole blocks kept behind a sliding window, for cheap step-back
    KvCacheTypes types;           // F16 keys and values unless asked otherwise
    bool host_storage = true;     // false: accounting only (a device backend holds the values;
                                  // key()/value() must not be called then)
};

struct KvLayerAccounting {
    uint32_t tokens_in_use = 0; // positions attention can still see: min(cached, window)
    uint32_t blocks_allocated = 0;
    uint64_t bytes_in_use = 0;    // (K row + V row bytes) · kv heads · tokens in use
    uint64_t bytes_allocated = 0; // blocks allocated · bytes per block
    uint32_t first_stored = 0;    // oldest position whose K/V is still held
};

struct KvAccounting {
    uint32_t tokens_cached = 0;
    uint32_t block_tokens = 0;
    uint64_t bytes_in_use = 0;
    uint64_t bytes_allocated = 0;
    uint32_t blocks_allocated = 0;
    uint64_t bytes_per_block_per_head = 0;
    std::vector<KvLayerAccounting> layers;
};

struct KvTruncation {
    uint32_t kept = 0;                         // positions still cached
    bool recompute = false;                    // a sliding-window layer had freed blocks the new end needs
    std::optional<uint32_t> first_layer_short; // the first such layer
};

// The key/value cache: per layer, K and V of every KV head (F16, or the types asked for), in blocks
// of `block_tokens` positions (layout per block: [K|V][kv_head][token][row of head_dim values]). Blocks are allocated
// as positions arrive; a sliding-window layer frees blocks that fell out of its window plus the reserve.
class KvCache final : public KvStore {
public:
    explicit KvCache(KvCacheConfig config);

    const KvCacheConfig& config() const { return m_config; }
    uint32_t n_cached() const override { return m_n_cached; }

    // Makes room for positions [n_cached, new_end) and frees what sliding windows no longer need.
    // Throws Error when new_end exceeds n_ctx.
    void reserve_until(uint32_t new_end) override;
    // Marks positions [n_cached, new_end) as written (after the forward pass filled them).
    void commit(uint32_t new_end) override;
    // Keeps positions [0, n). When a sliding-window layer no longer holds what position n needs, the
    // result says so and the cache is emptied: the caller recomputes from the tokens.
    KvTruncation truncate(uint32_t n);
    // Back to n positions keeping every block (what was written past n stays, to be written again or
    // read by a pass that resumes above the layers it holds: the early-exit drafter's lower layers).
    // False, with nothing changed, when a sliding-window layer has freed a block position n needs.
    bool rewind(uint32_t n);
    void clear();

    // F16 vectors of one position, layer and KV head (the block must be allocated; an F16 cache).
    uint16_t* key(uint32_t layer, uint32_t pos, uint32_t kv_head) override;
    uint16_t* value(uint32_t layer, uint32_t pos, uint32_t kv_head) override;
    const uint16_t* key(uint32_t layer, uint32_t pos, uint32_t kv_head) const override;
    const uint16_t* value(uint32_t layer, uint32_t pos, uint32_t kv_head) const override;
    bool holds(uint32_t layer, uint32_t pos) const override;
    KvCacheTypes types() const override { return m_config.types; }
    uint8_t* key_row(uint32_t layer, uint32_t pos, uint32_t kv_head) override
    {
        return slot(layer, pos, kv_head, false);
    }
    uint8_t* value_row(uint32_t layer, uint32_t pos, uint32_t kv_head) override
    {
        return slot(layer, pos, kv_head, true);
    }
    const uint8_t* key_row(uint32_t layer, uint32_t pos, uint32_t kv_head) const override
    {
        return slot(layer, pos, kv_head, false);
    }
    const uint8_t* value_row(uint32_t layer, uint32_t pos, uint32_t kv_head) const override
    {
        return slot(layer, pos, kv_head, true);
    }

    KvAccounting accounting() const;
    uint64_t bytes_per_block(uint32_t layer) const;

private:
    struct Layer {
        std::vector<std::unique_ptr<uint8_t[]>> blocks; // by logical block index (pos / block_tokens)
        uint32_t allocated = 0;
    };
    uint8_t* slot(uint32_t layer, uint32_t pos, uint32_t kv_head, bool value) const;
    void free_out_of_window(uint32_t layer, uint32_t end);
    // The first layer that no longer holds a block a sequence of n positions reads (its window's
    // positions, up to `end`): a sliding window freed it. None: every block is there.
    std::optional<uint32_t> first_layer_short(uint32_t n, uint32_t end) const;

    KvCacheConfig m_config;
    uint64_t m_k_row = 0, m_v_row = 0; // bytes of one head's key / value vector
    std::vector<Layer> m_layers;
    uint32_t m_n_cached = 0;
};

} // namespace engine
