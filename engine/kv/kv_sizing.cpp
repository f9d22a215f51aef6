// SPDX-License-Identifier: GPL-3.0-or-later
#include "kv/kv_sizing.h"

#include "model/model_config.h"

#include <algorithm>

namespace engine {

KvCacheConfig kv_cache_config_for(const ModelConfig& c, uint32_t n_ctx, KvCacheTypes types)
{
    KvCacheConfig k;
    k.types = types;
    k.n_layer = c.n_layer;
    k.n_kv_heads = c.n_head_kv;
    k.head_dim = c.head_dim_k;
    for (uint32_t il = 0; il < c.n_layer; ++il)
        k.window.push_back(il < c.layer_is_swa.size() && c.layer_is_swa[il] ? c.sliding_window : 0);
    k.n_ctx = c.n_ctx_train ? std::min(n_ctx, c.n_ctx_train) : n_ctx;
    return k;
}

namespace {

// Blocks held right after commit(e0) and reserve_until(e1), e0 ≤ e1: blocks [first, ceil(e1/bt)),
// where commit(e0) freed every block b with b + reserve < (e0 − window) / bt.
uint64_t blocks_between(uint64_t e0, uint64_t e1, uint64_t window, uint64_t bt, uint64_t reserve)
{
    const uint64_t end_block = (e1 + bt - 1) / bt;
    uint64_t first = 0;
    if (window && e0 > window) {
        const uint64_t keep_from = (e0 - window) / bt;
        first = keep_from > reserve ? keep_from - reserve : 0;
    }
    return end_block > first ? end_block - first : 0;
}

} // namespace

uint32_t kv_layer_peak_blocks(const KvCacheConfig& config, uint32_t layer, uint32_t max_batch)
{
    const uint64_t bt = std::max<uint32_t>(config.block_tokens, 1);
    const uint64_t n_ctx = config.n_ctx;
    const uint64_t total_blocks = (n_ctx + bt - 1) / bt;
    const uint64_t window = layer < config.window.size() ? config.window[layer] : 0;
    if (!window || n_ctx == 0)
        return static_cast<uint32_t>(total_blocks);
    const uint64_t batch = std::max<uint32_t>(max_batch, 1);
    const uint64_t reserve = config.reserve_blocks;
    // The count after commit(e0) + reserve_until(min(e0 + batch, n_ctx)), maximised over e0. Once
    // the window has started freeing and the batch end is below n_ctx, the count repeats with
    // period bt in e0, so the first stretch (through one whole period after freeing starts) and
    // the last stretch (where n_ctx caps the batch) cover every value.
    uint64_t peak = 0;
    auto visit = [&](uint64_t e0) {
        peak = std::max(peak, blocks_between(e0, std::min(e0 + batch, n_ctx), window, bt, reserve));
    };
    const uint64_t head_end = std::min(n_ctx, window + (reserve + 3) * bt + batch);
    for (uint64_t e0 = 0; e0 < head_end; ++e0)
        visit(e0);
    const uint64_t tail_begin = std::max(head_end, n_ctx > batch + 2 * bt ? n_ctx - batch - 2 * bt : 0);
    for (uint64_t e0 = tail_begin; e0 < n_ctx; ++e0)
        visit(e0);
    return static_cast<uint32_t>(std::min(peak, total_blocks));
}

uint64_t kv_cache_peak_bytes(const KvCacheConfig& config, uint32_t max_batch)
{
    uint64_t total = 0;
    for (uint32_t il = 0; il < config.n_layer; ++il) {
        const uint64_t block_bytes =
            uint64_t(config.n_kv_heads[il]) * config.block_tokens *
            (kv_row_bytes(config.types.k, config.head_dim) + kv_row_bytes(config.types.v, config.head_dim));
        total += uint64_t(kv_layer_peak_blocks(config, il, max_batch)) * block_bytes;
    }
    return total;
}

} // namespace engine
