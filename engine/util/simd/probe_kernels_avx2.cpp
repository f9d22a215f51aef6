// SPDX-License-Identifier: GPL-3.0-or-later
// Compiled with -mavx2 -mfma; called only when simd_level() reports AVX2.
#include "util/simd/probe_kernels.h"

#include <immintrin.h>

namespace engine::probe {

uint64_t read_words_avx2(const uint32_t* words, std::size_t n)
{
    // Four independent accumulators: the loads, not the adds, set the pace.
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    for (std::size_t i = 0; i < n; i += 32) {
        s0 = _mm256_add_epi32(s0, _mm256_load_si256(reinterpret_cast<const __m256i*>(words + i)));
        s1 = _mm256_add_epi32(s1, _mm256_load_si256(reinterpret_cast<const __m256i*>(words + i + 8)));
        s2 = _mm256_add_epi32(s2, _mm256_load_si256(reinterpret_cast<const __m256i*>(words + i + 16)));
        s3 = _mm256_add_epi32(s3, _mm256_load_si256(reinterpret_cast<const __m256i*>(words + i + 24)));
    }
    const __m256i s = _mm256_add_epi32(_mm256_add_epi32(s0, s1), _mm256_add_epi32(s2, s3));
    alignas(32) uint32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
    uint64_t total = 0;
    for (uint32_t v : lanes)
        total += v;
    return total;
}

float fma_chain_avx2(uint64_t iterations, float m, float a)
{
    // Twelve independent chains hide the FMA latency (4–5 cycles, two ports).
    const __m256 vm = _mm256_set1_ps(m), va = _mm256_set1_ps(a);
    __m256 acc[12];
    for (int i = 0; i < 12; ++i)
        acc[i] = _mm256_set1_ps(static_cast<float>(i) * 0.01f);
    for (uint64_t it = 0; it < iterations; ++it)
        for (auto& x : acc)
            x = _mm256_fmadd_ps(x, vm, va);
    __m256 s = acc[0];
    for (int i = 1; i < 12; ++i)
        s = _mm256_add_ps(s, acc[i]);
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, s);
    float total = 0.0f;
    for (float v : lanes)
        total += v;
    return total;
}

} // namespace engine::probe
