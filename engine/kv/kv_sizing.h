// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// What this engine's KV cache (kv_cache.h) allocates, computed from its configuration alone: the
// cache configuration a backend builds for a model, and the most memory it holds while a sequence
// grows to the full context.

#include "kv/kv_cache.h"

#include <cstdint>

namespace engine {

struct ModelConfig;

// The cache configuration the CPU backend builds for a model (every layer's KV heads and window,
// head_dim = key_length, n_ctx capped at the training context when the file states one).
KvCacheConfig kv_cache_config_for(const ModelConfig& config, uint32_t n_ctx, KvCacheTypes types = {});

// Blocks a layer holds at most while positions are appended in batches of at most `max_batch`
// (≥ 1) up to n_ctx. A full-attention layer ends with every block; a sliding-window layer holds,
// at worst, the blocks its window and reserve still cover after a commit plus the blocks the next
// batch reserves before its commit frees anything (see KvCache::reserve_until / commit).
uint32_t kv_layer_peak_blocks(const KvCacheConfig& config, uint32_t layer, uint32_t max_batch);

// Σ layers peak blocks × bytes per block: the cache's high-water mark in bytes.
uint64_t kv_cache_peak_bytes(const KvCacheConfig& config, uint32_t max_batch);

} // namespace engine
