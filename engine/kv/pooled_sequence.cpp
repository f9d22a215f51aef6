// SPDX-License-Identifier: GPL-3.0-or-later
#include "kv/pooled_sequence.h"

#include "util/error.h"

#include <algorithm>
#include <spdlog/fmt/fmt.h>

namespace engine {

PooledSequence::PooledSequence(KvBlockPool& pool, uint32_t owner, uint32_t n_ctx)
    : m_pool(pool), m_owner(owner), m_n_ctx(n_ctx)
{
}

PooledSequence::~PooledSequence()
{
    release_blocks();
}

uint32_t PooledSequence::adopt_prefix(std::span<const TokenId> tokens)
{
    if (m_n_cached != 0 || tokens.empty())
        return m_n_cached;
    const uint32_t bt = m_pool.block_tokens();
    const auto full = uint32_t((tokens.size() - 1) / bt); // the last token's block is always computed
    uint64_t parent = 0;
    for (uint32_t b = 0; b < full; ++b) {
        const auto block_tokens = tokens.subspan(std::size_t(b) * bt, bt);
        const uint64_t hash = KvBlockPool::prefix_hash(parent, block_tokens);
        const std::optional<uint32_t> block = m_pool.take_prefix(hash, parent, block_tokens);
        if (!block)
            break;
        m_table.push_back(*block);
        parent = hash;
    }
    m_published = uint32_t(m_table.size());
    m_last_hash = parent;
    m_n_cached = m_published * bt;
    return m_n_cached;
}

uint32_t PooledSequence::blocks_needed(uint32_t new_end) const
{
    const uint32_t bt = m_pool.block_tokens();
    const uint32_t have = uint32_t(m_table.size());
    const uint32_t want = (new_end + bt - 1) / bt;
    uint32_t n = want > have ? want - have : 0;
    const uint32_t first_written = m_n_cached / bt;
    if (new_end > m_n_cached && first_written < have && m_pool.info(m_table[first_written]).refs > 1)
        ++n; // the shared block being written is copied first
    return n;
}

bool PooledSequence::try_reserve(uint32_t new_end)
{
    if (new_end <= m_n_cached)
        return true;
    if (blocks_needed(new_end) > m_pool.n_available())
        return false;
    const uint32_t bt = m_pool.block_tokens();
    const uint32_t first_written = m_n_cached / bt;
    if (first_written < m_table.size() && m_pool.info(m_table[first_written]).refs > 1) {
        const uint32_t copy = *m_pool.allocate(m_owner);
        m_pool.copy_block(m_table[first_written], copy);
        m_pool.release(m_table[first_written]);
        m_table[first_written] = copy;
    }
    while (m_table.size() * bt < new_end)
        m_table.push_back(*m_pool.allocate(m_owner));
    return true;
}

void PooledSequence::reserve_until(uint32_t new_end)
{
    if (new_end > m_n_ctx)
        throw Error(
            fmt::format("the context is full: {} positions requested, a sequence holds at most {}", new_end, m_n_ctx));
    if (!try_reserve(new_end))
        throw Error(fmt::format("the KV block pool is full: {} more blocks needed, {} available",
                                blocks_needed(new_end), m_pool.n_available()));
}

void PooledSequence::commit(uint32_t new_end)
{
    m_n_cached = std::max(m_n_cached, new_end);
}

void PooledSequence::publish_full_blocks(std::span<const TokenId> tokens)
{
    const uint32_t bt = m_pool.block_tokens();
    const uint32_t full = std::min<uint32_t>(m_n_cached, uint32_t(tokens.size())) / bt;
    for (; m_published < full; ++m_published) {
        const auto block_tokens = tokens.subspan(std::size_t(m_published) * bt, bt);
        const uint64_t hash = KvBlockPool::prefix_hash(m_last_hash, block_tokens);
        m_pool.publish(m_table[m_published], hash, m_last_hash, block_tokens);
        m_last_hash = hash;
    }
}

std::unique_ptr<PooledSequence> PooledSequence::fork(uint32_t owner) const
{
    auto copy = std::make_unique<PooledSequence>(m_pool, owner, m_n_ctx);
    for (uint32_t b : m_table)
        m_pool.retain(b);
    copy->m_table = m_table;
    copy->m_n_cached = m_n_cached;
    copy->m_published = m_published;
    copy->m_last_hash = m_last_hash;
    return copy;
}

void PooledSequence::release_blocks()
{
    for (uint32_t b : m_table)
        m_pool.release(b);
    m_table.clear();
    m_n_cached = 0;
    m_published = 0;
    m_last_hash = 0;
}

PooledSequence::Swapped PooledSequence::swap_out()
{
    Swapped s;
    s.n_cached = m_n_cached;
    const uint32_t bt = m_pool.block_tokens();
    const uint32_t used = (m_n_cached + bt - 1) / bt;
    for (uint32_t i = 0; i < used; ++i) {
        const auto block = m_pool.contents(m_table[i]);
        s.data.insert(s.data.end(), block.begin(), block.end());
    }
    release_blocks();
    return s;
}

bool PooledSequence::swap_in(const Swapped& swapped)
{
    const std::size_t per_block = m_pool.bytes_per_block() / sizeof(uint16_t);
    const auto n_blocks = uint32_t(swapped.data.size() / per_block);
    if (m_n_cached != 0 || n_blocks > m_pool.n_available())
        return false;
    for (uint32_t i = 0; i < n_blocks; ++i) {
        const uint32_t b = *m_pool.allocate(m_owner);
        const auto from = std::span(swapped.data).subspan(i * per_block, per_block);
        std::copy(from.begin(), from.end(), m_pool.contents(b).begin());
        m_table.push_back(b);
    }
    m_n_cached = swapped.n_cached;
    return true;
}

uint16_t* PooledSequence::key(uint32_t layer, uint32_t pos, uint32_t kv_head)
{
    const uint32_t bt = m_pool.block_tokens();
    return m_pool.slot(m_table[pos / bt], layer, pos % bt, kv_head, false);
}

uint16_t* PooledSequence::value(uint32_t layer, uint32_t pos, uint32_t kv_head)
{
    const uint32_t bt = m_pool.block_tokens();
    return m_pool.slot(m_table[pos / bt], layer, pos % bt, kv_head, true);
}

const uint16_t* PooledSequence::key(uint32_t layer, uint32_t pos, uint32_t kv_head) const
{
    const uint32_t bt = m_pool.block_tokens();
    return m_pool.slot(m_table[pos / bt], layer, pos % bt, kv_head, false);
}

const uint16_t* PooledSequence::value(uint32_t layer, uint32_t pos, uint32_t kv_head) const
{
    const uint32_t bt = m_pool.block_tokens();
    return m_pool.slot(m_table[pos / bt], layer, pos % bt, kv_head, true);
}

bool PooledSequence::holds(uint32_t, uint32_t pos) const
{
    return pos < m_n_cached;
}

} // namespace engine
