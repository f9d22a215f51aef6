// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "backend/backend.h"

namespace testsupport {

// The app's CPU backends sum in llama.cpp's default order (repacked Q4_0, IQ4_NL and Q4_K matrices
// where the CPU has AVX2; the backend picker's "CPU" entry): an engine session that a UI test holds
// the app's numbers to is made in the same order.
inline constexpr engine::WeightOrder kAppWeightOrder = engine::WeightOrder::LlamaCppDefault;
// … and their attention in llama.cpp's flash-attention order (its default on a CPU, the picker's "CPU").
inline constexpr bool kAppFlashAttention = true;

// The options of a CPU backend as the app makes them.
inline engine::CpuBackendOptions app_cpu_options(int threads, uint32_t n_ctx, engine::KvCacheTypes kv_types = {})
{
    return {.threads = threads,
            .n_ctx = n_ctx,
            .order = kAppWeightOrder,
            .kv_types = kv_types,
            .flash_attention = kAppFlashAttention};
}

} // namespace testsupport
