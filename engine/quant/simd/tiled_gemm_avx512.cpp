// SPDX-License-Identifier: GPL-3.0-or-later
// The tiled order (tiled_gemm.h) with AVX-512 VNNI: a thread decodes its weight rows once into byte
// codes with int32 scales, then for each panel of sixteen tokens and eight rows at a time sums every
// sub-block's codes × quants with vpdpbusd (four weight bytes broadcast, the tokens' four quants in
// each lane), scales the sub-block sums in integers, and does the block's three float operations on
// sixteen tokens at once. Compiled with -mavx512vnni; reached only through tiled_gemm_for.
#include "quant/simd/vec_dot_simd.h"
#include "quant/simd/x86_block_helpers.h"
#include "quant/vec_dot_portable.h"

// GCC 12's AVX-512 headers start some results from _mm512_undefined_*(), which its flow analysis
// reports as maybe uninitialized once the kernels are unrolled; a false alarm.
#if defined(__GNUC__) && !defined(__clang__) // clang has no such warning (and refuses to hear of it)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <algorithm>
#include <cstring>
#include <immintrin.h>
#include <vector>

namespace engine::simd {
namespace { // NOLINT(cert-dcl59-cpp,google-build-namespaces): one translation unit's kernels

// One weight row's 256-element block, decoded: value e is codes[e] − Bias (an unsigned byte, what
// vpdpbusd multiplies), sub-block s has scale scales[s] and minimum mins[s].
struct alignas(64) DecodedBlock {
    uint8_t codes[256];
    int32_t scales[16];
    int32_t mins[16];
    float d, dmin;
};

// 32 bytes of 2-bit fields at bit offset `shift`.
inline __m256i bits2(const uint8_t* src, int shift)
{
    return _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)), shift),
                            _mm256_set1_epi8(3));
}
inline void store32(uint8_t* dst, __m256i v)
{
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), v);
}

// Per type: sub-block width, whether it has minimums, its code bias (a power of two: shifted), and
// how a block decodes (SIMD: a prompt decodes every block of every matrix once).
template <GgmlType T> struct Decode;

template <> struct Decode<GgmlType::Q2_K> {
    static constexpr int sub = 16, bias_shift = -1;
    static constexpr bool has_min = true;
    static void run(const uint8_t* x, DecodedBlock& o)
    {
        for (int h = 0; h < 2; ++h) // element 128h + 32s + l: bits 2s of qs[32h + l]
            for (int sh = 0; sh < 4; ++sh)
                store32(o.codes + 128 * h + 32 * sh, bits2(x + 16 + 32 * h, 2 * sh));
        for (int g = 0; g < 16; ++g) {
            o.scales[g] = x[g] & 0x0F;
            o.mins[g] = x[g] >> 4;
        }
        o.d = half(x + 80);
        o.dmin = half(x + 82);
    }
};

template <> struct Decode<GgmlType::Q3_K> {
    static constexpr int sub = 16, bias_shift = 2; // values low2 − 4·(no high bit): codes low2 + 4·high
    static constexpr bool has_min = false;
    static void run(const uint8_t* x, DecodedBlock& o)
    {
        const __m256i hmask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
        for (int c = 0; c < 8; ++c) { // element 32c + l: low bits 2(c % 4) of qs[32(c / 4) + l], high bit c of hmask[l]
            const __m256i high = _mm256_and_si256(_mm256_srli_epi16(hmask, c), _mm256_set1_epi8(1));
            store32(o.codes + 32 * c,
                    _mm256_or_si256(bits2(x + 32 + 32 * (c / 4), 2 * (c % 4)), _mm256_slli_epi16(high, 2)));
        }
        for (int g = 0; g < 16; ++g)
            o.scales[g] = portable::q3_k_scale(x + 96, g);
        o.d = half(x + 108);
        o.dmin = 0.0f;
    }
};

template <bool Five> struct DecodeQ45 {
    static constexpr int sub = 32, bias_shift = -1;
    static constexpr bool has_min = true;
    static void run(const uint8_t* x, DecodedBlock& o)
    {
        const uint8_t* qh = x + 16;
        const uint8_t* qs = x + (Five ? 48 : 16);
        const __m256i low4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
        const __m256i high = Five ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh)) : _mm256_setzero_si256();
        for (int j = 0; j < 4; ++j) { // elements 64j + l (low nibbles) and 64j + 32 + l (high nibbles)
            const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * j));
            __m256i lo = _mm256_and_si256(bytes, low4), hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low4);
            if constexpr (Five) {
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high, 2 * j), one), 4));
                hi = _mm256_or_si256(hi,
                                     _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high, 2 * j + 1), one), 4));
            }
            store32(o.codes + 64 * j, lo);
            store32(o.codes + 64 * j + 32, hi);
        }
        for (int s = 0; s < 8; ++s)
            portable::scale_min_k4(x + 4, s, o.scales[s], o.mins[s]);
        o.d = half(x);
        o.dmin = half(x + 2);
    }
};
template <> struct Decode<GgmlType::Q4_K> : DecodeQ45<false> {
};
template <> struct Decode<GgmlType::Q5_K> : DecodeQ45<true> {
};

template <> struct Decode<GgmlType::Q6_K> {
    static constexpr int sub = 16, bias_shift = 5; // values code − 32
    static constexpr bool has_min = false;
    static void run(const uint8_t* x, DecodedBlock& o)
    {
        const uint8_t* ql = x;
        const uint8_t* qh = x + 128;
        const __m256i low4 = _mm256_set1_epi8(0x0F);
        for (int h = 0; h < 2;
             ++h) // element 128h + 32q + l: a nibble of ql[64h + 32(q % 2) + l], bits 2q of qh[32h + l]
            for (int q = 0; q < 4; ++q) {
                const __m256i lbytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 64 * h + 32 * (q % 2)));
                const __m256i low = _mm256_and_si256(q < 2 ? lbytes : _mm256_srli_epi16(lbytes, 4), low4);
                store32(o.codes + 128 * h + 32 * q,
                        _mm256_or_si256(low, _mm256_slli_epi16(bits2(qh + 32 * h, 2 * q), 4)));
            }
        const auto* scales = reinterpret_cast<const int8_t*>(x + 192);
        for (int g = 0; g < 16; ++g)
            o.scales[g] = scales[g];
        o.d = half(x + 208);
        o.dmin = 0.0f;
    }
};

template <> struct Decode<GgmlType::IQ4_XS> {
    static constexpr int sub = 32, bias_shift = 7; // table values + 128
    static constexpr bool has_min = false;
    static void run(const uint8_t* x, DecodedBlock& o)
    {
        alignas(16) uint8_t table[16]; // the values + 128, as codes
        for (int i = 0; i < 16; ++i)
            table[i] = static_cast<uint8_t>(portable::iq4_value(i) + 128);
        const __m128i lut = _mm_load_si128(reinterpret_cast<const __m128i*>(table)), low4 = _mm_set1_epi8(0x0F);
        for (int ib = 0; ib < 8; ++ib) { // element 32ib + j: the low (j < 16) or high nibble of qs[16ib + j % 16]
            const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 8 + 16 * ib));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(o.codes + 32 * ib),
                             _mm_shuffle_epi8(lut, _mm_and_si128(bytes, low4)));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(o.codes + 32 * ib + 16),
                             _mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(bytes, 4), low4)));
            o.scales[ib] = portable::iq4_xs_scale(x, ib);
        }
        o.d = half(x);
        o.dmin = 0.0f;
    }
};

constexpr std::size_t kPanelQuantBytes = kTiledQ8K.quant_bytes(), kPanelScales = kTiledQ8K.scales_offset();
constexpr std::size_t kPanelBlockBytes = kTiledQ8K.bytes();

inline uint32_t load_u32(const uint8_t* p)
{
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// The sixteen tokens' sums of each sub-block's quants (Sub elements wide), from the panel's per-16 sums.
template <int Sub> inline void sub_block_sums(const uint8_t* pb, __m512i out[256 / Sub])
{
    const auto* sums = reinterpret_cast<const __m512i*>(pb + kPanelQuantBytes);
#pragma GCC unroll 16
    for (int s = 0; s < 256 / Sub; ++s)
        out[s] = Sub == 32 ? _mm512_add_epi32(_mm512_loadu_si512(sums + 2 * s), _mm512_loadu_si512(sums + 2 * s + 1))
                           : _mm512_loadu_si512(sums + s);
}

// Eight rows' integer sums of sub-block s: Σ codes × quants, less the code bias × the quants' sum.
template <GgmlType T>
inline void sub_block_products(const DecodedBlock* const w[8], const uint8_t* pb, int s, const __m512i* sub_sums,
                               __m512i p[8])
{
    using D = Decode<T>;
    constexpr int ng = D::sub / 4;
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r)
        p[r] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int g = 0; g < ng; ++g) {
        const int k = s * ng + g;
        const __m512i a = _mm512_loadu_si512(pb + static_cast<std::size_t>(k) * 64);
#pragma GCC unroll 8
        for (int r = 0; r < 8; ++r)
            p[r] = _mm512_dpbusd_epi32(p[r], _mm512_set1_epi32(static_cast<int>(load_u32(w[r]->codes + 4 * k))), a);
    }
    if constexpr (D::bias_shift >= 0) {
        const __m512i bias = _mm512_slli_epi32(sub_sums[s], D::bias_shift);
#pragma GCC unroll 8
        for (int r = 0; r < 8; ++r)
            p[r] = _mm512_sub_epi32(p[r], bias);
    }
}

// acc + v · scale in each lane. Where every v fits 16 bits (Fits16: Q2_K and Q3_K sub-block sums, the
// quants' sums of any sub-block) one vpdpwssd does it — v's high half meets the scale's zero high half —
// instead of a two-uop vpmulld and an add.
template <bool Fits16> inline __m512i add_scaled(__m512i acc, __m512i v, int32_t scale)
{
    if constexpr (Fits16)
        return _mm512_dpwssd_epi32(acc, v, _mm512_set1_epi32(scale & 0xFFFF));
    else
        return _mm512_add_epi32(acc, _mm512_mullo_epi32(v, _mm512_set1_epi32(scale)));
}

// The tiled order: per block res = d·s1, res = fma(−dmin, s2, res), acc = fma(res, d8, acc).
template <GgmlType Type> struct TiledOrder {
    static constexpr GgmlType T = Type;
    using D = Decode<T>;
    static void block(const DecodedBlock* const w[8], const uint8_t* pb, __m512 acc[8], __m512* /*acc_min*/)
    {
        constexpr int ns = 256 / D::sub;
        __m512i sub_sums[ns];
        sub_block_sums<D::sub>(pb, sub_sums);
        __m512i s1[8];
#pragma GCC unroll 8
        for (int r = 0; r < 8; ++r)
            s1[r] = _mm512_setzero_si512();
        for (int s = 0; s < ns; ++s) {
            __m512i p[8];
            sub_block_products<T>(w, pb, s, sub_sums, p);
            // |Σ (code − bias)·q| ≤ 4 · 128 · 16 for Q3_K, 3 · 128 · 16 for Q2_K
            constexpr bool fits16 = T == GgmlType::Q2_K || T == GgmlType::Q3_K;
#pragma GCC unroll 8
            for (int r = 0; r < 8; ++r)
                s1[r] = add_scaled<fits16>(s1[r], p[r], w[r]->scales[s]);
        }
        const __m512 d8 = _mm512_loadu_ps(pb + kPanelScales);
#pragma GCC unroll 8
        for (int r = 0; r < 8; ++r) {
            __m512 res = _mm512_mul_ps(_mm512_set1_ps(w[r]->d), _mm512_cvtepi32_ps(s1[r]));
            if constexpr (D::has_min) {
                __m512i s2 = _mm512_setzero_si512();
#pragma GCC unroll 16
                for (int s = 0; s < ns; ++s)
                    s2 = add_scaled<true>(s2, sub_sums[s], w[r]->mins[s]); // |sums| ≤ 128 · 32
                res = _mm512_fnmadd_ps(_mm512_set1_ps(w[r]->dmin), _mm512_cvtepi32_ps(s2), res);
            }
            acc[r] = _mm512_fmadd_ps(res, d8, acc[r]);
        }
    }
    static __m512 finish(__m512 acc, __m512 /*acc_min*/)
    {
        return acc;
    }
};

// llama.cpp's repacked Q4_K order (dot_repacked_q4_k and _gemm): acc = fma(s1, d·d8, acc) and acc_min =
// fma(s2, dmin·d8, acc_min) per block (its gemv) or per pair of sub-blocks (its gemm); acc − acc_min.
template <bool Gemm> struct RepackedQ4kOrder {
    static constexpr GgmlType T = GgmlType::Q4_K;
    static void block(const DecodedBlock* const w[8], const uint8_t* pb, __m512 acc[8], __m512 acc_min[8])
    {
        constexpr int per_step = Gemm ? 2 : 8; // sub-blocks per float step
        __m512i sub_sums[8];
        sub_block_sums<32>(pb, sub_sums);
        const __m512 d8 = _mm512_loadu_ps(pb + kPanelScales);
        __m512i s1[8];
#pragma GCC unroll 8
        for (int r = 0; r < 8; ++r)
            s1[r] = _mm512_setzero_si512();
        for (int s = 0; s < 8; ++s) {
            __m512i p[8];
            sub_block_products<T>(w, pb, s, sub_sums, p);
#pragma GCC unroll 8
            for (int r = 0; r < 8; ++r)
                s1[r] = add_scaled<false>(s1[r], p[r], w[r]->scales[s]);
            if (s % per_step == per_step - 1) {
#pragma GCC unroll 8
                for (int r = 0; r < 8; ++r) {
                    acc[r] =
                        _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1[r]), _mm512_mul_ps(_mm512_set1_ps(w[r]->d), d8), acc[r]);
                    s1[r] = _mm512_setzero_si512();
                }
            }
        }
#pragma GCC unroll 8
        for (int r = 0; r < 8; ++r) {
            const __m512 dmin = _mm512_mul_ps(_mm512_set1_ps(w[r]->dmin), d8);
            for (int s0 = 0; s0 < 8; s0 += per_step) {
                __m512i s2 = _mm512_setzero_si512();
                for (int s = s0; s < s0 + per_step; ++s)
                    s2 = add_scaled<true>(s2, sub_sums[s], w[r]->mins[s]);
                acc_min[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s2), dmin, acc_min[r]);
            }
        }
    }
    static __m512 finish(__m512 acc, __m512 acc_min)
    {
        return _mm512_sub_ps(acc, acc_min);
    }
};

// Rows [0, rows) of a pass's results (token lanes from t0) into y, tokens [t_begin, t_end) only.
inline void store_tile(const float out[8][kTiledPanelTokens], int rows, int64_t t0, int64_t t_begin, int64_t t_end,
                       float* y, int64_t y_stride)
{
    const int64_t first = std::max(t0, t_begin), last = std::min(t0 + kTiledPanelTokens, t_end);
    for (int r = 0; r < rows; ++r)
        for (int64_t t = first; t < last; ++t)
            y[t * y_stride + r] = out[r][t - t0];
}

// Decodes every row of the call once (a task's rows, in L2), then runs Order over each panel for
// eight rows at a time, all of the rows before the next panel (a panel is read from L1 by each row
// group; walking every panel past sixteen rows at a time read the prompt's panels from L3 once per
// sixteen rows); stores tokens [t_begin, t_end) only.
template <class Order>
void tiled_gemm(const void* w, std::size_t w_row_bytes, int64_t n_rows, const uint8_t* panels, int64_t t_begin,
                int64_t t_end, int64_t n, float* y, int64_t y_stride)
{
    constexpr GgmlType T = Order::T;
    constexpr std::size_t block_bytes = portable::KLayout<T>::block_bytes;
    const int64_t nb = n / 256;
    const std::size_t panel_bytes = static_cast<std::size_t>(nb) * kPanelBlockBytes;
    const int64_t padded_rows = (n_rows + 7) / 8 * 8;
    // the decoded rows stay with the thread: a prompt's matrices reuse one buffer
    thread_local std::vector<DecodedBlock> decoded;
    decoded.resize(static_cast<std::size_t>(padded_rows * nb));
    for (int64_t r = 0; r < padded_rows; ++r)
        for (int64_t b = 0; b < nb; ++b) {
            DecodedBlock& o = decoded[static_cast<std::size_t>(r * nb + b)];
            if (r < n_rows)
                Decode<T>::run(static_cast<const uint8_t*>(w) + static_cast<std::size_t>(r) * w_row_bytes +
                                   static_cast<std::size_t>(b) * block_bytes,
                               o);
            else
                o = DecodedBlock{}; // a missing row: zeros, never stored
        }
    for (int64_t t0 = t_begin - t_begin % kTiledPanelTokens; t0 < t_end; t0 += kTiledPanelTokens) {
        const uint8_t* panel = panels + static_cast<std::size_t>(t0 / kTiledPanelTokens) * panel_bytes;
        for (int64_t h = 0; h < n_rows; h += 8) {
            __m512 acc[8], acc_min[8];
            for (int r = 0; r < 8; ++r)
                acc[r] = acc_min[r] = _mm512_setzero_ps();
            for (int64_t b = 0; b < nb; ++b) {
                const DecodedBlock* wb[8];
                for (int r = 0; r < 8; ++r)
                    wb[r] = &decoded[static_cast<std::size_t>((h + r) * nb + b)];
                Order::block(wb, panel + static_cast<std::size_t>(b) * kPanelBlockBytes, acc, acc_min);
            }
            alignas(64) float out[8][kTiledPanelTokens];
            for (int r = 0; r < 8; ++r)
                _mm512_store_ps(out[r], Order::finish(acc[r], acc_min[r]));
            store_tile(out, static_cast<int>(std::min<int64_t>(8, n_rows - h)), t0, t_begin, t_end, y + h, y_stride);
        }
    }
}

// llama.cpp's repacked Q4_0 and IQ4_NL order (dot_repacked_b32, its gemm's and gemv's alike): per
// 32-element block acc = fma(isum, d·d8, acc). Codes are the values + 8 (Q4_0) or + 128 (IQ4_NL).
constexpr std::size_t kB32QuantBytes = kTiledQ80.quant_bytes(), kB32Scales = kTiledQ80.scales_offset();
constexpr std::size_t kB32BlockBytes = kTiledQ80.bytes();

template <GgmlType T>
void repacked_b32_gemm(const void* w, std::size_t w_row_bytes, int64_t n_rows, const uint8_t* panels, int64_t t_begin,
                       int64_t t_end, int64_t n, float* y, int64_t y_stride)
{
    constexpr int bias_shift = T == GgmlType::Q4_0 ? 3 : 7;
    const int64_t nb = n / 32;
    const std::size_t panel_bytes = static_cast<std::size_t>(nb) * kB32BlockBytes;
    thread_local std::vector<uint8_t> codes; // [row][element]
    thread_local std::vector<float> scales;  // [row][block]
    // every row of the call decoded once, then each panel walked past all of them (as tiled_gemm)
    const int64_t padded_rows = (n_rows + 7) / 8 * 8;
    codes.resize(static_cast<std::size_t>(padded_rows * n));
    scales.resize(static_cast<std::size_t>(padded_rows * nb));
    for (int64_t r = 0; r < padded_rows; ++r)
        for (int64_t b = 0; b < nb; ++b) {
            uint8_t* c = codes.data() + static_cast<std::size_t>(r * n + 32 * b);
            float& d = scales[static_cast<std::size_t>(r * nb + b)];
            if (r >= n_rows) { // a missing row: zeros, never stored
                std::memset(c, 0, 32);
                d = 0.0f;
                continue;
            }
            const uint8_t* x = static_cast<const uint8_t*>(w) + static_cast<std::size_t>(r) * w_row_bytes +
                               static_cast<std::size_t>(b) * 18;
            for (int e = 0; e < 32; ++e)
                c[e] = static_cast<uint8_t>(portable::legacy_q<T>(x, e) + (1 << bias_shift));
            d = half(x);
        }
    for (int64_t t0 = t_begin - t_begin % kTiledPanelTokens; t0 < t_end; t0 += kTiledPanelTokens) {
        const uint8_t* panel = panels + static_cast<std::size_t>(t0 / kTiledPanelTokens) * panel_bytes;
        for (int64_t h = 0; h < n_rows; h += 8) {
            const uint8_t* row_codes[8];
            const float* row_scales[8];
            for (int r = 0; r < 8; ++r) {
                row_codes[r] = codes.data() + static_cast<std::size_t>((h + r) * n);
                row_scales[r] = scales.data() + static_cast<std::size_t>((h + r) * nb);
            }
            __m512 acc[8];
            for (int r = 0; r < 8; ++r)
                acc[r] = _mm512_setzero_ps();
            for (int64_t b = 0; b < nb; ++b) {
                const uint8_t* pb = panel + static_cast<std::size_t>(b) * kB32BlockBytes;
                __m512i p[8];
#pragma GCC unroll 8
                for (int r = 0; r < 8; ++r)
                    p[r] = _mm512_setzero_si512();
#pragma GCC unroll 8
                for (int g = 0; g < 8; ++g) {
                    const __m512i a = _mm512_loadu_si512(pb + 64 * g);
#pragma GCC unroll 8
                    for (int r = 0; r < 8; ++r)
                        p[r] = _mm512_dpbusd_epi32(
                            p[r], _mm512_set1_epi32(static_cast<int>(load_u32(row_codes[r] + 32 * b + 4 * g))), a);
                }
                const __m512i bias = _mm512_slli_epi32(_mm512_loadu_si512(pb + kB32QuantBytes), bias_shift);
                const __m512 d8 = _mm512_loadu_ps(pb + kB32Scales);
#pragma GCC unroll 8
                for (int r = 0; r < 8; ++r)
                    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(p[r], bias)),
                                             _mm512_mul_ps(_mm512_set1_ps(row_scales[r][b]), d8), acc[r]);
            }
            alignas(64) float out[8][kTiledPanelTokens];
            for (int r = 0; r < 8; ++r)
                _mm512_store_ps(out[r], acc[r]);
            store_tile(out, static_cast<int>(std::min<int64_t>(8, n_rows - h)), t0, t_begin, t_end, y + h, y_stride);
        }
    }
}

// llama.cpp's batched (llamafile) order for float weights (dot_float_batched): per (row, token) one
// 8-lane accumulator, acc = fma(w[i..i+8], a[i..i+8], acc) along the row, then hsum. Two rows share a
// 512-bit register (one per 256-bit half), their eight values decoded to f32 once per thread; a token's
// eight values are broadcast to both halves. Eight rows × six tokens per pass (24 accumulators).
template <GgmlType T> inline __m256 load_weights8(const uint8_t* row, int64_t i)
{
    if constexpr (T == GgmlType::F32) {
        return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
    } else if constexpr (T == GgmlType::F16) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
    } else {
        const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
    }
}

// Eight packed rows × six tokens over the whole row, into y.
inline void float_tile(const float* wp, int64_t steps, const float* const at[6], int rows, int tokens, float* y,
                       int64_t y_stride)
{
    constexpr int kTokens = 6;
    __m512 acc[4][kTokens];
#pragma GCC unroll 6
    for (int p = 0; p < 4; ++p)
#pragma GCC unroll 6
        for (int t = 0; t < kTokens; ++t)
            acc[p][t] = _mm512_setzero_ps();
    for (int64_t j = 0; j < steps; ++j, wp += 64) {
        const __m512 w0 = _mm512_loadu_ps(wp), w1 = _mm512_loadu_ps(wp + 16), w2 = _mm512_loadu_ps(wp + 32),
                     w3 = _mm512_loadu_ps(wp + 48);
#pragma GCC unroll 6
        for (int t = 0; t < kTokens; ++t) {
            const __m512 x = _mm512_broadcast_f32x8(_mm256_loadu_ps(at[t] + 8 * j));
            acc[0][t] = _mm512_fmadd_ps(w0, x, acc[0][t]);
            acc[1][t] = _mm512_fmadd_ps(w1, x, acc[1][t]);
            acc[2][t] = _mm512_fmadd_ps(w2, x, acc[2][t]);
            acc[3][t] = _mm512_fmadd_ps(w3, x, acc[3][t]);
        }
    }
    for (int p = 0; p < 4; ++p)
        for (int t = 0; t < tokens; ++t) {
            float* dst = y + t * y_stride + 2 * p;
            if (2 * p < rows)
                dst[0] = hsum(_mm512_castps512_ps256(acc[p][t]));
            if (2 * p + 1 < rows)
                dst[1] = hsum(_mm512_extractf32x8_ps(acc[p][t], 1));
        }
}

// All of the call's rows are packed first (a task of float rows is kFloatRowsPerTask rows: 256 KB of
// f32 for 1,024-wide rows, in L2); then each six tokens' activations are multiplied with every packed
// row block while they are in L1. Walking all of a prompt's tokens past one row block at a time
// streamed the activations (2 MB for 512 tokens × 1,024) from L3 once per eight rows.
template <GgmlType T>
void float_batched_gemm(const void* w, std::size_t w_row_bytes, int64_t n_rows, const uint8_t* panels, int64_t t_begin,
                        int64_t t_end, int64_t n, float* y, int64_t y_stride)
{
    constexpr int kTokens = 6;
    const int64_t steps = n / 8;
    const auto block_floats = static_cast<std::size_t>(steps * 64);
    const int64_t blocks = (n_rows + 7) / 8;
    const auto* a = reinterpret_cast<const float*>(panels); // f32 rows, token after token
    thread_local std::vector<float> packed;                 // [row block][step][pair][16]: rows 2p, 2p + 1
    packed.resize(static_cast<std::size_t>(blocks) * block_floats);
    for (int64_t b = 0; b < blocks; ++b) {
        const int64_t r0 = 8 * b;
        const int rows = static_cast<int>(std::min<int64_t>(8, n_rows - r0));
        for (int r = 0; r < 8; ++r) {
            const auto* row =
                static_cast<const uint8_t*>(w) + static_cast<std::size_t>(r0 + std::min(r, rows - 1)) * w_row_bytes;
            float* out = packed.data() + static_cast<std::size_t>(b) * block_floats + (r / 2) * 16 + (r % 2) * 8;
            for (int64_t j = 0; j < steps; ++j)
                _mm256_storeu_ps(out + j * 64, r < rows ? load_weights8<T>(row, 8 * j) : _mm256_setzero_ps());
        }
    }
    for (int64_t t0 = t_begin; t0 < t_end; t0 += kTokens) {
        const int tokens = static_cast<int>(std::min<int64_t>(kTokens, t_end - t0));
        const float* at[kTokens];
        for (int t = 0; t < kTokens; ++t)
            at[t] = a + (t0 + std::min(t, tokens - 1)) * n;
        for (int64_t b = 0; b < blocks; ++b)
            float_tile(packed.data() + static_cast<std::size_t>(b) * block_floats, steps, at,
                       static_cast<int>(std::min<int64_t>(8, n_rows - 8 * b)), tokens, y + t0 * y_stride + 8 * b,
                       y_stride);
    }
}

} // namespace

TiledGemmFn tiled_gemm_avx512(GgmlType type)
{
    switch (type) {
    case GgmlType::Q2_K:
        return tiled_gemm<TiledOrder<GgmlType::Q2_K>>;
    case GgmlType::Q3_K:
        return tiled_gemm<TiledOrder<GgmlType::Q3_K>>;
    case GgmlType::Q4_K:
        return tiled_gemm<TiledOrder<GgmlType::Q4_K>>;
    case GgmlType::Q5_K:
        return tiled_gemm<TiledOrder<GgmlType::Q5_K>>;
    case GgmlType::Q6_K:
        return tiled_gemm<TiledOrder<GgmlType::Q6_K>>;
    case GgmlType::IQ4_XS:
        return tiled_gemm<TiledOrder<GgmlType::IQ4_XS>>;
    default:
        return nullptr;
    }
}

TiledGemmFn float_gemm_avx512(GgmlType type)
{
    switch (type) {
    case GgmlType::F32:
        return float_batched_gemm<GgmlType::F32>;
    case GgmlType::F16:
        return float_batched_gemm<GgmlType::F16>;
    case GgmlType::BF16:
        return float_batched_gemm<GgmlType::BF16>;
    default:
        return nullptr;
    }
}

TiledGemmFn repacked_gemm_avx512(GgmlType type, bool gemm)
{
    switch (type) {
    case GgmlType::Q4_K:
        return gemm ? tiled_gemm<RepackedQ4kOrder<true>> : tiled_gemm<RepackedQ4kOrder<false>>;
    case GgmlType::Q4_0:
        return repacked_b32_gemm<GgmlType::Q4_0>;
    case GgmlType::IQ4_NL:
        return repacked_b32_gemm<GgmlType::IQ4_NL>;
    default:
        return nullptr;
    }
}

} // namespace engine::simd
