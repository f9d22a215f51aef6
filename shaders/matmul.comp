// SPDX-License-Identifier: GPL-3.0-or-later
// kernel_matmul: y[t][out_row0 + r] = W.row(r) · a[t] for one row range of a weight matrix, with the
// CPU backend's dot product for the weight type (engine/quant/vec_dot.cpp, simd/vec_dot_avx2.cpp)
// repeated step for step: the same exact integer sums per block, gathered into the same eight SIMD
// lanes, scaled and accumulated with the same fused multiply-adds in the same order, and summed
// across lanes in the same tree. The activations a come from quantize_act.comp in the CPU's format
// for the type (or raw f32). `order` selects the CPU's batch orders: k-quants switch to llama.cpp's
// tiled order for batches of 8+ rows, F16 to its batched order from 2 rows. One invocation per
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
#if defined(TYPE_Q4_1) || defined(TYPE_Q5_1)
    // scalar: sum += (d·d8)·isum + m·s8
    precise float sum[NT];
    for (uint t = 0u; t < NT; ++t)
        sum[t] = 0.0;
#else
    // AVX2: lane l holds the int sum of elements 4l…4l+3; acc_l = fma(d·d8, lane, acc_l)
    precise float acc[NT][8];
    for (uint t = 0u; t < NT; ++t)
        for (uint l = 0u; l < 8u; ++l)
            acc[t][l] = 0.0;
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
#if defined(TYPE_Q4_1) || defined(TYPE_Q5_1)
            int isum = 0;
            LANES(l)
                isum += lane_dot(w[l], int(act[qb + 2u + l]));
            precise float t1 = (dw * af(qb)) * float(isum);
            precise float t2 = ld_half(blk + 2u) * af(qb + 1u);
            sum[t] = sum[t] + (t1 + t2);
#else
            precise float d = dw * af(qb);
            LANES(l)
                acc[t][l] = fma_rn(d, float(lane_dot(w[l], int(act[qb + 2u + l]))), acc[t][l]);
#endif
        }
    }
    for (uint t = 0u; t < NT; ++t) {
#if defined(TYPE_Q4_1) || defined(TYPE_Q5_1)
        res[t] = sum[t];
#else
        float a[8];
        for (uint l = 0u; l < 8u; ++l)
            a[l] = acc[t][l];
        gather_lanes(a, 0u);
        res[t] = hsum8_halves(a);
#endif
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
#elif defined(TYPE_Q2_K)
    // scales[16] · qs[64]: element e = 2-bit field (e%128)/32 of byte 32·(e/128) + e%32
    for (uint t = 0u; t < NT; ++t) {
        if (t >= nt)
            break;
        const uint qb = qb0 + t * p.a_row_words;
        for (uint g = 0u; g < 16u; ++g) {
            const uint sc = ld8(blk + g);
            int s = 0;
            for (uint k = 0u; k < 16u; ++k) {
                const uint e = 16u * g + k;
                s += int((ld8(blk + 16u + 32u * (e / 128u) + e % 32u) >> (2u * ((e % 128u) / 32u))) & 3u) * q8(qb, e);
            }
            lane[t][0] += int(sc & 15u) * s;
            s2[t] += bsum(qb, g) * int(sc >> 4);
        }
    }
#elif defined(TYPE_Q3_K)
    for (uint t = 0u; t < NT; ++t) {
        if (t >= nt)
            break;
        const uint qb = qb0 + t * p.a_row_words;
        for (uint g = 0u; g < 16u; ++g) {
            const uint low4 = g < 8u ? (ld8(blk + 96u + g) & 15u) : (ld8(blk + 96u + g - 8u) >> 4);
            const uint high2 = (ld8(blk + 104u + (g & 3u)) >> (2u * (g / 4u))) & 3u;
            const int scale = int(low4 | (high2 << 4)) - 32;
            int s = 0;
            for (uint k = 0u; k < 16u; ++k) {
                const uint e = 16u * g + k;
                const int low = int((ld8(blk + 32u + 32u * (e / 128u) + e % 32u) >> (2u * ((e % 128u) / 32u))) & 3u);
                const bool high = ((ld8(blk + e % 32u) >> (e / 32u)) & 1u) != 0u;
                s += (low - (high ? 0 : 4)) * q8(qb, e);
            }
            lane[t][0] += scale * s;
        }
    }
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
#if defined(TYPE_Q2_K) || defined(TYPE_Q3_K)
    // scalar vec_dot: sum += (d8·d)·s1 − (d8·dmin)·s2
    precise float sum[NT];
    for (uint t = 0u; t < NT; ++t)
        sum[t] = 0.0;
    for (uint b = 0u; b < nb; ++b) {
        const uint blk = row + b * SB;
        block_lanes(blk, ab0 + 81u * b, nt, lane, s2);
        for (uint t = 0u; t < NT; ++t) {
            if (t >= nt)
                break;
            const float d8 = af(ab0 + t * p.a_row_words + 81u * b);
            precise float d = d8 * ld_half(blk + D_OFF);
#ifdef DMIN_OFF
            precise float v = d * float(lane[t][0]) - (d8 * ld_half(blk + DMIN_OFF)) * float(s2[t]);
            sum[t] = sum[t] + v;
#else
            sum[t] = sum[t] + d * float(lane[t][0]);
#endif
        }
    }
    for (uint t = 0u; t < NT; ++t)
        res[t] = sum[t];
#else
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
#endif
}

#elif defined(TYPE_F16)
// ---- F16 weights × F16-rounded activations (one word per element) --------------------------------
float row_dot(uint row, uint ab)
{
    const uint n = p.cols;
    if (p.order != 0u && n % 8u == 0u) { // batched: one 8-lane accumulator
        precise float acc[8];
        for (uint l = 0u; l < 8u; ++l)
            acc[l] = 0.0;
        for (uint i = 0u; i < n; i += 8u)
            LANES(l)
                acc[l] = fma_rn(ld_half(row + 2u * (i + l)), af(ab + i + l), acc[l]);
        gather_lanes(acc, 0u);
        return hsum8_halves(acc);
    }
    // four 8-lane accumulators over 32-element steps, reduced pairwise, the tail in double
    precise float acc[4][8];
    for (uint j = 0u; j < 4u; ++j)
        for (uint l = 0u; l < 8u; ++l)
            acc[j][l] = 0.0;
    const uint np = n & ~31u;
    for (uint i = 0u; i < np; i += 32u)
        for (uint j = 0u; j < 4u; ++j)
            LANES(l) {
                const uint e = i + 8u * j + l;
                acc[j][l] = fma_rn(ld_half(row + 2u * e), af(ab + e), acc[j][l]);
            }
    for (uint j = 0u; j < 4u; ++j)
        gather_lanes(acc[j], j);
    WIDE sum = wide_add(WIDE_ZERO, hsum_4x8(acc));
    for (uint e = np; e < n; ++e) {
        precise float prod = ld_half(row + 2u * e) * af(ab + e);
        sum = wide_add(sum, prod);
    }
    return wide_float(sum);
}

#elif defined(TYPE_F32)
// ---- F32 weights × f32 activations: AVX2 dot_f32 (two 8-lane accumulators over 16 elements) -----
float wf(uint row, uint e) { return uintBitsToFloat(ld32(row + 4u * e)); }
float row_dot(uint row, uint ab)
{
    precise float acc0[8], acc1[8];
    for (uint l = 0u; l < 8u; ++l) {
        acc0[l] = 0.0;
        acc1[l] = 0.0;
    }
    uint i = 0u;
    for (; i + 16u <= p.cols; i += 16u)
        LANES(l) {
            acc0[l] = fma_rn(wf(row, i + l), af(ab + i + l), acc0[l]);
            acc1[l] = fma_rn(wf(row, i + 8u + l), af(ab + i + 8u + l), acc1[l]);
        }
    float v[8];
    for (uint l = 0u; l < 8u; ++l) {
        precise float s = acc0[l] + acc1[l];
        v[l] = s;
    }
    gather_lanes(v, 0u);
    precise float sum = hsum8_halves(v);
    for (; i < p.cols; ++i) {
        precise float prod = wf(row, i) * af(ab + i);
        sum = sum + prod;
    }
    return sum;
}

#elif defined(TYPE_BF16)
// ---- BF16 weights × f32 activations: the scalar sum in element order ------------------------------
float row_dot(uint row, uint ab)
{
    precise float sum = 0.0;
    if (g_l0 >= g_l1)
        return sum; // the row's first invocation sums it
    for (uint e = 0u; e < p.cols; ++e) {
        precise float prod = uintBitsToFloat(ld16(row + 2u * e) << 16) * af(ab + e);
        sum = sum + prod;
    }
    return sum;
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
#if defined(TYPE_Q4_1) || defined(TYPE_Q5_1) || defined(TYPE_Q2_K) || defined(TYPE_Q3_K) || defined(TYPE_BF16)
    const bool scalar_order = true;
#elif defined(SB)
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
