// SPDX-License-Identifier: GPL-3.0-or-later
#include "backend/cpu/simd/flash_attention_simd.h"

#include "backend/cpu/flash_attention_impl.h"

namespace engine::cpu::simd {

void flash_attention_tile_avx512(const FlashRow* rows, uint32_t n_rows, float* const* outs, float* const* weights,
                                 FlashScratch& scratch)
{
    flash_attention_tile_impl(rows, n_rows, outs, weights, scratch);
}

} // namespace engine::cpu::simd
