// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// The portable dot products of quantized weight rows with quantized activations (vec_dot.h): the
// types that have AVX2 kernels in those kernels' exact order (the bit-exact reference), the others
// in the shape of ggml's reference vec_dot functions (integer sums per block, then d_weight ·
// d_activation). Written once for the CPU backend's portable path and the CUDA kernels (one thread
// computes one row's dot, so it follows the same order): both give the AVX2 kernels' bits.
//
// The AVX2 kernels' order: their integer partial sums land in eight lanes (lane l holds elements
// 4l…4l+3 of each 32-element step, exact integers in any order), each lane is scaled into its own
// float accumulator with a fused multiply-add per block, and the lanes are summed in _mm256's
// horizontal order at the end. Loops that index a lane are unrolled (TS_UNROLL): on the device the
// lanes then stay in registers.
#include "quant/activation_quant.h"
#include "util/hd.h"

namespace engine::portable {

using cuda::bits_float;
using cuda::fma_rn;
using cuda::load_u32;

TS_HD inline float half(const uint8_t* p)
{
    return cuda::half_to_f32(cuda::load_u16(p));
}

// The AVX2 horizontal sum: ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)).
TS_HD inline float hsum8(const float* a)
{
    const float t0 = a[0] + a[4], t1 = a[1] + a[5], t2 = a[2] + a[6], t3 = a[3] + a[7];
    return (t0 + t2) + (t1 + t3);
}

// ---- legacy blocks × Q8_0: lane l takes elements 4l … 4l + 3 of every block ------------------------

template <GgmlType T>
constexpr int kLegacyBlockBytes = T == GgmlType::Q4_0 || T == GgmlType::IQ4_NL ? 18
                                  : T == GgmlType::Q5_0                        ? 22
                                                                               : 34;

// IQ4_NL and IQ4_XS store 4-bit indices into a non-linear table (ggml-common.h's kvalues_iq4nl:
// −127, −104, −83, −65, −49, −35, −22, −10, 1, 13, 25, 38, 53, 69, 89, 113), here as the bytes of two
// constants: an array indexed at run time would live in a GPU thread's local memory.
TS_HD inline int iq4_value(int index)
{
    const uint64_t bytes = index < 8 ? 0xF6EADDCFBFAD9881ull : 0x7159453526190D01ull;
    return static_cast<int8_t>(static_cast<uint8_t>(bytes >> (8 * (index & 7))));
}

// Element e of a Q4_0, Q5_0, Q8_0 or IQ4_NL block as its signed integer.
template <GgmlType T> TS_HD inline int legacy_q(const uint8_t* x, int e)
{
    if constexpr (T == GgmlType::Q4_0) {
        return (e < 16 ? (x[2 + e] & 0x0F) : (x[2 + e - 16] >> 4)) - 8;
    } else if constexpr (T == GgmlType::IQ4_NL) {
        return iq4_value(e < 16 ? (x[2 + e] & 0x0F) : (x[2 + e - 16] >> 4));
    } else if constexpr (T == GgmlType::Q5_0) {
        const uint32_t qh = load_u32(x + 2);
        const int low = e < 16 ? (x[6 + e] & 0x0F) : (x[6 + e - 16] >> 4);
        return (low | static_cast<int>(((qh >> e) & 1u) << 4)) - 16;
    } else {
        return static_cast<int8_t>(x[2 + e]);
    }
}

// Lane l's integer sum of one block: Σ q·q8 over elements 4l … 4l + 3.
template <GgmlType T> TS_HD inline int legacy_lane_sum(const uint8_t* x, const BlockQ8_0& y, int l)
{
    int s = 0;
    TS_UNROLL
    for (int j = 4 * l; j < 4 * l + 4; ++j)
        s += legacy_q<T>(x, j) * y.qs[j];
    return s;
}

// Lane l's accumulators over a row: the values' (one fused multiply-add per block) and, for Q4_K
// (l < 4) a minimum lane's or for Q5_K the one minimum float (the same on every lane).
struct KLaneAcc {
    float acc = 0.0f, mins = 0.0f;
};

// The lane-split types block by block: the activation block a weight block meets, and what one block
// adds to lane l (LaneBlocks<T>::step). A row is its blocks in order (lanes_of_row); the CUDA kernels
// run a thread per lane, one weight block against several tokens' blocks.
template <GgmlType T> struct LaneBlocks;
template <GgmlType T> struct LegacyLaneBlocks {
    using Act = BlockQ8_0;
    static constexpr int bytes = kLegacyBlockBytes<T>, elements = 32;
    TS_HD static void step(const uint8_t* x, const Act& y, int l, KLaneAcc& r)
    {
        r.acc = fma_rn(half(x) * cuda::half_to_f32(y.d), static_cast<float>(legacy_lane_sum<T>(x, y, l)), r.acc);
    }
};
template <> struct LaneBlocks<GgmlType::Q4_0> : LegacyLaneBlocks<GgmlType::Q4_0> {
};
template <> struct LaneBlocks<GgmlType::Q5_0> : LegacyLaneBlocks<GgmlType::Q5_0> {
};
template <> struct LaneBlocks<GgmlType::Q8_0> : LegacyLaneBlocks<GgmlType::Q8_0> {
};
// IQ4_NL in llama.cpp's batched order (its llamafile matmul, 2+ rows): one accumulator, as Q4_0.
template <> struct LaneBlocks<GgmlType::IQ4_NL> : LegacyLaneBlocks<GgmlType::IQ4_NL> {
};

// The eight lanes' value accumulators summed in the AVX2 horizontal order.
TS_HD inline float hsum_lanes(const KLaneAcc* r)
{
    float acc[8];
    TS_UNROLL
    for (int l = 0; l < 8; ++l)
        acc[l] = r[l].acc;
    return hsum8(acc);
}

// The eight lanes over a whole row, block by block (each block read once for the eight).
template <GgmlType T> TS_HD inline void lanes_of_row(const void* w, const void* a, int64_t n, KLaneAcc* r)
{
    using B = LaneBlocks<T>;
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const typename B::Act*>(a);
    for (int64_t b = 0; b < n / B::elements; ++b)
        TS_UNROLL
    for (int l = 0; l < 8; ++l)
        B::step(x + b * B::bytes, y[b], l, r[l]);
}

// ---- legacy blocks with a minimum × Q8_1, in the AVX2 kernels' order ----------------------------
// The values' lanes as Q4_0's (unsigned quants, d_w · d_a per block); the minimum's m · s summed in one
// float, a fused multiply-add per block (GCC contracts llama.cpp's `summs += m * s`), added last.

template <GgmlType T> TS_HD inline int offset_q(const uint8_t* x, int e)
{
    const uint8_t* qs = x + (T == GgmlType::Q4_1 ? 4 : 8);
    int q = e < 16 ? (qs[e] & 0x0F) : (qs[e - 16] >> 4);
    if constexpr (T == GgmlType::Q5_1)
        q |= static_cast<int>(((load_u32(x + 4) >> e) & 1u) << 4);
    return q;
}

template <GgmlType T> struct OffsetLaneBlocks {
    using Act = BlockQ8_1;
    static constexpr int bytes = T == GgmlType::Q4_1 ? 20 : 24, elements = 32;
    TS_HD static void step(const uint8_t* x, const Act& y, int l, KLaneAcc& r)
    {
        int s = 0;
        TS_UNROLL
        for (int j = 4 * l; j < 4 * l + 4; ++j)
            s += offset_q<T>(x, j) * y.qs[j];
        r.acc = fma_rn(half(x) * y.d, static_cast<float>(s), r.acc);
        r.mins = fma_rn(half(x + 2), y.s, r.mins); // the same in every lane
    }
};
template <> struct LaneBlocks<GgmlType::Q4_1> : OffsetLaneBlocks<GgmlType::Q4_1> {
};
template <> struct LaneBlocks<GgmlType::Q5_1> : OffsetLaneBlocks<GgmlType::Q5_1> {
};

template <GgmlType T> TS_HD inline float dot_offset(const void* w, const void* a, int64_t n)
{
    KLaneAcc r[8];
    lanes_of_row<T>(w, a, n, r);
    return hsum_lanes(r) + r[0].mins;
}

// ---- IQ4_NL × Q8_0 in the AVX2 one-row order ------------------------------------------------------
// Lanes as Q4_0's through the table; even blocks feed one set of eight accumulators and odd blocks
// another, added lane by lane before the horizontal sum; an odd last block joins the result with a
// fused multiply-add (GCC contracts `sumf += d * sumi`).
TS_HD inline float dot_iq4_nl_pairs(const void* w, const void* a, int64_t n)
{
    using B = LaneBlocks<GgmlType::IQ4_NL>;
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    const int64_t nb = n / 32;
    KLaneAcc even[8], odd[8];
    int64_t b = 0;
    for (; b + 1 < nb; b += 2)
        TS_UNROLL
    for (int l = 0; l < 8; ++l) {
        B::step(x + b * 18, y[b], l, even[l]);
        B::step(x + (b + 1) * 18, y[b + 1], l, odd[l]);
    }
    float acc[8];
    TS_UNROLL
    for (int l = 0; l < 8; ++l)
        acc[l] = even[l].acc + odd[l].acc;
    float sum = hsum8(acc);
    if (b < nb) {
        int isum = 0;
        for (int e = 0; e < 32; ++e)
            isum += legacy_q<GgmlType::IQ4_NL>(x + b * 18, e) * y[b].qs[e];
        sum = fma_rn(cuda::half_to_f32(y[b].d) * half(x + b * 18), static_cast<float>(isum), sum);
    }
    return sum;
}

// ---- k-quants × Q8_K ---------------------------------------------------------------------------
// One function per type computes a super-block's exact integer sums (decoding each value where it
// is used: integers, so any order gives the same sums); the two summation orders below (llama.cpp's
// vec_dot, and its tiled matmul for batches of 8+ rows) only differ in how they scale and accumulate
// them.

struct KBlockSums {
    int s1 = 0; // Σ scale · (q · q8) over the block
    int s2 = 0; // Σ min · (sum of q8 over the sub-block), for the formats with mins
};

// The 2-bit quants of Q2_K and the low bits of Q3_K: element e of a block.
TS_HD inline int low2_of(const uint8_t* qs, int e)
{
    return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

TS_HD inline KBlockSums sums_q2_k(const uint8_t* x, const BlockQ8_K& y)
{ // scales[16] · qs[64] · d half · dmin half
    const uint8_t* sc = x;
    const uint8_t* qs = x + 16;
    KBlockSums r;
    for (int g = 0; g < 16; ++g) {
        int s = 0;
        for (int l = 0; l < 16; ++l)
            s += low2_of(qs, 16 * g + l) * y.qs[16 * g + l];
        r.s1 += (sc[g] & 0x0F) * s;
        r.s2 += y.bsums[g] * (sc[g] >> 4);
    }
    return r;
}

// The signed six-bit scale of 16-element group g of a Q3_K block (12 packed bytes).
TS_HD inline int q3_k_scale(const uint8_t* sc, int g)
{
    const int low4 = g < 8 ? (sc[g] & 0x0F) : (sc[g - 8] >> 4);
    const int high2 = (sc[8 + g % 4] >> (2 * (g / 4))) & 3;
    return (low4 | (high2 << 4)) - 32;
}

TS_HD inline KBlockSums sums_q3_k(const uint8_t* x, const BlockQ8_K& y)
{ // hmask[32] · qs[64] · scales[12] · d half
    const uint8_t* hmask = x;
    const uint8_t* qs = x + 32;
    const uint8_t* sc = x + 96;
    KBlockSums r;
    for (int g = 0; g < 16; ++g) {
        int s = 0;
        for (int l = 0; l < 16; ++l) {
            const int e = 16 * g + l;
            const bool high = (hmask[e % 32] >> (e / 32)) & 1;
            s += (low2_of(qs, e) - (high ? 0 : 4)) * y.qs[e];
        }
        r.s1 += q3_k_scale(sc, g) * s;
    }
    return r;
}

// The six-bit scale and minimum of sub-block j of a Q4_K/Q5_K block (12 packed bytes).
TS_HD inline void scale_min_k4(const uint8_t* q, int j, int& sc, int& m)
{
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

template <bool Five> TS_HD inline KBlockSums sums_q45_k(const uint8_t* x, const BlockQ8_K& y)
{ // d half · dmin half · scales[12] · (qh[32] for Q5_K) · qs[128]
    const uint8_t* qh = x + 16;
    const uint8_t* qs = x + (Five ? 48 : 16);
    KBlockSums r;
    for (int sub = 0; sub < 8; ++sub) {
        int sc = 0, m = 0;
        scale_min_k4(x + 4, sub, sc, m);
        int s = 0;
        for (int l = 0; l < 32; ++l) {
            const uint8_t byte = qs[32 * (sub / 2) + l];
            int q = (sub % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
            if constexpr (Five)
                q |= ((qh[l] >> sub) & 1) << 4;
            s += q * y.qs[sub * 32 + l];
        }
        r.s1 += sc * s;
        r.s2 += m * (y.bsums[2 * sub] + y.bsums[2 * sub + 1]);
    }
    return r;
}

TS_HD inline KBlockSums sums_q6_k(const uint8_t* x, const BlockQ8_K& y)
{ // ql[128] · qh[64] · scales[16] int8 · d half
    const uint8_t* ql = x;
    const uint8_t* qh = x + 128;
    const auto* scales = reinterpret_cast<const int8_t*>(x + 192);
    KBlockSums r;
    for (int g = 0; g < 16; ++g) {
        int s = 0;
        for (int k = 0; k < 16; ++k) {
            const int e = 16 * g + k, h = e / 128, rr = e % 128, quarter = rr / 32, l = rr % 32;
            const uint8_t lbyte = ql[64 * h + l + 32 * (quarter % 2)];
            const int low = quarter < 2 ? (lbyte & 0x0F) : (lbyte >> 4);
            const int high = (qh[32 * h + l] >> (2 * quarter)) & 3;
            s += ((low | (high << 4)) - 32) * y.qs[e];
        }
        r.s1 += scales[g] * s;
    }
    return r;
}

// IQ4_XS: the six-bit scale of 32-element sub-block ib, less 32.
TS_HD inline int iq4_xs_scale(const uint8_t* x, int ib)
{ // d half · scales_h u16 · scales_l[4] · qs[128]
    const int low = (x[4 + ib / 2] >> (4 * (ib % 2))) & 0x0F;
    const int high = (cuda::load_u16(x + 2) >> (2 * ib)) & 3;
    return (low | (high << 4)) - 32;
}

// Element j (< 32) of sub-block ib of an IQ4_XS block, through the table.
TS_HD inline int iq4_xs_q(const uint8_t* x, int ib, int j)
{
    const uint8_t byte = x[8 + 16 * ib + (j % 16)];
    return iq4_value(j < 16 ? (byte & 0x0F) : (byte >> 4));
}

TS_HD inline KBlockSums sums_iq4_xs(const uint8_t* x, const BlockQ8_K& y)
{
    KBlockSums r;
    for (int ib = 0; ib < 8; ++ib) {
        int s = 0;
        for (int j = 0; j < 32; ++j)
            s += iq4_xs_q(x, ib, j) * y.qs[32 * ib + j];
        r.s1 += iq4_xs_scale(x, ib) * s;
    }
    return r;
}

// Where each format keeps its f16 scale d and, if it has mins, dmin.
template <GgmlType T> struct KLayout;
template <> struct KLayout<GgmlType::Q2_K> {
    static constexpr int block_bytes = 84, d_offset = 80, dmin_offset = 82;
    TS_HD static KBlockSums sums(const uint8_t* x, const BlockQ8_K& y) { return sums_q2_k(x, y); }
};
template <> struct KLayout<GgmlType::Q3_K> {
    static constexpr int block_bytes = 110, d_offset = 108, dmin_offset = -1;
    TS_HD static KBlockSums sums(const uint8_t* x, const BlockQ8_K& y) { return sums_q3_k(x, y); }
};
template <> struct KLayout<GgmlType::Q4_K> {
    static constexpr int block_bytes = 144, d_offset = 0, dmin_offset = 2;
    TS_HD static KBlockSums sums(const uint8_t* x, const BlockQ8_K& y) { return sums_q45_k<false>(x, y); }
};
template <> struct KLayout<GgmlType::Q5_K> {
    static constexpr int block_bytes = 176, d_offset = 0, dmin_offset = 2;
    TS_HD static KBlockSums sums(const uint8_t* x, const BlockQ8_K& y) { return sums_q45_k<true>(x, y); }
};
template <> struct KLayout<GgmlType::IQ4_XS> {
    static constexpr int block_bytes = 136, d_offset = 0, dmin_offset = -1;
    TS_HD static KBlockSums sums(const uint8_t* x, const BlockQ8_K& y) { return sums_iq4_xs(x, y); }
};
template <> struct KLayout<GgmlType::Q6_K> {
    static constexpr int block_bytes = 210, d_offset = 208, dmin_offset = -1;
    TS_HD static KBlockSums sums(const uint8_t* x, const BlockQ8_K& y) { return sums_q6_k(x, y); }
};

// Q2_K, Q3_K and IQ4_XS in the AVX2 kernels' order. Q2_K and Q3_K: each 32-element chunk c
// (of 8) feeds lane l with its elements 4l … 4l + 3, times the scale of 16-group 2c (lanes 0–3) or
// 2c + 1 (lanes 4–7); Q2_K first folds its minimums into the lane (pair l of the 16 scale · bsum
// products). IQ4_XS: chunk ib is sub-block ib, with its own scale.
TS_HD inline int q2_k_lane_isum(const uint8_t* x, const BlockQ8_K& y, int l)
{
    int isum = 0;
    TS_UNROLL
    for (int c = 0; c < 8; ++c) {
        const int scale = x[2 * c + (l >= 4 ? 1 : 0)] & 0x0F;
        TS_UNROLL
        for (int e = 32 * c + 4 * l; e < 32 * c + 4 * l + 4; ++e)
            isum += scale * low2_of(x + 16, e) * y.qs[e];
    }
    return isum;
}
TS_HD inline int q3_k_lane_isum(const uint8_t* x, const BlockQ8_K& y, int l)
{
    const uint8_t* hmask = x;
    int isum = 0;
    TS_UNROLL
    for (int c = 0; c < 8; ++c) {
        const int scale = q3_k_scale(x + 96, 2 * c + (l >= 4 ? 1 : 0));
        TS_UNROLL
        for (int e = 32 * c + 4 * l; e < 32 * c + 4 * l + 4; ++e) {
            const bool high = (hmask[e % 32] >> (e / 32)) & 1;
            isum += scale * (low2_of(x + 32, e) - (high ? 0 : 4)) * y.qs[e];
        }
    }
    return isum;
}
TS_HD inline int iq4_xs_lane_isum(const uint8_t* x, const BlockQ8_K& y, int l)
{
    int isum = 0;
    TS_UNROLL
    for (int ib = 0; ib < 8; ++ib) {
        int s = 0;
        TS_UNROLL
        for (int j = 4 * l; j < 4 * l + 4; ++j)
            s += iq4_xs_q(x, ib, j) * y.qs[32 * ib + j];
        isum += iq4_xs_scale(x, ib) * s;
    }
    return isum;
}

template <> struct LaneBlocks<GgmlType::Q2_K> {
    using Act = BlockQ8_K;
    static constexpr int bytes = 84, elements = 256;
    TS_HD static void step(const uint8_t* x, const Act& y, int l, KLaneAcc& r)
    {
        const int mins = (x[2 * l] >> 4) * y.bsums[2 * l] + (x[2 * l + 1] >> 4) * y.bsums[2 * l + 1];
        r.acc = fma_rn(-y.d * half(x + 82), static_cast<float>(mins), r.acc);
        r.acc = fma_rn(y.d * half(x + 80), static_cast<float>(q2_k_lane_isum(x, y, l)), r.acc);
    }
};
template <> struct LaneBlocks<GgmlType::Q3_K> {
    using Act = BlockQ8_K;
    static constexpr int bytes = 110, elements = 256;
    TS_HD static void step(const uint8_t* x, const Act& y, int l, KLaneAcc& r)
    {
        r.acc = fma_rn(y.d * half(x + 108), static_cast<float>(q3_k_lane_isum(x, y, l)), r.acc);
    }
};
template <> struct LaneBlocks<GgmlType::IQ4_XS> {
    using Act = BlockQ8_K;
    static constexpr int bytes = 136, elements = 256;
    TS_HD static void step(const uint8_t* x, const Act& y, int l, KLaneAcc& r)
    {
        r.acc = fma_rn(half(x) * y.d, static_cast<float>(iq4_xs_lane_isum(x, y, l)), r.acc);
    }
};

// A row of one of the lane-split types whose lanes hold everything (no separate minimum).
template <GgmlType T> TS_HD inline float dot_lanes(const void* w, const void* a, int64_t n)
{
    KLaneAcc r[8];
    lanes_of_row<T>(w, a, n, r);
    return hsum_lanes(r);
}

// llama.cpp's tiled order (batches of 8+ rows): res = d·s1, res = fma(−dmin, s2, res),
// acc = fma(res, d8, acc).
template <GgmlType T> TS_HD inline float dot_k_tiled(const void* w, const void* a, int64_t n)
{
    using L = KLayout<T>;
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float acc = 0.0f;
    for (int64_t b = 0; b < n / 256; ++b, x += L::block_bytes) {
        const KBlockSums r = L::sums(x, y[b]);
        float res = half(x + L::d_offset) * static_cast<float>(r.s1);
        if constexpr (L::dmin_offset >= 0)
            res = fma_rn(-half(x + L::dmin_offset), static_cast<float>(r.s2), res);
        acc = fma_rn(res, y[b].d, acc);
    }
    return acc;
}

// The AVX2 kernels' order for Q4_K and Q5_K: byte j of each 32-byte chunk c feeds lane j/4 with its
// low nibble × y[64c + j] (scale of sub-block 2c) and its high nibble × y[64c + 32 + j] (sub-block
// 2c + 1). Q4_K keeps the minimums in four lanes of their own; Q5_K folds them into one float with a
// fused multiply-add per block.
template <bool Five> TS_HD inline int q45_k_lane_isum(const uint8_t* x, const BlockQ8_K& y, int l)
{
    const uint8_t* hbits = x + 16;
    const uint8_t* qs = x + (Five ? 48 : 16);
    int isum = 0;
    TS_UNROLL
    for (int c = 0; c < 4; ++c) {
        int sc_lo = 0, m_lo = 0, sc_hi = 0, m_hi = 0;
        scale_min_k4(x + 4, 2 * c, sc_lo, m_lo);
        scale_min_k4(x + 4, 2 * c + 1, sc_hi, m_hi);
        TS_UNROLL
        for (int j = 4 * l; j < 4 * l + 4; ++j) {
            int lo = qs[32 * c + j] & 0x0F, hi = qs[32 * c + j] >> 4;
            if constexpr (Five) {
                lo |= ((hbits[j] >> (2 * c)) & 1) << 4;
                hi |= ((hbits[j] >> (2 * c + 1)) & 1) << 4;
            }
            isum += sc_lo * lo * y.qs[64 * c + j] + sc_hi * hi * y.qs[64 * c + 32 + j];
        }
    }
    return isum;
}

// Q4_K: minimum lane l (< 4), sub-blocks 2l and 2l + 1. Q5_K: all eight (one float).
TS_HD inline int q4_k_lane_mins(const uint8_t* x, const BlockQ8_K& y, int l)
{
    int sc0 = 0, m0 = 0, sc1 = 0, m1 = 0;
    scale_min_k4(x + 4, 2 * l, sc0, m0);
    scale_min_k4(x + 4, 2 * l + 1, sc1, m1);
    return m0 * (y.bsums[4 * l] + y.bsums[4 * l + 1]) + m1 * (y.bsums[4 * l + 2] + y.bsums[4 * l + 3]);
}
TS_HD inline int q5_k_mins(const uint8_t* x, const BlockQ8_K& y)
{
    int s2 = 0;
    TS_UNROLL
    for (int sub = 0; sub < 8; ++sub) {
        int sc = 0, m = 0;
        scale_min_k4(x + 4, sub, sc, m);
        s2 += m * (y.bsums[2 * sub] + y.bsums[2 * sub + 1]);
    }
    return s2;
}

template <bool Five> struct Q45KLaneBlocks {
    using Act = BlockQ8_K;
    static constexpr int bytes = Five ? 176 : 144, elements = 256;
    TS_HD static void step(const uint8_t* x, const Act& y, int l, KLaneAcc& r)
    {
        const float d = y.d * half(x);
        const float neg_dmin = -y.d * half(x + 2);
        if constexpr (Five)
            r.mins = fma_rn(neg_dmin, static_cast<float>(q5_k_mins(x, y)), r.mins);
        else if (l < 4)
            r.mins = fma_rn(neg_dmin, static_cast<float>(q4_k_lane_mins(x, y, l)), r.mins);
        r.acc = fma_rn(d, static_cast<float>(q45_k_lane_isum<Five>(x, y, l)), r.acc);
    }
};
template <> struct LaneBlocks<GgmlType::Q4_K> : Q45KLaneBlocks<false> {
};
template <> struct LaneBlocks<GgmlType::Q5_K> : Q45KLaneBlocks<true> {
};

template <bool Five> TS_HD inline float dot_q45_k_lanes(const void* w, const void* a, int64_t n)
{
    KLaneAcc r[8];
    lanes_of_row<Five ? GgmlType::Q5_K : GgmlType::Q4_K>(w, a, n, r);
    if constexpr (Five)
        return hsum_lanes(r) + r[0].mins; // the one minimum float, the same in every lane
    return hsum_lanes(r) + ((r[0].mins + r[2].mins) + (r[1].mins + r[3].mins));
}

// Q6_K in the AVX2 kernel's order: for each half h and quarter q, byte j of the 32 decoded values
// feeds lane j/4, with the scale of 16-group 8h + 2q for j < 16 and of the next group above; the
// stored +32 comes off lane l as 32 · (scale · bsum) of groups 2l and 2l + 1.
TS_HD inline int q6_k_lane_isum(const uint8_t* x, const BlockQ8_K& y, int l)
{
    const uint8_t* ql = x;
    const uint8_t* qh = x + 128;
    const auto* scales = reinterpret_cast<const int8_t*>(x + 192);
    int isum = 0;
    TS_UNROLL
    for (int h = 0; h < 2; ++h)
        TS_UNROLL
    for (int q = 0; q < 4; ++q) {
        const int g = 8 * h + 2 * q;
        TS_UNROLL
        for (int j = 4 * l; j < 4 * l + 4; ++j) {
            const uint8_t lbyte = ql[64 * h + 32 * (q % 2) + j];
            const int low = q < 2 ? (lbyte & 0x0F) : (lbyte >> 4);
            const int value = low | (((qh[32 * h + j] >> (2 * q)) & 3) << 4);
            isum += scales[j < 16 ? g : g + 1] * value * y.qs[128 * h + 32 * q + j];
        }
    }
    return isum - 32 * (scales[2 * l] * y.bsums[2 * l] + scales[2 * l + 1] * y.bsums[2 * l + 1]);
}

template <> struct LaneBlocks<GgmlType::Q6_K> {
    using Act = BlockQ8_K;
    static constexpr int bytes = 210, elements = 256;
    TS_HD static void step(const uint8_t* x, const Act& y, int l, KLaneAcc& r)
    {
        r.acc = fma_rn(half(x + 208) * y.d, static_cast<float>(q6_k_lane_isum(x, y, l)), r.acc);
    }
};

// ---- float weights -------------------------------------------------------------------------------
// ggml's one-row order (ggml_vec_dot_f32/_f16/_bf16 on AVX2): four 8-lane accumulators over
// 32-element steps (lane l of accumulator j: element 8j + l of each step), reduced (a0 + a2) + (a1 + a3)
// and summed horizontally, then the tail one product at a time. F32 and F16 sum horizontally in the
// hadd order and F32 adds its tail in float (fused), F16 and BF16 in double; BF16 sums in the
// extract order. llama.cpp's batched order (its llamafile matmul, 2+ rows, n a multiple of 8): one
// 8-lane accumulator, summed in the extract order. Activations: F32 for F32 weights, F16 for F16,
// BF16 for BF16 (ggml converts them to the weight's own type).

TS_HD inline float f32_value(const void* p, int64_t i)
{
    return static_cast<const float*>(p)[i];
}
TS_HD inline float f16_value(const void* p, int64_t i)
{
    return cuda::half_to_f32(static_cast<const uint16_t*>(p)[i]);
}
TS_HD inline float bf16_value(const void* p, int64_t i)
{
    return bits_float(uint32_t(static_cast<const uint16_t*>(p)[i]) << 16);
}

template <float (*Value)(const void*, int64_t)>
TS_HD inline float float_lane(const void* w, const void* a, int64_t n, int l)
{
    float acc[4] = {};
    const int64_t np = n & ~int64_t(31);
    for (int64_t i = 0; i < np; i += 32)
        TS_UNROLL
    for (int j = 0; j < 4; ++j)
        acc[j] = fma_rn(Value(w, i + 8 * j + l), Value(a, i + 8 * j + l), acc[j]);
    acc[0] += acc[2];
    acc[1] += acc[3];
    return acc[0] + acc[1];
}
template <float (*Value)(const void*, int64_t)>
TS_HD inline float float_batched_lane(const void* w, const void* a, int64_t n, int l)
{
    float acc = 0.0f;
    for (int64_t i = 0; i < n; i += 8)
        acc = fma_rn(Value(w, i + l), Value(a, i + l), acc);
    return acc;
}

// The hadd order: ((a0+a4)+(a1+a5)) + ((a2+a6)+(a3+a7)).
TS_HD inline float hsum8_hadd(const float* a)
{
    const float t0 = a[0] + a[4], t1 = a[1] + a[5], t2 = a[2] + a[6], t3 = a[3] + a[7];
    return (t0 + t1) + (t2 + t3);
}

TS_HD inline float f32_tail(const void* w, const void* a, int64_t n, float lanes_sum)
{
    float sum = lanes_sum;
    for (int64_t i = n & ~int64_t(31); i < n; ++i)
        sum = fma_rn(f32_value(w, i), f32_value(a, i), sum);
    return sum;
}
template <float (*Value)(const void*, int64_t)>
TS_HD inline float double_tail(const void* w, const void* a, int64_t n, float lanes_sum)
{
    double sum = lanes_sum;
    for (int64_t i = n & ~int64_t(31); i < n; ++i)
        sum += static_cast<double>(Value(w, i) * Value(a, i));
    return static_cast<float>(sum);
}
TS_HD inline float f16_tail(const void* w, const void* a, int64_t n, float lanes_sum)
{
    return double_tail<f16_value>(w, a, n, lanes_sum);
}

TS_HD inline float f16_lane(const void* w, const void* a, int64_t n, int l)
{
    return float_lane<f16_value>(w, a, n, l);
}
TS_HD inline float f16_batched_lane(const void* w, const void* a, int64_t n, int l)
{
    return float_batched_lane<f16_value>(w, a, n, l);
}

TS_HD inline float dot_f32(const void* w, const void* a, int64_t n)
{
    float acc[8];
    TS_UNROLL
    for (int l = 0; l < 8; ++l)
        acc[l] = float_lane<f32_value>(w, a, n, l);
    return f32_tail(w, a, n, hsum8_hadd(acc));
}

TS_HD inline float dot_f16(const void* w, const void* a, int64_t n)
{
    float acc[8];
    TS_UNROLL
    for (int l = 0; l < 8; ++l)
        acc[l] = f16_lane(w, a, n, l);
    return f16_tail(w, a, n, hsum8_hadd(acc));
}

TS_HD inline float dot_bf16(const void* w, const void* a, int64_t n)
{
    float acc[8];
    TS_UNROLL
    for (int l = 0; l < 8; ++l)
        acc[l] = float_lane<bf16_value>(w, a, n, l);
    return double_tail<bf16_value>(w, a, n, hsum8(acc));
}

// The batched order; only valid when n is a multiple of 8.
template <float (*Value)(const void*, int64_t)>
TS_HD inline float dot_float_batched(const void* w, const void* a, int64_t n)
{
    float acc[8];
    TS_UNROLL
    for (int l = 0; l < 8; ++l)
        acc[l] = float_batched_lane<Value>(w, a, n, l);
    return hsum8(acc);
}
TS_HD inline float dot_f32_batched(const void* w, const void* a, int64_t n)
{
    return dot_float_batched<f32_value>(w, a, n);
}
TS_HD inline float dot_f16_batched(const void* w, const void* a, int64_t n)
{
    return dot_float_batched<f16_value>(w, a, n);
}
TS_HD inline float dot_bf16_batched(const void* w, const void* a, int64_t n)
{
    return dot_float_batched<bf16_value>(w, a, n);
}

// ---- llama.cpp's repacked order ---------------------------------------------------------------------
// What its CPU_REPACK buffer computes for the Q4_0, IQ4_NL and Q4_K matrices it interleaves (x86 with
// AVX2, rows a multiple of 8, its default): for every output, one float accumulator over the
// blocks, each block's whole integer sum fused in with d_w · d_a; Q4_K's minimums in a second
// accumulator, subtracted at the end. Its gemm (the first n − n % 4 rows of a batch of 4 or more)
// fuses Q4_K per 64-element half-block pair instead (dot_repacked_q4_k_gemm); its gemv (the other
// rows) per block.

template <GgmlType T> TS_HD inline float dot_repacked_b32(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    float acc = 0.0f;
    for (int64_t b = 0; b < n / 32; ++b, x += 18) {
        int isum = 0;
        for (int e = 0; e < 32; ++e)
            isum += legacy_q<T>(x, e) * y[b].qs[e];
        acc = fma_rn(static_cast<float>(isum), half(x) * cuda::half_to_f32(y[b].d), acc);
    }
    return acc;
}

TS_HD inline float dot_repacked_q4_k(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float acc = 0.0f, acc_min = 0.0f;
    for (int64_t b = 0; b < n / 256; ++b, x += 144) {
        const KBlockSums r = sums_q45_k<false>(x, y[b]);
        acc = fma_rn(static_cast<float>(r.s1), half(x) * y[b].d, acc);
        acc_min = fma_rn(static_cast<float>(r.s2), half(x + 2) * y[b].d, acc_min);
    }
    return acc - acc_min;
}

TS_HD inline float dot_repacked_q4_k_gemm(const void* w, const void* a, int64_t n)
{
    const auto* x = static_cast<const uint8_t*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float acc = 0.0f, acc_min = 0.0f;
    for (int64_t b = 0; b < n / 256; ++b, x += 144) {
        const float d = half(x) * y[b].d, dmin = half(x + 2) * y[b].d;
        for (int pair = 0; pair < 4; ++pair) {
            int s1 = 0, s2 = 0;
            for (int sub = 2 * pair; sub < 2 * pair + 2; ++sub) {
                int sc = 0, m = 0;
                scale_min_k4(x + 4, sub, sc, m);
                int s = 0;
                for (int l = 0; l < 32; ++l) {
                    const uint8_t byte = x[16 + 32 * (sub / 2) + l];
                    s += ((sub % 2 == 0) ? (byte & 0x0F) : (byte >> 4)) * y[b].qs[sub * 32 + l];
                }
                s1 += sc * s;
                s2 += m * (y[b].bsums[2 * sub] + y[b].bsums[2 * sub + 1]);
            }
            acc = fma_rn(static_cast<float>(s1), d, acc);
            acc_min = fma_rn(static_cast<float>(s2), dmin, acc_min);
        }
    }
    return acc - acc_min;
}

// llama.cpp's k-quant tiled matmul takes over from batches of this many rows.
constexpr int64_t kTiledMinBatch = 8;

// The dot product the CPU backend's matmul computes for a row of `type` in a batch of `order` rows
// (vec_dot_for_batch's choice; its SIMD kernels give these bits). NaN for a type without one.
TS_HD inline float dot_for_batch(GgmlType type, const void* w, const void* a, int64_t n, int64_t order)
{
    const bool tiled = order >= kTiledMinBatch;
    const bool batched = order >= 2 && n % 8 == 0; // llama.cpp's llamafile matmul (float weights)
    switch (type) {
    case GgmlType::F32:
        return batched ? dot_f32_batched(w, a, n) : dot_f32(w, a, n);
    case GgmlType::F16:
        return batched ? dot_f16_batched(w, a, n) : dot_f16(w, a, n);
    case GgmlType::BF16:
        return batched ? dot_bf16_batched(w, a, n) : dot_bf16(w, a, n);
    case GgmlType::Q4_0:
        return dot_lanes<GgmlType::Q4_0>(w, a, n);
    case GgmlType::Q4_1:
        return dot_offset<GgmlType::Q4_1>(w, a, n);
    case GgmlType::Q5_0:
        return dot_lanes<GgmlType::Q5_0>(w, a, n);
    case GgmlType::Q5_1:
        return dot_offset<GgmlType::Q5_1>(w, a, n);
    case GgmlType::Q8_0:
        return dot_lanes<GgmlType::Q8_0>(w, a, n);
    case GgmlType::IQ4_NL:
        return order >= 2 ? dot_lanes<GgmlType::IQ4_NL>(w, a, n) : dot_iq4_nl_pairs(w, a, n);
    case GgmlType::Q2_K:
        return tiled ? dot_k_tiled<GgmlType::Q2_K>(w, a, n) : dot_lanes<GgmlType::Q2_K>(w, a, n);
    case GgmlType::Q3_K:
        return tiled ? dot_k_tiled<GgmlType::Q3_K>(w, a, n) : dot_lanes<GgmlType::Q3_K>(w, a, n);
    case GgmlType::Q4_K:
        return tiled ? dot_k_tiled<GgmlType::Q4_K>(w, a, n) : dot_q45_k_lanes<false>(w, a, n);
    case GgmlType::Q5_K:
        return tiled ? dot_k_tiled<GgmlType::Q5_K>(w, a, n) : dot_q45_k_lanes<true>(w, a, n);
    case GgmlType::Q6_K:
        return tiled ? dot_k_tiled<GgmlType::Q6_K>(w, a, n) : dot_lanes<GgmlType::Q6_K>(w, a, n);
    case GgmlType::IQ4_XS:
        return tiled ? dot_k_tiled<GgmlType::IQ4_XS>(w, a, n) : dot_lanes<GgmlType::IQ4_XS>(w, a, n);
    default:
        return bits_float(0x7FC00000u);
    }
}

} // namespace engine::portable
