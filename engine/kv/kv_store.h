// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "kv/kv_cache_types.h"

#include <cstdint>

namespace engine {

// Where a sequence's keys and values live, as the forward pass reads and writes them: one vector
// per (layer, position, KV head), F16 or (a KvCache made so) quantized. The backend's own cache (KvCache) holds one
// sequence; a sequence of the serving engine (PooledSequence) keeps a block table into a pool shared by many.
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
    // F16 vectors of one position, layer and KV head (reserved or held positions only; an F16 store).
    virtual uint16_t* key(uint32_t layer, uint32_t pos, uint32_t kv_head) = 0;
    virtual uint16_t* value(uint32_t layer, uint32_t pos, uint32_t kv_head) = 0;
    virtual const uint16_t* key(uint32_t layer, uint32_t pos, uint32_t kv_head) const = 0;
    virtual const uint16_t* value(uint32_t layer, uint32_t pos, uint32_t kv_head) const = 0;
    // What keys and values are stored as: F16 unless the store was made otherwise (a KvCache).
    virtual KvCacheTypes types() const { return {}; }
    // The stored row of one position, layer and KV head in types().k / types().v (kv_row_bytes of it).
    virtual uint8_t* key_row(uint32_t layer, uint32_t pos, uint32_t kv_head)
    {
        return reinterpret_cast<uint8_t*>(key(layer, pos, kv_head));
    }
    virtual uint8_t* value_row(uint32_t layer, uint32_t pos, uint32_t kv_head)
    {
        return reinterpret_cast<uint8_t*>(value(layer, pos, kv_head));
    }
    virtual const uint8_t* key_row(uint32_t layer, uint32_t pos, uint32_t kv_head) const
    {
        return reinterpret_cast<const uint8_t*>(key(layer, pos, kv_head));
    }
    virtual const uint8_t* value_row(uint32_t layer, uint32_t pos, uint32_t kv_head) const
    {
        return reinterpret_cast<const uint8_t*>(value(layer, pos, kv_head));
    }
    // Whether the position's vectors are still held (a sliding window may have freed them).
    virtual bool holds(uint32_t layer, uint32_t pos) const = 0;
};

} // namespace engine
