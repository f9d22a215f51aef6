// SPDX-License-Identifier: GPL-3.0-or-later
// AVX2 kernels for the weight types beyond the shipped models' mix: Q4_0's and IQ4_NL's batches,
// Q4_1 and Q5_1, Q2_K, Q3_K and IQ4_XS (one row and llama.cpp's tiled order), Q5_K's tiled order,
// and the float types (F32, F16, BF16) in ggml's one-row and llamafile orders. Each gives the
// portable kernels' bits (vec_dot_portable.h, which spells out the orders); vec_dot_avx2.cpp's
// dispatch consults these after its own.
#include "quant/simd/float_dot_x86.h"
#include "quant/simd/vec_dot_simd.h"
#include "quant/simd/x86_block_helpers.h"

#include <cmath>
#include <cstring>
#include <immintrin.h>

namespace engine::simd {

namespace {

// ---- 32-element blocks -------------------------------------------------------------------------

// Q4_1 / Q5_1: the unsigned quants (the minimum is applied apart).
template <bool Five> inline __m256i unpack_offset(const uint8_t* x)
{
    if constexpr (Five) {
        uint32_t qh;
        std::memcpy(&qh, x + 4, 4);
        return _mm256_or_si256(nibbles_32(x + 8), _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10)));
    } else {
        return nibbles_32(x + 4);
    }
}

// IQ4_NL's one-row order: even and odd blocks in two accumulators, an odd last block fused in last.
float dot_iq4_nl_pairs(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    const int64_t nb = n / 32;
    __m256 even = _mm256_setzero_ps(), odd = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 1 < nb; b += 2) {
        const uint8_t* x0 = x + b * 18;
        prefetch_ahead(x0, 36);
        const __m256i p0 = dot_i8(unpack_iq4_nl(x0), load_qs(y[b].qs));
        const __m256i p1 = dot_i8(unpack_iq4_nl(x0 + 18), load_qs(y[b + 1].qs));
        even = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(y[b].d) * half(x0)), _mm256_cvtepi32_ps(p0), even);
        odd = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(y[b + 1].d) * half(x0 + 18)), _mm256_cvtepi32_ps(p1), odd);
    }
    float sum = hsum(_mm256_add_ps(even, odd));
    if (b < nb) {
        const int isum = hsum_i32(dot_i8(unpack_iq4_nl(x + b * 18), load_qs(y[b].qs)));
        sum = std::fma(_cvtsh_ss(y[b].d) * half(x + b * 18), static_cast<float>(isum), sum);
    }
    return sum;
}

// Q4_1 / Q5_1 × Q8_1: the values' lanes, and m · s in one float (fused), added after the lanes.
template <bool Five> float dot_offset(const void* w, const void* a, int64_t n)
{
    constexpr int kBytes = Five ? 24 : 20;
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_1*>(a);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.0f;
    for (int64_t b = 0; b < n / 32; ++b, x += kBytes) {
        prefetch_ahead(x, 1);
        const __m256i prod = _mm256_madd_epi16(_mm256_maddubs_epi16(unpack_offset<Five>(x), load_qs(y[b].qs)), ones);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(half(x) * y[b].d), _mm256_cvtepi32_ps(prod), acc);
        summs = std::fma(half(x + 2), y[b].s, summs);
    }
    return hsum(acc) + summs;
}

template <bool Five> void dot_offset_x4(const void* w, const void* const a[4], int64_t n, float out[4])
{
    constexpr int kBytes = Five ? 24 : 20;
    const auto* x = static_cast<const uint8_t*>(w);
    const BlockQ8_1* y[4] = {static_cast<const BlockQ8_1*>(a[0]), static_cast<const BlockQ8_1*>(a[1]),
                             static_cast<const BlockQ8_1*>(a[2]), static_cast<const BlockQ8_1*>(a[3])};
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    float summs[4] = {};
    for (int64_t b = 0; b < n / 32; ++b, x += kBytes) {
        const __m256i q = unpack_offset<Five>(x);
        const float dx = half(x), mx = half(x + 2);
        for (int t = 0; t < 4; ++t) {
            const __m256i prod = _mm256_madd_epi16(_mm256_maddubs_epi16(q, load_qs(y[t][b].qs)), ones);
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dx * y[t][b].d), _mm256_cvtepi32_ps(prod), acc[t]);
            summs[t] = std::fma(mx, y[t][b].s, summs[t]);
        }
    }
    for (int t = 0; t < 4; ++t)
        out[t] = hsum(acc[t]) + summs[t];
}

// ---- 256-element blocks ------------------------------------------------------------------------
// A Block decodes a super-block once: 8 chunks of 32 quants (unsigned, or signed with their
// absolute values for maddubs) and each chunk's pair of 16-group scales as int16 lanes (lanes 0–3
// of the chunk's integer sums take the first, 4–7 the second). lanes(y) gives the eight exact
// integer lanes; lane_step the AVX2 one-row order; step the tiled order (dot_tiled*).

// Chunk c's pair from sixteen int16 scales in order: word 2c in the low half, 2c + 1 in the high
// half (the dword holding both, everywhere; then each half keeps its word).
inline __m256i scale_pair(__m256i scales16, int c)
{
    const __m256i both = _mm256_permutevar8x32_epi32(scales16, _mm256_set1_epi32(c));
    return _mm256_shuffle_epi8(both, _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3,
                                                      2, 3, 2, 3, 2, 3, 2, 3, 2, 3));
}

struct Q2kBlock {
    __m256i q[8], scale[8];
    __m256i mins16; // the 16 minimums as int16, for madd with the 16 bsums
    float d, dmin;
    explicit Q2kBlock(const uint8_t* x)
    {
        const __m256i two_bits = _mm256_set1_epi8(3);
        for (int j = 0; j < 2; ++j) {
            const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 16 + 32 * j));
            for (int k = 0; k < 4; ++k)
                q[4 * j + k] = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), two_bits);
        }
        const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x));
        const __m256i scales16 = _mm256_cvtepu8_epi16(_mm_and_si128(sc, _mm_set1_epi8(0x0F)));
        for (int c = 0; c < 8; ++c)
            scale[c] = scale_pair(scales16, c);
        mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), _mm_set1_epi8(0x0F)));
        d = half(x + 80);
        dmin = half(x + 82);
    }
    __m256i lanes(const BlockQ8_K& y) const
    {
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 8; ++c)
            isum =
                _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(q[c], load_qs(y.qs + 32 * c)), scale[c]));
        return isum;
    }
    __m256i mins(const BlockQ8_K& y) const { return _mm256_madd_epi16(mins16, load_bsums(y.bsums)); }
    __m256 lane_step(__m256 acc, const BlockQ8_K& y) const
    {
        acc = _mm256_fmadd_ps(_mm256_set1_ps(-y.d * dmin), _mm256_cvtepi32_ps(mins(y)), acc);
        return _mm256_fmadd_ps(_mm256_set1_ps(y.d * d), _mm256_cvtepi32_ps(lanes(y)), acc);
    }
    float step(float acc, const BlockQ8_K& y) const
    {
        int s1 = 0, s2 = 0;
        hsum2_i32(lanes(y), mins(y), s1, s2);
        return tiled_step(acc, d, s1, dmin, s2, y.d, true);
    }
};

// Signed quants: |q| and q for maddubs' unsigned-by-signed product.
struct SignedChunks {
    __m256i q[8], abs_q[8], scale[8];
    __m256i lanes(const BlockQ8_K& y) const
    {
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 8; ++c) {
            const __m256i p = _mm256_maddubs_epi16(abs_q[c], _mm256_sign_epi8(load_qs(y.qs + 32 * c), q[c]));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, scale[c]));
        }
        return isum;
    }
};

struct Q3kBlock : SignedChunks {
    float d;
    explicit Q3kBlock(const uint8_t* x)
    {
        const __m256i two_bits = _mm256_set1_epi8(3);
        const __m256i hmask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
        const __m256i one = _mm256_set1_epi8(1), four = _mm256_set1_epi8(4);
        for (int j = 0; j < 2; ++j) {
            const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32 + 32 * j));
            for (int k = 0; k < 4; ++k) {
                const int c = 4 * j + k;
                const __m256i low = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), two_bits);
                // q − 4 where the chunk's high bit (bit c of each hmask byte) is clear
                const __m256i high = _mm256_and_si256(_mm256_srli_epi16(hmask, c), one);
                q[c] = _mm256_sub_epi8(low, _mm256_andnot_si256(_mm256_slli_epi16(high, 2), four));
                abs_q[c] = _mm256_sign_epi8(q[c], q[c]);
            }
        }
        const __m256i scales16 = q3_k_scales(x + 96);
        for (int c = 0; c < 8; ++c)
            scale[c] = scale_pair(scales16, c);
        d = half(x + 108);
    }
    __m256 lane_step(__m256 acc, const BlockQ8_K& y) const
    {
        return _mm256_fmadd_ps(_mm256_set1_ps(y.d * d), _mm256_cvtepi32_ps(lanes(y)), acc);
    }
    float step(float acc, const BlockQ8_K& y) const
    {
        return tiled_step(acc, d, hsum_i32(lanes(y)), 0.0f, 0, y.d, false);
    }
};

struct Iq4xsBlock : SignedChunks {
    float d;
    explicit Iq4xsBlock(const uint8_t* x)
    {
        uint16_t scales_h;
        std::memcpy(&scales_h, x + 2, 2);
        for (int ib = 0; ib < 8; ++ib) {
            q[ib] = iq4_lookup(x + 8 + 16 * ib);
            abs_q[ib] = _mm256_sign_epi8(q[ib], q[ib]);
            const int ls = ((x[4 + ib / 2] >> (4 * (ib % 2))) & 0x0F) | (((scales_h >> (2 * ib)) & 3) << 4);
            scale[ib] = _mm256_set1_epi16(static_cast<short>(ls - 32));
        }
        d = half(x);
    }
    __m256 lane_step(__m256 acc, const BlockQ8_K& y) const
    {
        return _mm256_fmadd_ps(_mm256_set1_ps(d * y.d), _mm256_cvtepi32_ps(lanes(y)), acc);
    }
    float step(float acc, const BlockQ8_K& y) const
    {
        return tiled_step(acc, d, hsum_i32(lanes(y)), 0.0f, 0, y.d, false);
    }
};

using Q5kBlock = Q45kBlock<true>;

// ---- llama.cpp's repacked order -------------------------------------------------------------------
// Each block's whole integer sum, fused into one float accumulator with d_w · d_a (Q4_K: the
// minimums into a second one, subtracted at the end).

template <__m256i (*Unpack)(const uint8_t*)> float dot_repacked_b32(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    float acc = 0.0f;
    for (int64_t b = 0; b < n / 32; ++b, x += 18) {
        prefetch_ahead(x, 1);
        const int isum = hsum_i32(dot_i8(Unpack(x), load_qs(y[b].qs)));
        acc = std::fma(static_cast<float>(isum), half(x) * _cvtsh_ss(y[b].d), acc);
    }
    return acc;
}

template <__m256i (*Unpack)(const uint8_t*)>
void dot_repacked_b32_x4(const void* w, const void* const a[4], int64_t n, float out[4])
{
    const auto* x = static_cast<const uint8_t*>(w);
    const BlockQ8_0* y[4] = {static_cast<const BlockQ8_0*>(a[0]), static_cast<const BlockQ8_0*>(a[1]),
                             static_cast<const BlockQ8_0*>(a[2]), static_cast<const BlockQ8_0*>(a[3])};
    const __m256i ones = _mm256_set1_epi16(1);
    float acc[4] = {};
    for (int64_t b = 0; b < n / 32; ++b, x += 18) {
        const __m256i q = Unpack(x);
        const __m256i abs_q = _mm256_sign_epi8(q, q);
        const float dx = half(x);
        __m256i p[4];
        for (int t = 0; t < 4; ++t)
            p[t] = _mm256_madd_epi16(_mm256_maddubs_epi16(abs_q, _mm256_sign_epi8(load_qs(y[t][b].qs), q)), ones);
        // four horizontal sums at once (exact): pairs, then quads
        const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
        const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        alignas(16) int isum[4];
        _mm_store_si128(reinterpret_cast<__m128i*>(isum), s);
        for (int t = 0; t < 4; ++t)
            acc[t] = std::fma(static_cast<float>(isum[t]), dx * _cvtsh_ss(y[t][b].d), acc[t]);
    }
    for (int t = 0; t < 4; ++t)
        out[t] = acc[t];
}

float dot_repacked_q4_k(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float acc = 0.0f, acc_min = 0.0f;
    for (int64_t b = 0; b < n / 256; ++b, x += 144) {
        prefetch_ahead(x, 144);
        const Q45kBlock<false> blk(x);
        int s1 = 0, s2 = 0;
        blk.sums(y[b], s1, s2);
        acc = std::fma(static_cast<float>(s1), blk.d * y[b].d, acc);
        acc_min = std::fma(static_cast<float>(s2), blk.dmin * y[b].d, acc_min);
    }
    return acc - acc_min;
}

// Its gemm's order (rows in whole groups of four): fused per 64-element pair.
float dot_repacked_q4_k_gemm(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float acc = 0.0f, acc_min = 0.0f;
    for (int64_t b = 0; b < n / 256; ++b, x += 144) {
        const Q45kBlock<false> blk(x);
        int s1[4], s2[4];
        blk.pair_sums(y[b], s1, s2);
        const float d = blk.d * y[b].d, dmin = blk.dmin * y[b].d;
        for (int c = 0; c < 4; ++c) {
            acc = std::fma(static_cast<float>(s1[c]), d, acc);
            acc_min = std::fma(static_cast<float>(s2[c]), dmin, acc_min);
        }
    }
    return acc - acc_min;
}

void dot_repacked_q4_k_x4(const void* w, const void* const a[4], int64_t n, float out[4])
{
    const auto* x = static_cast<const uint8_t*>(w);
    float acc[4] = {}, acc_min[4] = {};
    for (int64_t b = 0; b < n / 256; ++b, x += 144) {
        const Q45kBlock<false> blk(x);
        for (int t = 0; t < 4; ++t) {
            const BlockQ8_K& y = static_cast<const BlockQ8_K*>(a[t])[b];
            int s1[4], s2[4];
            blk.pair_sums(y, s1, s2);
            const float d = blk.d * y.d, dmin = blk.dmin * y.d;
            for (int c = 0; c < 4; ++c) {
                acc[t] = std::fma(static_cast<float>(s1[c]), d, acc[t]);
                acc_min[t] = std::fma(static_cast<float>(s2[c]), dmin, acc_min[t]);
            }
        }
    }
    for (int t = 0; t < 4; ++t)
        out[t] = acc[t] - acc_min[t];
}

template <typename Block, int kBytes> float dot_k_lanes(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / 256; ++b, x += kBytes) {
        prefetch_ahead(x, kBytes);
        acc = Block(x).lane_step(acc, y[b]);
    }
    return hsum(acc);
}

// ---- float weights -----------------------------------------------------------------------------

// ggml's one-row order (vec_dot_portable.h's dot_f32 / dot_f16 / dot_bf16).
template <FloatKind K> float dot_float(const void* w, const void* a, int64_t n)
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    const int64_t np = n & ~int64_t(31);
    constexpr int kBytes = K == FloatKind::F32 ? 128 : 64; // a step's 32 weights
    for (int64_t i = 0; i < np; i += 32) {
        prefetch_ahead(static_cast<const uint8_t*>(w) + i * (kBytes / 32), kBytes);
        acc0 = _mm256_fmadd_ps(load_float<K>(w, i), load_float<K>(a, i), acc0);
        acc1 = _mm256_fmadd_ps(load_float<K>(w, i + 8), load_float<K>(a, i + 8), acc1);
        acc2 = _mm256_fmadd_ps(load_float<K>(w, i + 16), load_float<K>(a, i + 16), acc2);
        acc3 = _mm256_fmadd_ps(load_float<K>(w, i + 24), load_float<K>(a, i + 24), acc3);
    }
    return finish_float_dot<K>(_mm256_add_ps(_mm256_add_ps(acc0, acc2), _mm256_add_ps(acc1, acc3)), w, a, np, n);
}

// llama.cpp's llamafile order for 2+ rows (n a multiple of 8): one 8-lane accumulator.
template <FloatKind K> float dot_float_batched(const void* w, const void* a, int64_t n)
{
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 8)
        acc = _mm256_fmadd_ps(load_float<K>(w, i), load_float<K>(a, i), acc);
    return hsum(acc);
}

// Four tokens against one row in the batched order (the four-row kernels run for batches of 4+ rows);
// a width that is not a multiple of 8 has no batched order: the one-row kernel, token by token.
template <FloatKind K> void dot_float_batched_x4(const void* w, const void* const a[4], int64_t n, float out[4])
{
    if (n % 8 != 0) {
        for (int t = 0; t < 4; ++t)
            out[t] = dot_float<K>(w, a[t], n);
        return;
    }
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    for (int64_t i = 0; i < n; i += 8) {
        const __m256 x = load_float<K>(w, i);
        acc0 = _mm256_fmadd_ps(x, load_float<K>(a[0], i), acc0);
        acc1 = _mm256_fmadd_ps(x, load_float<K>(a[1], i), acc1);
        acc2 = _mm256_fmadd_ps(x, load_float<K>(a[2], i), acc2);
        acc3 = _mm256_fmadd_ps(x, load_float<K>(a[3], i), acc3);
    }
    out[0] = hsum(acc0);
    out[1] = hsum(acc1);
    out[2] = hsum(acc2);
    out[3] = hsum(acc3);
}

} // namespace

// ---- lookups (vec_dot_avx2.cpp's dispatch asks these after its own) ---------------------------------

namespace types_avx2 {

VecDotFn one_row(GgmlType type)
{
    switch (type) {
    case GgmlType::Q4_1:
        return dot_offset<false>;
    case GgmlType::Q5_1:
        return dot_offset<true>;
    case GgmlType::IQ4_NL:
        return dot_iq4_nl_pairs;
    case GgmlType::Q2_K:
        return dot_k_lanes<Q2kBlock, 84>;
    case GgmlType::Q3_K:
        return dot_k_lanes<Q3kBlock, 110>;
    case GgmlType::IQ4_XS:
        return dot_k_lanes<Iq4xsBlock, 136>;
    case GgmlType::F32:
        return dot_float<FloatKind::F32>;
    case GgmlType::F16:
        return dot_float<FloatKind::F16>;
    case GgmlType::BF16:
        return dot_float<FloatKind::BF16>;
    default:
        return nullptr;
    }
}

VecDotFn batched(GgmlType type, int64_t n)
{
    switch (type) {
    case GgmlType::IQ4_NL:
        return dot_blocks<18, unpack_iq4_nl>;
    case GgmlType::F32:
        return n % 8 == 0 ? dot_float_batched<FloatKind::F32> : nullptr;
    case GgmlType::F16:
        return n % 8 == 0 ? dot_float_batched<FloatKind::F16> : nullptr;
    case GgmlType::BF16:
        return n % 8 == 0 ? dot_float_batched<FloatKind::BF16> : nullptr;
    default:
        return nullptr;
    }
}

// Four rows: Q4_0 and Q4_1/Q5_1 in their one-row order, IQ4_NL and the float types in their batched
// order (the four-row kernels run for batches of 4+ rows only).
VecDotX4Fn x4(GgmlType type)
{
    switch (type) {
    case GgmlType::F32:
        return dot_float_batched_x4<FloatKind::F32>;
    case GgmlType::F16:
        return dot_float_batched_x4<FloatKind::F16>;
    case GgmlType::BF16:
        return dot_float_batched_x4<FloatKind::BF16>;
    case GgmlType::Q4_0:
        return dot_blocks_x4<18, unpack_q4_0>;
    case GgmlType::IQ4_NL:
        return dot_blocks_x4<18, unpack_iq4_nl>;
    case GgmlType::Q4_1:
        return dot_offset_x4<false>;
    case GgmlType::Q5_1:
        return dot_offset_x4<true>;
    default:
        return nullptr;
    }
}

VecDotX8Fn x8(GgmlType type)
{
    switch (type) {
    case GgmlType::Q4_0:
        return dot_blocks_x8<18, unpack_q4_0>;
    case GgmlType::IQ4_NL:
        return dot_blocks_x8<18, unpack_iq4_nl>;
    default:
        return nullptr;
    }
}

VecDotFn tiled(GgmlType type)
{
    switch (type) {
    case GgmlType::Q2_K:
        return dot_tiled<Q2kBlock, 84>;
    case GgmlType::Q3_K:
        return dot_tiled<Q3kBlock, 110>;
    case GgmlType::Q5_K:
        return dot_tiled<Q5kBlock, 176>;
    case GgmlType::IQ4_XS:
        return dot_tiled<Iq4xsBlock, 136>;
    default:
        return nullptr;
    }
}

VecDotX4Fn tiled_x4(GgmlType type)
{
    switch (type) {
    case GgmlType::Q2_K:
        return dot_tiled_x4<Q2kBlock, 84>;
    case GgmlType::Q3_K:
        return dot_tiled_x4<Q3kBlock, 110>;
    case GgmlType::Q5_K:
        return dot_tiled_x4<Q5kBlock, 176>;
    case GgmlType::IQ4_XS:
        return dot_tiled_x4<Iq4xsBlock, 136>;
    default:
        return nullptr;
    }
}

VecDotX8Fn tiled_x8(GgmlType type)
{
    switch (type) {
    case GgmlType::Q2_K:
        return dot_tiled_x8<Q2kBlock, 84>;
    case GgmlType::Q3_K:
        return dot_tiled_x8<Q3kBlock, 110>;
    case GgmlType::Q5_K:
        return dot_tiled_x8<Q5kBlock, 176>;
    case GgmlType::IQ4_XS:
        return dot_tiled_x8<Iq4xsBlock, 136>;
    default:
        return nullptr;
    }
}

VecDotFn repacked(GgmlType type, bool gemm)
{
    switch (type) {
    case GgmlType::Q4_0:
        return dot_repacked_b32<unpack_q4_0>;
    case GgmlType::IQ4_NL:
        return dot_repacked_b32<unpack_iq4_nl>;
    case GgmlType::Q4_K:
        return gemm ? dot_repacked_q4_k_gemm : dot_repacked_q4_k;
    default:
        return nullptr;
    }
}

VecDotRows8Fn repacked_rows8(GgmlType type, bool gemm)
{
    switch (type) {
    case GgmlType::Q4_0:
        return dot_repacked_b32_rows8_lanes<false>;
    case GgmlType::IQ4_NL:
        return dot_repacked_b32_rows8_lanes<true>;
    case GgmlType::Q4_K:
        return gemm ? dot_repacked_q4_k_rows8<Q45kBlock<false>, true>
                    : dot_repacked_q4_k_rows8<Q45kBlock<false>, false>;
    default:
        return nullptr;
    }
}

VecDotRows8x4Fn repacked_rows8x4(GgmlType type, bool gemm)
{
    switch (type) { // (Q4_0's and IQ4_NL's gemm and gemv sum each output alike: per block)
    case GgmlType::Q4_0:
        return dot_repacked_b32_rows8x4<unpack_q4_0>;
    case GgmlType::IQ4_NL:
        return dot_repacked_b32_rows8x4<unpack_iq4_nl>;
    case GgmlType::Q4_K:
        return gemm ? dot_repacked_q4_k_rows8x4_pairs<Q45kBlock<false>>
                    : dot_repacked_q4_k_rows8x4_gemv<Q45kBlock<false>>;
    default:
        return nullptr;
    }
}

VecDotX4Fn repacked_x4(GgmlType type)
{
    switch (type) {
    case GgmlType::Q4_0:
        return dot_repacked_b32_x4<unpack_q4_0>;
    case GgmlType::IQ4_NL:
        return dot_repacked_b32_x4<unpack_iq4_nl>;
    case GgmlType::Q4_K:
        return dot_repacked_q4_k_x4;
    default:
        return nullptr;
    }
}

} // namespace types_avx2

} // namespace engine::simd
