// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <cstdint>

namespace engine::simd {

// f32 → F16 (round to nearest even, as F16C's vcvtps2ph and ggml's x86 build convert) and f32 → BF16
// (f32_to_bf16's rounding and NaN rule) eight values at a time, compiled with -mavx2 -mf16c in
// activation_avx2.cpp; call only when simd_level() reports AVX2. Each returns how many values it
// converted (whole groups of eight; the caller converts the tail), the bits of fp16.h's functions.
int64_t f32_to_f16_avx2(const float* x, uint16_t* out, int64_t n);
int64_t f32_to_bf16_avx2(const float* x, uint16_t* out, int64_t n);

// The largest |x| of n values, n a multiple of 8 (NaNs passed over, as the quantizers' scans pass them).
float abs_max_avx2(const float* x, int n);

// One 32-value block of Q8_0 or Q8_1: the quants round(x · id) (half to even, as nearbyint in the
// default rounding mode and ggml's AVX quantizer round them) into qs, returning their sum.
int q8_0_quants_avx2(const float* x, float id, int8_t qs[32]);

// One Q8_K block's quants and per-16 sums from 256 values with its scale iscale, as quantize_q8_k
// rounds them (x · iscale, then round half to even through the float mantissa, capped at 127).
void q8_k_quants_avx2(const float* x, float iscale, int8_t qs[256], int16_t bsums[16]);

} // namespace engine::simd
