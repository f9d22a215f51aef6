// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "backend/cpu/attention_kernels.h"

namespace engine::cpu::simd {

// Prefill visits the slots in blocks this long, every row of a group going over a block before the
// next one (see attention_avx2.cpp).
inline constexpr uint32_t kSlotBlock = 256;

// Prefill's two batched loops over one block of slots [j0, j1): the scores of a group's rows (raising
// max[r] to each row's maximum) and their weighted values (accumulated into `lanes`, [D][8] floats per
// row). AVX2 and AVX-512 versions, the same bits.
struct BatchedAttentionKernels {
    void (*scores)(const AttentionRow* rows, uint32_t n_rows, uint32_t n_slots, const float* q16, float* scores,
                   std::size_t stride, float* max, uint32_t j0, uint32_t j1, std::vector<float>& scratch);
    void (*values)(const AttentionRow* rows, uint32_t n_rows, uint32_t n, const float* p, std::size_t stride,
                   float* lanes, std::vector<float>& vt, uint32_t j0, uint32_t j1);
};
BatchedAttentionKernels batched_attention_avx2();
// Compiled with -mavx512f in attention_avx512.cpp; call only when simd_level() reports AVX-512.
BatchedAttentionKernels batched_attention_avx512();

// AVX2 + FMA + F16C version of attention_row_scalar (same bits). Compiled with -mavx2 in
// attention_avx2.cpp; call only when simd_level() reports AVX2.
void attention_row_avx2(const AttentionRow& row, float* out, float* weights, AttentionScratch& scratch);
// Rows of one group (the query heads that share a KV head at one position: same keys, values, slots
// and batching), each with the bits attention_row_avx2 gives it alone.
void attention_rows_avx2(const AttentionRow* rows, uint32_t n_rows, float* const* outs, float* const* weights,
                         AttentionScratch& scratch, BatchedAttentionKernels batched = batched_attention_avx2());

} // namespace engine::cpu::simd
