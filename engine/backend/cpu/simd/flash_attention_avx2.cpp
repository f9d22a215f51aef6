// SPDX-License-Identifier: GPL-3.0-or-later
#include "backend/cpu/simd/flash_attention_simd.h"

#include "backend/cpu/flash_attention_impl.h"

namespace engine::cpu::simd {

void flash_attention_row_avx2(const FlashRow& row, float* out, float* weights, FlashScratch& scratch)
{
    flash_attention_row_impl(row, out, weights, scratch);
}

void flash_attention_split_avx2(const FlashRow& row, uint32_t n_cells, uint32_t n_chunks, float* out, float* weights,
                                FlashScratch& scratch)
{
    flash_attention_split_impl(row, n_cells, n_chunks, out, weights, scratch);
}

void flash_attention_group_avx2(const FlashRow* rows, uint32_t n_rows, uint32_t n_cells, uint32_t n_chunks,
                                float* const* outs, FlashScratch& scratch)
{
    flash_attention_group_impl(rows, n_rows, n_cells, n_chunks, outs, scratch);
}

void flash_attention_tile_avx2(const FlashRow* rows, uint32_t n_rows, float* const* outs, float* const* weights,
                               FlashScratch& scratch)
{
    flash_attention_tile_impl(rows, n_rows, outs, weights, scratch);
}

} // namespace engine::cpu::simd
