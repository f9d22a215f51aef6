// SPDX-License-Identifier: GPL-3.0-or-later
// Float weights (F32, F16, BF16) for the x86 dot-product files: loads widened to f32 and the end of
// ggml's one-row order (dot_float), which the AVX2 and AVX-512 kernels share. Internal linkage, as
// x86_block_helpers.h, for the same reason.
#pragma once

#include "quant/simd/x86_block_helpers.h"

namespace engine::simd {
namespace { // NOLINT(cert-dcl59-cpp,google-build-namespaces): see x86_block_helpers.h

inline __m256 load_f32(const void* p, int64_t i)
{
    return _mm256_loadu_ps(static_cast<const float*>(p) + i);
}
inline __m256 load_f16(const void* p, int64_t i)
{
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i)));
}
inline __m256 load_bf16(const void* p, int64_t i)
{
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// ((a0+a4)+(a1+a5)) + ((a2+a6)+(a3+a7))
inline float hsum_hadd(__m256 v)
{
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    t = _mm_hadd_ps(t, t);
    t = _mm_hadd_ps(t, t);
    return _mm_cvtss_f32(t);
}

enum class FloatKind { F32, F16, BF16 };

template <FloatKind K> __m256 load_float(const void* p, int64_t i)
{
    if constexpr (K == FloatKind::F32)
        return load_f32(p, i);
    else if constexpr (K == FloatKind::F16)
        return load_f16(p, i);
    else
        return load_bf16(p, i);
}
template <FloatKind K> float scalar_value(const void* p, int64_t i)
{
    if constexpr (K == FloatKind::F32)
        return static_cast<const float*>(p)[i];
    else if constexpr (K == FloatKind::F16)
        return _cvtsh_ss(static_cast<const uint16_t*>(p)[i]);
    else
        return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
}

// The end of ggml's one-row order: the eight lanes (its four accumulators summed as
// (acc0 + acc2) + (acc1 + acc3)) summed horizontally, then the elements past the last 32 — F32 fused
// into a float, F16 and BF16 products added in double.
template <FloatKind K> float finish_float_dot(__m256 lanes, const void* w, const void* a, int64_t np, int64_t n)
{
    if constexpr (K == FloatKind::F32) {
        float sum = hsum_hadd(lanes);
        for (int64_t i = np; i < n; ++i)
            sum = std::fma(scalar_value<K>(w, i), scalar_value<K>(a, i), sum);
        return sum;
    } else {
        double sum = K == FloatKind::F16 ? hsum_hadd(lanes) : hsum(lanes);
        for (int64_t i = np; i < n; ++i)
            sum += static_cast<double>(scalar_value<K>(w, i) * scalar_value<K>(a, i));
        return static_cast<float>(sum);
    }
}

} // namespace
} // namespace engine::simd
