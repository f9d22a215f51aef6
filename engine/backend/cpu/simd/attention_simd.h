// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "backend/cpu/attention_kernels.h"

namespace engine::cpu::simd {

// AVX2 + FMA + F16C version of attention_row_scalar (same bits). Compiled with -mavx2 in
// attention_avx2.cpp; call only when simd_level() reports AVX2.
void attention_row_avx2(const AttentionRow& row, float* out, float* weights, AttentionScratch& scratch);
// Rows of one group (the query heads that share a KV head at one position: same keys, values, slots
// and batching), each with the bits attention_row_avx2 gives it alone.
void attention_rows_avx2(const AttentionRow* rows, uint32_t n_rows, float* const* outs, float* const* weights,
                         AttentionScratch& scratch);

} // namespace engine::cpu::simd
