// SPDX-License-Identifier: GPL-3.0-or-later
// BF16 weights × BF16 activations with AVX-512 BF16's VDPBF16PS, in llama.cpp's batched (llamafile)
// order and with its bits. That order keeps, per (row, token), eight chains: chain L takes
// fma(w[i], a[i], acc) for i = L, L + 8, L + 16, … in turn (tiled_gemm_avx512.cpp's float_tile).
// VDPBF16PS adds two products to each f32 lane, and on the CPUs checked here it is exactly two fused
// multiply-adds in turn, the odd element's first: so each lane holds one chain, element i of a step
// in the odd place and element i + 8 (the next step's) in the even one, and one instruction does two
// steps of sixteen chains. Two conditions keep the bits:
//  - the instruction rounds as two FMAs: checked once per process on random values (a CPU on which
//    it does not is left the FMA kernel);
//  - it flushes subnormal inputs and results to zero, where FMA keeps them: every product of a
//    weight and an activation is a multiple of 2^(Ew + Ea − 268) (biased exponents, 8-bit
//    significands), and so is every sum rounded from them, so no nonzero value can be subnormal
//    when the smallest nonzero exponents add up to 142 or more. The call checks this on its weights
//    and activations (and that none is infinite or NaN), and gives them to the FMA kernel otherwise.
#include "quant/simd/vec_dot_simd.h"
#include "quant/simd/x86_block_helpers.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <immintrin.h>
#include <random>
#include <vector>

namespace engine::simd {

// GCC 12 warns that the 512-bit intrinsics' own undefined pass-through operand "may be used
// uninitialized" (its headers, not this code), as in vec_dot_avx512.cpp.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace {

constexpr int kTokens = 6; // tokens per pass: 4 row pairs × 6 tokens = 24 accumulators

// The smallest nonzero and the largest magnitude among bf16 values (as bits, sign dropped).
struct Magnitudes {
    __m128i smallest = _mm_set1_epi16(-1), largest = _mm_setzero_si128();
    void add(__m128i v)
    {
        const __m128i abs = _mm_and_si128(v, _mm_set1_epi16(0x7FFF));
        // zeros count as 0xFFFF for the minimum
        smallest = _mm_min_epu16(smallest, _mm_or_si128(abs, _mm_cmpeq_epi16(abs, _mm_setzero_si128())));
        largest = _mm_max_epu16(largest, abs);
    }
    // Magnitudes found elsewhere, in this form (zeros as 0xFFFF in `small`).
    void merge(__m128i small, __m128i large)
    {
        smallest = _mm_min_epu16(smallest, small);
        largest = _mm_max_epu16(largest, large);
    }
    // The smallest nonzero biased exponent (255 where all are zero), or -1 where a value is
    // subnormal, infinite or NaN.
    int smallest_exponent() const
    {
        alignas(16) uint16_t lo[8], hi[8];
        _mm_store_si128(reinterpret_cast<__m128i*>(lo), smallest);
        _mm_store_si128(reinterpret_cast<__m128i*>(hi), largest);
        const uint16_t min = *std::min_element(lo, lo + 8), max = *std::max_element(hi, hi + 8);
        if (max >= 0x7F80 || (min != 0xFFFF && min < 0x0080))
            return -1;
        return min == 0xFFFF ? 255 : min >> 7;
    }
};

// Sixteen bf16 values of one row (steps s and s + 1 of its chains) into the pair layout: element L
// of step s in the odd place of lane L, element L of step s + 1 in the even one. `second` is false
// for an odd last step: its partner is zero.
inline void pair_up(const uint16_t* src, bool second, uint16_t* dst, Magnitudes& seen)
{
    const __m128i first = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
    const __m128i next = second ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 8)) : _mm_setzero_si128();
    seen.add(first);
    seen.add(next);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm_unpacklo_epi16(next, first));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 8), _mm_unpackhi_epi16(next, first));
}

// Eight packed rows × six tokens over the whole row, into y (the FMA kernel's reduction, so its bits).
inline void pair_tile(const uint16_t* wp, int64_t pairs, const uint16_t* const at[kTokens], int rows, int tokens,
                      float* y, int64_t y_stride)
{
    __m512 acc[4][kTokens];
#pragma GCC unroll 6
    for (int p = 0; p < 4; ++p)
#pragma GCC unroll 6
        for (int t = 0; t < kTokens; ++t)
            acc[p][t] = _mm512_setzero_ps();
    for (int64_t j = 0; j < pairs; ++j, wp += 128) {
        const auto w0 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(wp));
        const auto w1 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(wp + 32));
        const auto w2 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(wp + 64));
        const auto w3 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(wp + 96));
#pragma GCC unroll 6
        for (int t = 0; t < kTokens; ++t) {
            const auto x = reinterpret_cast<__m512bh>(
                _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at[t] + 16 * j))));
            acc[0][t] = _mm512_dpbf16_ps(acc[0][t], w0, x);
            acc[1][t] = _mm512_dpbf16_ps(acc[1][t], w1, x);
            acc[2][t] = _mm512_dpbf16_ps(acc[2][t], w2, x);
            acc[3][t] = _mm512_dpbf16_ps(acc[3][t], w3, x);
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

// The call's activations are put in the pair layout once, then its rows 64 at a time are packed
// (into L2) and multiplied with every token; the caller hands out large row ranges
// (tiled_rows_per_task), since converting the activations costs about as much as a 64-row chunk's
// packing.
void bf16_pairs_gemm(const void* w, std::size_t w_row_bytes, int64_t n_rows, const uint8_t* panels, int64_t t_begin,
                     int64_t t_end, int64_t n, float* y, int64_t y_stride)
{
    constexpr int64_t kChunkRows = 64;
    const int64_t steps = n / 8, pairs = (steps + 1) / 2;
    const auto block_values = static_cast<std::size_t>(pairs * 128);
    // The activations (f32 rows of bf16 values, token after token) in the pair layout, straight
    // from their f32 bits: lane L = element L of step 2j (high half) and of step 2j + 1 (low half).
    const auto* a = reinterpret_cast<const float*>(panels);
    thread_local std::vector<uint32_t> paired; // [token][step pair][8 lanes]
    const int64_t tokens_here = t_end - t_begin;
    paired.resize(static_cast<std::size_t>(tokens_here * pairs * 8));
    const __m256i high = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u)), magnitude = _mm256_set1_epi32(0x7FFF0000);
    __m256i smallest = _mm256_set1_epi32(-1), largest = _mm256_setzero_si256(); // |bits| as unsigned
    for (int64_t t = 0; t < tokens_here; ++t) {
        const float* row = a + (t_begin + t) * n;
        for (int64_t j = 0; j < pairs; ++j) {
            const __m256i first = _mm256_castps_si256(_mm256_loadu_ps(row + 16 * j));
            const __m256i next =
                2 * j + 1 < steps ? _mm256_castps_si256(_mm256_loadu_ps(row + 16 * j + 8)) : _mm256_setzero_si256();
            for (const __m256i v : {first, next}) {
                const __m256i abs = _mm256_and_si256(v, magnitude);
                smallest =
                    _mm256_min_epu32(smallest, _mm256_or_si256(abs, _mm256_cmpeq_epi32(abs, _mm256_setzero_si256())));
                largest = _mm256_max_epu32(largest, abs);
            }
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(paired.data() + (t * pairs + j) * 8),
                                _mm256_or_si256(_mm256_and_si256(first, high), _mm256_srli_epi32(next, 16)));
        }
    }
    const auto halves = [](__m256i v) { // the 32-bit magnitudes' high halves: the bf16 ones
        return _mm_packus_epi32(_mm_srli_epi32(_mm256_castsi256_si128(v), 16),
                                _mm_srli_epi32(_mm256_extracti128_si256(v, 1), 16));
    };
    Magnitudes activations;
    activations.merge(halves(smallest), halves(largest));
    const int ea = activations.smallest_exponent();
    thread_local std::vector<uint16_t> packed; // [row block][step pair][row pair][16 lanes × 2]
    packed.resize(static_cast<std::size_t>(kChunkRows / 8) * block_values);
    for (int64_t c0 = 0; c0 < n_rows; c0 += kChunkRows) {
        const int64_t chunk_rows = std::min(kChunkRows, n_rows - c0);
        const auto* wc = static_cast<const uint8_t*>(w) + static_cast<std::size_t>(c0) * w_row_bytes;
        const int64_t blocks = (chunk_rows + 7) / 8;
        Magnitudes weights;
        for (int64_t b = 0; b < blocks; ++b) {
            const int rows = static_cast<int>(std::min<int64_t>(8, chunk_rows - 8 * b));
            for (int r = 0; r < 8; ++r) {
                const auto* row = reinterpret_cast<const uint16_t*>(
                    wc + static_cast<std::size_t>(8 * b + std::min(r, rows - 1)) * w_row_bytes);
                uint16_t* out =
                    packed.data() + static_cast<std::size_t>(b) * block_values + (r / 2) * 32 + (r % 2) * 16;
                for (int64_t j = 0; j < pairs; ++j)
                    pair_up(row + 16 * j, 2 * j + 1 < steps, out + j * 128, weights);
            }
        }
        const int ew = weights.smallest_exponent();
        if (ew < 0 || ea < 0 || ew + ea < 142) { // a subnormal could arise: the FMA kernel keeps it
            float_gemm_avx512(GgmlType::BF16)(wc, w_row_bytes, chunk_rows, panels, t_begin, t_end, n, y + c0, y_stride);
            continue;
        }
        for (int64_t t0 = t_begin; t0 < t_end; t0 += kTokens) {
            const int tokens = static_cast<int>(std::min<int64_t>(kTokens, t_end - t0));
            const uint16_t* at[kTokens];
            for (int t = 0; t < kTokens; ++t)
                at[t] = reinterpret_cast<const uint16_t*>(paired.data() +
                                                          (t0 - t_begin + std::min(t, tokens - 1)) * pairs * 8);
            for (int64_t b = 0; b < blocks; ++b)
                pair_tile(packed.data() + static_cast<std::size_t>(b) * block_values, pairs, at,
                          static_cast<int>(std::min<int64_t>(8, chunk_rows - 8 * b)), tokens,
                          y + t0 * y_stride + c0 + 8 * b, y_stride);
        }
    }
}

// Whether VDPBF16PS is two FMAs in turn (odd element first) here: random normal values of every
// magnitude the kernel lets through, their products and sums compared bit for bit.
bool rounds_as_two_fmas()
{
    std::mt19937 rng(2024);
    const auto bf16_value = [](uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); };
    for (int round = 0; round < 256; ++round) {
        alignas(64) uint16_t a[32], b[32];
        alignas(64) float acc[16], out[16];
        for (int i = 0; i < 32; ++i) { // exponents 71…182 (products from 2^-112 up), any sign and significand
            a[i] = static_cast<uint16_t>((rng() & 0x807F) | ((71 + rng() % 112) << 7));
            b[i] = static_cast<uint16_t>((rng() & 0x807F) | ((71 + rng() % 112) << 7));
        }
        for (int i = 0; i < 16; ++i)
            acc[i] = bf16_value(static_cast<uint16_t>((rng() & 0x807F) | ((110 + rng() % 40) << 7))) *
                     (1.0f + static_cast<float>(rng() % 1000) / 1000.0f);
        _mm512_store_ps(out, _mm512_dpbf16_ps(_mm512_load_ps(acc), reinterpret_cast<__m512bh>(_mm512_load_si512(a)),
                                              reinterpret_cast<__m512bh>(_mm512_load_si512(b))));
        for (int i = 0; i < 16; ++i) {
            float s = std::fma(bf16_value(a[2 * i + 1]), bf16_value(b[2 * i + 1]), acc[i]);
            s = std::fma(bf16_value(a[2 * i]), bf16_value(b[2 * i]), s);
            if (std::bit_cast<uint32_t>(s) != std::bit_cast<uint32_t>(out[i]))
                return false;
        }
    }
    return true;
}

} // namespace

TiledGemmFn bf16_pairs_gemm_avx512bf16()
{
    static const bool two_fmas = rounds_as_two_fmas();
    return two_fmas ? bf16_pairs_gemm : nullptr;
}

} // namespace engine::simd
