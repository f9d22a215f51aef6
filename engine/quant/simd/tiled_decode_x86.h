// SPDX-License-Identifier: GPL-3.0-or-later
// The tiled matmuls' weight decoding (tiled_gemm.h), shared by the AVX2 and AVX-512 kernels, in AVX2
// code: a 256-element block of a k-quant or IQ4_XS row to byte codes with integer scales, Q4_0 and
// IQ4_NL rows to codes and scales, eight F32/F16/BF16 weights to f32. Internal linkage on purpose:
// each kernel file compiles these with its own instruction-set flags, and one shared out-of-line copy
// built for AVX-512 would be called on CPUs without it.
#pragma once

#include "quant/ggml_type.h"
#include "quant/simd/x86_block_helpers.h"
#include "quant/vec_dot_portable.h"

#include <cstdint>
#include <cstring>
#include <immintrin.h>
#include <vector>

namespace engine::simd {
namespace { // NOLINT(cert-dcl59-cpp,google-build-namespaces): see above

// One weight row's 256-element block, decoded: value e is codes[e] − Bias (an unsigned byte, what
// vpdpbusd multiplies), sub-block s has scale scales[s] and minimum mins[s] (also as int16, side by
// side: one 32-bit broadcast gives the AVX2 kernels' vpmaddwd two sub-blocks' factors).
struct alignas(64) DecodedBlock {
    uint8_t codes[256];
    int32_t scales[16];
    int32_t mins[16];
    int16_t scales16[16];
    int16_t mins16[16];
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

// Every row of a call decoded once (a task's rows, kept in L2 while each panel walks past them), the
// rows padded to a multiple of `group` with zeros (never stored): decoded[r · nb + b] is block b of
// row r. The buffer stays with the thread: a prompt's matrices reuse it.
template <GgmlType T>
DecodedBlock* decode_k_rows(const void* w, std::size_t w_row_bytes, int64_t n_rows, int64_t padded_rows, int64_t nb)
{
    constexpr std::size_t block_bytes = portable::KLayout<T>::block_bytes;
    thread_local std::vector<DecodedBlock> decoded;
    decoded.resize(static_cast<std::size_t>(padded_rows * nb));
    for (int64_t r = 0; r < padded_rows; ++r)
        for (int64_t b = 0; b < nb; ++b) {
            DecodedBlock& o = decoded[static_cast<std::size_t>(r * nb + b)];
            if (r >= n_rows) {
                o = DecodedBlock{};
                continue;
            }
            Decode<T>::run(static_cast<const uint8_t*>(w) + static_cast<std::size_t>(r) * w_row_bytes +
                               static_cast<std::size_t>(b) * block_bytes,
                           o);
            for (int s = 0; s < 256 / Decode<T>::sub; ++s) { // every scale and minimum fits int16
                o.scales16[s] = static_cast<int16_t>(o.scales[s]);
                o.mins16[s] = Decode<T>::has_min ? static_cast<int16_t>(o.mins[s]) : int16_t{0};
            }
        }
    return decoded.data();
}

// The same for Q4_0 and IQ4_NL rows (llama.cpp's repacked order): codes[r · n + e] is element e of
// row r plus 2^BiasShift (8 for Q4_0, 128 for IQ4_NL), scales[r · (n / 32) + b] block b's scale.
template <GgmlType T> struct DecodedB32Rows {
    static constexpr int bias_shift = T == GgmlType::Q4_0 ? 3 : 7;
    uint8_t* codes;
    float* scales;
};
template <GgmlType T>
DecodedB32Rows<T> decode_b32_rows(const void* w, std::size_t w_row_bytes, int64_t n_rows, int64_t padded_rows,
                                  int64_t n)
{
    static_assert(T == GgmlType::Q4_0 || T == GgmlType::IQ4_NL);
    alignas(16) uint8_t values[16]; // IQ4_NL's table + 128, as codes
    for (int i = 0; i < 16; ++i)
        values[i] = static_cast<uint8_t>(portable::iq4_value(i) + 128);
    const __m128i table = _mm_load_si128(reinterpret_cast<const __m128i*>(values));
    const int64_t nb = n / 32;
    thread_local std::vector<uint8_t> codes;
    thread_local std::vector<float> scales;
    codes.resize(static_cast<std::size_t>(padded_rows * n));
    scales.resize(static_cast<std::size_t>(padded_rows * nb));
    for (int64_t r = 0; r < padded_rows; ++r)
        for (int64_t b = 0; b < nb; ++b) {
            uint8_t* c = codes.data() + static_cast<std::size_t>(r * n + 32 * b);
            float& d = scales[static_cast<std::size_t>(r * nb + b)];
            if (r >= n_rows) {
                std::memset(c, 0, 32);
                d = 0.0f;
                continue;
            }
            const uint8_t* x = static_cast<const uint8_t*>(w) + static_cast<std::size_t>(r) * w_row_bytes +
                               static_cast<std::size_t>(b) * 18;
            // elements 0–15: the low nibbles of the 16 bytes after the scale, 16–31 the high ones; the
            // code is the nibble (Q4_0's value + 8) or the table's value + 128 (IQ4_NL)
            const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 2)), low4 = _mm_set1_epi8(0x0F);
            __m128i lo = _mm_and_si128(bytes, low4), hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), low4);
            if constexpr (T == GgmlType::IQ4_NL) {
                lo = _mm_shuffle_epi8(table, lo);
                hi = _mm_shuffle_epi8(table, hi);
            }
            _mm_storeu_si128(reinterpret_cast<__m128i*>(c), lo);
            _mm_storeu_si128(reinterpret_cast<__m128i*>(c + 16), hi);
            d = half(x);
        }
    return {codes.data(), scales.data()};
}

// Eight weights from element i of an F32, F16 or BF16 row, as f32 (the float matmuls' rows, converted
// once per task).
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

inline uint32_t load_u32(const uint8_t* p)
{
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

} // namespace
} // namespace engine::simd
