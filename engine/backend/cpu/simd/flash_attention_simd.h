// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "backend/cpu/flash_attention.h"

namespace engine::cpu::simd {

// The flash-attention kernels compiled with AVX2 + FMA + F16C (same bits); call only when simd_level()
// reports AVX2 or more.
void flash_attention_row_avx2(const FlashRow& row, float* out, float* weights, FlashScratch& scratch);
void flash_attention_split_avx2(const FlashRow& row, uint32_t n_cells, uint32_t n_chunks, float* out, float* weights,
                                FlashScratch& scratch);
void flash_attention_group_avx2(const FlashRow* rows, uint32_t n_rows, uint32_t n_cells, uint32_t n_chunks,
                                float* const* outs, FlashScratch& scratch);
void flash_attention_tile_avx2(const FlashRow* rows, uint32_t n_rows, float* const* outs, float* const* weights,
                               FlashScratch& scratch);
// The tile kernel with sixteen-lane vectors (the same chains, the same bits); call only when
// simd_level() reports AVX-512.
void flash_attention_tile_avx512(const FlashRow* rows, uint32_t n_rows, float* const* outs, float* const* weights,
                                 FlashScratch& scratch);

} // namespace engine::cpu::simd
