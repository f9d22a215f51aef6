// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <cstdint>

namespace engine {

// Where a sequence's keys and values live, as the forward pass reads and writes them: one F16
// vector per (layer, position, KV head). The backend's own cache (KvCache) holds one sequence; a
// sequence of the serving engine (PooledSequence) keeps a block table into a pool shared by many.
class KvStore {
public:
    virtual ~KvStore() = default;
    // Positions written so far (the next token of the sequence goes to this position).
    virtual uint32_t n_cached() const = 0;
    // Makes room for positions [n_cached, new_end). Throws Error when it cannot (the context or the
    // pool is full); the store is unchanged then.
    virtual void reserve_until(uint32_t new_end) = 0;
    // Marks positions [n_cached, new_end) as written (after the forward pass filled them).
    virtual void commit(uint32_t new_end) = 0;
    // F16 vectors of one position, layer and KV head (reserved or held positions only).
    virtual uint16_t* key(uint32_t layer, uint32_t pos, uint32_t kv_head) = 0;
    virtual uint16_t* value(uint32_t layer, uint32_t pos, uint32_t kv_head) = 0;
    virtual const uint16_t* key(uint32_t layer, uint32_t pos, uint32_t kv_head) const = 0;
    virtual const uint16_t* value(uint32_t layer, uint32_t pos, uint32_t kv_head) const = 0;
    // Whether the position's vectors are still held (a sliding window may have freed them).
    virtual bool holds(uint32_t layer, uint32_t pos) const = 0;
};

} // namespace engine
