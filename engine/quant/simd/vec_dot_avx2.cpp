// SPDX-License-Identifier: GPL-3.0-or-later
// AVX2 versions of the hot dot products. Same integer sums per block as the scalar code; only the
// order of the float accumulation differs (8 lanes, summed at the end).
#include "quant/simd/vec_dot_simd.h"

#include "util/fp16.h"

#include <cmath>
#include <cstring>
#include <immintrin.h>

namespace engine::simd {

namespace {

inline float hsum(__m256 v)
{
    __m128 lo = _mm256_castps256_ps128(v);
    __m128 hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

inline float half(const uint8_t* p)
{
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

// Weight rows are streamed once per decode step, and the hardware prefetcher alone leaves the
// loads stalled (measured: decode 30.6 → 17 ms per token on the default model with this); rows of a
// task are contiguous, so reading ahead across the row end is useful. Distance tuned on the default
// model (1, 2, 3, 4 and 8 KiB tried).
constexpr int kPrefetchAhead = 2048;
inline void prefetch_ahead(const uint8_t* x, int bytes)
{
    for (int at = 0; at < bytes; at += 64)
        _mm_prefetch(reinterpret_cast<const char*>(x) + kPrefetchAhead + at, _MM_HINT_T0);
}

// 32 signed bytes · 32 signed bytes → 8 int32 partial sums (|a| ≤ 128 and b ≠ −128 keep maddubs exact).
inline __m256i dot_i8(__m256i a, __m256i b)
{
    const __m256i abs_a = _mm256_sign_epi8(a, a);
    const __m256i b_signed = _mm256_sign_epi8(b, a);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(abs_a, b_signed), _mm256_set1_epi16(1));
}

// Elements 0–15 from the low nibbles of 16 bytes, elements 16–31 from the high nibbles.
inline __m256i nibbles_32(const uint8_t* qs)
{
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    const __m128i mask = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), mask), _mm_and_si128(b, mask));
}

// 32 bits → 32 bytes, 0xFF where the bit (bit i for byte i) is set.
inline __m256i bits_to_bytes(uint32_t bits)
{
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                                               _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                                                2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i bit = _mm256_set1_epi64x(0x8040201008040201ll);
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

float dot_q8_0(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / 32; ++b, x += 34) {
        prefetch_ahead(x, 1);
        const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 2));
        const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].qs));
        const __m256 d = _mm256_set1_ps(half(x) * _cvtsh_ss(y[b].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8(qx, qy)), acc);
    }
    return hsum(acc);
}

float dot_q5_0(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    __m256 acc = _mm256_setzero_ps();
    const __m256i high_bit = _mm256_set1_epi8(0x10);
    const __m256i offset = _mm256_set1_epi8(16);
    for (int64_t b = 0; b < n / 32; ++b, x += 22) {
        prefetch_ahead(x, 1);
        uint32_t qh;
        std::memcpy(&qh, x + 2, 4);
        __m256i q = _mm256_or_si256(nibbles_32(x + 6), _mm256_and_si256(bits_to_bytes(qh), high_bit));
        q = _mm256_sub_epi8(q, offset);
        const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].qs));
        const __m256 d = _mm256_set1_ps(half(x) * _cvtsh_ss(y[b].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8(q, qy)), acc);
    }
    return hsum(acc);
}

float dot_q4_0(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    __m256 acc = _mm256_setzero_ps();
    const __m256i offset = _mm256_set1_epi8(8);
    for (int64_t b = 0; b < n / 32; ++b, x += 18) {
        const __m256i q = _mm256_sub_epi8(nibbles_32(x + 2), offset);
        const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].qs));
        const __m256 d = _mm256_set1_ps(half(x) * _cvtsh_ss(y[b].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8(q, qy)), acc);
    }
    return hsum(acc);
}

void scale_min_k4(const uint8_t* q, int* sc, int* m)
{
    for (int j = 0; j < 8; ++j) {
        if (j < 4) {
            sc[j] = q[j] & 63;
            m[j] = q[j + 4] & 63;
        } else {
            sc[j] = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
            m[j] = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
        }
    }
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
        int sc[8], m[8];
        scale_min_k4(x + 4, sc, m);
        const uint8_t* qs = x + 16;
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 4; ++c) {
            const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * c));
            const __m256i lo = _mm256_and_si256(bytes, low_mask);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low_mask);
            const __m256i y_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].qs + 64 * c));
            const __m256i y_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].qs + 64 * c + 32));
            const __m256i p_lo =
                _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y_lo), _mm256_set1_epi16(static_cast<short>(sc[2 * c])));
            const __m256i p_hi =
                _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y_hi), _mm256_set1_epi16(static_cast<short>(sc[2 * c + 1])));
            isum = _mm256_add_epi32(isum, _mm256_add_epi32(p_lo, p_hi));
        }
        // Mins in 4 lanes: lane l holds m[2l]·(bsums of sub-block 2l) + m[2l+1]·(… 2l+1).
        int mins[4];
        for (int l = 0; l < 4; ++l)
            mins[l] = m[2 * l] * (y[b].bsums[4 * l] + y[b].bsums[4 * l + 1]) +
                      m[2 * l + 1] * (y[b].bsums[4 * l + 2] + y[b].bsums[4 * l + 3]);
        const float d = y[b].d * half(x);
        const float neg_dmin = -y[b].d * half(x + 2);
        acc_m = _mm_fmadd_ps(_mm_set1_ps(neg_dmin),
                             _mm_cvtepi32_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(mins))), acc_m);
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

float dot_f32(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const float*>(w);
    const auto* y = static_cast<const float*>(a);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), acc1);
    }
    float sum = hsum(_mm256_add_ps(acc0, acc1));
    for (; i < n; ++i)
        sum += x[i] * y[i];
    return sum;
}

// ---- four activation rows per weight row (prefill) ------------------------------------------------
// Each token keeps its own accumulator fed in the same block order as the one-row kernels above,
// so the results are the same bits; the weight block is unpacked once for the four.

void dot_q8_0_x4(const void* w, const void* const a[4], int64_t n, float out[4])
{
    const auto* x = static_cast<const uint8_t*>(w);
    const BlockQ8_0* y[4] = {static_cast<const BlockQ8_0*>(a[0]), static_cast<const BlockQ8_0*>(a[1]),
                             static_cast<const BlockQ8_0*>(a[2]), static_cast<const BlockQ8_0*>(a[3])};
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t b = 0; b < n / 32; ++b, x += 34) {
        const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 2));
        const __m256i abs_x = _mm256_sign_epi8(qx, qx);
        const float dx = half(x);
        for (int t = 0; t < 4; ++t) {
            const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][b].qs));
            const __m256i prod =
                _mm256_madd_epi16(_mm256_maddubs_epi16(abs_x, _mm256_sign_epi8(qy, qx)), _mm256_set1_epi16(1));
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dx * _cvtsh_ss(y[t][b].d)), _mm256_cvtepi32_ps(prod), acc[t]);
        }
    }
    for (int t = 0; t < 4; ++t)
        out[t] = hsum(acc[t]);
}

void dot_q5_0_x4(const void* w, const void* const a[4], int64_t n, float out[4])
{
    const auto* x = static_cast<const uint8_t*>(w);
    const BlockQ8_0* y[4] = {static_cast<const BlockQ8_0*>(a[0]), static_cast<const BlockQ8_0*>(a[1]),
                             static_cast<const BlockQ8_0*>(a[2]), static_cast<const BlockQ8_0*>(a[3])};
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const __m256i high_bit = _mm256_set1_epi8(0x10);
    const __m256i offset = _mm256_set1_epi8(16);
    for (int64_t b = 0; b < n / 32; ++b, x += 22) {
        uint32_t qh;
        std::memcpy(&qh, x + 2, 4);
        __m256i q = _mm256_or_si256(nibbles_32(x + 6), _mm256_and_si256(bits_to_bytes(qh), high_bit));
        q = _mm256_sub_epi8(q, offset);
        const __m256i abs_q = _mm256_sign_epi8(q, q);
        const float dx = half(x);
        for (int t = 0; t < 4; ++t) {
            const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][b].qs));
            const __m256i prod =
                _mm256_madd_epi16(_mm256_maddubs_epi16(abs_q, _mm256_sign_epi8(qy, q)), _mm256_set1_epi16(1));
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dx * _cvtsh_ss(y[t][b].d)), _mm256_cvtepi32_ps(prod), acc[t]);
        }
    }
    for (int t = 0; t < 4; ++t)
        out[t] = hsum(acc[t]);
}

void dot_q4_k_x4(const void* w, const void* const a[4], int64_t n, float out[4])
{
    const auto* x = static_cast<const uint8_t*>(w);
    const BlockQ8_K* y[4] = {static_cast<const BlockQ8_K*>(a[0]), static_cast<const BlockQ8_K*>(a[1]),
                             static_cast<const BlockQ8_K*>(a[2]), static_cast<const BlockQ8_K*>(a[3])};
    const __m256i low_mask = _mm256_set1_epi8(0x0F);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    __m128 acc_m[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
    for (int64_t b = 0; b < n / 256; ++b, x += 144) {
        int sc[8], m[8];
        scale_min_k4(x + 4, sc, m);
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
                const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo[c], y_lo),
                                                       _mm256_set1_epi16(static_cast<short>(sc[2 * c])));
                const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi[c], y_hi),
                                                       _mm256_set1_epi16(static_cast<short>(sc[2 * c + 1])));
                isum = _mm256_add_epi32(isum, _mm256_add_epi32(p_lo, p_hi));
            }
            int mins[4];
            for (int l = 0; l < 4; ++l)
                mins[l] = m[2 * l] * (y[t][b].bsums[4 * l] + y[t][b].bsums[4 * l + 1]) +
                          m[2 * l + 1] * (y[t][b].bsums[4 * l + 2] + y[t][b].bsums[4 * l + 3]);
            const float d = y[t][b].d * dx;
            const float neg_dmin = -y[t][b].d * dminx;
            acc_m[t] = _mm_fmadd_ps(_mm_set1_ps(neg_dmin),
                                    _mm_cvtepi32_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(mins))), acc_m[t]);
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

inline int hsum_i32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

inline float tiled_step(float acc, float d, int s1, float dmin, int s2, float d8, bool has_min)
{
    float res = d * static_cast<float>(s1);
    if (has_min)
        res = std::fma(-dmin, static_cast<float>(s2), res);
    return std::fma(res, d8, acc);
}

struct Q4kBlock {
    __m256i lo[4], hi[4];
    int sc[8], m[8];
    float d, dmin;
    explicit Q4kBlock(const uint8_t* x)
    {
        const __m256i low_mask = _mm256_set1_epi8(0x0F);
        scale_min_k4(x + 4, sc, m);
        for (int c = 0; c < 4; ++c) {
            const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 16 + 32 * c));
            lo[c] = _mm256_and_si256(bytes, low_mask);
            hi[c] = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low_mask);
        }
        d = half(x);
        dmin = half(x + 2);
    }
    float step(float acc, const BlockQ8_K& y) const
    {
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 4; ++c) {
            const __m256i y_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs + 64 * c));
            const __m256i y_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs + 64 * c + 32));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(lo[c], y_lo),
                                                            _mm256_set1_epi16(static_cast<short>(sc[2 * c]))));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(hi[c], y_hi),
                                                            _mm256_set1_epi16(static_cast<short>(sc[2 * c + 1]))));
        }
        int s2 = 0;
        for (int sub = 0; sub < 8; ++sub)
            s2 += m[sub] * (y.bsums[2 * sub] + y.bsums[2 * sub + 1]);
        return tiled_step(acc, d, hsum_i32(isum), dmin, s2, y.d, true);
    }
};

struct Q6kBlock {
    __m256i quarter[2][4];
    __m256i scale[2][4];
    const int8_t* scales;
    float d;
    explicit Q6kBlock(const uint8_t* x)
    {
        const __m256i low_mask = _mm256_set1_epi8(0x0F);
        const __m256i two_bits = _mm256_set1_epi8(0x03);
        const uint8_t* ql = x;
        const uint8_t* qh = x + 128;
        scales = reinterpret_cast<const int8_t*>(x + 192);
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
    float step(float acc, const BlockQ8_K& y) const
    {
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; ++h)
            for (int q = 0; q < 4; ++q) {
                const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs + 128 * h + 32 * q));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(quarter[h][q], qy), scale[h][q]));
            }
        int offset = 0; // stored values are q + 32
        for (int g = 0; g < 16; ++g)
            offset += scales[g] * y.bsums[g];
        return tiled_step(acc, d, hsum_i32(isum) - 32 * offset, 0.0f, 0, y.d, false);
    }
};

template <typename Block, int kBlockBytes> float dot_tiled(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float acc = 0.0f;
    for (int64_t b = 0; b < n / 256; ++b, x += kBlockBytes)
        acc = Block(x).step(acc, y[b]);
    return acc;
}

template <typename Block, int kBlockBytes>
void dot_tiled_x4(const void* w, const void* const a[4], int64_t n, float out[4])
{
    const auto* x = static_cast<const uint8_t*>(w);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t b = 0; b < n / 256; ++b, x += kBlockBytes) {
        const Block blk(x);
        for (int t = 0; t < 4; ++t)
            acc[t] = blk.step(acc[t], static_cast<const BlockQ8_K*>(a[t])[b]);
    }
    for (int t = 0; t < 4; ++t)
        out[t] = acc[t];
}

} // namespace

VecDotFn vec_dot_tiled_avx2(GgmlType type)
{
    switch (type) {
    case GgmlType::Q4_K:
        return dot_tiled<Q4kBlock, 144>;
    case GgmlType::Q6_K:
        return dot_tiled<Q6kBlock, 210>;
    default:
        return nullptr;
    }
}

VecDotX4Fn vec_dot_tiled_x4_avx2(GgmlType type)
{
    switch (type) {
    case GgmlType::Q4_K:
        return dot_tiled_x4<Q4kBlock, 144>;
    case GgmlType::Q6_K:
        return dot_tiled_x4<Q6kBlock, 210>;
    default:
        return nullptr;
    }
}

VecDotX4Fn vec_dot_x4_avx2(GgmlType type)
{
    switch (type) {
    case GgmlType::Q8_0:
        return dot_q8_0_x4;
    case GgmlType::Q5_0:
        return dot_q5_0_x4;
    case GgmlType::Q4_K:
        return dot_q4_k_x4;
    case GgmlType::Q6_K:
        return dot_q6_k_x4;
    default:
        return nullptr;
    }
}

VecDotFn vec_dot_avx2(GgmlType type)
{
    switch (type) {
    case GgmlType::Q8_0:
        return dot_q8_0;
    case GgmlType::Q4_0:
        return dot_q4_0;
    case GgmlType::Q5_0:
        return dot_q5_0;
    case GgmlType::Q4_K:
        return dot_q4_k;
    case GgmlType::Q5_K:
        return dot_q5_k;
    case GgmlType::Q6_K:
        return dot_q6_k;
    case GgmlType::F32:
        return dot_f32;
    default:
        return nullptr;
    }
}

} // namespace engine::simd
