// SPDX-License-Identifier: GPL-3.0-or-later
// Small pieces the x86 attention files share. Internal linkage on purpose: each file compiles them with
// its own instruction-set flags, and one shared out-of-line copy built for AVX-512 would be called on
// CPUs without it (as quant/simd/x86_block_helpers.h).
#pragma once

#include "backend/cpu/attention_kernels.h"

#include <cstddef>
#include <cstdint>
#include <immintrin.h>
#include <limits>

namespace engine::cpu::simd {
namespace { // NOLINT(cert-dcl59-cpp,google-build-namespaces): see above

inline __m256 load_f16(const uint16_t* p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// 8×8 transpose: row i of the result is column i of the input.
inline void transpose8(__m256 r[8])
{
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// Prefill's scores over slots [j0, j1): the live slots (a key, below n_slots) handed to
// score(live, n_live) in groups of up to N, in slot order; a masked slot gets −∞ in every row.
template <uint32_t N, class Score>
inline void live_key_groups(const AttentionRow& row0, uint32_t n_rows, uint32_t n_slots, float* scores,
                            std::size_t stride, uint32_t j0, uint32_t j1, Score&& score)
{
    uint32_t live[N];
    uint32_t n_live = 0;
    for (uint32_t j = j0; j < j1; ++j) {
        if (j >= n_slots || !row0.keys[j]) {
            for (uint32_t r = 0; r < n_rows; ++r)
                scores[std::size_t(r) * stride + j] = -std::numeric_limits<float>::infinity();
            continue;
        }
        live[n_live++] = j;
        if (n_live == N) {
            score(live, n_live);
            n_live = 0;
        }
    }
    if (n_live)
        score(live, n_live);
}

} // namespace
} // namespace engine::cpu::simd
