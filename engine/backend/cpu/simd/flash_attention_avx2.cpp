// SPDX-License-Identifier: GPL-3.0-or-later
#include "backend/cpu/simd/flash_attention_simd.h"

#include "backend/cpu/flash_attention_impl.h"

namespace engine::cpu::simd {

void flash_attention_row_avx2(const FlashRow& row, float* out, float* weights, FlashScratch& scratch)
{
    flash_attention_row_impl(row, out, weights, scratch);
}

} // namespace engine::cpu::simd
