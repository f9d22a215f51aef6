// SPDX-License-Identifier: GPL-3.0-or-later
// The tiled matmuls (tiled_gemm.h) on AVX2 without VNNI: the AVX-512 kernels' design — a task's weight
// rows decoded once into byte codes, then every panel walked past all of them — with eight tokens to a
// 256-bit register (each half of a sixteen-token panel in turn) and four rows at a time (sixteen
// registers). vpdpbusd's work is done by vpmaddubsw (codes × quants, pairs summed to int16), int16
// adds over as many groups as cannot overflow, then one vpmaddwd by the sub-block's scale into int32.
// Every sum is an exact integer, so the bits are the AVX-512 kernels' and the row kernels'. Compiled
// with -mavx2; reached only through tiled_gemm_for, float_gemm_for and repacked_gemm_for.
#include "quant/simd/tiled_decode_x86.h"
#include "quant/simd/vec_dot_simd.h"
#include "quant/simd/x86_block_helpers.h"
#include "quant/vec_dot_portable.h"

#include <algorithm>
#include <immintrin.h>
#include <vector>

namespace engine::simd {
namespace { // NOLINT(cert-dcl59-cpp,google-build-namespaces): one translation unit's kernels

constexpr int kTokens = 8; // one ymm of int32 or f32 lanes: half of a panel
constexpr int kRows = 4;   // rows per pass: 4 int16 sums, 4 int32 sums and 4 f32 sums fit the sixteen registers
static_assert(2 * kTokens == kTiledPanelTokens);

constexpr std::size_t kPanelQuantBytes = kTiledQ8K.quant_bytes(), kPanelScales = kTiledQ8K.scales_offset();
constexpr std::size_t kPanelBlockBytes = kTiledQ8K.bytes();

// How many groups of four codes × quants a sub-block's int16 lanes may sum before they could overflow
// (each vpmaddubsw lane is two products of a code and a quant of at most 127 in magnitude — Q8_K's and
// Q8_0's range): the codes' bound × 2 × 127 × groups < 2^15. IQ4_XS codes (up to 241) would overflow
// vpmaddubsw itself, so its kernels multiply the signed values instead: |value| × (quant with the
// value's sign), at most 2 × 127 × 127 per lane, one group at a time.
template <GgmlType T> struct Int16Run;
template <> struct Int16Run<GgmlType::Q2_K> { // codes ≤ 3
    static constexpr int groups = 4;
    static constexpr bool signed_values = false;
};
template <> struct Int16Run<GgmlType::Q3_K> { // codes ≤ 7
    static constexpr int groups = 4;
    static constexpr bool signed_values = false;
};
template <> struct Int16Run<GgmlType::Q4_K> { // codes ≤ 15: 8 · 2 · 15 · 127 = 30,480
    static constexpr int groups = 8;
    static constexpr bool signed_values = false;
};
template <> struct Int16Run<GgmlType::Q5_K> { // codes ≤ 31: 4 · 2 · 31 · 127 = 31,496
    static constexpr int groups = 4;
    static constexpr bool signed_values = false;
};
template <> struct Int16Run<GgmlType::Q6_K> { // codes ≤ 63: 2 · 2 · 63 · 127 = 32,004
    static constexpr int groups = 2;
    static constexpr bool signed_values = false;
};
template <> struct Int16Run<GgmlType::IQ4_XS> { // signed values
    static constexpr int groups = 1;
    static constexpr bool signed_values = true;
};

inline __m256i load256(const void* p)
{
    return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}
inline __m256i broadcast32(const void* p)
{
    return _mm256_set1_epi32(static_cast<int>(load_u32(static_cast<const uint8_t*>(p))));
}

// Four weight codes broadcast to every token's lane times each token's four quants: int16 pairs.
inline __m256i code_products(const uint8_t* codes, __m256i a)
{
    return _mm256_maddubs_epi16(broadcast32(codes), a);
}
// The same for signed values (|value| ≤ 127), given with their magnitudes: the sign goes onto the quants.
inline __m256i value_products(const uint8_t* magnitudes, const uint8_t* values, __m256i a)
{
    return _mm256_maddubs_epi16(broadcast32(magnitudes), _mm256_sign_epi8(a, broadcast32(values)));
}

// Signed values and their magnitudes from codes that are the values + 128 (IQ4_XS's and IQ4_NL's):
// the codes are rewritten in place, the magnitudes written to `magnitudes`.
inline void codes_to_signed(uint8_t* codes, uint8_t* magnitudes, std::size_t count)
{
    for (std::size_t i = 0; i < count; i += 32) {
        const __m256i v = _mm256_xor_si256(load256(codes + i), _mm256_set1_epi8(static_cast<char>(0x80)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + i), v);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(magnitudes + i), _mm256_abs_epi8(v));
    }
}

// int32 lanes + the int16 pairs' sums × scale (vpmaddwd), exact.
inline __m256i add_scaled_pairs(__m256i acc, __m256i pairs, int16_t scale)
{
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(scale)));
}

// The eight tokens' sum of the quants of sub-block s (Sub elements), from the panel's per-16 sums.
template <int Sub> inline __m256i sub_sum(const uint8_t* pb, int half, int s)
{
    const auto* sums = reinterpret_cast<const int32_t*>(pb + kPanelQuantBytes) + kTokens * half;
    if constexpr (Sub == 32)
        return _mm256_add_epi32(load256(sums + 2 * s * kTiledPanelTokens),
                                load256(sums + (2 * s + 1) * kTiledPanelTokens));
    else
        return load256(sums + s * kTiledPanelTokens);
}

// Sub-blocks 2j and 2j + 1's quant sums (each fits int16) side by side in each lane: one vpmaddwd by
// a row's two int16 factors (scales16 or mins16 from 2j) gives both products' sum. Once per block,
// for every row.
template <int Sub> struct SubSumPairs {
    static constexpr int pairs = 256 / Sub / 2;
    __m256i v[pairs];
    SubSumPairs(const uint8_t* pb, int half)
    {
        for (int j = 0; j < pairs; ++j)
            v[j] = _mm256_blend_epi16(sub_sum<Sub>(pb, half, 2 * j),
                                      _mm256_slli_epi32(sub_sum<Sub>(pb, half, 2 * j + 1), 16), 0xAA);
    }
    // Σ factors[s] · sum_s over sub-blocks [2 j0, 2 j1)
    __m256i dot(const int16_t* factors, int j0, int j1) const
    {
        __m256i acc = _mm256_setzero_si256();
        for (int j = j0; j < j1; ++j)
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(v[j], broadcast32(factors + 2 * j)));
        return acc;
    }
};

// s1[r] += scale_s · Σ codes × quants over sub-block s, for the rows' codes (the code bias is taken
// off per block by the caller), or Σ values × quants where the rows hold signed values.
template <GgmlType T>
inline void add_sub_block(const DecodedBlock* const w[kRows], const uint8_t* const magnitudes[kRows], const uint8_t* pb,
                          int half, int s, __m256i s1[kRows])
{
    using Run = Int16Run<T>;
    constexpr int ng = Decode<T>::sub / 4;
    __m256i p[kRows];
    for (int g0 = 0; g0 < ng; g0 += Run::groups) {
#pragma GCC unroll 4
        for (int r = 0; r < kRows; ++r)
            p[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int g = g0; g < g0 + Run::groups; ++g) {
            const int k = s * ng + g;
            const __m256i a = load256(pb + static_cast<std::size_t>(k) * 64 + 32 * half);
#pragma GCC unroll 4
            for (int r = 0; r < kRows; ++r)
                p[r] = _mm256_add_epi16(p[r], Run::signed_values
                                                  ? value_products(magnitudes[r] + 4 * k, w[r]->codes + 4 * k, a)
                                                  : code_products(w[r]->codes + 4 * k, a));
            // the sums taken group by group: GCC otherwise forms all of a run's products first and adds
            // them as a tree, which spills them (sixteen registers)
            static_assert(kRows == 4, "one register barrier operand per row");
            __asm__("" : "+x"(p[0]), "+x"(p[1]), "+x"(p[2]), "+x"(p[3]));
        }
#pragma GCC unroll 4
        for (int r = 0; r < kRows; ++r)
            s1[r] = add_scaled_pairs(s1[r], p[r], w[r]->scales16[s]);
    }
}

// The tiled order: per block res = d·s1, res = fma(−dmin, s2, res), acc = fma(res, d8, acc), with
// s1 = Σ scale_s · (Σ codes × quants − bias · quants' sum_s) (Σ values × quants for signed values).
template <GgmlType Type> struct TiledOrder {
    static constexpr GgmlType T = Type;
    static constexpr bool kSeparateMin = false;
    using D = Decode<T>;
    static void block(const DecodedBlock* const w[kRows], const uint8_t* const magnitudes[kRows], const uint8_t* pb,
                      int half, __m256 acc[kRows], __m256* /*acc_min*/)
    {
        constexpr int ns = 256 / D::sub;
        __m256i s1[kRows];
#pragma GCC unroll 4
        for (int r = 0; r < kRows; ++r)
            s1[r] = _mm256_setzero_si256();
        for (int s = 0; s < ns; ++s)
            add_sub_block<T>(w, magnitudes, pb, half, s, s1);
        const SubSumPairs<D::sub> sums(pb, half);
        const __m256 d8 = _mm256_loadu_ps(reinterpret_cast<const float*>(pb + kPanelScales) + kTokens * half);
#pragma GCC unroll 4
        for (int r = 0; r < kRows; ++r) {
            if constexpr (D::bias_shift >= 0 && !Int16Run<T>::signed_values) // |Σ scale · sum| · 2^shift < 2^28
                s1[r] = _mm256_sub_epi32(s1[r], _mm256_slli_epi32(sums.dot(w[r]->scales16, 0, ns / 2), D::bias_shift));
            __m256 res = _mm256_mul_ps(_mm256_set1_ps(w[r]->d), _mm256_cvtepi32_ps(s1[r]));
            if constexpr (D::has_min)
                res = _mm256_fnmadd_ps(_mm256_set1_ps(w[r]->dmin),
                                       _mm256_cvtepi32_ps(sums.dot(w[r]->mins16, 0, ns / 2)), res);
            acc[r] = _mm256_fmadd_ps(res, d8, acc[r]);
        }
    }
    static __m256 finish(__m256 acc, __m256 /*acc_min*/)
    {
        return acc;
    }
};

// llama.cpp's repacked Q4_K order (dot_repacked_q4_k and _gemm): acc = fma(s1, d·d8, acc) and acc_min =
// fma(s2, dmin·d8, acc_min) per block (its gemv) or per pair of sub-blocks (its gemm); acc − acc_min.
template <bool Gemm> struct RepackedQ4kOrder {
    static constexpr GgmlType T = GgmlType::Q4_K;
    // acc_min is a sum of its own: taken in a second walk over the blocks, so that its four registers are
    // not held through the products (sixteen accumulators spilled)
    static constexpr bool kSeparateMin = true;
    static constexpr int per_step = Gemm ? 2 : 8; // sub-blocks per float step
    static void block(const DecodedBlock* const w[kRows], const uint8_t* const magnitudes[kRows], const uint8_t* pb,
                      int half, __m256 acc[kRows], __m256* /*acc_min*/)
    {
        const __m256 d8 = _mm256_loadu_ps(reinterpret_cast<const float*>(pb + kPanelScales) + kTokens * half);
        __m256i s1[kRows];
#pragma GCC unroll 4
        for (int r = 0; r < kRows; ++r)
            s1[r] = _mm256_setzero_si256();
        for (int s = 0; s < 8; ++s) {
            add_sub_block<T>(w, magnitudes, pb, half, s, s1);
            if (s % per_step == per_step - 1) {
#pragma GCC unroll 4
                for (int r = 0; r < kRows; ++r) {
                    acc[r] =
                        _mm256_fmadd_ps(_mm256_cvtepi32_ps(s1[r]), _mm256_mul_ps(_mm256_set1_ps(w[r]->d), d8), acc[r]);
                    s1[r] = _mm256_setzero_si256();
                }
            }
        }
    }
    static void min_block(const DecodedBlock* const w[kRows], const uint8_t* pb, int half, __m256 acc_min[kRows])
    {
        const __m256 d8 = _mm256_loadu_ps(reinterpret_cast<const float*>(pb + kPanelScales) + kTokens * half);
        const SubSumPairs<32> sums(pb, half);
#pragma GCC unroll 4
        for (int r = 0; r < kRows; ++r) {
            const __m256 dmin = _mm256_mul_ps(_mm256_set1_ps(w[r]->dmin), d8);
            for (int s0 = 0; s0 < 8; s0 += per_step)
                acc_min[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums.dot(w[r]->mins16, s0 / 2, (s0 + per_step) / 2)),
                                             dmin, acc_min[r]);
        }
    }
    static __m256 finish(__m256 acc, __m256 acc_min)
    {
        return _mm256_sub_ps(acc, acc_min);
    }
};

// Rows [0, rows) of a pass's results (token lanes from t0) into y, tokens [t_begin, t_end) only: four
// tokens at a time turned from rows into columns (4×4 transposes), a token's four results one store.
inline void store_tile(const float out[kRows][kTokens], int rows, int64_t t0, int64_t t_begin, int64_t t_end, float* y,
                       int64_t y_stride)
{
    static_assert(kRows == 4);
    const int64_t first = std::max(t0, t_begin), last = std::min(t0 + kTokens, t_end);
    const __m128i row_mask = _mm_cmpgt_epi32(_mm_set1_epi32(rows), _mm_setr_epi32(0, 1, 2, 3));
    for (int quarter = 0; quarter < kTokens / 4; ++quarter) {
        __m128 c0 = _mm_loadu_ps(out[0] + 4 * quarter), c1 = _mm_loadu_ps(out[1] + 4 * quarter);
        __m128 c2 = _mm_loadu_ps(out[2] + 4 * quarter), c3 = _mm_loadu_ps(out[3] + 4 * quarter);
        _MM_TRANSPOSE4_PS(c0, c1, c2, c3);
        const __m128 column[4] = {c0, c1, c2, c3};
        for (int i = 0; i < 4; ++i) {
            const int64_t t = t0 + 4 * quarter + i;
            if (t >= first && t < last)
                _mm_maskstore_ps(y + t * y_stride, row_mask, column[i]);
        }
    }
}

// Calls pass(panel, half, t0) for each half panel of eight tokens that holds a token of [t_begin, t_end).
template <class Pass>
inline void for_each_half_panel(const uint8_t* panels, std::size_t panel_bytes, int64_t t_begin, int64_t t_end,
                                Pass&& pass)
{
    for (int64_t t0 = t_begin - t_begin % kTokens; t0 < t_end; t0 += kTokens)
        pass(panels + static_cast<std::size_t>(t0 / kTiledPanelTokens) * panel_bytes,
             static_cast<int>(t0 / kTokens % 2), t0);
}

// Decodes every row of the call once (a task's rows, in L2), then runs Order over each half panel for
// four rows at a time, all of the rows before the next half panel (read from L1 by each row group).
template <class Order>
void tiled_gemm(const void* w, std::size_t w_row_bytes, int64_t n_rows, const uint8_t* panels, int64_t t_begin,
                int64_t t_end, int64_t n, float* y, int64_t y_stride)
{
    const int64_t nb = n / 256, padded_rows = (n_rows + kRows - 1) / kRows * kRows;
    DecodedBlock* decoded = decode_k_rows<Order::T>(w, w_row_bytes, n_rows, padded_rows, nb);
    thread_local std::vector<uint8_t> magnitudes; // [row][block][256] where the rows hold signed values
    if constexpr (Int16Run<Order::T>::signed_values) {
        magnitudes.resize(static_cast<std::size_t>(padded_rows * nb) * 256);
        for (int64_t i = 0; i < padded_rows * nb; ++i)
            codes_to_signed(decoded[i].codes, magnitudes.data() + i * 256, 256);
    }
    for_each_half_panel(
        panels, static_cast<std::size_t>(nb) * kPanelBlockBytes, t_begin, t_end,
        [&](const uint8_t* panel, int half, int64_t t0) {
            for (int64_t h = 0; h < n_rows; h += kRows) {
                __m256 acc[kRows], acc_min[kRows];
                for (int r = 0; r < kRows; ++r)
                    acc[r] = acc_min[r] = _mm256_setzero_ps();
                for (int64_t b = 0; b < nb; ++b) {
                    const DecodedBlock* wb[kRows];
                    const uint8_t* mb[kRows];
                    for (int r = 0; r < kRows; ++r) {
                        wb[r] = decoded + (h + r) * nb + b;
                        mb[r] =
                            Int16Run<Order::T>::signed_values ? magnitudes.data() + ((h + r) * nb + b) * 256 : nullptr;
                    }
                    Order::block(wb, mb, panel + static_cast<std::size_t>(b) * kPanelBlockBytes, half, acc, acc_min);
                }
                if constexpr (Order::kSeparateMin)
                    for (int64_t b = 0; b < nb; ++b) {
                        const DecodedBlock* wb[kRows];
                        for (int r = 0; r < kRows; ++r)
                            wb[r] = decoded + (h + r) * nb + b;
                        Order::min_block(wb, panel + static_cast<std::size_t>(b) * kPanelBlockBytes, half, acc_min);
                    }
                alignas(32) float out[kRows][kTokens];
                for (int r = 0; r < kRows; ++r)
                    _mm256_store_ps(out[r], Order::finish(acc[r], acc_min[r]));
                store_tile(out, static_cast<int>(std::min<int64_t>(kRows, n_rows - h)), t0, t_begin, t_end, y + h,
                           y_stride);
            }
        });
}

// llama.cpp's repacked Q4_0 and IQ4_NL order (dot_repacked_b32, its gemm's and gemv's alike): per
// 32-element block acc = fma(isum, d·d8, acc). Q4_0's codes are the values + 8 (a block's eight groups
// summed in int16, the bias taken off after); IQ4_NL's are turned into signed values (as IQ4_XS's).
constexpr std::size_t kB32QuantBytes = kTiledQ80.quant_bytes(), kB32Scales = kTiledQ80.scales_offset();
constexpr std::size_t kB32BlockBytes = kTiledQ80.bytes();

template <GgmlType T>
void repacked_b32_gemm(const void* w, std::size_t w_row_bytes, int64_t n_rows, const uint8_t* panels, int64_t t_begin,
                       int64_t t_end, int64_t n, float* y, int64_t y_stride)
{
    constexpr bool signed_values = T == GgmlType::IQ4_NL;
    const int64_t nb = n / 32, padded_rows = (n_rows + kRows - 1) / kRows * kRows;
    const DecodedB32Rows<T> decoded = decode_b32_rows<T>(w, w_row_bytes, n_rows, padded_rows, n);
    thread_local std::vector<uint8_t> magnitudes; // [row][element] where the rows hold signed values
    if constexpr (signed_values) {
        magnitudes.resize(static_cast<std::size_t>(padded_rows * n));
        codes_to_signed(decoded.codes, magnitudes.data(), magnitudes.size());
    }
    for_each_half_panel(
        panels, static_cast<std::size_t>(nb) * kB32BlockBytes, t_begin, t_end,
        [&](const uint8_t* panel, int half, int64_t t0) {
            for (int64_t h = 0; h < n_rows; h += kRows) {
                __m256 acc[kRows];
                for (int r = 0; r < kRows; ++r)
                    acc[r] = _mm256_setzero_ps();
                for (int64_t b = 0; b < nb; ++b) {
                    const uint8_t* pb = panel + static_cast<std::size_t>(b) * kB32BlockBytes;
                    __m256i p[kRows];
#pragma GCC unroll 4
                    for (int r = 0; r < kRows; ++r)
                        p[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
                    for (int g = 0; g < 8; ++g) {
                        const __m256i a = load256(pb + 64 * g + 32 * half);
#pragma GCC unroll 4
                        for (int r = 0; r < kRows; ++r) {
                            const std::size_t at = static_cast<std::size_t>((h + r) * n + 32 * b + 4 * g);
                            if constexpr (signed_values) // each group's pairs to int32 (two would overflow int16)
                                p[r] = add_scaled_pairs(
                                    p[r], value_products(magnitudes.data() + at, decoded.codes + at, a), 1);
                            else // codes ≤ 15: 8 · 2 · 15 · 127 < 2^15
                                p[r] = _mm256_add_epi16(p[r], code_products(decoded.codes + at, a));
                        }
                    }
                    const __m256 d8 = _mm256_loadu_ps(reinterpret_cast<const float*>(pb + kB32Scales) + kTokens * half);
                    __m256i bias = _mm256_setzero_si256();
                    if constexpr (!signed_values)
                        bias = _mm256_slli_epi32(
                            load256(reinterpret_cast<const int32_t*>(pb + kB32QuantBytes) + kTokens * half),
                            DecodedB32Rows<T>::bias_shift);
#pragma GCC unroll 4
                    for (int r = 0; r < kRows; ++r) {
                        const __m256i isum = signed_values ? p[r] : add_scaled_pairs(_mm256_setzero_si256(), p[r], 1);
                        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(isum, bias)),
                                                 _mm256_mul_ps(_mm256_set1_ps(decoded.scales[(h + r) * nb + b]), d8),
                                                 acc[r]);
                    }
                }
                alignas(32) float out[kRows][kTokens];
                for (int r = 0; r < kRows; ++r)
                    _mm256_store_ps(out[r], acc[r]);
                store_tile(out, static_cast<int>(std::min<int64_t>(kRows, n_rows - h)), t0, t_begin, t_end, y + h,
                           y_stride);
            }
        });
}

// llama.cpp's batched (llamafile) order for float weights (dot_float_batched): per (row, token) one
// 8-lane accumulator, acc = fma(w[i..i+8], a[i..i+8], acc) along the row, then hsum. A task's rows are
// converted to f32 once, four rows' eight values side by side; then three tokens at a time are
// multiplied with every four rows while their activations sit in L1 (llama.cpp's AVX2 tile: twelve
// accumulators, three activation registers, one weight register).
constexpr int kFloatRows = 4, kFloatTokens = 3;
// A step's four rows of eight floats, side by side (128 bytes, two cache lines).
constexpr int kFloatStep = 8 * kFloatRows;

// Four packed rows × three tokens over the whole row, into y: the tokens' eight values stay in
// registers while each row's are loaded once (twelve accumulators, three activation registers, one
// weight register: seven loads per twelve products).
inline void float_tile(const float* wp, int64_t steps, const float* const at[kFloatTokens], int rows, int tokens,
                       float* y, int64_t y_stride)
{
    __m256 acc[kFloatRows][kFloatTokens];
#pragma GCC unroll 4
    for (int r = 0; r < kFloatRows; ++r)
#pragma GCC unroll 3
        for (int t = 0; t < kFloatTokens; ++t)
            acc[r][t] = _mm256_setzero_ps();
    for (int64_t j = 0; j < steps; ++j, wp += kFloatStep) {
        __m256 x0 = _mm256_loadu_ps(at[0] + 8 * j), x1 = _mm256_loadu_ps(at[1] + 8 * j),
               x2 = _mm256_loadu_ps(at[2] + 8 * j);
        // Loaded once each, held in registers: GCC folds loads into the products otherwise (ten or
        // fifteen loads a step instead of seven, 10–15% slower).
        __asm__("" : "+x"(x0), "+x"(x1), "+x"(x2));
#pragma GCC unroll 4
        for (int r = 0; r < kFloatRows; ++r) {
            __m256 wr = _mm256_load_ps(wp + 8 * r);
            __asm__("" : "+x"(wr));
            acc[r][0] = _mm256_fmadd_ps(wr, x0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(wr, x1, acc[r][1]);
            acc[r][2] = _mm256_fmadd_ps(wr, x2, acc[r][2]);
        }
    }
    for (int r = 0; r < rows; ++r)
        for (int t = 0; t < tokens; ++t)
            y[t * y_stride + r] = hsum(acc[r][t]);
}

template <GgmlType T>
void float_batched_gemm(const void* w, std::size_t w_row_bytes, int64_t n_rows, const uint8_t* panels, int64_t t_begin,
                        int64_t t_end, int64_t n, float* y, int64_t y_stride)
{
    const int64_t steps = n / 8;
    const auto block_floats = static_cast<std::size_t>(steps * kFloatStep);
    const int64_t blocks = (n_rows + kFloatRows - 1) / kFloatRows;
    const auto* a = reinterpret_cast<const float*>(panels); // f32 rows, token after token
    thread_local std::vector<float> buffer;                 // [row block][step][row][8], from a 64-byte boundary
    buffer.resize(static_cast<std::size_t>(blocks) * block_floats + 16);
    float* const packed = buffer.data() + (16 - (reinterpret_cast<std::uintptr_t>(buffer.data()) % 64) / 4) % 16;
    for (int64_t b = 0; b < blocks; ++b) {
        const int64_t r0 = kFloatRows * b;
        const int rows = static_cast<int>(std::min<int64_t>(kFloatRows, n_rows - r0));
        for (int r = 0; r < kFloatRows; ++r) {
            const auto* row =
                static_cast<const uint8_t*>(w) + static_cast<std::size_t>(r0 + std::min(r, rows - 1)) * w_row_bytes;
            float* out = packed + static_cast<std::size_t>(b) * block_floats + 8 * r;
            for (int64_t j = 0; j < steps; ++j)
                _mm256_storeu_ps(out + j * kFloatStep, r < rows ? load_weights8<T>(row, 8 * j) : _mm256_setzero_ps());
        }
    }
    for (int64_t t0 = t_begin; t0 < t_end; t0 += kFloatTokens) {
        const int tokens = static_cast<int>(std::min<int64_t>(kFloatTokens, t_end - t0));
        const float* at[kFloatTokens];
        for (int t = 0; t < kFloatTokens; ++t)
            at[t] = a + (t0 + std::min(t, tokens - 1)) * n;
        for (int64_t b = 0; b < blocks; ++b)
            float_tile(packed + static_cast<std::size_t>(b) * block_floats, steps, at,
                       static_cast<int>(std::min<int64_t>(kFloatRows, n_rows - kFloatRows * b)), tokens,
                       y + t0 * y_stride + kFloatRows * b, y_stride);
    }
}

} // namespace

TiledGemmFn tiled_gemm_avx2(GgmlType type)
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

TiledGemmFn float_gemm_avx2(GgmlType type)
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

TiledGemmFn repacked_gemm_avx2(GgmlType type, bool gemm)
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
