// SPDX-License-Identifier: GPL-3.0-or-later
#include "quant/simd/activation_simd.h"

#include <immintrin.h>

namespace engine::simd {

int64_t f32_to_f16_avx2(const float* x, uint16_t* out, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    return i;
}

int64_t f32_to_bf16_avx2(const float* x, uint16_t* out, int64_t n)
{
    const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF), inf = _mm256_set1_epi32(0x7F800000);
    const __m256i round = _mm256_set1_epi32(0x7FFF), one = _mm256_set1_epi32(1), quiet = _mm256_set1_epi32(64);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
        // rounded: (u + 0x7FFF + ((u >> 16) & 1)) >> 16; a NaN keeps its top half, made quiet
        const __m256i rounded = _mm256_srli_epi32(
            _mm256_add_epi32(u, _mm256_add_epi32(round, _mm256_and_si256(_mm256_srli_epi32(u, 16), one))), 16);
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
        const __m256i v = _mm256_blendv_epi8(rounded, _mm256_or_si256(_mm256_srli_epi32(u, 16), quiet), nan);
        // eight 32-bit values (each < 65536) to eight 16-bit ones, in order
        const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0x08);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_castsi256_si128(packed));
    }
    return i;
}

float abs_max_avx2(const float* x, int n)
{
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < n; j += 8) // max_ps returns its second operand when either is NaN: m is kept
        m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + j), abs_mask), m);
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

int q8_0_quants_avx2(const float* x, float id, int8_t qs[32])
{
    const __m256 scale = _mm256_set1_ps(id);
    __m256i q[4];
    for (int k = 0; k < 4; ++k)
        q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), scale),
                                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    s = _mm_hadd_epi32(s, s);
    s = _mm_hadd_epi32(s, s);
    // thirty-two int32 (within ±127) to thirty-two bytes in order: the packs interleave 128-bit
    // lanes, the permute puts the eight groups of four back
    const __m256i words01 = _mm256_packs_epi32(q[0], q[1]), words23 = _mm256_packs_epi32(q[2], q[3]);
    const __m256i bytes =
        _mm256_permutevar8x32_epi32(_mm256_packs_epi16(words01, words23), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), bytes);
    return _mm_cvtsi128_si32(s);
}

void q8_k_quants_avx2(const float* x, float iscale, int8_t qs[256], int16_t bsums[16])
{
    const __m256 scale = _mm256_set1_ps(iscale), magic = _mm256_set1_ps(12582912.f);
    const __m256i mantissa = _mm256_set1_epi32(0x007fffff), offset = _mm256_set1_epi32(0x00400000);
    const __m256i cap = _mm256_set1_epi32(127);
    for (int g = 0; g < 16; ++g) {
        __m256i q[2];
        for (int h = 0; h < 2; ++h) {
            const __m256 shifted = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 16 * g + 8 * h), scale), magic);
            q[h] = _mm256_min_epi32(_mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(shifted), mantissa), offset),
                                    cap);
        }
        const __m256i sum = _mm256_add_epi32(q[0], q[1]);
        __m128i s = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
        s = _mm_hadd_epi32(s, s);
        s = _mm_hadd_epi32(s, s);
        bsums[g] = static_cast<int16_t>(_mm_cvtsi128_si32(s));
        // sixteen int32 (within ±127) to sixteen bytes in order
        const __m256i words = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[0], q[1]), 0xD8);
        const __m128i bytes = _mm_packs_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16 * g), bytes);
    }
}

} // namespace engine::simd
