// SPDX-License-Identifier: GPL-3.0-or-later
// AVX2 versions of the hot dot products. Same integer sums per block as the scalar code; only the
// order of the float accumulation differs (8 lanes, summed at the end).
#include "quant/simd/vec_dot_simd.h"
#include "quant/simd/x86_block_helpers.h"

#include <cmath>
#include <cstring>
#include <immintrin.h>

namespace engine::simd {

namespace {

// A Q5_0 or Q8_0 block's 32 weights as signed bytes.
inline __m256i unpack_q5_0(const uint8_t* x)
{
    uint32_t qh;
    std::memcpy(&qh, x + 2, 4);
    const __m256i q = _mm256_or_si256(nibbles_32(x + 6), _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10)));
    return _mm256_sub_epi8(q, _mm256_set1_epi8(16));
}

inline __m256i unpack_q8_0(const uint8_t* x)
{
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 2));
}

float dot_q4_k(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    const __m256i low_mask = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    __m128 acc_m = _mm_setzero_ps();
    for (int64_t b = 0; b < n / 256; ++b, x += 144) {
        prefetch_ahead(x, 144);
        const __m128i packed = scales_mins_k4(x + 4);
        const __m256i scales = k4_scales16(packed);
        const uint8_t* qs = x + 16;
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 4; ++c) {
            const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * c));
            const __m256i lo = _mm256_and_si256(bytes, low_mask);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low_mask);
            const __m256i y_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].qs + 64 * c));
            const __m256i y_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].qs + 64 * c + 32));
            const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y_lo), k4_scale(scales, 2 * c));
            const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y_hi), k4_scale(scales, 2 * c + 1));
            isum = _mm256_add_epi32(isum, _mm256_add_epi32(p_lo, p_hi));
        }
        // Mins in 4 lanes: lane l holds m[2l]·(bsums of sub-block 2l) + m[2l+1]·(… 2l+1).
        const float d = y[b].d * half(x);
        const float neg_dmin = -y[b].d * half(x + 2);
        acc_m = _mm_fmadd_ps(_mm_set1_ps(neg_dmin), _mm_cvtepi32_ps(k4_min_products(packed, y[b].bsums)), acc_m);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
    }
    acc_m = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
    acc_m = _mm_add_ss(acc_m, _mm_movehdup_ps(acc_m));
    return hsum(acc) + _mm_cvtss_f32(acc_m);
}

// Q5_K as ggml's AVX2 code: integer lanes as Q4_K's (values carry the fifth bit), the mins folded
// into one scalar with a fused multiply-add per block (its compiled `summs += dmin * s2`).
float dot_q5_k(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    const __m256i low_mask = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.0f;
    for (int64_t b = 0; b < n / 256; ++b, x += 176) {
        prefetch_ahead(x, 176);
        int sc[8], m[8];
        scale_min_k4(x + 4, sc, m);
        const __m256i hbits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 16));
        const uint8_t* qs = x + 48;
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 4; ++c) {
            const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * c));
            const __m256i bit_lo = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c), _mm256_set1_epi8(1));
            const __m256i bit_hi = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c + 1), _mm256_set1_epi8(1));
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(bytes, low_mask), _mm256_slli_epi16(bit_lo, 4));
            const __m256i hi =
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bytes, 4), low_mask), _mm256_slli_epi16(bit_hi, 4));
            const __m256i y_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].qs + 64 * c));
            const __m256i y_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].qs + 64 * c + 32));
            isum = _mm256_add_epi32(
                isum, _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(lo, y_lo),
                                                         _mm256_set1_epi16(static_cast<short>(sc[2 * c]))),
                                       _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y_hi),
                                                         _mm256_set1_epi16(static_cast<short>(sc[2 * c + 1])))));
        }
        int s2 = 0;
        for (int sub = 0; sub < 8; ++sub)
            s2 += m[sub] * (y[b].bsums[2 * sub] + y[b].bsums[2 * sub + 1]);
        const float d = y[b].d * half(x);
        const float neg_dmin = -y[b].d * half(x + 2);
        summs = std::fma(neg_dmin, static_cast<float>(s2), summs);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
    }
    return hsum(acc) + summs;
}

float dot_q6_k(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    const __m256i low_mask = _mm256_set1_epi8(0x0F);
    const __m256i two_bits = _mm256_set1_epi8(0x03);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / 256; ++b, x += 210) {
        prefetch_ahead(x, 210);
        const uint8_t* ql = x;
        const uint8_t* qh = x + 128;
        const auto* scales = reinterpret_cast<const int8_t*>(x + 192);
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; ++h) {
            const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 64 * h));
            const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 64 * h + 32));
            const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh + 32 * h));
            const __m256i quarter[4] = {
                _mm256_or_si256(_mm256_and_si256(l0, low_mask), _mm256_slli_epi16(_mm256_and_si256(hb, two_bits), 4)),
                _mm256_or_si256(_mm256_and_si256(l1, low_mask),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), two_bits), 4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low_mask),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), two_bits), 4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low_mask),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), two_bits), 4)),
            };
            for (int q = 0; q < 4; ++q) {
                const int g = 8 * h + 2 * q; // first 16-group of these 32 elements
                const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].qs + 128 * h + 32 * q));
                const __m256i scale = _mm256_set_m128i(_mm_set1_epi16(scales[g + 1]), _mm_set1_epi16(scales[g]));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(quarter[q], qy), scale));
            }
        }
        // The stored values are q + 32: lane l subtracts 32 · (scale·bsum) of 16-groups 2l and 2l+1.
        int offset[8];
        for (int l = 0; l < 8; ++l)
            offset[l] = 32 * (scales[2 * l] * y[b].bsums[2 * l] + scales[2 * l + 1] * y[b].bsums[2 * l + 1]);
        isum = _mm256_sub_epi32(isum, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(offset)));
        const float d = half(x + 208) * y[b].d;
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
    }
    return hsum(acc);
}

// ---- four activation rows per weight row (prefill) ------------------------------------------------
// Each token keeps its own accumulator fed in the same block order as the one-row kernels above,
// so the results are the same bits; the weight block is unpacked once for the four.

void dot_q4_k_x4(const void* w, const void* const a[4], int64_t n, float out[4])
{
    const auto* x = static_cast<const uint8_t*>(w);
    const BlockQ8_K* y[4] = {static_cast<const BlockQ8_K*>(a[0]), static_cast<const BlockQ8_K*>(a[1]),
                             static_cast<const BlockQ8_K*>(a[2]), static_cast<const BlockQ8_K*>(a[3])};
    const __m256i low_mask = _mm256_set1_epi8(0x0F);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    __m128 acc_m[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
    for (int64_t b = 0; b < n / 256; ++b, x += 144) {
        const __m128i packed = scales_mins_k4(x + 4);
        const __m256i scales = k4_scales16(packed);
        const uint8_t* qs = x + 16;
        __m256i lo[4], hi[4];
        for (int c = 0; c < 4; ++c) {
            const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * c));
            lo[c] = _mm256_and_si256(bytes, low_mask);
            hi[c] = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low_mask);
        }
        const float dx = half(x), dminx = half(x + 2);
        for (int t = 0; t < 4; ++t) {
            __m256i isum = _mm256_setzero_si256();
            for (int c = 0; c < 4; ++c) {
                const __m256i y_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][b].qs + 64 * c));
                const __m256i y_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][b].qs + 64 * c + 32));
                const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo[c], y_lo), k4_scale(scales, 2 * c));
                const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi[c], y_hi), k4_scale(scales, 2 * c + 1));
                isum = _mm256_add_epi32(isum, _mm256_add_epi32(p_lo, p_hi));
            }
            const float d = y[t][b].d * dx;
            const float neg_dmin = -y[t][b].d * dminx;
            acc_m[t] =
                _mm_fmadd_ps(_mm_set1_ps(neg_dmin), _mm_cvtepi32_ps(k4_min_products(packed, y[t][b].bsums)), acc_m[t]);
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc[t]);
        }
    }
    for (int t = 0; t < 4; ++t) {
        __m128 am = _mm_add_ps(acc_m[t], _mm_movehl_ps(acc_m[t], acc_m[t]));
        am = _mm_add_ss(am, _mm_movehdup_ps(am));
        out[t] = hsum(acc[t]) + _mm_cvtss_f32(am);
    }
}

void dot_q6_k_x4(const void* w, const void* const a[4], int64_t n, float out[4])
{
    const auto* x = static_cast<const uint8_t*>(w);
    const BlockQ8_K* y[4] = {static_cast<const BlockQ8_K*>(a[0]), static_cast<const BlockQ8_K*>(a[1]),
                             static_cast<const BlockQ8_K*>(a[2]), static_cast<const BlockQ8_K*>(a[3])};
    const __m256i low_mask = _mm256_set1_epi8(0x0F);
    const __m256i two_bits = _mm256_set1_epi8(0x03);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t b = 0; b < n / 256; ++b, x += 210) {
        const uint8_t* ql = x;
        const uint8_t* qh = x + 128;
        const auto* scales = reinterpret_cast<const int8_t*>(x + 192);
        __m256i quarter[2][4];
        __m256i scale[2][4];
        for (int h = 0; h < 2; ++h) {
            const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 64 * h));
            const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 64 * h + 32));
            const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh + 32 * h));
            quarter[h][0] =
                _mm256_or_si256(_mm256_and_si256(l0, low_mask), _mm256_slli_epi16(_mm256_and_si256(hb, two_bits), 4));
            quarter[h][1] = _mm256_or_si256(_mm256_and_si256(l1, low_mask),
                                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), two_bits), 4));
            quarter[h][2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low_mask),
                                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), two_bits), 4));
            quarter[h][3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low_mask),
                                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), two_bits), 4));
            for (int q = 0; q < 4; ++q) {
                const int g = 8 * h + 2 * q;
                scale[h][q] = _mm256_set_m128i(_mm_set1_epi16(scales[g + 1]), _mm_set1_epi16(scales[g]));
            }
        }
        const float dx = half(x + 208);
        for (int t = 0; t < 4; ++t) {
            __m256i isum = _mm256_setzero_si256();
            for (int h = 0; h < 2; ++h)
                for (int q = 0; q < 4; ++q) {
                    const __m256i qy =
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][b].qs + 128 * h + 32 * q));
                    isum =
                        _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(quarter[h][q], qy), scale[h][q]));
                }
            int off[8];
            for (int l = 0; l < 8; ++l)
                off[l] = 32 * (scales[2 * l] * y[t][b].bsums[2 * l] + scales[2 * l + 1] * y[t][b].bsums[2 * l + 1]);
            isum = _mm256_sub_epi32(isum, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(off)));
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dx * y[t][b].d), _mm256_cvtepi32_ps(isum), acc[t]);
        }
    }
    for (int t = 0; t < 4; ++t)
        out[t] = hsum(acc[t]);
}

// ---- k-quants in llama.cpp's tiled order ---------------------------------------------------------
// The integer block sums are exact in any lane layout; only the float steps are ordered, scalar.

struct Q6kBlock {
    __m256i quarter[2][4];
    __m256i scale[2][4];
    __m256i scales16; // the 16 sub-block scales as int16
    float d;
    explicit Q6kBlock(const uint8_t* x)
    {
        const __m256i low_mask = _mm256_set1_epi8(0x0F);
        const __m256i two_bits = _mm256_set1_epi8(0x03);
        const uint8_t* ql = x;
        const uint8_t* qh = x + 128;
        const auto* scales = reinterpret_cast<const int8_t*>(x + 192);
        scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales)));
        for (int h = 0; h < 2; ++h) {
            const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 64 * h));
            const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 64 * h + 32));
            const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh + 32 * h));
            quarter[h][0] =
                _mm256_or_si256(_mm256_and_si256(l0, low_mask), _mm256_slli_epi16(_mm256_and_si256(hb, two_bits), 4));
            quarter[h][1] = _mm256_or_si256(_mm256_and_si256(l1, low_mask),
                                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), two_bits), 4));
            quarter[h][2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low_mask),
                                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), two_bits), 4));
            quarter[h][3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low_mask),
                                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), two_bits), 4));
            for (int q = 0; q < 4; ++q) {
                const int g = 8 * h + 2 * q;
                scale[h][q] = _mm256_set_m128i(_mm_set1_epi16(scales[g + 1]), _mm_set1_epi16(scales[g]));
            }
        }
        d = half(x + 208);
    }
    static constexpr bool kHasMin = false;
    float dmin = 0.0f;
    void vectors(const BlockQ8_K& y, __m256i& v1, __m256i& v2) const // unreduced s1 (dot_tiled_x8_lanes)
    {
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; ++h)
            for (int q = 0; q < 4; ++q) {
                const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs + 128 * h + 32 * q));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(quarter[h][q], qy), scale[h][q]));
            }
        // stored values are q + 32: subtract 32 · Σ scale · bsum, lane by lane (exact)
        const __m256i offset = _mm256_madd_epi16(load_bsums(y.bsums), scales16);
        v1 = _mm256_sub_epi32(isum, _mm256_slli_epi32(offset, 5));
        v2 = _mm256_setzero_si256();
    }
    float step(float acc, const BlockQ8_K& y) const
    {
        __m256i v1, v2;
        vectors(y, v1, v2);
        return tiled_step(acc, d, hsum_i32(v1), 0.0f, 0, y.d, false);
    }
};

} // namespace

VecDotFn vec_dot_tiled_avx2(GgmlType type)
{
    switch (type) {
    case GgmlType::Q4_K:
        return dot_tiled<Q45kBlock<false>, 144>;
    case GgmlType::Q6_K:
        return dot_tiled<Q6kBlock, 210>;
    default:
        return types_avx2::tiled(type);
    }
}

VecDotX4Fn vec_dot_tiled_x4_avx2(GgmlType type)
{
    switch (type) {
    case GgmlType::Q4_K:
        return dot_tiled_x4<Q45kBlock<false>, 144>;
    case GgmlType::Q6_K:
        return dot_tiled_x4<Q6kBlock, 210>;
    default:
        return types_avx2::tiled_x4(type);
    }
}

VecDotX8Fn vec_dot_x8_avx2(GgmlType type)
{
    switch (type) {
    case GgmlType::Q8_0:
        return dot_blocks_x8<34, unpack_q8_0>;
    case GgmlType::Q5_0:
        return dot_blocks_x8<22, unpack_q5_0>;
    default:
        return types_avx2::x8(type);
    }
}

VecDotX8Fn vec_dot_tiled_x8_avx2(GgmlType type)
{
    switch (type) {
    case GgmlType::Q4_K:
        return dot_tiled_x8_lanes<Q45kBlock<false>, 144>;
    case GgmlType::Q6_K:
        return dot_tiled_x8_lanes<Q6kBlock, 210>;
    default:
        return types_avx2::tiled_x8(type);
    }
}

VecDotX4Fn vec_dot_x4_avx2(GgmlType type)
{
    switch (type) {
    case GgmlType::Q8_0:
        return dot_blocks_x4<34, unpack_q8_0>;
    case GgmlType::Q5_0:
        return dot_blocks_x4<22, unpack_q5_0>;
    case GgmlType::Q4_K:
        return dot_q4_k_x4;
    case GgmlType::Q6_K:
        return dot_q6_k_x4;
    default:
        return types_avx2::x4(type);
    }
}

VecDotFn vec_dot_avx2(GgmlType type)
{
    switch (type) {
    case GgmlType::Q8_0:
        return dot_blocks<34, unpack_q8_0>;
    case GgmlType::Q4_0:
        return dot_blocks<18, unpack_q4_0>;
    case GgmlType::Q5_0:
        return dot_blocks<22, unpack_q5_0>;
    case GgmlType::Q4_K:
        return dot_q4_k;
    case GgmlType::Q5_K:
        return dot_q5_k;
    case GgmlType::Q6_K:
        return dot_q6_k;
    default:
        return types_avx2::one_row(type);
    }
}

VecDotFn vec_dot_batched_avx2(GgmlType type, int64_t n)
{
    return types_avx2::batched(type, n);
}

} // namespace engine::simd
