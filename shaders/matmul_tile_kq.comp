// SPDX-License-Identifier: GPL-3.0-or-later
// The f32 path's K-quant matrix product in the order the CPU (and llama.cpp) sums batches of 8+
// tokens: per super-block the exact integer sums s1 = Σ scale·Σ q·q8 and s2 = Σ min·bsum, then
// res = d·s1, res = fma(−dmin, s2, res), acc = fma(res, d8, acc) (vec_dot.cpp's dot_k_tiled), each
// fused multiply-add rounded once (cpu_math.glsl's fma_rn): the CPU's bits. Tiles of 64 rows × 32
// tokens per workgroup, each invocation an 8 × 4 block of them, one 32-element chunk of integers in
// shared memory at a time. The input is quantize_act.comp's Q8_K.
#version 450

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer W { uint w_words[]; }; // rows of this range, raw bytes
layout(std430, binding = 1) readonly buffer A { uint act[]; };     // [n_tokens][a_row_words] Q8_K
layout(std430, binding = 2) writeonly buffer Y { float y[]; };     // [n_tokens][out_stride] from y_offset

layout(push_constant) uniform Params {
    uint cols;
    uint rows;       // rows in this range
    uint n_tokens;
    uint row_bytes;
    uint out_row0;   // first output column this range writes
    uint out_stride; // floats per output token row
    uint a_row_words;
    uint y_offset;   // floats
    uint groups_x;
} p;

#include "cpu_math.glsl"
#include "dequant.glsl" // and kquant_ints.glsl

const uint BM = 64u, BN = 32u, TM = 8u, TN = 4u;
shared int wq[BM][33];
shared ivec2 wsc[BM], wmn[BM]; // the chunk's two group scales and minimums, per row
shared vec2 wd[BM];            // the super-block's d and dmin, per row
shared int xq[BN][33];
shared ivec2 xbs[BN]; // the chunk's two 16-element sums of q8, per token
shared float xd[BN];  // the super-block's d8, per token

void main()
{
    const uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * p.groups_x;
    const uint r0 = wg * BM, t0 = gl_WorkGroupID.z * BN;
    if (r0 >= p.rows)
        return;
    const uint lid = gl_LocalInvocationID.x;
    const uint tx = lid % 8u, ty = lid / 8u;
    const uint n_chunks = p.cols / 32u;

    float acc[TM][TN];
    int s1[TM][TN], s2[TM][TN];
    for (uint m = 0u; m < TM; ++m)
        for (uint n = 0u; n < TN; ++n) {
            acc[m][n] = 0.0;
            s1[m][n] = 0;
            s2[m][n] = 0;
        }

    for (uint c = 0u; c < n_chunks; ++c) {
        const uint sb = c >> 3, sub = c & 7u;
        {
            int q[32];
            ivec2 sc = ivec2(0), mn = ivec2(0);
            vec2 d = vec2(0.0);
            if (r0 + lid < p.rows) {
                const uint row = (r0 + lid) * p.row_bytes;
                kq_chunk(row, c, q, sc, mn);
                d = kq_d(row, c);
            } else {
                for (uint i = 0u; i < 32u; ++i)
                    q[i] = 0;
            }
            for (uint i = 0u; i < 32u; ++i)
                wq[lid][i] = q[i];
            wsc[lid] = sc;
            wmn[lid] = mn;
            wd[lid] = d;
        }
        // 32 tokens × 32 int8: eight words a token, four words an invocation
        for (uint k = 0u; k < 4u; ++k) {
            const uint idx = lid + 64u * k, tok = idx / 8u, w = idx % 8u;
            int v = 0;
            if (t0 + tok < p.n_tokens)
                v = int(act[(t0 + tok) * p.a_row_words + sb * 81u + 17u + 8u * sub + w]);
            for (uint j = 0u; j < 4u; ++j)
                xq[tok][4u * w + j] = bitfieldExtract(v, int(8u * j), 8);
        }
        if (lid < BN) {
            const bool in_range = t0 + lid < p.n_tokens;
            const uint blk = (t0 + lid) * p.a_row_words + sb * 81u;
            xbs[lid] = in_range ? ivec2(int(act[blk + 1u + 2u * sub]), int(act[blk + 2u + 2u * sub])) : ivec2(0);
            xd[lid] = in_range ? uintBitsToFloat(act[blk]) : 0.0;
        }
        barrier();
        for (uint half_ = 0u; half_ < 2u; ++half_) {
            int part[TM][TN];
            for (uint m = 0u; m < TM; ++m)
                for (uint n = 0u; n < TN; ++n)
                    part[m][n] = 0;
            for (uint i = 16u * half_; i < 16u * half_ + 16u; ++i) {
                int a[TM], b[TN];
                for (uint m = 0u; m < TM; ++m)
                    a[m] = wq[ty + 8u * m][i];
                for (uint n = 0u; n < TN; ++n)
                    b[n] = xq[tx + 8u * n][i];
                for (uint m = 0u; m < TM; ++m)
                    for (uint n = 0u; n < TN; ++n)
                        part[m][n] += a[m] * b[n];
            }
            for (uint m = 0u; m < TM; ++m)
                for (uint n = 0u; n < TN; ++n) {
                    s1[m][n] += wsc[ty + 8u * m][half_] * part[m][n];
                    s2[m][n] += wmn[ty + 8u * m][half_] * xbs[tx + 8u * n][half_];
                }
        }
        if (sub == 7u) { // the super-block's float steps
            for (uint m = 0u; m < TM; ++m) {
                const vec2 d = wd[ty + 8u * m];
                for (uint n = 0u; n < TN; ++n) {
                    precise float res = d.x * float(s1[m][n]);
#if defined(TYPE_Q2_K) || defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
                    res = fma_rn(-d.y, float(s2[m][n]), res);
#endif
                    acc[m][n] = fma_rn(res, xd[tx + 8u * n], acc[m][n]);
                    s1[m][n] = 0;
                    s2[m][n] = 0;
                }
            }
        }
        barrier();
    }
    for (uint m = 0u; m < TM; ++m) {
        const uint r = r0 + ty + 8u * m;
        if (r >= p.rows)
            continue;
        for (uint n = 0u; n < TN; ++n) {
            const uint t = t0 + tx + 8u * n;
            if (t < p.n_tokens)
                y[p.y_offset + t * p.out_stride + p.out_row0 + r] = acc[m][n];
        }
    }
}
