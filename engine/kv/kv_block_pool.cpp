// SPDX-License-Identifier: GPL-3.0-or-later
#include "kv/kv_block_pool.h"

#include "util/error.h"

#include <algorithm>
#include <cstring>
#include <spdlog/fmt/fmt.h>

namespace engine {

KvBlockPool::KvBlockPool(const KvCacheConfig& layout, uint32_t n_blocks) : m_layout(layout)
{
    if (n_blocks == 0)
        throw Error("a KV block pool needs at least one block");
    for (uint32_t il = 0; il < layout.n_layer; ++il) {
        m_layer_offset.push_back(m_block_elems);
        m_block_elems += 2ull * layout.n_kv_heads[il] * layout.block_tokens * layout.head_dim;
    }
    m_storage.assign(m_block_elems * n_blocks, 0);
    m_info.resize(n_blocks);
    m_hash_of.assign(n_blocks, 0);
    for (uint32_t b = n_blocks; b-- > 0;)
        m_free.push_back(b); // block 0 is handed out first
}

std::optional<uint32_t> KvBlockPool::allocate(uint32_t owner)
{
    uint32_t block = 0;
    if (!m_free.empty()) {
        block = m_free.back();
        m_free.pop_back();
    } else if (!m_cached_order.empty()) {
        block = m_cached_order.front();
        m_cached_order.erase(m_cached_order.begin());
        unpublish(block);
        ++m_counters.evictions;
    } else {
        return std::nullopt;
    }
    m_info[block] = {.refs = 1, .owner = owner};
    ++m_counters.allocations;
    return block;
}

void KvBlockPool::retain(uint32_t block)
{
    BlockInfo& b = m_info.at(block);
    if (b.cached) { // a cached prefix taken again
        m_cached_order.erase(std::find(m_cached_order.begin(), m_cached_order.end(), block));
        b.cached = false;
    }
    ++b.refs;
}

void KvBlockPool::release(uint32_t block)
{
    BlockInfo& b = m_info.at(block);
    if (b.refs == 0)
        throw std::logic_error("a KV block released more often than it was held");
    if (--b.refs > 0)
        return;
    if (b.published) {
        b.cached = true;
        m_cached_order.push_back(block);
    } else {
        b.owner = kNoOwner;
        m_free.push_back(block);
    }
}

uint64_t KvBlockPool::prefix_hash(uint64_t parent, std::span<const TokenId> tokens)
{
    // FNV-1a over the parent's hash and the token ids: the chain makes a block's hash name its whole
    // prefix (a match is confirmed against the stored tokens and parent, so a collision costs nothing).
    uint64_t h = 1469598103934665603ull;
    const auto mix = [&](uint64_t v) {
        for (int i = 0; i < 8; ++i) {
            h ^= (v >> (8 * i)) & 0xff;
            h *= 1099511628211ull;
        }
    };
    mix(parent);
    for (TokenId t : tokens)
        mix(uint64_t(uint32_t(t)));
    return h;
}

std::optional<uint32_t> KvBlockPool::take_prefix(uint64_t hash, uint64_t parent, std::span<const TokenId> tokens)
{
    const auto it = m_published.find(hash);
    if (it == m_published.end() || it->second.parent != parent ||
        !std::equal(tokens.begin(), tokens.end(), it->second.tokens.begin(), it->second.tokens.end()))
        return std::nullopt;
    retain(it->second.block);
    ++m_counters.prefix_hits;
    return it->second.block;
}

void KvBlockPool::publish(uint32_t block, uint64_t hash, uint64_t parent, std::span<const TokenId> tokens)
{
    BlockInfo& b = m_info.at(block);
    if (b.published || m_published.contains(hash))
        return; // already there (another sequence computed the same prefix in the same step)
    b.published = true;
    m_hash_of[block] = hash;
    m_published.emplace(hash, Published{parent, {tokens.begin(), tokens.end()}, block});
}

void KvBlockPool::unpublish(uint32_t block)
{
    BlockInfo& b = m_info[block];
    m_published.erase(m_hash_of[block]);
    b.published = false;
    b.cached = false;
}

void KvBlockPool::copy_block(uint32_t from, uint32_t to)
{
    std::memcpy(m_storage.data() + m_block_elems * to, m_storage.data() + m_block_elems * from,
                m_block_elems * sizeof(uint16_t));
    ++m_counters.cow_copies;
}

uint16_t* KvBlockPool::slot(uint32_t block, uint32_t layer, uint32_t offset, uint32_t kv_head, bool value)
{
    const std::size_t hd = m_layout.head_dim, bt = m_layout.block_tokens;
    const std::size_t half = std::size_t(m_layout.n_kv_heads[layer]) * bt * hd;
    return m_storage.data() + m_block_elems * block + m_layer_offset[layer] + (value ? half : 0) +
           (std::size_t(kv_head) * bt + offset) * hd;
}

const uint16_t* KvBlockPool::slot(uint32_t block, uint32_t layer, uint32_t offset, uint32_t kv_head, bool value) const
{
    return const_cast<KvBlockPool*>(this)->slot(block, layer, offset, kv_head, value);
}

std::span<const uint16_t> KvBlockPool::contents(uint32_t block) const
{
    return {m_storage.data() + m_block_elems * block, m_block_elems};
}

std::span<uint16_t> KvBlockPool::contents(uint32_t block)
{
    return {m_storage.data() + m_block_elems * block, m_block_elems};
}

uint64_t KvBlockPool::checksum(uint32_t block) const
{
    uint64_t h = 1469598103934665603ull;
    for (uint16_t v : contents(block)) {
        h ^= v & 0xff;
        h *= 1099511628211ull;
        h ^= v >> 8;
        h *= 1099511628211ull;
    }
    return h;
}

} // namespace engine
