// SPDX-License-Identifier: GPL-3.0-or-later
// AVX2 versions of kernel_geglu and kernel_swiglu (cpu_kernels.h), bit for bit: the same F16 table
// lookups and the same exponential, eight elements at a time.
#include "backend/cpu/simd/glu_simd.h"

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/simd/expf8_avx2.h"

#include <immintrin.h>
#include <vector>

namespace engine::cpu::simd {

namespace {

// The GELU table with two bytes of padding: a 32-bit gather at the last entry stays inside it.
const uint16_t* padded_gelu_table()
{
    static const std::vector<uint16_t> table = [] {
        const auto& t = gelu_f16_table();
        std::vector<uint16_t> v(t.begin(), t.end());
        v.push_back(0);
        return v;
    }();
    return table.data();
}

} // namespace

int64_t geglu_avx2(const float* gate, const float* up, float* y, int64_t n)
{
    const uint16_t* table = padded_gelu_table();
    const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
    const __m256i low16 = _mm256_set1_epi32(0xFFFF);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(gate + i), u = _mm256_loadu_ps(up + i);
        const __m256i index = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
        const __m256i g32 =
            _mm256_and_si256(_mm256_i32gather_epi32(reinterpret_cast<const int*>(table), index, 2), low16);
        const __m128i g16 = _mm_packus_epi32(_mm256_castsi256_si128(g32), _mm256_extracti128_si256(g32, 1));
        __m256 v = _mm256_mul_ps(_mm256_cvtph_ps(g16), u);
        v = _mm256_blendv_ps(v, _mm256_mul_ps(x, u), _mm256_cmp_ps(x, hi, _CMP_GE_OQ));
        v = _mm256_blendv_ps(v, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LE_OQ));
        _mm256_storeu_ps(y + i, v);
    }
    return i;
}

int64_t swiglu_avx2(const float* gate, const float* up, float* y, int64_t n)
{
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 g = _mm256_loadu_ps(gate + i);
        const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, expf8(_mm256_xor_ps(g, sign))));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
    }
    return i;
}

} // namespace engine::cpu::simd
