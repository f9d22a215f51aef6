// SPDX-License-Identifier: GPL-3.0-or-later
#include "kv/kv_cache.h"

#include "util/error.h"

#include <algorithm>
#include <spdlog/fmt/fmt.h>

namespace engine {

KvCache::KvCache(KvCacheConfig config)
    : m_config(std::move(config)), m_k_row(kv_row_bytes(m_config.types.k, m_config.head_dim)),
      m_v_row(kv_row_bytes(m_config.types.v, m_config.head_dim))
{
    check_kv_cache_types(m_config.types, m_config.head_dim);
    m_layers.resize(m_config.n_layer);
    const uint32_t n_blocks = (m_config.n_ctx + m_config.block_tokens - 1) / m_config.block_tokens;
    for (auto& l : m_layers)
        l.blocks.resize(n_blocks);
}

uint64_t KvCache::bytes_per_block(uint32_t layer) const
{
    return uint64_t(m_config.n_kv_heads[layer]) * m_config.block_tokens * (m_k_row + m_v_row);
}

void KvCache::reserve_until(uint32_t new_end)
{
    if (new_end > m_config.n_ctx)
        throw Error(fmt::format("the context is full: {} positions requested, the cache holds {} (raise the "
                                "context size or shorten the conversation)",
                                new_end, m_config.n_ctx));
    // Every position written by this batch is needed during it (its own queries read them);
    // commit() frees what the windows no longer need afterwards.
    const uint32_t bt = m_config.block_tokens;
    for (uint32_t il = 0; il < m_config.n_layer; ++il) {
        Layer& L = m_layers[il];
        for (uint32_t b = m_n_cached / bt; b * bt < new_end; ++b) {
            if (!L.blocks[b]) {
                L.blocks[b] = std::make_unique<uint8_t[]>(m_config.host_storage ? bytes_per_block(il) : 0);
                ++L.allocated;
            }
        }
    }
}

void KvCache::free_out_of_window(uint32_t il, uint32_t end)
{
    const uint32_t window = m_config.window[il];
    if (!window || end <= window)
        return;
    const uint32_t bt = m_config.block_tokens;
    const uint32_t first_needed = end - window; // queries at end-1 and later read from here on
    const uint32_t keep_from_block = first_needed / bt;
    const uint32_t reserve = m_config.reserve_blocks;
    Layer& L = m_layers[il];
    for (uint32_t b = 0; b + reserve < keep_from_block; ++b) {
        if (L.blocks[b]) {
            L.blocks[b].reset();
            --L.allocated;
        }
    }
}

void KvCache::commit(uint32_t new_end)
{
    m_n_cached = std::max(m_n_cached, new_end);
    for (uint32_t il = 0; il < m_config.n_layer; ++il)
        free_out_of_window(il, m_n_cached);
}

std::optional<uint32_t> KvCache::first_layer_short(uint32_t n, uint32_t end) const
{
    const uint32_t bt = m_config.block_tokens;
    for (uint32_t il = 0; il < m_config.n_layer; ++il) {
        const uint32_t window = m_config.window[il];
        const uint32_t first_needed = (window && n > window) ? n - window : 0;
        for (uint32_t pos = first_needed; pos < end; pos += bt)
            if (!m_layers[il].blocks[pos / bt])
                return il;
    }
    return std::nullopt;
}

bool KvCache::rewind(uint32_t n)
{
    n = std::min(n, m_n_cached);
    // what lies past n is read again by the pass that resumes there: it must still be held too
    if (first_layer_short(n, m_n_cached))
        return false;
    m_n_cached = n;
    return true;
}

KvTruncation KvCache::truncate(uint32_t n)
{
    KvTruncation r;
    n = std::min(n, m_n_cached);
    if (const auto short_layer = first_layer_short(n, n)) {
        r.recompute = true;
        r.first_layer_short = *short_layer;
    }
    if (r.recompute) {
        clear();
        return r;
    }
    const uint32_t bt = m_config.block_tokens;
    for (uint32_t il = 0; il < m_config.n_layer; ++il) {
        Layer& L = m_layers[il];
        for (uint32_t b = (n + bt - 1) / bt; b < L.blocks.size(); ++b)
            if (L.blocks[b]) {
                L.blocks[b].reset();
                --L.allocated;
            }
    }
    m_n_cached = n;
    r.kept = n;
    return r;
}

void KvCache::clear()
{
    for (auto& L : m_layers) {
        for (auto& b : L.blocks)
            b.reset();
        L.allocated = 0;
    }
    m_n_cached = 0;
}

uint8_t* KvCache::slot(uint32_t il, uint32_t pos, uint32_t kv_head, bool value) const
{
    const uint32_t bt = m_config.block_tokens;
    uint8_t* block = m_layers[il].blocks[pos / bt].get();
    const std::size_t keys = std::size_t(m_config.n_kv_heads[il]) * bt * m_k_row;
    const std::size_t row = value ? m_v_row : m_k_row;
    return block + (value ? keys : 0) + (std::size_t(kv_head) * bt + pos % bt) * row;
}

uint16_t* KvCache::key(uint32_t l, uint32_t p, uint32_t h)
{
    return reinterpret_cast<uint16_t*>(slot(l, p, h, false));
}
uint16_t* KvCache::value(uint32_t l, uint32_t p, uint32_t h)
{
    return reinterpret_cast<uint16_t*>(slot(l, p, h, true));
}
const uint16_t* KvCache::key(uint32_t l, uint32_t p, uint32_t h) const
{
    return reinterpret_cast<const uint16_t*>(slot(l, p, h, false));
}
const uint16_t* KvCache::value(uint32_t l, uint32_t p, uint32_t h) const
{
    return reinterpret_cast<const uint16_t*>(slot(l, p, h, true));
}

bool KvCache::holds(uint32_t layer, uint32_t pos) const
{
    return pos < m_n_cached && m_layers[layer].blocks[pos / m_config.block_tokens] != nullptr;
}

KvAccounting KvCache::accounting() const
{
    KvAccounting a;
    a.tokens_cached = m_n_cached;
    a.block_tokens = m_config.block_tokens;
    a.bytes_per_block_per_head = uint64_t(m_config.block_tokens) * (m_k_row + m_v_row);
    for (uint32_t il = 0; il < m_config.n_layer; ++il) {
        KvLayerAccounting l;
        const uint32_t window = m_config.window[il];
        l.tokens_in_use = window ? std::min(m_n_cached, window) : m_n_cached;
        l.bytes_in_use = uint64_t(m_config.n_kv_heads[il]) * (m_k_row + m_v_row) * l.tokens_in_use;
        l.blocks_allocated = m_layers[il].allocated;
        l.bytes_allocated = uint64_t(l.blocks_allocated) * bytes_per_block(il);
        l.first_stored = m_n_cached;
        for (uint32_t b = 0; b * m_config.block_tokens < m_n_cached; ++b)
            if (m_layers[il].blocks[b]) {
                l.first_stored = b * m_config.block_tokens;
                break;
            }
        a.bytes_in_use += l.bytes_in_use;
        a.bytes_allocated += l.bytes_allocated;
        a.blocks_allocated += l.blocks_allocated;
        a.layers.push_back(l);
    }
    return a;
}

} // namespace engine
