// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "backend/cpu/flash_attention.h"

namespace engine::cpu::simd {

// flash_attention_row compiled with AVX2 + FMA + F16C (same bits); call only when simd_level()
// reports AVX2 or more.
void flash_attention_row_avx2(const FlashRow& row, float* out, float* weights, FlashScratch& scratch);

} // namespace engine::cpu::simd
