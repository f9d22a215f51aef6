// SPDX-License-Identifier: GPL-3.0-or-later
// kernel_matmul: y[t][out_row0 + r] = W.row(r) · a[t] for one row range of a weight matrix, with the
// CPU backend's dot product for the weight type (engine/quant/vec_dot.cpp, simd/vec_dot_avx2.cpp)
// repeated step for step: the same exact integer sums per block, gathered into the same eight SIMD
// lanes, scaled and accumulated with the same fused multiply-adds in the same order, and summed
// across lanes in the same tree. The activations a come from quantize_act.comp in the CPU's format
// for the type (or raw f32). `order` selects the CPU's batch orders: k-quants switch to llama.cpp's
// tiled order for batches of 8+ rows, float weights to its batched order from 2 rows. One invocation per
// row and NT tokens: NT CPU dot products sharing the weight decoding, each with its own accumulators.
// LANE_SPLIT (the f32 path): eight invocations per row, one per SIMD lane, the lanes gathered into
// the row's first invocation for the CPU's horizontal sum: the same arithmetic, in f32 with each
// fused multiply-add rounded once (cpu_math.glsl), so the results are the CPU's bits wherever the
// double sums' two-float stand-ins round alike.
#version 450
#ifdef SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint THREADS = 64;
// Tokens per invocation: each weight word is decoded once for all of them (4 for batches, 1 for a
// single token, whose registers then stay few).
layout(constant_id = 1) const uint NT = 4u;

layout(std430, binding = 0) readonly buffer W { uint w_words[]; };  // rows of this range, raw bytes
layout(std430, binding = 1) readonly buffer A { uint act[]; };      // [n_tokens][a_row_words]
layout(std430, binding = 2) writeonly buffer Y { float y[]; };      // [n_tokens][out_stride]

layout(push_constant) uniform Params {
    uint cols;
    uint rows;        // rows in this range
    uint n_tokens;
    uint row_bytes;
    uint out_row0;    // first output column this range writes
    uint out_stride;  // floats per output token row
    uint a_offset;    // words
    uint a_row_words; // words per token of the activations
    uint y_offset;    // floats
    uint groups_x;
    uint order;       // 0: one-row order, 1: the batch order
} p;

#include "bytes.glsl"
#include "cpu_math.glsl"

#ifdef LANE_SPLIT
// Eight invocations share a row, invocation g_lane keeping the CPU's SIMD lane g_lane (the f32
// path: the same arithmetic as one invocation per row, spread so that neighbouring invocations read
// neighbouring bytes of a block, eight rows per workgroup). Orders with no lanes (scalar sums) run
// whole in the row's first invocation (g_l0 … g_l1 = 0 … 8 there, empty in the others). The lanes
// meet in the row's first invocation for the CPU's horizontal sum: by subgroup shuffles where the
// device has them (SUBGROUP: a row's eight invocations are neighbours in one subgroup), else
// through shared memory.
uint g_l0 = 0u, g_l1 = 8u, g_lane = 0u, g_slot = 0u;
#define LANES(l) for (uint l = g_l0; l < g_l1; ++l)
#ifdef SUBGROUP
// v[k] of lane l ← v[g_lane] of the row's invocation l (value k is the caller's; no barrier)
void gather_lanes(inout float v[8], uint k)
{
    const float mine = v[g_lane];
    const uint base = gl_SubgroupInvocationID & ~7u;
    for (uint l = 0u; l < 8u; ++l)
        v[l] = subgroupShuffle(mine, base + l);
}
#else
shared float g_lanes[8][8][8]; // [row slot][value][lane]
// v[g_lane] of every invocation of the row into the first one's v (value k of up to eight)
void gather_lanes(inout float v[8], uint k)
{
    g_lanes[g_slot][k][g_lane] = v[g_lane];
    barrier();
    if (g_lane == 0u)
        for (uint l = 0u; l < 8u; ++l)
            v[l] = g_lanes[g_slot][k][l];
    barrier();
}
#endif
#else
const uint g_l0 = 0u, g_l1 = 8u;
#define LANES(l) for (uint l = 0u; l < 8u; ++l)
void gather_lanes(inout float v[8], uint k) {}
#endif

int a8(uint w, uint i) { return bitfieldExtract(int(act[w + (i >> 2)]), int((i & 3u) * 8u), 8); }
float af(uint w) { return uintBitsToFloat(act[w]); }

#if defined(TYPE_Q4_0) || defined(TYPE_Q5_0) || defined(TYPE_Q8_0) || defined(TYPE_Q4_1) || defined(TYPE_Q5_1)
// ---- 32-element blocks × Q8_0 / Q8_1 (10 words per block: d, s, qs) ------------------------------
#if defined(TYPE_Q4_0)
#define BB 18u
#define QS 2u
#elif defined(TYPE_Q5_0)
#define BB 22u
#define QS 6u
#elif defined(TYPE_Q8_0)
#define BB 34u
#define QS 2u
#elif defined(TYPE_Q4_1)
#define BB 20u
#define QS 4u
#else
#define BB 24u
#define QS 8u
#endif

// Elements 4l … 4l+3 of the block at byte blk as the four bytes of one word (before offsets):
// whole-word loads, since this loop is most of the output head's work.
uint w4(uint blk, uint qh, uint l)
{
#if defined(TYPE_Q8_0)
    return ld32(blk + 2u + 4u * l);
#else
    // elements 0–15: low nibbles of bytes 0–15; 16–31: high nibbles
    const uint bytes = ld32(blk + QS + 4u * (l & 3u));
    uint v = (l < 4u ? bytes : bytes >> 4) & 0x0F0F0F0Fu;
#if defined(TYPE_Q5_0) || defined(TYPE_Q5_1)
    const uint bits = (qh >> (4u * l)) & 15u; // the fifth bit of the four elements
    v |= ((bits & 1u) << 4) | ((bits & 2u) << 11) | ((bits & 4u) << 18) | ((bits & 8u) << 25);
#endif
    return v;
#endif
}

// Σ over the four elements of a lane of weight word w · activation word a, offsets applied as the
// CPU applies them.
int lane_dot(uint w, int a)
{
    int s = 0;
    for (uint j = 0u; j < 4u; ++j) {
#if defined(TYPE_Q8_0)
        const int q = bitfieldExtract(int(w), int(8u * j), 8);
#elif defined(TYPE_Q4_0)
        const int q = int(bitfieldExtract(w, int(8u * j), 8)) - 8;
#elif defined(TYPE_Q5_0)
        const int q = int(bitfieldExtract(w, int(8u * j), 8)) - 16;
#else
        const int q = int(bitfieldExtract(w, int(8u * j), 8));
#endif
        s += q * bitfieldExtract(a, int(8u * j), 8);
    }
    return s;
}

// res[t] = row · activations of token t (at ab0 + t·a_row_words) for t < nt, each block decoded once
// for all nt tokens; every token keeps its own accumulators, so each result is the CPU's.
void rows_dot(uint row, uint ab0, uint nt, out float res[NT])
{
    const uint nb = p.cols / 32u;
    // AVX2: lane l holds the int sum of elements 4l…4l+3; acc_l = fma(d·d8, lane, acc_l)
    precise float acc[NT][8];
    for (uint t = 0u; t < NT; ++t)
        for (uint l = 0u; l < 8u; ++l)
            acc[t][l] = 0.0;
#if defined(TYPE_Q4_1) || defined(TYPE_Q5_1)
    // the minimum's m · s8 in one float, a fused multiply-add per block, added after the lanes
    precise float mins[NT];
    for (uint t = 0u; t < NT; ++t)
        mins[t] = 0.0;
#endif
    for (uint b = 0u; b < nb; ++b) {
        const uint blk = row + b * BB;
#if defined(TYPE_Q5_1)
        const uint qh = ld32(blk + 4u);
#elif defined(TYPE_Q5_0)
        const uint qh = ld32(blk + 2u);
#else
        const uint qh = 0u;
#endif
        uint w[8];
        LANES(l)
            w[l] = w4(blk, qh, l);
        const float dw = ld_half(blk);
        for (uint t = 0u; t < NT; ++t) {
            if (t >= nt)
                break;
            const uint qb = ab0 + t * p.a_row_words + 10u * b;
            precise float d = dw * af(qb);
            LANES(l)
                acc[t][l] = fma_rn(d, float(lane_dot(w[l], int(act[qb + 2u + l]))), acc[t][l]);
#if defined(TYPE_Q4_1) || defined(TYPE_Q5_1)
            mins[t] = fma_rn(ld_half(blk + 2u), af(qb + 1u), mins[t]);
#endif
        }
    }
    for (uint t = 0u; t < NT; ++t) {
        float a[8];
        for (uint l = 0u; l < 8u; ++l)
            a[l] = acc[t][l];
        gather_lanes(a, 0u);
        precise float total = hsum8_halves(a);
#if defined(TYPE_Q4_1) || defined(TYPE_Q5_1)
        total = total + mins[t];
#endif
        res[t] = total;
    }
}

#elif defined(TYPE_Q2_K) || defined(TYPE_Q3_K) || defined(TYPE_Q4_K) || defined(TYPE_Q5_K) || defined(TYPE_Q6_K)
// ---- 256-element super-blocks × Q8_K (81 words per block: d, bsums[16], qs) ----------------------
#if defined(TYPE_Q2_K)
#define SB 84u
#define D_OFF 80u
#define DMIN_OFF 82u
#elif defined(TYPE_Q3_K)
#define SB 110u
#define D_OFF 108u
#elif defined(TYPE_Q4_K)
#define SB 144u
#define D_OFF 0u
#define DMIN_OFF 2u
#elif defined(TYPE_Q5_K)
#define SB 176u
#define D_OFF 0u
#define DMIN_OFF 2u
#else
#define SB 210u
#define D_OFF 208u
#endif

int bsum(uint qb, uint g) { return int(act[qb + 1u + g]); }
int q8(uint qb, uint e) { return a8(qb + 17u, e); }

#if defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
void scale_min_k4(uint b, out int sc[8], out int m[8])
{
    for (uint j = 0u; j < 8u; ++j) {
        if (j < 4u) {
            sc[j] = int(ld8(b + j) & 63u);
            m[j] = int(ld8(b + j + 4u) & 63u);
        } else {
            sc[j] = int((ld8(b + j + 4u) & 15u) | ((ld8(b + j - 4u) >> 6) << 4));
            m[j] = int((ld8(b + j + 4u) >> 4) | ((ld8(b + j) >> 6) << 4));
        }
    }
}
#endif

// The block's integer sums in the AVX2 kernels' eight lanes (their total is the scalar s1), and s2
// (Σ min · bsum) for the formats with mins, for nt tokens whose Q8_K blocks start at
// qb0 + t·a_row_words: each weight word is decoded once for all of them.
void block_lanes(uint blk, uint qb0, uint nt, out int lane[NT][8], out int s2[NT])
{
    for (uint t = 0u; t < NT; ++t) {
        s2[t] = 0;
        for (uint l = 0u; l < 8u; ++l)
            lane[t][l] = 0;
    }
    if (g_l0 >= g_l1)
        return; // another invocation of the row sums this block
#if defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
    int sc[8], m[8];
    scale_min_k4(blk + 4u, sc, m);
#if defined(TYPE_Q5_K)
    const uint qs = blk + 48u;
#else
    const uint qs = blk + 16u;
#endif
    for (uint c = 0u; c < 4u; ++c)
        LANES(l) {
            // bytes 4l…4l+3 of chunk c: low nibbles are elements 64c + 4l…, high ones 64c + 32 + 4l…
            const uint bytes = ld32(qs + 32u * c + 4u * l);
            uint lo = bytes & 0x0F0F0F0Fu, hi = (bytes >> 4) & 0x0F0F0F0Fu;
#if defined(TYPE_Q5_K)
            const uint hb = ld32(blk + 16u + 4u * l);
            lo |= ((hb >> (2u * c)) & 0x01010101u) << 4;
            hi |= ((hb >> (2u * c + 1u)) & 0x01010101u) << 4;
#endif
            for (uint t = 0u; t < NT; ++t) {
                if (t >= nt)
                    break;
                const uint qb = qb0 + t * p.a_row_words;
                const int a_lo = int(act[qb + 17u + 16u * c + l]), a_hi = int(act[qb + 17u + 16u * c + 8u + l]);
                int lo_sum = 0, hi_sum = 0;
                for (uint j = 0u; j < 4u; ++j) {
                    lo_sum += int(bitfieldExtract(lo, int(8u * j), 8)) * bitfieldExtract(a_lo, int(8u * j), 8);
                    hi_sum += int(bitfieldExtract(hi, int(8u * j), 8)) * bitfieldExtract(a_hi, int(8u * j), 8);
                }
                lane[t][l] += sc[2u * c] * lo_sum + sc[2u * c + 1u] * hi_sum;
            }
        }
    for (uint t = 0u; t < NT; ++t) {
        if (t >= nt)
            break;
        const uint qb = qb0 + t * p.a_row_words;
        for (uint sub = 0u; sub < 8u; ++sub)
            s2[t] += m[sub] * (bsum(qb, 2u * sub) + bsum(qb, 2u * sub + 1u));
    }
#elif defined(TYPE_Q6_K)
    // stored values are q + 32: quarters of 32 bytes, lanes 0–3 scaled by scales[g], 4–7 by scales[g+1]
    for (uint h = 0u; h < 2u; ++h)
        for (uint q = 0u; q < 4u; ++q) {
            const uint g = 8u * h + 2u * q;
            const int sc_lo = ld8s(blk + 192u + g), sc_hi = ld8s(blk + 192u + g + 1u);
            LANES(l) {
                const uint lw = ld32(blk + 64u * h + 32u * (q & 1u) + 4u * l);
                const uint low = (q < 2u ? lw : lw >> 4) & 0x0F0F0F0Fu;
                const uint high = (ld32(blk + 128u + 32u * h + 4u * l) >> (2u * q)) & 0x03030303u;
                const uint v = low | (high << 4);
                for (uint t = 0u; t < NT; ++t) {
                    if (t >= nt)
                        break;
                    const int a = int(act[qb0 + t * p.a_row_words + 17u + 32u * h + 8u * q + l]);
                    int s = 0;
                    for (uint j = 0u; j < 4u; ++j)
                        s += int(bitfieldExtract(v, int(8u * j), 8)) * bitfieldExtract(a, int(8u * j), 8);
                    lane[t][l] += (l < 4u ? sc_lo : sc_hi) * s;
                }
            }
        }
    for (uint t = 0u; t < NT; ++t) {
        if (t >= nt)
            break;
        const uint qb = qb0 + t * p.a_row_words;
        LANES(l)
            lane[t][l] -= 32 * (ld8s(blk + 192u + 2u * l) * bsum(qb, 2u * l) + ld8s(blk + 192u + 2u * l + 1u) * bsum(qb, 2u * l + 1u));
    }
#elif defined(TYPE_Q2_K) || defined(TYPE_Q3_K)
    // 32-element chunk c (of 8) feeds lane l with its elements 4l…4l+3 (byte 4l + j of the chunk's
    // 2-bit field c % 4 in quant bytes 32·(c/4) …), times the scale of 16-group 2c (lanes 0–3) or
    // 2c + 1 (lanes 4–7)
    for (uint c = 0u; c < 8u; ++c)
        LANES(l) {
            const uint g = 2u * c + (l < 4u ? 0u : 1u);
#if defined(TYPE_Q2_K)
            const int scale = int(ld8(blk + g) & 15u);
            const uint v = (ld32(blk + 16u + 32u * (c / 4u) + 4u * l) >> (2u * (c % 4u))) & 0x03030303u;
            const uint hbits = 0u;
            const int offset = 0;
#else
            const uint low4 = g < 8u ? (ld8(blk + 96u + g) & 15u) : (ld8(blk + 96u + g - 8u) >> 4);
            const uint high2 = (ld8(blk + 104u + (g & 3u)) >> (2u * (g / 4u))) & 3u;
            const int scale = int(low4 | (high2 << 4)) - 32;
            const uint v = (ld32(blk + 32u + 32u * (c / 4u) + 4u * l) >> (2u * (c % 4u))) & 0x03030303u;
            const uint hbits = (ld32(blk + 4u * l) >> c) & 0x01010101u; // hmask bit c of byte 4l + j
            const int offset = -4; // q − 4 where the high bit is clear
#endif
            for (uint t = 0u; t < NT; ++t) {
                if (t >= nt)
                    break;
                const int a = int(act[qb0 + t * p.a_row_words + 17u + 8u * c + l]);
                int sum = 0;
                for (uint j = 0u; j < 4u; ++j) {
                    const int q = int(bitfieldExtract(v, int(8u * j), 8)) + offset + 4 * int(bitfieldExtract(hbits, int(8u * j), 8));
                    sum += q * bitfieldExtract(a, int(8u * j), 8);
                }
                lane[t][l] += scale * sum;
            }
        }
#if defined(TYPE_Q2_K)
    for (uint t = 0u; t < NT; ++t) {
        if (t >= nt)
            break;
        for (uint g = 0u; g < 16u; ++g)
            s2[t] += bsum(qb0 + t * p.a_row_words, g) * int(ld8(blk + g) >> 4);
    }
#endif
#endif
}

void rows_dot(uint row, uint ab0, uint nt, out float res[NT])
{
    const uint nb = p.cols / 256u;
    int lane[NT][8], s2[NT];
    if (p.order != 0u) {
        // llama.cpp's tiled order: res = d·s1, res = fma(−dmin, s2, res), acc = fma(res, d8, acc)
        precise float acc[NT];
        for (uint t = 0u; t < NT; ++t)
            acc[t] = 0.0;
        for (uint b = 0u; b < nb; ++b) {
            const uint blk = row + b * SB;
            block_lanes(blk, ab0 + 81u * b, nt, lane, s2);
            for (uint t = 0u; t < NT; ++t) {
                if (t >= nt)
                    break;
                int s1 = 0;
                for (uint l = 0u; l < 8u; ++l)
                    s1 += lane[t][l];
                precise float r = ld_half(blk + D_OFF) * float(s1);
#ifdef DMIN_OFF
                r = fma_rn(-ld_half(blk + DMIN_OFF), float(s2[t]), r);
#endif
                acc[t] = fma_rn(r, af(ab0 + t * p.a_row_words + 81u * b), acc[t]);
            }
        }
        for (uint t = 0u; t < NT; ++t)
            res[t] = acc[t];
        return;
    }
    precise float acc[NT][8];
    for (uint t = 0u; t < NT; ++t)
        for (uint l = 0u; l < 8u; ++l)
            acc[t][l] = 0.0;
#if defined(TYPE_Q4_K)
    precise float acc_m[NT][4];
    for (uint t = 0u; t < NT; ++t)
        for (uint l = 0u; l < 4u; ++l)
            acc_m[t][l] = 0.0;
    int sc[8], m[8];
#elif defined(TYPE_Q5_K)
    precise float summs[NT];
    for (uint t = 0u; t < NT; ++t)
        summs[t] = 0.0;
#endif
    for (uint b = 0u; b < nb; ++b) {
        const uint blk = row + b * SB;
        block_lanes(blk, ab0 + 81u * b, nt, lane, s2);
#if defined(TYPE_Q4_K)
        scale_min_k4(blk + 4u, sc, m);
#endif
        for (uint t = 0u; t < NT; ++t) {
            if (t >= nt)
                break;
            const uint qb = ab0 + t * p.a_row_words + 81u * b;
            precise float d = ld_half(blk + D_OFF) * af(qb);
#if defined(TYPE_Q4_K)
            // mins in four lanes: lane l = m[2l]·(bsums 4l, 4l+1) + m[2l+1]·(bsums 4l+2, 4l+3)
            precise float neg_dmin = -af(qb) * ld_half(blk + DMIN_OFF);
            for (uint l = 0u; l < 4u; ++l) {
                const int mins = m[2u * l] * (bsum(qb, 4u * l) + bsum(qb, 4u * l + 1u)) +
                                 m[2u * l + 1u] * (bsum(qb, 4u * l + 2u) + bsum(qb, 4u * l + 3u));
                acc_m[t][l] = fma_rn(neg_dmin, float(mins), acc_m[t][l]);
            }
#elif defined(TYPE_Q5_K)
            precise float neg_dmin = -af(qb) * ld_half(blk + DMIN_OFF);
            summs[t] = fma_rn(neg_dmin, float(s2[t]), summs[t]);
#elif defined(TYPE_Q2_K)
            // minimums first, in the lanes: lane l = min[2l]·bsum[2l] + min[2l+1]·bsum[2l+1]
            precise float neg_dmin = -af(qb) * ld_half(blk + DMIN_OFF);
            LANES(l) {
                const int mins = int(ld8(blk + 2u * l) >> 4) * bsum(qb, 2u * l) +
                                 int(ld8(blk + 2u * l + 1u) >> 4) * bsum(qb, 2u * l + 1u);
                acc[t][l] = fma_rn(neg_dmin, float(mins), acc[t][l]);
            }
#endif
            LANES(l)
                acc[t][l] = fma_rn(d, float(lane[t][l]), acc[t][l]);
        }
    }
    for (uint t = 0u; t < NT; ++t) {
        float a[8];
        for (uint l = 0u; l < 8u; ++l)
            a[l] = acc[t][l];
        gather_lanes(a, 0u);
        precise float total = hsum8_halves(a);
#if defined(TYPE_Q4_K)
        precise float mins_total = (acc_m[t][0] + acc_m[t][2]) + (acc_m[t][1] + acc_m[t][3]);
        total = total + mins_total;
#elif defined(TYPE_Q5_K)
        total = total + summs[t];
#endif
        res[t] = total;
    }
}

#elif defined(TYPE_F16) || defined(TYPE_F32) || defined(TYPE_BF16)
// ---- float weights × activations rounded to the weight's type (one f32 word per element) --------
// ggml's one-row order: four 8-lane accumulators over 32-element steps, reduced pairwise, summed
// horizontally (F32, F16: the hadd order; BF16: the extract order), then the tail (F32: fused, in
// float; F16, BF16: in double). The batched order (2+ rows, n a multiple of 8): one 8-lane accumulator.
#if defined(TYPE_F16)
float wv(uint row, uint e) { return ld_half(row + 2u * e); }
#elif defined(TYPE_F32)
float wv(uint row, uint e) { return uintBitsToFloat(ld32(row + 4u * e)); }
#else
float wv(uint row, uint e) { return uintBitsToFloat(ld16(row + 2u * e) << 16); }
#endif
float row_dot(uint row, uint ab)
{
    const uint n = p.cols;
    if (p.order != 0u && n % 8u == 0u) { // batched: one 8-lane accumulator
        precise float acc[8];
        for (uint l = 0u; l < 8u; ++l)
            acc[l] = 0.0;
        for (uint i = 0u; i < n; i += 8u)
            LANES(l)
                acc[l] = fma_rn(wv(row, i + l), af(ab + i + l), acc[l]);
        gather_lanes(acc, 0u);
        return hsum8_halves(acc);
    }
    precise float acc[4][8];
    for (uint j = 0u; j < 4u; ++j)
        for (uint l = 0u; l < 8u; ++l)
            acc[j][l] = 0.0;
    const uint np = n & ~31u;
    for (uint i = 0u; i < np; i += 32u)
        for (uint j = 0u; j < 4u; ++j)
            LANES(l) {
                const uint e = i + 8u * j + l;
                acc[j][l] = fma_rn(wv(row, e), af(ab + e), acc[j][l]);
            }
    for (uint j = 0u; j < 4u; ++j)
        gather_lanes(acc[j], j);
#if defined(TYPE_F32)
    precise float sum = hsum_4x8(acc);
    for (uint e = np; e < n; ++e)
        sum = fma_rn(wv(row, e), af(ab + e), sum);
    return sum;
#else
#if defined(TYPE_F16)
    const float lanes_sum = hsum_4x8(acc);
#else
    float r[8];
    for (uint l = 0u; l < 8u; ++l) {
        precise float a02 = acc[0][l] + acc[2][l];
        precise float a13 = acc[1][l] + acc[3][l];
        precise float v = a02 + a13;
        r[l] = v;
    }
    const float lanes_sum = hsum8_halves(r);
#endif
    WIDE sum = wide_add(WIDE_ZERO, lanes_sum);
    for (uint e = np; e < n; ++e) {
        precise float prod = wv(row, e) * af(ab + e);
        sum = wide_add(sum, prod);
    }
    return wide_float(sum);
#endif
}

#else
#error "define one TYPE_<name>"
#endif

#if defined(TYPE_F16) || defined(TYPE_F32) || defined(TYPE_BF16)
void rows_dot(uint row, uint ab0, uint nt, out float res[NT])
{
    for (uint t = 0u; t < NT; ++t)
        res[t] = t < nt ? row_dot(row, ab0 + t * p.a_row_words) : 0.0;
}
#endif

#ifdef LANE_SPLIT
void main()
{
#ifdef SUBGROUP
    // rows by subgroup position (the host takes this build only where the subgroup size is 8–64 and
    // divides the 64-invocation workgroup, so a row's eight invocations share a subgroup)
    const uint index = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
#else
    const uint index = gl_LocalInvocationID.x;
#endif
    g_lane = index & 7u;
    g_slot = index >> 3;
    const uint r0 = (gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x) * (THREADS / 8u);
    const uint t0 = gl_WorkGroupID.z * NT;
    if (r0 >= p.rows || t0 >= p.n_tokens)
        return; // whole workgroups: every invocation below reaches the barriers
    const uint r = min(r0 + g_slot, p.rows - 1u);
    const uint nt = min(NT, p.n_tokens - t0);
#if defined(SB)
    const bool scalar_order = p.order != 0u; // the tiled order sums the lanes per block
#else
    const bool scalar_order = false;
#endif
    g_l0 = scalar_order ? 0u : g_lane;
    g_l1 = scalar_order ? (g_lane == 0u ? 8u : 0u) : g_lane + 1u;
    float res[NT];
    rows_dot(r * p.row_bytes, p.a_offset + t0 * p.a_row_words, nt, res);
    if (g_lane == 0u && r0 + g_slot < p.rows)
        for (uint t = 0u; t < nt; ++t)
            y[p.y_offset + (t0 + t) * p.out_stride + p.out_row0 + r0 + g_slot] = res[t];
}
#else
void main()
{
    const uint r = (gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x) * THREADS + gl_LocalInvocationID.x;
    const uint t0 = gl_WorkGroupID.z * NT;
    if (r >= p.rows || t0 >= p.n_tokens)
        return;
    const uint nt = min(NT, p.n_tokens - t0);
    float res[NT];
    rows_dot(r * p.row_bytes, p.a_offset + t0 * p.a_row_words, nt, res);
    for (uint t = 0u; t < nt; ++t)
        y[p.y_offset + (t0 + t) * p.out_stride + p.out_row0 + r] = res[t];
}
#endif
