// SPDX-License-Identifier: GPL-3.0-or-later
// AVX-512 VNNI versions of the batch kernels (256-bit vectors, EVEX encodings). Bit-identical to the
// AVX2 ones: every integer lane holds the same exact sum (VNNI adds the four byte products of a
// lane in one instruction where AVX2 needs maddubs + madd, and maddubs never saturates on these
// operands), and every float step — the per-block fused multiply-add into 8 lanes, or the tiled
// order's scalar steps — is the same operation on the same values in the same order. What changes
// is the instruction count: one VNNI instruction for three, a mask for vpsignb (which AVX-512 lacks),
// and 32 vector registers, enough to keep eight tokens' accumulators beside one weight block.
#include "quant/simd/float_dot_x86.h"
#include "quant/simd/vec_dot_simd.h"
#include "quant/simd/x86_block_helpers.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <immintrin.h>
#include <string_view>

namespace engine::simd {

namespace {

// The signed-by-signed products of AVX2's dot_i8 as VNNI wants them: |w| (unsigned) against y with
// w's sign moved onto it. Lanes are sums of four consecutive bytes in both.
struct SignedWeights {
    __m256i abs;
    __mmask32 negative;
    explicit SignedWeights(__m256i w) : abs(_mm256_abs_epi8(w)), negative(_mm256_movepi8_mask(w)) {}
    // AVX2's _mm256_sign_epi8(y, w) also zeroes y where w is 0; |w| is 0 there, so the sums agree.
    __m256i dot(__m256i y) const
    {
        const __m256i y_signed = _mm256_mask_sub_epi8(y, negative, _mm256_setzero_si256(), y);
        return _mm256_dpbusd_epi32(_mm256_setzero_si256(), abs, y_signed);
    }
};

inline __m256i load32(const void* p)
{
    return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// Q5_0's 32 values (nibbles plus the fifth bit, minus 16) as signed bytes.
inline __m256i unpack_q5_0(const uint8_t* x)
{
    uint32_t qh;
    std::memcpy(&qh, x + 2, 4);
    const __m256i nib = nibbles_32(x + 6);
    // value = nibble + 16·bit − 16: subtract 16 where the bit is clear
    return _mm256_mask_sub_epi8(nib, static_cast<__mmask32>(~qh), nib, _mm256_set1_epi8(16));
}

float dot_q8_0(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / 32; ++b, x += 34) {
        prefetch_ahead(x, 1);
        const SignedWeights q(load32(x + 2));
        const __m256 d = _mm256_set1_ps(half(x) * _cvtsh_ss(y[b].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(q.dot(load32(y[b].qs))), acc);
    }
    return hsum(acc);
}

float dot_q5_0(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / 32; ++b, x += 22) {
        prefetch_ahead(x, 1);
        const SignedWeights q(unpack_q5_0(x));
        const __m256 d = _mm256_set1_ps(half(x) * _cvtsh_ss(y[b].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(q.dot(load32(y[b].qs))), acc);
    }
    return hsum(acc);
}

inline __m256i unpack_q8_0(const uint8_t* x)
{
    return load32(x + 2);
}

template <int kBlockBytes, __m256i (*Unpack)(const uint8_t*)>
void dot_legacy_x4(const void* w, const void* const a[4], int64_t n, float out[4])
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y0 = static_cast<const BlockQ8_0*>(a[0]);
    const auto* y1 = static_cast<const BlockQ8_0*>(a[1]);
    const auto* y2 = static_cast<const BlockQ8_0*>(a[2]);
    const auto* y3 = static_cast<const BlockQ8_0*>(a[3]);
    // four named accumulators and pointers: with arrays GCC kept them in memory, a store and reload
    // per token and block (a batch of four sequences ran slower than three single rows)
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    for (int64_t b = 0; b < n / 32; ++b, x += kBlockBytes) {
        prefetch_ahead(x, 1);
        const SignedWeights q(Unpack(x));
        const float dx = half(x);
        const auto step = [&](__m256& acc, const BlockQ8_0& yb) {
            acc = _mm256_fmadd_ps(_mm256_set1_ps(dx * _cvtsh_ss(yb.d)), _mm256_cvtepi32_ps(q.dot(load32(yb.qs))), acc);
        };
        step(acc0, y0[b]);
        step(acc1, y1[b]);
        step(acc2, y2[b]);
        step(acc3, y3[b]);
    }
    out[0] = hsum(acc0);
    out[1] = hsum(acc1);
    out[2] = hsum(acc2);
    out[3] = hsum(acc3);
}

// Eight tokens against one weight row of a 32-element type, the tokens packed (pack8_activations):
// the weight block is unpacked once for the eight, each token keeps its own accumulator, so every
// result is the one-row kernel's.
template <int kBlockBytes, __m256i (*Unpack)(const uint8_t*)>
void dot_legacy_x8(const void* w, const void* packed, int64_t n, float out[8])
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* p = static_cast<const uint8_t*>(packed);
    // eight named accumulators: an array of them was kept in memory too, a store per token and block
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
    for (int64_t b = 0; b < n / 32; ++b, x += kBlockBytes, p += 8 * (sizeof(float) + 32)) {
        const __m256i q = Unpack(x);
        // Activations arrive as y + 128 (unsigned): Σ (y + 128)·w − 128·Σ w = Σ y·w per lane of
        // four, exactly; the −128·Σ w term starts each token's sum.
        const __m256i start =
            _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_dpbusd_epi32(_mm256_setzero_si256(), bias, q));
        const __m256 dx = _mm256_set1_ps(half(x));
        const auto* dy = reinterpret_cast<const float*>(p);
        const uint8_t* qy = p + 8 * sizeof(float);
        // dx · dy rounded once, as the one-row kernel's scalar product
        const auto step = [&](__m256& acc, int t) {
            acc = _mm256_fmadd_ps(_mm256_mul_ps(dx, _mm256_broadcast_ss(dy + t)),
                                  _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(start, load32(qy + 32 * t), q)), acc);
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

// GCC 12 warns that the 512-bit intrinsics' own undefined pass-through operand "may be used
// uninitialized" (its headers, not this code): silenced for the 512-bit kernels below only.
#if defined(__GNUC__) && !defined(__clang__) // clang has no such warning (and refuses to hear of it)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
// Which token's scale each half of a 512-bit register takes: lanes 0–7 token 2k, lanes 8–15 token
// 2k + 1, for the four pairs of a packed group of eight.
struct PairPicks {
    __m512i pick[4];
    PairPicks()
    {
        pick[0] = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
        for (int k = 1; k < 4; ++k)
            pick[k] = _mm512_add_epi32(pick[0], _mm512_set1_epi32(2 * k));
    }
};

// One weight block ready for a pair of tokens: the quants in both halves, and the −128·Σw start of
// each token's integer sum (the activations arrive as y + 128, see dot_legacy_x8).
struct ZmmBlock {
    __m512i q2, start2;
    explicit ZmmBlock(__m256i q)
    {
        const __m256i start =
            _mm256_sub_epi32(_mm256_setzero_si256(),
                             _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(static_cast<char>(0x80)), q));
        q2 = _mm512_broadcast_i64x4(q);
        start2 = _mm512_broadcast_i64x4(start);
    }
    // acc += (dx·dy of the pair's tokens) · (its two integer sums), per lane as the one-row kernel
    void step(__m512& acc, const __m512i& pick, const __m512& d, const uint8_t* group, int pair) const
    {
        const __m512i y = _mm512_loadu_si512(group + 8 * sizeof(float) + 64 * pair);
        acc = _mm512_fmadd_ps(_mm512_permutexvar_ps(pick, d), _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(start2, y, q2)),
                              acc);
    }
};

// dx · dy for the eight tokens of a packed group, each rounded once (the one-row kernel's product).
inline __m512 pair_scales(__m256 dx, const uint8_t* group)
{
    return _mm512_castps256_ps512(_mm256_mul_ps(dx, _mm256_loadu_ps(reinterpret_cast<const float*>(group))));
}

// The two tokens' sums of a 512-bit accumulator.
inline void store_pair(const __m512& acc, float* out)
{
    out[0] = hsum(_mm512_castps512_ps256(acc));
    out[1] = hsum(_mm512_extractf32x8_ps(acc, 1));
}

// The same, two tokens to a 512-bit register: the weight block broadcast to both halves, each half a
// token's eight lanes (lanes never meet before the final sums, so every result keeps its bits) —
// half the instructions of the 256-bit kernel above, which kept the multiply units waiting on issue.
template <int kBlockBytes, __m256i (*Unpack)(const uint8_t*)>
void dot_legacy_x8_zmm(const void* w, const void* packed, int64_t n, float out[8])
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* p = static_cast<const uint8_t*>(packed);
    __m512 a01 = _mm512_setzero_ps(), a23 = a01, a45 = a01, a67 = a01;
    const PairPicks picks;
    for (int64_t b = 0; b < n / 32; ++b, x += kBlockBytes, p += 8 * (sizeof(float) + 32)) {
        const ZmmBlock block(Unpack(x));
        const __m512 d = pair_scales(_mm256_set1_ps(half(x)), p);
        block.step(a01, picks.pick[0], d, p, 0);
        block.step(a23, picks.pick[1], d, p, 1);
        block.step(a45, picks.pick[2], d, p, 2);
        block.step(a67, picks.pick[3], d, p, 3);
    }
    store_pair(a01, out);
    store_pair(a23, out + 2);
    store_pair(a45, out + 4);
    store_pair(a67, out + 6);
}

// Sixteen tokens (two packed groups of eight): the weight block unpacked once for all of them, the
// rest as dot_legacy_x8_zmm — the same lanes, so the same bits.
template <int kBlockBytes, __m256i (*Unpack)(const uint8_t*)>
void dot_legacy_x16_zmm(const void* w, const void* packed, std::size_t group_bytes, int64_t n, float out[16])
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* p = static_cast<const uint8_t*>(packed);
    __m512 a01 = _mm512_setzero_ps(), a23 = a01, a45 = a01, a67 = a01;
    __m512 b01 = a01, b23 = a01, b45 = a01, b67 = a01;
    const PairPicks picks;
    for (int64_t b = 0; b < n / 32; ++b, x += kBlockBytes, p += 8 * (sizeof(float) + 32)) {
        const ZmmBlock block(Unpack(x));
        const __m256 dx = _mm256_set1_ps(half(x));
        const uint8_t* pb = p + group_bytes;
        const __m512 da = pair_scales(dx, p), db = pair_scales(dx, pb);
        block.step(a01, picks.pick[0], da, p, 0);
        block.step(b01, picks.pick[0], db, pb, 0);
        block.step(a23, picks.pick[1], da, p, 1);
        block.step(b23, picks.pick[1], db, pb, 1);
        block.step(a45, picks.pick[2], da, p, 2);
        block.step(b45, picks.pick[2], db, pb, 2);
        block.step(a67, picks.pick[3], da, p, 3);
        block.step(b67, picks.pick[3], db, pb, 3);
    }
    store_pair(a01, out);
    store_pair(a23, out + 2);
    store_pair(a45, out + 4);
    store_pair(a67, out + 6);
    store_pair(b01, out + 8);
    store_pair(b23, out + 10);
    store_pair(b45, out + 12);
    store_pair(b67, out + 14);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// ---- k-quants in llama.cpp's tiled order (see vec_dot_for_batch) --------------------------------
// Integer block sums with VNNI's word form (madd + add in one), then the same scalar float step.

struct Q4kBlock {
    __m256i lo[4], hi[4];
    __m256i sc_lo[4], sc_hi[4]; // each 32-value group's scale, as int16 lanes
    __m256i mins;
    float d, dmin;
    explicit Q4kBlock(const uint8_t* x)
    {
        const __m256i low_mask = _mm256_set1_epi8(0x0F);
        int sc[8], m[8];
        scale_min_k4(x + 4, sc, m);
        mins = mins_pairs_epi16(m);
        for (int c = 0; c < 4; ++c) {
            const __m256i bytes = load32(x + 16 + 32 * c);
            lo[c] = _mm256_and_si256(bytes, low_mask);
            hi[c] = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low_mask);
            sc_lo[c] = _mm256_set1_epi16(static_cast<short>(sc[2 * c]));
            sc_hi[c] = _mm256_set1_epi16(static_cast<short>(sc[2 * c + 1]));
        }
        d = half(x);
        dmin = half(x + 2);
    }
    static constexpr bool kHasMin = true;
    void pair_vectors(const BlockQ8_K& y, __m256i v[4], __m256i& w) const // (dot_repacked_q4_k_rows8x4_pairs)
    {
        for (int c = 0; c < 4; ++c)
            v[c] =
                _mm256_dpwssd_epi32(_mm256_dpwssd_epi32(_mm256_setzero_si256(),
                                                        _mm256_maddubs_epi16(lo[c], load32(y.qs + 64 * c)), sc_lo[c]),
                                    _mm256_maddubs_epi16(hi[c], load32(y.qs + 64 * c + 32)), sc_hi[c]);
        w = _mm256_madd_epi16(load_bsums(y.bsums), mins);
    }
    void vectors(const BlockQ8_K& y, __m256i& v1, __m256i& v2) const // unreduced s1, s2 (dot_tiled_x8_lanes)
    {
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 4; ++c) {
            isum = _mm256_dpwssd_epi32(isum, _mm256_maddubs_epi16(lo[c], load32(y.qs + 64 * c)), sc_lo[c]);
            isum = _mm256_dpwssd_epi32(isum, _mm256_maddubs_epi16(hi[c], load32(y.qs + 64 * c + 32)), sc_hi[c]);
        }
        v1 = isum;
        v2 = _mm256_madd_epi16(load_bsums(y.bsums), mins);
    }
    float step(float acc, const BlockQ8_K& y) const
    {
        __m256i v1, v2;
        vectors(y, v1, v2);
        int s1 = 0, s2 = 0;
        hsum2_i32(v1, v2, s1, s2);
        return tiled_step(acc, d, s1, dmin, s2, y.d, true);
    }
};

struct Q6kBlock {
    __m256i quarter[2][4];
    __m256i scale[2][4];
    __m256i scales16;
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
            const __m256i l0 = load32(ql + 64 * h);
            const __m256i l1 = load32(ql + 64 * h + 32);
            const __m256i hb = load32(qh + 32 * h);
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
            for (int q = 0; q < 4; ++q)
                isum = _mm256_dpwssd_epi32(isum, _mm256_maddubs_epi16(quarter[h][q], load32(y.qs + 128 * h + 32 * q)),
                                           scale[h][q]);
        const __m256i offset = _mm256_madd_epi16(load_bsums(y.bsums), scales16); // values are stored + 32
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

template <typename Block, int kBlockBytes, int kTokens>
void dot_tiled_xn(const void* w, const void* const a[kTokens], int64_t n, float out[kTokens])
{
    const auto* x = static_cast<const uint8_t*>(w);
    float acc[kTokens] = {};
    for (int64_t b = 0; b < n / 256; ++b, x += kBlockBytes) {
        const Block blk(x);
        for (int t = 0; t < kTokens; ++t)
            acc[t] = blk.step(acc[t], static_cast<const BlockQ8_K*>(a[t])[b]);
    }
    for (int t = 0; t < kTokens; ++t)
        out[t] = acc[t];
}

} // namespace

// The word indices that give a Q2_K/Q3_K chunk c its pair of scales (of sixteen int16 scales in
// order): scale 2c for its first sixteen values, 2c + 1 for the others.
inline void chunk_scale_picks(__m256i pick[8])
{
    for (int c = 0; c < 8; ++c)
        pick[c] =
            _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(2 * c + 1)), _mm_set1_epi16(static_cast<short>(2 * c)));
}

// Q3_K's one-row kernel (vec_dot_types_avx2.cpp's dot_k_lanes<Q3kBlock>: the same int32 lanes and
// float steps), each chunk's pair of scales picked by one word permute, the high bit tested into a
// mask that subtracts the 4.
float dot_q3_k(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    const __m256i two_bits = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
    __m256i pick[8];
    chunk_scale_picks(pick);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / 256; ++b, x += 110) {
        prefetch_ahead(x, 110);
        const __m256i scales = q3_k_scales(x + 96);
        const __m256i hmask = load32(x);
        __m256i isum = _mm256_setzero_si256();
        for (int j = 0; j < 2; ++j) {
            const __m256i bits = load32(x + 32 + 32 * j);
            for (int k = 0; k < 4; ++k) {
                const int c = 4 * j + k;
                const __m256i low = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), two_bits);
                // q − 4 where the chunk's high bit (bit c of each hmask byte) is clear
                const __mmask32 clear = _mm256_testn_epi8_mask(hmask, _mm256_set1_epi8(static_cast<char>(1 << c)));
                const __m256i q = _mm256_mask_sub_epi8(low, clear, low, four);
                const __m256i p =
                    _mm256_maddubs_epi16(_mm256_abs_epi8(q), _mm256_sign_epi8(load32(y[b].qs + 32 * c), q));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, _mm256_permutexvar_epi16(pick[c], scales)));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(y[b].d * half(x + 108)), _mm256_cvtepi32_ps(isum), acc);
    }
    return hsum(acc);
}

// Q6_K's one-row kernel (vec_dot_avx2.cpp's dot_q6_k: the same eight int32 lanes and float steps),
// two of its 32-element quarters to a 512-bit register: quarters 0 | 1 from the low bits' 64 bytes
// with the high bits shifted by 0 | 2, quarters 2 | 3 from the same bytes' high nibbles, each
// 128-bit lane's scale picked from the block's sixteen by one word permute; the two halves' lanes
// added at the end are the AVX2 kernel's lanes (exact integers), and 32 · Σ scale · bsum comes off
// by one vpmaddwd instead of eight scalar pairs.
#if defined(__GNUC__) && !defined(__clang__) // GCC 12's false warning on the insert and broadcast, as above
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
float dot_q6_k(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    const __m512i low_mask = _mm512_set1_epi8(0x0F), two_bits = _mm512_set1_epi8(0x03);
    // the high bits of quarter 1 sit two bits above quarter 0's (and 3's above 2's)
    const __m512i high_shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    __m512i scale_at[2][2]; // [h][pair]: 128-bit lane i takes scale 8h + 4·pair + i
    for (int h = 0; h < 2; ++h)
        for (int p = 0; p < 2; ++p) {
            alignas(64) int16_t idx[32];
            for (int i = 0; i < 32; ++i)
                idx[i] = static_cast<int16_t>(8 * h + 4 * p + i / 8);
            scale_at[h][p] = _mm512_load_si512(idx);
        }
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / 256; ++b, x += 210) {
        prefetch_ahead(x, 210);
        const BlockQ8_K& yb = y[b];
        const __m256i scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 192)));
        const __m512i scales = _mm512_castsi256_si512(scales16);
        __m512i isum = _mm512_setzero_si512();
        for (int h = 0; h < 2; ++h) {
            const __m512i low = _mm512_loadu_si512(x + 64 * h);
            const __m512i high = _mm512_srlv_epi16(
                _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 128 + 32 * h))),
                high_shift);
            const __m512i q01 = _mm512_or_si512(_mm512_and_si512(low, low_mask),
                                                _mm512_slli_epi16(_mm512_and_si512(high, two_bits), 4));
            const __m512i q23 =
                _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(low, 4), low_mask),
                                _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(high, 4), two_bits), 4));
            const __m512i y01 = _mm512_loadu_si512(yb.qs + 128 * h), y23 = _mm512_loadu_si512(yb.qs + 128 * h + 64);
            isum = _mm512_add_epi32(isum, _mm512_madd_epi16(_mm512_maddubs_epi16(q01, y01),
                                                            _mm512_permutexvar_epi16(scale_at[h][0], scales)));
            isum = _mm512_add_epi32(isum, _mm512_madd_epi16(_mm512_maddubs_epi16(q23, y23),
                                                            _mm512_permutexvar_epi16(scale_at[h][1], scales)));
        }
        // the stored values are q + 32: lane l takes off 32 · (scale · bsum) of 16-groups 2l and 2l + 1
        const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(load_bsums(yb.bsums), scales16), 5);
        const __m256i lanes = _mm256_sub_epi32(
            _mm256_add_epi32(_mm512_castsi512_si256(isum), _mm512_extracti64x4_epi64(isum, 1)), offset);
        const float d = half(x + 208) * yb.d;
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes), acc);
    }
    return hsum(acc);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// Q2_K's one-row kernel (dot_k_lanes<Q2kBlock>'s int32 lanes and float steps): the sixteen 4-bit
// scales widened at once and each chunk's pair picked by one word permute (AVX2 broadcasts them
// one at a time, most of a block's work).
float dot_q2_k(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    const __m256i two_bits = _mm256_set1_epi8(3);
    const __m128i low4 = _mm_set1_epi8(0x0F);
    __m256i pick[8];
    chunk_scale_picks(pick);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / 256; ++b, x += 84) {
        prefetch_ahead(x, 84);
        const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x));
        const __m256i scales = _mm256_cvtepu8_epi16(_mm_and_si128(sc, low4));
        const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), low4));
        __m256i isum = _mm256_setzero_si256();
        for (int j = 0; j < 2; ++j) {
            const __m256i bits = load32(x + 16 + 32 * j);
            for (int k = 0; k < 4; ++k) {
                const int c = 4 * j + k;
                const __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), two_bits);
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(q, load32(y[b].qs + 32 * c)),
                                                                _mm256_permutexvar_epi16(pick[c], scales)));
            }
        }
        const __m256i mins = _mm256_madd_epi16(mins16, load_bsums(y[b].bsums));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(-y[b].d * half(x + 82)), _mm256_cvtepi32_ps(mins), acc);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(y[b].d * half(x + 80)), _mm256_cvtepi32_ps(isum), acc);
    }
    return hsum(acc);
}

// Q4_0's and IQ4_NL's one-row kernels two blocks to a 512-bit register: their unsigned codes (IQ4_NL:
// value + 128 from one table) into VNNI's lanes, less the bias times each lane's quant sum — each
// lane the same four products as AVX2's — then each block's fused multiply-add as there: Q4_0's
// order (dot_blocks) block b's before block b + 1's into one accumulator; IQ4_NL's
// (dot_iq4_nl_pairs) even and odd blocks into two, an odd last block's integer sum fused in last.
#if defined(__GNUC__) && !defined(__clang__) // GCC 12's false warning on the inserts, as above
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
template <bool Iq4> float dot_b32_pairs(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const __m512i ones = _mm512_set1_epi8(1);
    [[maybe_unused]] const __m512i table = _mm512_broadcast_i32x4(iq4_nl_biased_values()); // (IQ4_NL only)
    __m256 acc = _mm256_setzero_ps(), odd = _mm256_setzero_ps();
    float tail = 0.0f; // IQ4_NL's odd last block
    bool has_tail = false;
    const int64_t blocks = n / 32;
    for (int64_t b = 0; b < blocks; b += 2) {
        const bool pair = b + 1 < blocks; // an odd last block is read twice, its second copy unused
        const uint8_t* xb = x + b * 18;
        const uint8_t* xn = pair ? xb + 18 : xb;
        const BlockQ8_0& yn = y[pair ? b + 1 : b];
        prefetch_ahead(xb, 36);
        const __m256i bytes =
            _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb + 2))),
                                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(xn + 2)), 1);
        // [low nibbles of b, of b + 1, high nibbles of b, of b + 1] → b's 32 values, then b + 1's
        const __m512i halves = _mm512_inserti64x4(_mm512_zextsi256_si512(_mm256_and_si256(bytes, low4)),
                                                  _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low4), 1);
        __m512i codes = _mm512_shuffle_i64x2(halves, halves, _MM_SHUFFLE(3, 1, 2, 0));
        if constexpr (Iq4)
            codes = _mm512_shuffle_epi8(table, codes);
        const __m512i quants = _mm512_inserti64x4(_mm512_zextsi256_si512(load32(y[b].qs)), load32(yn.qs), 1);
        const __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), codes, quants);
        const __m512i bias = _mm512_slli_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, quants), Iq4 ? 7 : 3);
        const __m512i exact = _mm512_sub_epi32(sums, bias);
        const __m512 lanes = _mm512_cvtepi32_ps(exact);
        const __m256 high = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(lanes), 1));
        if constexpr (Iq4) {
            if (!pair) {
                tail = static_cast<float>(hsum_i32(_mm512_castsi512_si256(exact)));
                has_tail = true;
                break;
            }
            acc = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(y[b].d) * half(xb)), _mm512_castps512_ps256(lanes), acc);
            odd = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(yn.d) * half(xn)), high, odd);
        } else {
            acc = _mm256_fmadd_ps(_mm256_set1_ps(half(xb) * _cvtsh_ss(y[b].d)), _mm512_castps512_ps256(lanes), acc);
            if (pair)
                acc = _mm256_fmadd_ps(_mm256_set1_ps(half(xn) * _cvtsh_ss(yn.d)), high, acc);
        }
    }
    if constexpr (Iq4) {
        float sum = hsum(_mm256_add_ps(acc, odd));
        if (has_tail) {
            const int64_t b = blocks - 1;
            sum = std::fma(_cvtsh_ss(y[b].d) * half(x + b * 18), tail, sum);
        }
        return sum;
    }
    return hsum(acc);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#if defined(__GNUC__) && !defined(__clang__) // GCC 12's false warning on the widening, as above
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
// Sixteen float weights widened to f32.
template <FloatKind K> __m512 load_float16(const void* p, int64_t i)
{
    if constexpr (K == FloatKind::F32)
        return _mm512_loadu_ps(static_cast<const float*>(p) + i);
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(p) + i));
    if constexpr (K == FloatKind::F16)
        return _mm512_cvtph_ps(h);
    else
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// ggml's one-row order for float weights (dot_float's bits) with its four 8-lane accumulators two to
// a register: acc0 | acc1 in one, acc2 | acc3 in the other, each lane the same fused multiply-adds in
// the same order; the sum of the two registers' halves is dot_float's (acc0 + acc2) + (acc1 + acc3).
// Half the instructions per weight of the AVX2 kernel (BF16's widening is two of them per eight
// weights there), so decode waits on memory rather than on them.
template <FloatKind K> float dot_float_zmm(const void* w, const void* a, int64_t n)
{
    __m512 acc01 = _mm512_setzero_ps(), acc23 = _mm512_setzero_ps();
    const int64_t np = n & ~int64_t(31);
    constexpr int kBytes = K == FloatKind::F32 ? 128 : 64; // a step's 32 weights
    for (int64_t i = 0; i < np; i += 32) {
        // F32 streams on the hardware prefetchers alone: its two prefetches per step (a line per
        // load) cost more than they bring once the weights are on 2 MiB pages (F32 twin decode, two
        // threads, alternated: 34.4/31.6/34.7 → 36.8/34.5/36.0 tokens/s). F16 and BF16, a line per
        // step, keep theirs (63/64 without against 69 with).
        if constexpr (K != FloatKind::F32)
            prefetch_ahead(static_cast<const uint8_t*>(w) + i * (kBytes / 32), kBytes);
        acc01 = _mm512_fmadd_ps(load_float16<K>(w, i), load_float16<K>(a, i), acc01);
        acc23 = _mm512_fmadd_ps(load_float16<K>(w, i + 16), load_float16<K>(a, i + 16), acc23);
    }
    const __m512 pairs = _mm512_add_ps(acc01, acc23); // acc0 + acc2 | acc1 + acc3
    const __m256 lanes = _mm256_add_ps(_mm512_castps512_ps256(pairs),
                                       _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(pairs), 1)));
    return finish_float_dot<K>(lanes, w, a, np, n);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

VecDotFn vec_dot_avx512(GgmlType type)
{
    switch (type) {
    case GgmlType::F32:
        return dot_float_zmm<FloatKind::F32>;
    case GgmlType::F16:
        return dot_float_zmm<FloatKind::F16>;
    case GgmlType::BF16:
        return dot_float_zmm<FloatKind::BF16>;
    case GgmlType::Q8_0:
        return dot_q8_0;
    case GgmlType::Q5_0:
        return dot_q5_0;
    case GgmlType::Q4_0:
        return dot_b32_pairs<false>;
    case GgmlType::IQ4_NL:
        return dot_b32_pairs<true>;
    case GgmlType::Q2_K:
        return dot_q2_k;
    case GgmlType::Q3_K:
        return dot_q3_k;
    case GgmlType::Q6_K:
        return dot_q6_k;
    default:
        return nullptr;
    }
}

VecDotX4Fn vec_dot_x4_avx512(GgmlType type)
{
    switch (type) {
    case GgmlType::Q8_0:
        return dot_legacy_x4<34, unpack_q8_0>;
    case GgmlType::Q5_0:
        return dot_legacy_x4<22, unpack_q5_0>;
    default:
        return nullptr;
    }
}

namespace {

// The 512-bit eight-token kernels unless TOKENSCOPE_X8_ZMM=0 (for measuring the two against each other).
bool x8_zmm()
{
    static const bool on = [] {
        const char* v = std::getenv("TOKENSCOPE_X8_ZMM");
        return !(v && std::string_view(v) == "0");
    }();
    return on;
}

} // namespace

VecDotX8Fn vec_dot_x8_avx512(GgmlType type)
{
    switch (type) {
    case GgmlType::Q8_0:
        return x8_zmm() ? dot_legacy_x8_zmm<34, unpack_q8_0> : dot_legacy_x8<34, unpack_q8_0>;
    case GgmlType::Q5_0:
        return x8_zmm() ? dot_legacy_x8_zmm<22, unpack_q5_0> : dot_legacy_x8<22, unpack_q5_0>;
    case GgmlType::Q4_0: // the same lanes as Q5_0's (dot_lanes): its values −8 … 7 in the same place
        return x8_zmm() ? dot_legacy_x8_zmm<18, unpack_q4_0> : dot_legacy_x8<18, unpack_q4_0>;
    default:
        return nullptr;
    }
}

VecDotX16Fn vec_dot_x16_avx512(GgmlType type)
{
    if (!x8_zmm())
        return nullptr;
    switch (type) {
    case GgmlType::Q8_0:
        return dot_legacy_x16_zmm<34, unpack_q8_0>;
    case GgmlType::Q5_0:
        return dot_legacy_x16_zmm<22, unpack_q5_0>;
    case GgmlType::Q4_0:
        return dot_legacy_x16_zmm<18, unpack_q4_0>;
    default:
        return nullptr;
    }
}

VecDotFn vec_dot_tiled_avx512(GgmlType type)
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

VecDotX4Fn vec_dot_tiled_x4_avx512(GgmlType type)
{
    switch (type) {
    case GgmlType::Q4_K:
        return dot_tiled_xn<Q4kBlock, 144, 4>;
    case GgmlType::Q6_K:
        return dot_tiled_xn<Q6kBlock, 210, 4>;
    default:
        return nullptr;
    }
}

VecDotX8Fn vec_dot_tiled_x8_avx512(GgmlType type)
{
    switch (type) {
    case GgmlType::Q4_K:
        return dot_tiled_x8_lanes<Q4kBlock, 144>;
    case GgmlType::Q5_K:
        return dot_tiled_x8_lanes<Q45kBlock<true>, 176>;
    case GgmlType::Q6_K:
        return dot_tiled_x8_lanes<Q6kBlock, 210>;
    default:
        return nullptr;
    }
}

// VNNI's u8 × s8 dot product: the same exact int32 lanes as maddubs + madd (no pair saturates here).
struct DotI8Vnni {
    static __m256i dot(__m256i abs_q, __m256i signed_y)
    {
        return _mm256_dpbusd_epi32(_mm256_setzero_si256(), abs_q, signed_y);
    }
};

// Eight rows of Q4_0 or IQ4_NL in llama.cpp's repacked gemv order, the AVX2 lanes kernel's bits two
// blocks at a time: a 512-bit register holds the eight rows' sums of block b (lanes 0–7) and of
// b + 1 (lanes 8–15). The integer sums are the same exact ones (VNNI adds unsigned codes × quants
// straight into int32, so neither the int16 bound nor IQ4_NL's split codes are needed), and each
// row still takes block b's fused multiply-add before block b + 1's. The work per block falls from
// about a hundred instructions to under forty: no per-row reduction, no int16 steps, the scales
// loaded with the quants (B32Rows8).
#if defined(__GNUC__) && !defined(__clang__) // GCC 12's false warning on the unpacks, as above
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
// The activation scales of blocks b (lanes 0–7) and b + 1 (8–15).
inline __m512 b32_activation_scales(const BlockQ8_0& yb, const BlockQ8_0& yn)
{
    return _mm512_castpd_ps(
        _mm512_insertf64x4(_mm512_zextpd256_pd512(_mm256_castps_pd(_mm256_set1_ps(_cvtsh_ss(yb.d)))),
                           _mm256_castps_pd(_mm256_set1_ps(_cvtsh_ss(yn.d))), 1));
}

// Eight rows of Q4_0/IQ4_NL blocks b and b + 1, loaded for lanes that hold a row and block each:
// one masked load of the two blocks' 36 bytes per row (none read past them), then
//  - groups[k]: bytes 4k…4k+3 of each row's block b quants in lanes 0–7 (row order), of block b + 1's
//    in lanes 8–15 (word permutes put rows r and r + 4 of both blocks into the 128-bit lanes of one
//    register, then 4×4 dword transposes in each 128-bit lane);
//  - the sixteen weight scales in the same lanes, picked by word permutes and blends.
// A gather of the scales cost about a sixth of a decode step. An odd last block (pair = false) loads
// one block: block b + 1's lanes are zeros. step() then gives the codes of each group (unsigned:
// Q4_0's value + 8, IQ4_NL's + 128 through one table), the token's quants of both blocks and the
// sixteen scale products; pick[j] puts dword j of block b's quants (or of anything laid out as
// they are) into lanes 0–7 and of block b + 1's into 8–15.
template <bool Iq4> struct B32Rows8 {
    __m512i quant_words; // row r's words 1–8 and 10–17 (the two blocks' quants) beside row r + 4's
    __m512i scale_words; // word i: the scale of row i % 8 (of r or r + 4) and block i / 8
    __m512i pick[8];
    __m512i low4 = _mm512_set1_epi8(0x0F);
    __m512i table = _mm512_broadcast_i32x4(iq4_nl_biased_values()); // (IQ4_NL only)

    struct Step {
        __m512i lo[4], hi[4]; // group k's codes: low nibbles (quants 4k…), high nibbles (16 + 4k…)
        __m512i quants;       // the token's quants of block b (dwords 0–7) and b + 1 (8–15)
        __m512 d;             // weight × activation scales, lanes as the groups'
    };

    B32Rows8()
    {
        for (int j = 0; j < 8; ++j)
            pick[j] = _mm512_set_epi32(8 + j, 8 + j, 8 + j, 8 + j, 8 + j, 8 + j, 8 + j, 8 + j, j, j, j, j, j, j, j, j);
        alignas(64) int16_t q[32], sw[32];
        for (int i = 0; i < 32; ++i) {
            const int lane = i / 8; // 128-bit lanes: row r block b, row r + 4 block b, then block b + 1
            q[i] = static_cast<int16_t>((lane % 2 ? 32 : 0) + (lane < 2 ? 1 : 10) + i % 8);
        }
        for (int i = 0; i < 32; ++i) // (words 16 on: unused)
            sw[i] = static_cast<int16_t>((i % 8 >= 4 ? 32 : 0) + (i / 8 == 1 ? 9 : 0));
        quant_words = _mm512_load_si512(q);
        scale_words = _mm512_load_si512(sw);
    }

    __m512 load(const uint8_t* xb, std::size_t row_bytes, bool pair, __m512i groups[4]) const
    {
        const __mmask32 keep = pair ? 0x3FFFF : 0x1FF; // the 18 words of two blocks, or 9 of one
        __m512i rows[8];
        for (int r = 0; r < 8; ++r)
            rows[r] = _mm512_maskz_loadu_epi16(keep, xb + r * row_bytes);
        __m512i lanes[4], scales = _mm512_setzero_si512();
        for (int r = 0; r < 4; ++r) {
            lanes[r] = _mm512_permutex2var_epi16(rows[r], quant_words, rows[r + 4]);
            // words r, r + 4, 8 + r, 12 + r: rows r and r + 4 of block b, then of block b + 1
            scales = _mm512_mask_blend_epi16(0x1111u << r, scales,
                                             _mm512_permutex2var_epi16(rows[r], scale_words, rows[r + 4]));
        }
        const __m512i t0 = _mm512_unpacklo_epi32(lanes[0], lanes[1]), t1 = _mm512_unpackhi_epi32(lanes[0], lanes[1]);
        const __m512i t2 = _mm512_unpacklo_epi32(lanes[2], lanes[3]), t3 = _mm512_unpackhi_epi32(lanes[2], lanes[3]);
        groups[0] = _mm512_unpacklo_epi64(t0, t2);
        groups[1] = _mm512_unpackhi_epi64(t0, t2);
        groups[2] = _mm512_unpacklo_epi64(t1, t3);
        groups[3] = _mm512_unpackhi_epi64(t1, t3);
        return _mm512_cvtph_ps(_mm512_castsi512_si256(scales));
    }

    Step step(const uint8_t* x, std::size_t row_bytes, const BlockQ8_0* y, int64_t b, bool pair) const
    {
        const uint8_t* xb = x + b * 18;
        if ((b * 18) % 64 < 36) // each row stream: read ahead once per cache line
            prefetch_next_eight_rows(xb, row_bytes, 1);
        Step s;
        __m512i groups[4];
        const __m512 d_w = load(xb, row_bytes, pair, groups);
        for (int k = 0; k < 4; ++k) {
            s.lo[k] = _mm512_and_si512(groups[k], low4);
            s.hi[k] = _mm512_and_si512(_mm512_srli_epi16(groups[k], 4), low4);
            if constexpr (Iq4) {
                s.lo[k] = _mm512_shuffle_epi8(table, s.lo[k]);
                s.hi[k] = _mm512_shuffle_epi8(table, s.hi[k]);
            }
        }
        const BlockQ8_0& yn = y[b + (pair ? 1 : 0)];
        s.quants = _mm512_inserti64x4(_mm512_zextsi256_si512(load_qs(y[b].qs)), load_qs(yn.qs), 1);
        s.d = _mm512_mul_ps(d_w, b32_activation_scales(y[b], yn));
        return s;
    }
};

template <bool Iq4>
void dot_repacked_b32_rows8_lanes_zmm(const void* w, std::size_t row_bytes, const void* a, int64_t n, float out[8])
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    const __m512i ones8 = _mm512_set1_epi8(1);
    const B32Rows8<Iq4> lanes;
    __m256 acc = _mm256_setzero_ps();
    const int64_t blocks = n / 32;
    for (int64_t b = 0; b < blocks; b += 2) {
        const bool pair = b + 1 < blocks;
        const auto [lo, hi, quants, d] = lanes.step(x, row_bytes, y, b, pair);
        __m512i isum = _mm512_setzero_si512();
        for (int k = 0; k < 4; ++k) {
            isum = _mm512_dpbusd_epi32(isum, lo[k], _mm512_permutexvar_epi32(lanes.pick[k], quants));
            isum = _mm512_dpbusd_epi32(isum, hi[k], _mm512_permutexvar_epi32(lanes.pick[k + 4], quants));
        }
        // the codes' bias (8 or 128) × each block's quant sum, in all of its eight lanes
        __m512i qsum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones8, quants);
        qsum = _mm512_add_epi32(qsum, _mm512_shuffle_epi32(qsum, _MM_PERM_BADC));
        qsum = _mm512_add_epi32(qsum, _mm512_shuffle_epi32(qsum, _MM_PERM_CDAB));
        qsum = _mm512_add_epi32(qsum, _mm512_shuffle_i32x4(qsum, qsum, _MM_SHUFFLE(2, 3, 0, 1)));
        const __m512 sums = _mm512_cvtepi32_ps(_mm512_sub_epi32(isum, _mm512_slli_epi32(qsum, Iq4 ? 7 : 3)));
        acc = _mm256_fmadd_ps(_mm512_castps512_ps256(sums), _mm512_castps512_ps256(d), acc);
        if (pair)
            acc = _mm256_fmadd_ps(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(sums), 1)),
                                  _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(d), 1)), acc);
    }
    _mm256_storeu_ps(out, acc);
}
// Eight rows of Q4_0 or IQ4_NL in the plain order (--no-repack's), each row dot_b32_pairs's bits:
// the repacked kernel's loads and lanes, but each of the one-row kernel's eight accumulator lanes kept
// apart — lane j of row r's accumulator is lane r (block b) or 8 + r (block b + 1) of acc[j], where
// j < 4 sums the low nibbles of bytes 4j…4j+3 and j ≥ 4 the high ones of bytes 4(j−4)… — and the
// rows' horizontal sums taken in hsum's order across those registers. Q4_0 fuses block b then b + 1
// into one accumulator; IQ4_NL keeps even blocks in lanes 0–7 and odd ones in 8–15 and fuses an odd
// last block's integer sum at the end, as the one-row kernel does.
template <bool Iq4>
void dot_b32_rows8_plain_zmm(const void* w, std::size_t row_bytes, const void* a, int64_t n, float out[8])
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    const __m512i ones8 = _mm512_set1_epi8(1);
    const B32Rows8<Iq4> lanes;
    __m512 acc[8]; // IQ4_NL: even blocks in lanes 0–7, odd in 8–15; Q4_0: lanes 0–7
    for (auto& v : acc)
        v = _mm512_setzero_ps();
    __m256i tail = _mm256_setzero_si256(); // IQ4_NL's odd last block, per row, and its scales
    __m256 tail_d = _mm256_setzero_ps();
    bool has_tail = false;
    const int64_t blocks = n / 32;
    for (int64_t b = 0; b < blocks; b += 2) {
        const bool pair = b + 1 < blocks;
        const auto [lo, hi, quants, d] = lanes.step(x, row_bytes, y, b, pair);
        // minus the codes' bias (8 or 128) × each dword's quant sum: the starting value of its sum
        const __m512i bias = _mm512_sub_epi32(
            _mm512_setzero_si512(),
            _mm512_slli_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones8, quants), Iq4 ? 7 : 3));
        __m512i exact[8];
        for (int k = 0; k < 4; ++k) {
            exact[k] = _mm512_dpbusd_epi32(_mm512_permutexvar_epi32(lanes.pick[k], bias), lo[k],
                                           _mm512_permutexvar_epi32(lanes.pick[k], quants));
            exact[k + 4] = _mm512_dpbusd_epi32(_mm512_permutexvar_epi32(lanes.pick[k + 4], bias), hi[k],
                                               _mm512_permutexvar_epi32(lanes.pick[k + 4], quants));
        }
        if constexpr (Iq4) {
            if (!pair) {
                tail_d = _mm512_castps512_ps256(d);
                for (int j = 0; j < 8; ++j)
                    tail = _mm256_add_epi32(tail, _mm512_castsi512_si256(exact[j]));
                has_tail = true;
                break;
            }
            for (int j = 0; j < 8; ++j)
                acc[j] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(exact[j]), acc[j]);
        } else {
            for (int j = 0; j < 8; ++j)
                acc[j] = _mm512_mask3_fmadd_ps(d, _mm512_cvtepi32_ps(exact[j]), acc[j], 0x00FF);
            if (pair) // block b + 1's lanes down to 0–7, fused after block b's
                for (int j = 0; j < 8; ++j)
                    acc[j] = _mm512_mask3_fmadd_ps(_mm512_shuffle_f32x4(d, d, _MM_SHUFFLE(3, 2, 3, 2)),
                                                   _mm512_shuffle_f32x4(_mm512_cvtepi32_ps(exact[j]),
                                                                        _mm512_cvtepi32_ps(exact[j]),
                                                                        _MM_SHUFFLE(3, 2, 3, 2)),
                                                   acc[j], 0x00FF);
        }
    }
    __m256 f[8]; // each row's eight accumulator lanes (IQ4_NL: even + odd, as hsum(acc + odd))
    for (int j = 0; j < 8; ++j)
        f[j] = Iq4 ? _mm256_add_ps(_mm512_castps512_ps256(acc[j]),
                                   _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[j]), 1)))
                   : _mm512_castps512_ps256(acc[j]);
    // hsum: (f0 + f4) + (f2 + f6), then (f1 + f5) + (f3 + f7), then the two
    __m256 sum = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(f[0], f[4]), _mm256_add_ps(f[2], f[6])),
                               _mm256_add_ps(_mm256_add_ps(f[1], f[5]), _mm256_add_ps(f[3], f[7])));
    if (has_tail)
        sum = _mm256_fmadd_ps(tail_d, _mm256_cvtepi32_ps(tail), sum);
    _mm256_storeu_ps(out, sum);
}

// Eight rows of Q4_K in llama.cpp's repacked gemv order (dot_repacked_q4_k_rows8's bits): per row and
// block the exact sums s1 = Σ scale · (codes · quants) and s2 = Σ min · (quant sums), then its two
// fused multiply-adds. The work per row and block falls from about a hundred instructions, a third
// of them scalar scale unpacking, to about thirty:
//  - the eight rows' scales and minimums are unpacked at once (llama.cpp's 12-byte packing, read as
//    three words per row, loaded with d and dmin and transposed, and undone with the same masks and
//    shifts in all eight lanes);
//  - two rows share a 512-bit register (the quants broadcast to both halves), each sub-block's scale
//    picked into its half by one word permute;
//  - s2 from the minimums (bytes) and the quant pair sums split into a signed high and an unsigned low
//    byte, four VNNI steps for all eight rows.
void dot_repacked_q4_k_rows8_zmm(const void* w, std::size_t row_bytes, const void* a, int64_t n, float out[8])
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    // word s of the pair's scales (row 2p's in words 0–7, row 2p + 1's in 8–15) to each half
    __m512i pick[8];
    for (int k = 0; k < 8; ++k)
        pick[k] = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<short>(k)),
                                     _mm256_set1_epi16(static_cast<short>(8 + k)), 1);
    const __m256i k1 = _mm256_set1_epi32(0x3f3f3f3f), k2 = _mm256_set1_epi32(0x0f0f0f0f),
                  k3 = _mm256_set1_epi32(0x03030303);
    __m256 acc = _mm256_setzero_ps(), acc_min = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / 256; ++b) {
        const uint8_t* xb = x + b * 144;
        prefetch_next_eight_rows(xb, row_bytes, 144);
        const BlockQ8_K& yb = y[b];
        // d and dmin, then the scales (sub-blocks 0–3, 4–7) and minimums of the eight rows, a row per
        // lane: each row's first sixteen bytes loaded (rows r and r + 4 in one register) and
        // transposed 4×4 by dwords in each 128-bit half (four gathers cost as much as the rest)
        __m256i head[4];
        for (int r = 0; r < 4; ++r)
            head[r] = _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb + (r + 4) * row_bytes)),
                                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb + r * row_bytes)));
        const __m256i t0 = _mm256_unpacklo_epi32(head[0], head[1]), t1 = _mm256_unpackhi_epi32(head[0], head[1]);
        const __m256i t2 = _mm256_unpacklo_epi32(head[2], head[3]), t3 = _mm256_unpackhi_epi32(head[2], head[3]);
        const __m256i dd = _mm256_unpacklo_epi64(t0, t2), u0 = _mm256_unpackhi_epi64(t0, t2);
        const __m256i u1 = _mm256_unpacklo_epi64(t1, t3), u2 = _mm256_unpackhi_epi64(t1, t3);
        const __m256i sc_lo = _mm256_and_si256(u0, k1);
        const __m256i sc_hi = _mm256_or_si256(_mm256_and_si256(u2, k2),
                                              _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u0, 6), k3), 4));
        const __m256i m_lo = _mm256_and_si256(u1, k1);
        const __m256i m_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), k2),
                                             _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u1, 6), k3), 4));
        // s2: the quant pair sums P_s = 256 · high + low (|P_s| ≤ 4,064: high fits a signed byte)
        const __m256i pairs = _mm256_madd_epi16(load_bsums(yb.bsums), _mm256_set1_epi16(1));
        const __m128i p_lo = _mm256_cvtepi32_epi8(pairs), p_hi = _mm256_cvtepi32_epi8(_mm256_srai_epi32(pairs, 8));
        const __m256i lo03 = _mm256_set1_epi32(_mm_cvtsi128_si32(p_lo)),
                      lo47 = _mm256_set1_epi32(_mm_extract_epi32(p_lo, 1));
        const __m256i hi03 = _mm256_set1_epi32(_mm_cvtsi128_si32(p_hi)),
                      hi47 = _mm256_set1_epi32(_mm_extract_epi32(p_hi, 1));
        const __m256i s2_high =
            _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), m_lo, hi03), m_hi, hi47);
        const __m256i s2 =
            _mm256_add_epi32(_mm256_slli_epi32(s2_high, 8),
                             _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), lo03, m_lo), lo47, m_hi));
        // s1: the quants of each sub-block in both halves
        __m512i quants[8];
        for (int k = 0; k < 8; ++k)
            quants[k] = _mm512_broadcast_i64x4(load32(yb.qs + 32 * k));
        // each row's eight scales as one qword: rows 0, 1, 4, 5 in `even`, 2, 3, 6, 7 in `odd`
        const __m256i even = _mm256_unpacklo_epi32(sc_lo, sc_hi), odd = _mm256_unpackhi_epi32(sc_lo, sc_hi);
        const __m128i pair_scales[4] = {_mm256_castsi256_si128(even), _mm256_castsi256_si128(odd),
                                        _mm256_extracti128_si256(even, 1), _mm256_extracti128_si256(odd, 1)};
        __m256i halves[8];
        for (int p = 0; p < 4; ++p) {
            const uint8_t* r0 = xb + 2 * p * row_bytes;
            const __m512i scales = _mm512_zextsi256_si512(_mm256_cvtepu8_epi16(pair_scales[p]));
            __m512i isum = _mm512_setzero_si512();
            for (int c = 0; c < 4; ++c) {
                const __m512i codes = _mm512_inserti64x4(_mm512_zextsi256_si512(load32(r0 + 16 + 32 * c)),
                                                         load32(r0 + row_bytes + 16 + 32 * c), 1);
                const __m512i lo = _mm512_and_si512(codes, low4);
                const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(codes, 4), low4);
                isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(lo, quants[2 * c]),
                                           _mm512_permutexvar_epi16(pick[2 * c], scales));
                isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(hi, quants[2 * c + 1]),
                                           _mm512_permutexvar_epi16(pick[2 * c + 1], scales));
            }
            halves[2 * p] = _mm512_castsi512_si256(isum);
            halves[2 * p + 1] = _mm512_extracti64x4_epi64(isum, 1);
        }
        // the rows' d and dmin (the block's first two halves, dd above)
        const __m256 dy = _mm256_set1_ps(yb.d);
        const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_cvtepi32_epi16(dd)), dy);
        const __m256 dmin = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(dd, 16))), dy);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(transpose_sums(halves)), d, acc);
        acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s2), dmin, acc_min);
    }
    _mm256_storeu_ps(out, _mm256_sub_ps(acc, acc_min));
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

VecDotRows8Fn vec_dot_repacked_rows8_avx512(GgmlType type, bool gemm)
{
    switch (type) {
    case GgmlType::Q4_0: // (both orders sum these types per block)
        return dot_repacked_b32_rows8_lanes_zmm<false>;
    case GgmlType::IQ4_NL:
        return dot_repacked_b32_rows8_lanes_zmm<true>;
    case GgmlType::Q4_K: // (the gemm's per-pair order keeps the AVX2 kernel)
        return gemm ? nullptr : dot_repacked_q4_k_rows8_zmm;
    default:
        return nullptr;
    }
}

VecDotRows8Fn vec_dot_rows8_of_avx512(VecDotFn one_row)
{
    if (one_row == dot_b32_pairs<false>)
        return dot_b32_rows8_plain_zmm<false>;
    if (one_row == dot_b32_pairs<true>)
        return dot_b32_rows8_plain_zmm<true>;
    return nullptr;
}

VecDotRows8x4Fn vec_dot_repacked_rows8x4_avx512(GgmlType type, bool gemm)
{
    switch (type) {
    case GgmlType::Q4_0:
        return dot_repacked_b32_rows8x4<unpack_q4_0, DotI8Vnni>;
    case GgmlType::IQ4_NL:
        return dot_repacked_b32_rows8x4<unpack_iq4_nl, DotI8Vnni>;
    case GgmlType::Q4_K:
        return gemm ? dot_repacked_q4_k_rows8x4_pairs<Q4kBlock> : dot_repacked_q4_k_rows8x4_gemv<Q4kBlock>;
    default:
        return nullptr;
    }
}

VecDotFn vec_dot_batched_avx512(GgmlType, int64_t)
{
    return nullptr;
}

} // namespace engine::simd
