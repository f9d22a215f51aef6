// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "backend/cpu/attention_kernels.h"

namespace engine::cpu::simd {

// AVX2 + FMA + F16C version of attention_row_scalar (same bits). Compiled with -mavx2 in
// attention_avx2.cpp; call only when simd_level() reports AVX2.
void attention_row_avx2(const AttentionRow& row, float* out, float* weights, AttentionScratch& scratch);

} // namespace engine::cpu::simd
