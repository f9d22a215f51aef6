// SPDX-License-Identifier: GPL-3.0-or-later
// The tiled order (tiled_gemm.h) with AVX-512 VNNI: a thread decodes its weight rows once into byte
// codes with int32 scales, then for each panel of sixteen tokens and eight rows at a time sums every
// sub-block's codes × quants with vpdpbusd (four weight bytes broadcast, the tokens' four quants in
// each lane), scales the sub-block sums in integers, and does the block's three float operations on
// sixteen tokens at once. Compiled with -mavx512vnni; reached only through tiled_gemm_for.
#include "quant/simd/tiled_decode_x86.h"
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

constexpr std::size_t kPanelQuantBytes = kTiledQ8K.quant_bytes(), kPanelScales = kTiledQ8K.scales_offset();
constexpr std::size_t kPanelBlockBytes = kTiledQ8K.bytes();

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
    static constexpr bool kSeparateMin = false;
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
    // acc_min is a sum of its own: taken in a second walk over the blocks (min_block), so that its eight
    // registers are not held through the products (with them, s1, p and acc the kernel spilled)
    static constexpr bool kSeparateMin = true;
    static constexpr int per_step = Gemm ? 2 : 8; // sub-blocks per float step
    static void block(const DecodedBlock* const w[8], const uint8_t* pb, __m512 acc[8], __m512* /*acc_min*/)
    {
        // Q4_K's codes carry no bias: its products need no quant sums (min_block takes them)
        static_assert(Decode<T>::bias_shift < 0);
        const __m512 d8 = _mm512_loadu_ps(pb + kPanelScales);
        __m512i s1[8];
#pragma GCC unroll 8
        for (int r = 0; r < 8; ++r)
            s1[r] = _mm512_setzero_si512();
        for (int s = 0; s < 8; ++s) {
            __m512i p[8];
            sub_block_products<T>(w, pb, s, nullptr, p);
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
    }
    static void min_block(const DecodedBlock* const w[8], const uint8_t* pb, __m512 acc_min[8])
    {
        __m512i sub_sums[8];
        sub_block_sums<32>(pb, sub_sums);
        const __m512 d8 = _mm512_loadu_ps(pb + kPanelScales);
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

// Rows [0, rows) of a pass's results (token lanes from t0) into y, tokens [t_begin, t_end) only: eight
// tokens at a time turned from rows into columns (an 8×8 transpose), each token's eight results one
// store (scalar stores, one result at a time, were 5% of a Q4_K prefill).
inline void store_tile(const float out[8][kTiledPanelTokens], int rows, int64_t t0, int64_t t_begin, int64_t t_end,
                       float* y, int64_t y_stride)
{
    const int64_t first = std::max(t0, t_begin), last = std::min(t0 + kTiledPanelTokens, t_end);
    const __mmask8 row_mask = static_cast<__mmask8>((1u << rows) - 1);
    for (int half = 0; half < kTiledPanelTokens / 8; ++half) {
        const int64_t base = t0 + 8 * half;
        if (base + 8 <= first || base >= last)
            continue;
        __m256 column[8];
        for (int i = 0; i < 8; ++i)
            column[i] = _mm256_load_ps(out[i] + 8 * half);
        transpose8(column); // column[i]: token base + i's eight rows
        for (int i = 0; i < 8; ++i) {
            const int64_t t = base + i;
            if (t >= first && t < last)
                _mm256_mask_storeu_ps(y + t * y_stride, row_mask, column[i]);
        }
    }
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
    const int64_t nb = n / 256;
    const std::size_t panel_bytes = static_cast<std::size_t>(nb) * kPanelBlockBytes;
    const DecodedBlock* decoded = decode_k_rows<T>(w, w_row_bytes, n_rows, (n_rows + 7) / 8 * 8, nb);
    for (int64_t t0 = t_begin - t_begin % kTiledPanelTokens; t0 < t_end; t0 += kTiledPanelTokens) {
        const uint8_t* panel = panels + static_cast<std::size_t>(t0 / kTiledPanelTokens) * panel_bytes;
        for (int64_t h = 0; h < n_rows; h += 8) {
            __m512 acc[8], acc_min[8];
            for (int r = 0; r < 8; ++r)
                acc[r] = acc_min[r] = _mm512_setzero_ps();
            for (int64_t b = 0; b < nb; ++b) {
                const DecodedBlock* wb[8];
                for (int r = 0; r < 8; ++r)
                    wb[r] = decoded + (h + r) * nb + b;
                Order::block(wb, panel + static_cast<std::size_t>(b) * kPanelBlockBytes, acc, acc_min);
            }
            if constexpr (Order::kSeparateMin)
                for (int64_t b = 0; b < nb; ++b) {
                    const DecodedBlock* wb[8];
                    for (int r = 0; r < 8; ++r)
                        wb[r] = decoded + (h + r) * nb + b;
                    Order::min_block(wb, panel + static_cast<std::size_t>(b) * kPanelBlockBytes, acc_min);
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
    constexpr int bias_shift = DecodedB32Rows<T>::bias_shift;
    const int64_t nb = n / 32;
    const std::size_t panel_bytes = static_cast<std::size_t>(nb) * kB32BlockBytes;
    // every row of the call decoded once, then each panel walked past all of them (as tiled_gemm)
    const DecodedB32Rows<T> decoded = decode_b32_rows<T>(w, w_row_bytes, n_rows, (n_rows + 7) / 8 * 8, n);
    for (int64_t t0 = t_begin - t_begin % kTiledPanelTokens; t0 < t_end; t0 += kTiledPanelTokens) {
        const uint8_t* panel = panels + static_cast<std::size_t>(t0 / kTiledPanelTokens) * panel_bytes;
        for (int64_t h = 0; h < n_rows; h += 8) {
            const uint8_t* row_codes[8];
            const float* row_scales[8];
            for (int r = 0; r < 8; ++r) {
                row_codes[r] = decoded.codes + (h + r) * n;
                row_scales[r] = decoded.scales + (h + r) * nb;
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
