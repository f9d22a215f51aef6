// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <cstdint>

namespace engine::cpu::simd {

// AVX2 + FMA + F16C versions of kernel_geglu / kernel_swiglu (same bits), compiled with -mavx2 in
// glu_avx2.cpp; call only when simd_level() reports AVX2. Each does whole chunks of eight and
// returns how many elements it wrote (the caller finishes the tail).
int64_t geglu_avx2(const float* gate, const float* up, float* y, int64_t n);
int64_t swiglu_avx2(const float* gate, const float* up, float* y, int64_t n);

} // namespace engine::cpu::simd
