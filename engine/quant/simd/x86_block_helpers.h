// SPDX-License-Identifier: GPL-3.0-or-later
// Small pieces the x86 dot-product files share (block unpacking, horizontal sums, the tiled order's
// float step). Internal linkage on purpose: each file compiles them with its own instruction-set
// flags, and one shared out-of-line copy built for AVX-512 would be called on CPUs without it.
#pragma once

#include "quant/activation_quant.h"
#include "util/fp16.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <immintrin.h>

namespace engine::simd {
namespace { // NOLINT(cert-dcl59-cpp,google-build-namespaces): see above

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
// model (1, 2, 3, 4 and 8 KiB tried: 2 KiB on an Intel Xeon at 22 GB/s); 4 KiB since a Zen 5 at 73 GB/s,
// where 2 KiB left decode waiting (default model 144 → 153 tokens/s, chat model 77 → 85, Q3_K twin
// 42.8 → 46.7).
constexpr int kPrefetchAhead = 4096;
inline void prefetch_ahead(const uint8_t* x, int bytes)
{
    for (int at = 0; at < bytes; at += 64)
        _mm_prefetch(reinterpret_cast<const char*>(x) + kPrefetchAhead + at, _MM_HINT_T0);
}

// The eight-row kernels' read-ahead: the same `bytes` of the next eight rows (a task's rows follow
// each other, so rows r + 8 are the next call's).
inline void prefetch_next_eight_rows(const uint8_t* x, std::size_t row_bytes, int bytes)
{
    for (int r = 0; r < 8; ++r)
        for (int at = 0; at < bytes; at += 64)
            _mm_prefetch(reinterpret_cast<const char*>(x + (r + 8) * row_bytes + at), _MM_HINT_T0);
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

inline void scale_min_k4(const uint8_t* q, int* sc, int* m)
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

inline int hsum_i32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

// Q3_K's sixteen 6-bit scales, minus 32, as int16 words in order: unpacked four at a time in 32-bit
// words as llama.cpp does (bits 0–3 from the first eight bytes, 4–5 from the last four).
inline __m256i q3_k_scales(const uint8_t* packed)
{
    uint32_t aux[3];
    std::memcpy(aux, packed, 12);
    constexpr uint32_t k2 = 0x0f0f0f0f, k1 = 0x03030303;
    const __m128i bytes = _mm_setr_epi32(static_cast<int>((aux[0] & k2) | ((aux[2] & k1) << 4)),
                                         static_cast<int>((aux[1] & k2) | (((aux[2] >> 2) & k1) << 4)),
                                         static_cast<int>(((aux[0] >> 4) & k2) | (((aux[2] >> 4) & k1) << 4)),
                                         static_cast<int>(((aux[1] >> 4) & k2) | (((aux[2] >> 6) & k1) << 4)));
    return _mm256_cvtepi8_epi16(_mm_sub_epi8(bytes, _mm_set1_epi8(32)));
}

inline float tiled_step(float acc, float d, int s1, float dmin, int s2, float d8, bool has_min)
{
    float res = d * static_cast<float>(s1);
    if (has_min)
        res = std::fma(-dmin, static_cast<float>(s2), res);
    return std::fma(res, d8, acc);
}

// Eight vectors of eight exact int32 partial sums → one vector of their eight totals (exact).
inline __m256i transpose_sums(const __m256i v[8])
{
    // lanes: [v0 lo, v1 lo, v2 lo, v3 lo | v0 hi, v1 hi, v2 hi, v3 hi] (lo: lanes 0–3 summed, hi: 4–7)
    const __m256i h0 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    const __m256i h1 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(h0, h1, 0x20), _mm256_permute2x128_si256(h0, h1, 0x31));
}

// The horizontal sums of two integer vectors at once (exact in any order).
inline void hsum2_i32(__m256i a, __m256i b, int& sum_a, int& sum_b)
{
    const __m256i pairs = _mm256_hadd_epi32(a, b); // a01 a23 b01 b23 | a45 a67 b45 b67
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(pairs), _mm256_extracti128_si256(pairs, 1));
    s = _mm_hadd_epi32(s, s); // a b a b
    sum_a = _mm_cvtsi128_si32(s);
    sum_b = _mm_extract_epi32(s, 1);
}

// Eight 6-bit k-quant minimums, each twice, as 16 int16 lanes: madd with a Q8_K block's 16 bsums
// gives each sub-block's m · (bsum₂ₛ + bsum₂ₛ₊₁) in one lane.
inline __m256i mins_pairs_epi16(const int* m)
{
    const __m128i m16 = _mm_packs_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(m)),
                                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(m + 4)));
    return _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16));
}

inline __m256i load_bsums(const int16_t* bsums)
{
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsums));
}

// A Q4_0 block's 32 weights as signed bytes.
inline __m256i unpack_q4_0(const uint8_t* x)
{
    return _mm256_sub_epi8(nibbles_32(x + 2), _mm256_set1_epi8(8));
}

inline __m256i load_qs(const int8_t* qs)
{
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
}

// One accumulator fed block by block (Q4_0's order; IQ4_NL's for batches of 2+ rows).
template <int kBytes, __m256i (*Unpack)(const uint8_t*)> float dot_blocks(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / 32; ++b, x += kBytes) {
        prefetch_ahead(x, 1);
        const __m256 d = _mm256_set1_ps(half(x) * _cvtsh_ss(y[b].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8(Unpack(x), load_qs(y[b].qs))), acc);
    }
    return hsum(acc);
}

template <int kBytes, __m256i (*Unpack)(const uint8_t*)>
void dot_blocks_x4(const void* w, const void* const a[4], int64_t n, float out[4])
{
    const auto* x = static_cast<const uint8_t*>(w);
    const BlockQ8_0* y[4] = {static_cast<const BlockQ8_0*>(a[0]), static_cast<const BlockQ8_0*>(a[1]),
                             static_cast<const BlockQ8_0*>(a[2]), static_cast<const BlockQ8_0*>(a[3])};
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t b = 0; b < n / 32; ++b, x += kBytes) {
        const __m256i q = Unpack(x);
        const __m256i abs_q = _mm256_sign_epi8(q, q);
        const float dx = half(x);
        for (int t = 0; t < 4; ++t) {
            const __m256i prod =
                _mm256_madd_epi16(_mm256_maddubs_epi16(abs_q, _mm256_sign_epi8(load_qs(y[t][b].qs), q)), ones);
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dx * _cvtsh_ss(y[t][b].d)), _mm256_cvtepi32_ps(prod), acc[t]);
        }
    }
    for (int t = 0; t < 4; ++t)
        out[t] = hsum(acc[t]);
}

// Q4_K and Q5_K decoded for the orders that sum a whole super-block's integers: llama.cpp's tiled
// order and its repacked order (Q4_K). The minimums as one exact
// sum.
// A K-quant super-block's eight 6-bit scales (bytes 0–7) and minimums (bytes 8–15) from its twelve
// packed bytes, a word at a time (scale_min_k4's values).
inline __m128i scales_mins_k4(const uint8_t* q)
{
    constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
    uint32_t w[3];
    std::memcpy(w, q, 12);
    const uint32_t scales_lo = w[0] & kLow6, mins_lo = w[1] & kLow6;
    const uint32_t scales_hi = (w[2] & kLow4) | (((w[0] >> 6) & kLow2) << 4);
    const uint32_t mins_hi = ((w[2] >> 4) & kLow4) | (((w[1] >> 6) & kLow2) << 4);
    return _mm_set_epi32(static_cast<int>(mins_hi), static_cast<int>(mins_lo), static_cast<int>(scales_hi),
                         static_cast<int>(scales_lo));
}

// The eight scales of scales_mins_k4 as int16 words, in both 128-bit halves.
inline __m256i k4_scales16(__m128i packed)
{
    return _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(packed));
}

// Sub-block j's scale in every int16 lane (of k4_scales16's vector).
inline __m256i k4_scale(__m256i scales16, int j)
{
    return _mm256_shuffle_epi8(scales16, _mm256_set1_epi16(static_cast<short>(((2 * j + 1) << 8) | (2 * j))));
}

// Lane l: m[2l]·(the bsums of sub-block 2l) + m[2l+1]·(those of 2l + 1), exact (pairs of bsums fit
// int16: 2 · 16 · 128).
inline __m128i k4_min_products(__m128i packed, const int16_t* bsums)
{
    const __m128i m16 = _mm_cvtepu8_epi16(_mm_srli_si128(packed, 8));
    const __m128i pairs = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bsums)),
                                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(bsums + 8)));
    return _mm_madd_epi16(m16, pairs);
}

template <bool Five> struct Q45kBlock {
    __m256i lo[4], hi[4];
    __m256i mins;               // mins_pairs_epi16's lanes
    __m256i scales;             // the eight scales as int16 words, in both 128-bit halves
    alignas(16) uint8_t sm[16]; // scales (0–7) and minimums (8–15), for the scalar sums
    float d, dmin;
    // Sub-block j's scale in every int16 lane.
    __m256i scale_of(int j) const { return k4_scale(scales, j); }
    explicit Q45kBlock(const uint8_t* x)
    {
        const __m256i low_mask = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
        const __m128i packed = scales_mins_k4(x + 4);
        _mm_store_si128(reinterpret_cast<__m128i*>(sm), packed);
        scales = k4_scales16(packed);
        const __m128i m16 = _mm_cvtepu8_epi16(_mm_srli_si128(packed, 8));
        mins = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16));
        const __m256i hbits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 16));
        for (int c = 0; c < 4; ++c) {
            const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + (Five ? 48 : 16) + 32 * c));
            lo[c] = _mm256_and_si256(bytes, low_mask);
            hi[c] = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low_mask);
            if constexpr (Five) {
                const __m256i bit_lo = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c), one);
                const __m256i bit_hi = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c + 1), one);
                lo[c] = _mm256_or_si256(lo[c], _mm256_slli_epi16(bit_lo, 4));
                hi[c] = _mm256_or_si256(hi[c], _mm256_slli_epi16(bit_hi, 4));
            }
        }
        d = half(x);
        dmin = half(x + 2);
    }
    // The partial sums of s1 and s2 below, not yet reduced (their lanes add up to them exactly).
    void vectors(const BlockQ8_K& y, __m256i& v1, __m256i& v2) const
    {
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 4; ++c) {
            isum = _mm256_add_epi32(
                isum, _mm256_madd_epi16(_mm256_maddubs_epi16(lo[c], load_qs(y.qs + 64 * c)), scale_of(2 * c)));
            isum = _mm256_add_epi32(
                isum, _mm256_madd_epi16(_mm256_maddubs_epi16(hi[c], load_qs(y.qs + 64 * c + 32)), scale_of(2 * c + 1)));
        }
        v1 = isum;
        v2 = _mm256_madd_epi16(load_bsums(y.bsums), mins);
    }
    static constexpr bool kHasMin = true;
    // s1 = Σ scale · (q · q8), s2 = Σ min · (bsum pair), both exact
    void sums(const BlockQ8_K& y, int& s1, int& s2) const
    {
        __m256i v1, v2;
        vectors(y, v1, v2);
        hsum2_i32(v1, v2, s1, s2);
    }
    float step(float acc, const BlockQ8_K& y) const
    {
        int s1 = 0, s2 = 0;
        sums(y, s1, s2);
        return tiled_step(acc, d, s1, dmin, s2, y.d, true);
    }
    // The same sums per 64-element pair c (sub-blocks 2c and 2c + 1), exact
    // The pairs' s1 unreduced (v[c]: pair c's lanes) and the minimums by sub-block (lane s: sub-block s's
    // m · bsum pair), for the gemm-order kernel that reduces eight rows at once.
    void pair_vectors(const BlockQ8_K& y, __m256i v[4], __m256i& w) const
    {
        for (int c = 0; c < 4; ++c)
            v[c] = _mm256_add_epi32(
                _mm256_madd_epi16(_mm256_maddubs_epi16(lo[c], load_qs(y.qs + 64 * c)), scale_of(2 * c)),
                _mm256_madd_epi16(_mm256_maddubs_epi16(hi[c], load_qs(y.qs + 64 * c + 32)), scale_of(2 * c + 1)));
        w = _mm256_madd_epi16(load_bsums(y.bsums), mins);
    }
    void pair_sums(const BlockQ8_K& y, int s1[4], int s2[4]) const
    {
        __m256i v[4];
        for (int c = 0; c < 4; ++c)
            v[c] = _mm256_add_epi32(
                _mm256_madd_epi16(_mm256_maddubs_epi16(lo[c], load_qs(y.qs + 64 * c)), scale_of(2 * c)),
                _mm256_madd_epi16(_mm256_maddubs_epi16(hi[c], load_qs(y.qs + 64 * c + 32)), scale_of(2 * c + 1)));
        const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(s1),
                         _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
        for (int c = 0; c < 4; ++c)
            s2[c] = sm[8 + 2 * c] * (y.bsums[4 * c] + y.bsums[4 * c + 1]) +
                    sm[8 + 2 * c + 1] * (y.bsums[4 * c + 2] + y.bsums[4 * c + 3]);
    }
};
// A k-quant (or IQ4_XS) weight row in llama.cpp's tiled order, one and four activation rows: each
// file's Block unpacks a super-block once with its own instructions and steps a token's scalar
// accumulator (Block::step).
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

// ---- eight activation rows per weight row, packed (pack8_activations) ----------------------------
// The weight block is unpacked once for eight tokens. The packed layout is the one the AVX-512 VNNI
// kernels read: per block the eight f32 scales, then the eight tokens' quants stored + 128 as
// unsigned bytes; an exclusive or with 0x80 gives the signed quants back. Each token keeps its own
// accumulator fed in the one-row kernel's order, so the results are the same bits. On a Zen 2 core
// (one 256-bit integer multiplier) this took the Q5_0 kernel from 5.5 to 3.8 cycles per block and
// token against the four-row kernel: the eight named accumulators, the weight and its absolute
// value and the constants fit the 16 registers without spilling.

template <int kBlockBytes, __m256i (*Unpack)(const uint8_t*)>
void dot_blocks_x8(const void* w, const void* packed, int64_t n, float out[8])
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* p = static_cast<const uint8_t*>(packed);
    // named accumulators: an array of them was kept in memory, a store per token and block
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t b = 0; b < n / 32; ++b, x += kBlockBytes, p += 8 * (sizeof(float) + 32)) {
        const __m256i q = Unpack(x);
        const __m256i abs_q = _mm256_sign_epi8(q, q);
        // dx · dy rounded once, as the one-row kernel's scalar product: the eight tokens' products by
        // one multiply, each then broadcast from memory (a load, not an operation per token)
        alignas(32) float d[8];
        _mm256_store_ps(d, _mm256_mul_ps(_mm256_set1_ps(half(x)), _mm256_loadu_ps(reinterpret_cast<const float*>(p))));
        const uint8_t* qy = p + 8 * sizeof(float);
        const auto step = [&](__m256& acc, int t) {
            const __m256i y = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qy + 32 * t)), bias);
            const __m256i prod = _mm256_madd_epi16(_mm256_maddubs_epi16(abs_q, _mm256_sign_epi8(y, q)), ones);
            acc = _mm256_fmadd_ps(_mm256_broadcast_ss(d + t), _mm256_cvtepi32_ps(prod), acc);
        };
        step(a0, 0);
        step(a1, 1);
        step(a2, 2);
        step(a3, 3);
        step(a4, 4);
        step(a5, 5);
        step(a6, 6);
        step(a7, 7);
    }
    out[0] = hsum(a0);
    out[1] = hsum(a1);
    out[2] = hsum(a2);
    out[3] = hsum(a3);
    out[4] = hsum(a4);
    out[5] = hsum(a5);
    out[6] = hsum(a6);
    out[7] = hsum(a7);
}

// A k-quant weight row against eight packed Q8_K rows (pack8_activations) in the tiled order: each
// file's Block unpacks a super-block once with its own instructions and steps each token's scalar
// accumulator.
// The same sums for eight tokens with each token's accumulator in a lane: a block's eight unreduced
// integer vectors reduced together (transpose_sums, exact), then tiled_step's float operations on
// the eight lanes at once — per token the same multiply and fused multiply-adds, so the same bits.
// Block::vectors(y, v1, v2) gives the unreduced sums of s1 (and s2 where Block::kHasMin).
template <typename Block, int kBlockBytes>
void dot_tiled_x8_lanes(const void* w, const void* packed, int64_t n, float out[8])
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(packed);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / 256; ++b, x += kBlockBytes, y += 8) {
        const Block blk(x);
        __m256i v1[8], v2[8];
        for (int t = 0; t < 8; ++t)
            blk.vectors(y[t], v1[t], v2[t]);
        __m256 res = _mm256_mul_ps(_mm256_set1_ps(blk.d), _mm256_cvtepi32_ps(transpose_sums(v1)));
        if constexpr (Block::kHasMin)
            res = _mm256_fmadd_ps(_mm256_set1_ps(-blk.dmin), _mm256_cvtepi32_ps(transpose_sums(v2)), res);
        const __m256 d8 = _mm256_setr_ps(y[0].d, y[1].d, y[2].d, y[3].d, y[4].d, y[5].d, y[6].d, y[7].d);
        acc = _mm256_fmadd_ps(res, d8, acc);
    }
    _mm256_storeu_ps(out, acc);
}

template <typename Block, int kBlockBytes> void dot_tiled_x8(const void* w, const void* packed, int64_t n, float out[8])
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(packed);
    float acc[8] = {};
    for (int64_t b = 0; b < n / 256; ++b, x += kBlockBytes, y += 8) {
        const Block blk(x);
        for (int t = 0; t < 8; ++t)
            acc[t] = blk.step(acc[t], y[t]);
    }
    for (int t = 0; t < 8; ++t)
        out[t] = acc[t];
}

// ---- llama.cpp's repacked order, eight rows at once (each row's accumulator in its own lane, as its
// interleaved layout keeps them): shared by the AVX2 file and, with VNNI's dot product and its own
// Q4_K block, the AVX-512 file — the same integer sums and float steps, so the same bits.

// IQ4_NL's sixteen values (kvalues_iq4nl), signed bytes.
inline __m128i iq4_nl_values()
{
    return _mm_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
}

// IQ4_NL's indices through its table, as signed bytes.
inline __m256i iq4_lookup(const uint8_t* qs)
{
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(iq4_nl_values()), nibbles_32(qs));
}
inline __m256i unpack_iq4_nl(const uint8_t* x)
{
    return iq4_lookup(x + 2);
}

// IQ4_NL's sixteen values + 128 (kvalues_iq4nl, as iq4_lookup's), unsigned bytes: the codes the lanes
// kernels multiply, the bias taken off afterwards.
inline __m128i iq4_nl_biased_values()
{
    return _mm_add_epi8(iq4_nl_values(), _mm_set1_epi8(static_cast<char>(-128)));
}

// |q| · sign-adjusted y summed in groups of four bytes into int32 lanes (exact: no pair reaches the
// int16 limit for Q4_0's or IQ4_NL's values).
struct DotI8Avx2 {
    static __m256i dot(__m256i abs_q, __m256i signed_y)
    {
        return _mm256_madd_epi16(_mm256_maddubs_epi16(abs_q, signed_y), _mm256_set1_epi16(1));
    }
};

// The f16 words at the start of eight rows' blocks (xb, row_bytes apart), in row order: eight 4-byte
// loads folded by unpacks (a gather of them cost Q4_0's eight-row decode a tenth of its time).
inline __m128i b32_scales_rows8(const uint8_t* xb, std::size_t row_bytes)
{
    __m128i w[8];
    for (int r = 0; r < 8; ++r) {
        int32_t v;
        std::memcpy(&v, xb + r * row_bytes, 4);
        w[r] = _mm_cvtsi32_si128(v);
    }
    const __m128i w01 = _mm_unpacklo_epi16(w[0], w[1]), w23 = _mm_unpacklo_epi16(w[2], w[3]);
    const __m128i w45 = _mm_unpacklo_epi16(w[4], w[5]), w67 = _mm_unpacklo_epi16(w[6], w[7]);
    return _mm_unpacklo_epi64(_mm_unpacklo_epi32(w01, w23), _mm_unpacklo_epi32(w45, w67));
}

// Eight rows, one token (llama.cpp's interleaved gemv keeps eight columns so), fed block by block with
// the one-row kernel's fused multiply-adds; the eight rows' integer sums end in the eight lanes and
// the eight scales convert at once. Q4_0: each row's block is laid across the lanes first (its 4-byte
// groups transposed, as llama.cpp's interleaved layout holds them), then each group's nibbles multiply
// the token's four quants broadcast — its codes are unsigned (value + 8), so vpmaddubsw takes them as
// they are (every lane's eight groups fit int16: 8 · 2 · 15 · 127) and 8 × the quants' sum is taken
// off after. IQ4_NL: its values are looked up signed, so each pair of bytes is widened to int32 anyway;
// the rows are multiplied as they lie (two rows to a register) with |quant| × value carrying the
// quant's sign (pairs fit int16: 2 · 127 · 127), and the partial sums reduced across their dwords —
// four shuffles fewer per block than the transpose and half the sign operations (decode capped at AVX2
// 94 → 109 tokens/s on the IQ4_NL twin). Exact integers, the one-row kernel's fused steps: the same bits.
template <bool Iq4>
void dot_repacked_b32_rows8_lanes(const void* w, std::size_t row_bytes, const void* a, int64_t n, float out[8])
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    const __m256i low4 = _mm256_set1_epi8(0x0F), ones16 = _mm256_set1_epi16(1);
    [[maybe_unused]] const __m256i table = _mm256_broadcastsi128_si256(iq4_nl_values()); // (IQ4_NL only)
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / 32; ++b) {
        const uint8_t* xb = x + b * 18;
        if ((b * 18) % 64 < 18) // eight row streams: read each ahead once per cache line
            prefetch_next_eight_rows(xb, row_bytes, 1);
        __m256i rows[4]; // rows r (low half) and r + 4 (high half): their sixteen bytes of nibbles
        for (int r = 0; r < 4; ++r) {
            const uint8_t* lo_row = xb + r * row_bytes;
            const uint8_t* hi_row = xb + (r + 4) * row_bytes;
            rows[r] = _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(hi_row + 2)),
                                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(lo_row + 2)));
        }
        __m256i isum;
        if constexpr (Iq4) {
            // Each row pair's 64 values against the token's quants (elements 0–15 by the low nibbles,
            // 16–31 by the high), the sign moved onto the values so that |quant| is taken once per
            // block; then the four row pairs' partial sums reduced across their dwords (the rows' sums,
            // rows 0–3 and 4–7 in the two halves): fewer shuffles than transposing the rows first.
            const __m256i a_lo =
                _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y[b].qs)));
            const __m256i a_hi =
                _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y[b].qs + 16)));
            const __m256i abs_lo = _mm256_sign_epi8(a_lo, a_lo), abs_hi = _mm256_sign_epi8(a_hi, a_hi);
            __m256i p[4];
            for (int r = 0; r < 4; ++r) {
                const __m256i v_lo = _mm256_shuffle_epi8(table, _mm256_and_si256(rows[r], low4));
                const __m256i v_hi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(rows[r], 4), low4));
                p[r] = _mm256_add_epi32(
                    _mm256_madd_epi16(_mm256_maddubs_epi16(abs_lo, _mm256_sign_epi8(v_lo, a_lo)), ones16),
                    _mm256_madd_epi16(_mm256_maddubs_epi16(abs_hi, _mm256_sign_epi8(v_hi, a_hi)), ones16));
            }
            const __m256i t0 = _mm256_add_epi32(_mm256_unpacklo_epi32(p[0], p[1]), _mm256_unpackhi_epi32(p[0], p[1]));
            const __m256i t1 = _mm256_add_epi32(_mm256_unpacklo_epi32(p[2], p[3]), _mm256_unpackhi_epi32(p[2], p[3]));
            isum = _mm256_add_epi32(_mm256_unpacklo_epi64(t0, t1), _mm256_unpackhi_epi64(t0, t1));
        } else {
            // 4×4 transposes of dwords in each 128-bit half: groups[k] holds group k of rows 0–7, in order
            const __m256i t0 = _mm256_unpacklo_epi32(rows[0], rows[1]), t1 = _mm256_unpackhi_epi32(rows[0], rows[1]);
            const __m256i t2 = _mm256_unpacklo_epi32(rows[2], rows[3]), t3 = _mm256_unpackhi_epi32(rows[2], rows[3]);
            const __m256i groups[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
                                       _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3)};
            __m256i p = _mm256_setzero_si256();
            for (int k = 0; k < 4; ++k) {
                const __m256i e_lo = _mm256_and_si256(groups[k], low4);
                const __m256i e_hi = _mm256_and_si256(_mm256_srli_epi16(groups[k], 4), low4);
                int32_t q_lo, q_hi;
                std::memcpy(&q_lo, y[b].qs + 4 * k, 4);
                std::memcpy(&q_hi, y[b].qs + 16 + 4 * k, 4);
                p = _mm256_add_epi16(p, _mm256_maddubs_epi16(e_lo, _mm256_set1_epi32(q_lo)));
                p = _mm256_add_epi16(p, _mm256_maddubs_epi16(e_hi, _mm256_set1_epi32(q_hi)));
            }
            // the codes' bias 8 × the token's quant sum, in every lane
            __m256i qsum = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), load_qs(y[b].qs)), ones16);
            qsum = _mm256_add_epi32(qsum, _mm256_permute2x128_si256(qsum, qsum, 0x01));
            qsum = _mm256_add_epi32(qsum, _mm256_shuffle_epi32(qsum, 0x4E));
            qsum = _mm256_add_epi32(qsum, _mm256_shuffle_epi32(qsum, 0xB1));
            isum = _mm256_sub_epi32(_mm256_madd_epi16(p, ones16), _mm256_slli_epi32(qsum, 3));
        }
        const __m256 d =
            _mm256_mul_ps(_mm256_cvtph_ps(b32_scales_rows8(xb, row_bytes)), _mm256_set1_ps(_cvtsh_ss(y[b].d)));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), d, acc);
    }
    _mm256_storeu_ps(out, acc);
}

template <__m256i (*Unpack)(const uint8_t*), typename I8 = DotI8Avx2>
void dot_repacked_b32_rows8x4(const void* w, std::size_t row_bytes, const void* const a[4], int64_t n, float out[4][8])
{
    const auto* x = static_cast<const uint8_t*>(w);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t b = 0; b < n / 32; ++b) {
        __m256i q[8], abs_q[8];
        alignas(32) float dw[8];
        for (int r = 0; r < 8; ++r) {
            const uint8_t* xr = x + r * row_bytes + b * 18;
            q[r] = Unpack(xr);
            abs_q[r] = _mm256_sign_epi8(q[r], q[r]);
            dw[r] = half(xr);
        }
        const __m256 d_rows = _mm256_load_ps(dw);
        for (int t = 0; t < 4; ++t) {
            const BlockQ8_0& y = static_cast<const BlockQ8_0*>(a[t])[b];
            const __m256i qy = load_qs(y.qs);
            __m256i v[8];
            for (int r = 0; r < 8; ++r)
                v[r] = I8::dot(abs_q[r], _mm256_sign_epi8(qy, q[r]));
            const __m256 d = _mm256_mul_ps(d_rows, _mm256_set1_ps(_cvtsh_ss(y.d)));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(transpose_sums(v)), d, acc[t]);
        }
    }
    for (int t = 0; t < 4; ++t)
        _mm256_storeu_ps(out[t], acc[t]);
}

// The gemv's order for four tokens (one fused sum per block and token, as dot_repacked_q4_k_rows8<false>),
// each row's block unpacked once for the four.
template <typename Block>
void dot_repacked_q4_k_rows8x4_gemv(const void* w, std::size_t row_bytes, const void* const a[4], int64_t n,
                                    float out[4][8])
{
    const auto* x = static_cast<const uint8_t*>(w);
    __m256 acc[4], acc_min[4];
    for (int t = 0; t < 4; ++t)
        acc[t] = acc_min[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / 256; ++b) {
        __m256i v1[4][8], v2[4][8]; // [token][row], unreduced
        alignas(32) float dw[8], dminw[8];
        for (int r = 0; r < 8; ++r) {
            const Block blk(x + r * row_bytes + b * 144);
            for (int t = 0; t < 4; ++t)
                blk.vectors(static_cast<const BlockQ8_K*>(a[t])[b], v1[t][r], v2[t][r]);
            dw[r] = blk.d;
            dminw[r] = blk.dmin;
        }
        for (int t = 0; t < 4; ++t) { // each row's exact sums in its lane, then the gemv's fused steps
            const float dy = static_cast<const BlockQ8_K*>(a[t])[b].d;
            const __m256 d = _mm256_mul_ps(_mm256_load_ps(dw), _mm256_set1_ps(dy));
            const __m256 dmin = _mm256_mul_ps(_mm256_load_ps(dminw), _mm256_set1_ps(dy));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(transpose_sums(v1[t])), d, acc[t]);
            acc_min[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(transpose_sums(v2[t])), dmin, acc_min[t]);
        }
    }
    for (int t = 0; t < 4; ++t)
        _mm256_storeu_ps(out[t], _mm256_sub_ps(acc[t], acc_min[t]));
}

// Its gemm's order for four tokens (fused per 64-element pair), eight rows reduced together: each pair's
// unreduced sums of the eight rows through transpose_sums, the minimums' pair sums from the lanes of
// each row's sub-block vector — the exact integers of pair_sums, then the same fused steps.
template <typename Block>
void dot_repacked_q4_k_rows8x4_pairs(const void* w, std::size_t row_bytes, const void* const a[4], int64_t n,
                                     float out[4][8])
{
    const auto* x = static_cast<const uint8_t*>(w);
    __m256 acc[4], acc_min[4];
    for (int t = 0; t < 4; ++t)
        acc[t] = acc_min[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / 256; ++b) {
        __m256i v[4][4][8]; // [token][pair][row], unreduced
        __m256i mins[4][8]; // [token][row]: lane s = sub-block s's m · bsum pair
        alignas(32) float dw[8], dminw[8];
        for (int r = 0; r < 8; ++r) {
            const Block blk(x + r * row_bytes + b * 144);
            for (int t = 0; t < 4; ++t) {
                __m256i pv[4];
                blk.pair_vectors(static_cast<const BlockQ8_K*>(a[t])[b], pv, mins[t][r]);
                for (int c = 0; c < 4; ++c)
                    v[t][c][r] = pv[c];
            }
            dw[r] = blk.d;
            dminw[r] = blk.dmin;
        }
        for (int t = 0; t < 4; ++t) {
            const float dy = static_cast<const BlockQ8_K*>(a[t])[b].d;
            const __m256 d = _mm256_mul_ps(_mm256_load_ps(dw), _mm256_set1_ps(dy));
            const __m256 dmin = _mm256_mul_ps(_mm256_load_ps(dminw), _mm256_set1_ps(dy));
            alignas(32) int m8[8][8];
            for (int r = 0; r < 8; ++r)
                _mm256_store_si256(reinterpret_cast<__m256i*>(m8[r]), mins[t][r]);
            for (int c = 0; c < 4; ++c) {
                alignas(32) int s2[8];
                for (int r = 0; r < 8; ++r)
                    s2[r] = m8[r][2 * c] + m8[r][2 * c + 1];
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(transpose_sums(v[t][c])), d, acc[t]);
                acc_min[t] = _mm256_fmadd_ps(
                    _mm256_cvtepi32_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(s2))), dmin, acc_min[t]);
            }
        }
    }
    for (int t = 0; t < 4; ++t)
        _mm256_storeu_ps(out[t], _mm256_sub_ps(acc[t], acc_min[t]));
}

template <typename Block, bool Gemm>
void dot_repacked_q4_k_rows8(const void* w, std::size_t row_bytes, const void* a, int64_t n, float out[8])
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    __m256 acc = _mm256_setzero_ps(), acc_min = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / 256; ++b) {
        alignas(32) float dw[8], dminw[8];
        prefetch_next_eight_rows(x + b * 144, row_bytes, 144);
        if constexpr (Gemm) {
            alignas(32) int s1[4][8], s2[4][8]; // [pair][row]
            for (int r = 0; r < 8; ++r) {
                const Block blk(x + r * row_bytes + b * 144);
                int p1[4], p2[4];
                blk.pair_sums(y[b], p1, p2);
                for (int c = 0; c < 4; ++c) {
                    s1[c][r] = p1[c];
                    s2[c][r] = p2[c];
                }
                dw[r] = blk.d;
                dminw[r] = blk.dmin;
            }
            const __m256 d = _mm256_mul_ps(_mm256_load_ps(dw), _mm256_set1_ps(y[b].d));
            const __m256 dmin = _mm256_mul_ps(_mm256_load_ps(dminw), _mm256_set1_ps(y[b].d));
            for (int c = 0; c < 4; ++c) {
                acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(s1[c]))), d,
                                      acc);
                acc_min = _mm256_fmadd_ps(
                    _mm256_cvtepi32_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(s2[c]))), dmin, acc_min);
            }
        } else { // each row's exact sums reduced together into its lane
            __m256i v1[8], v2[8];
            for (int r = 0; r < 8; ++r) {
                const Block blk(x + r * row_bytes + b * 144);
                blk.vectors(y[b], v1[r], v2[r]);
                dw[r] = blk.d;
                dminw[r] = blk.dmin;
            }
            const __m256 d = _mm256_mul_ps(_mm256_load_ps(dw), _mm256_set1_ps(y[b].d));
            const __m256 dmin = _mm256_mul_ps(_mm256_load_ps(dminw), _mm256_set1_ps(y[b].d));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(transpose_sums(v1)), d, acc);
            acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(transpose_sums(v2)), dmin, acc_min);
        }
    }
    _mm256_storeu_ps(out, _mm256_sub_ps(acc, acc_min));
}

} // namespace
} // namespace engine::simd
