// SPDX-License-Identifier: GPL-3.0-or-later
// kernel_quantize_act: a matmul's input in the format the CPU backend's dot product for the weight
// type consumes (activation_quant.cpp), bit for bit, so that matmul.comp can repeat the CPU's
// integer block sums and its float steps. One workgroup of 32 lanes per block of one token;
// blocks never straddle tokens (cols is a multiple of the block size). Layout, in 32-bit words:
//   F16   (1): one word per element, the f32 value of the F16-rounded input
//   BF16  (5): one word per element, the f32 value of the BF16-rounded input (ties to even; NaN quiet)
//   Q8_0  (2) / Q8_1 (4): 10 words per 32 elements: d (f32 of the F16 scale), s (Q8_1: F16-rounded
//         d·Σq), qs[32] int8 packed four to a word
//   Q8_K  (3): 81 words per 256 elements: d (f32), bsums[16] (int), qs[256] int8 packed
#version 450

layout(local_size_x = 32) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };  // [n_tokens][cols]
layout(std430, binding = 1) writeonly buffer A { uint act[]; };

layout(push_constant) uniform Params {
    uint cols;      // F16, BF16: the element count over all tokens
    uint n_blocks;  // over all tokens
    uint format;
    uint x_offset;  // floats
    uint groups_x;
} p;

#include "cpu_math.glsl"

shared float s_abs[32];
shared float s_val[32];
shared uint s_idx[32];
shared int s_q[256];

void main()
{
    const uint block = gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x;
    if (block >= p.n_blocks)
        return;
    const uint lane = gl_LocalInvocationID.x;
    if (p.format == 1u || p.format == 5u) {
        const uint e = block * 32u + lane;
        if (e < p.cols)
            act[e] = p.format == 1u ? floatBitsToUint(round_f16(x[p.x_offset + e])) : bf16_bits(x[p.x_offset + e]) << 16;
        return;
    }
    const uint bs = p.format == 3u ? 256u : 32u;
    const uint base = p.x_offset + block * bs;
    // the element of largest magnitude, the first one on ties (the CPU's strict comparison)
    float best_abs = -1.0, best = 0.0;
    uint best_i = 0xFFFFFFFFu;
    for (uint i = lane; i < bs; i += 32u) {
        const float v = x[base + i];
        if (abs(v) > best_abs) {
            best_abs = abs(v);
            best = v;
            best_i = i;
        }
    }
    s_abs[lane] = best_abs;
    s_val[lane] = best;
    s_idx[lane] = best_i;
    barrier();
    for (uint k = 16u; k > 0u; k >>= 1) {
        if (lane < k) {
            const float a = s_abs[lane + k];
            if (a > s_abs[lane] || (a == s_abs[lane] && s_idx[lane + k] < s_idx[lane])) {
                s_abs[lane] = a;
                s_val[lane] = s_val[lane + k];
                s_idx[lane] = s_idx[lane + k];
            }
        }
        barrier();
    }
    const float amax = s_abs[0];
    if (p.format == 2u || p.format == 4u) {
        const uint dst = block * 10u;
        const float d = div_rn(amax, 127.0);
        const float id = amax != 0.0 ? div_rn(127.0, amax) : 0.0;
        precise float scaled = x[base + lane] * id;
        s_q[lane] = int(roundEven(scaled));
        barrier();
        if (lane < 8u) {
            uint w = 0u;
            for (uint j = 0u; j < 4u; ++j)
                w |= (uint(s_q[4u * lane + j]) & 0xFFu) << (8u * j);
            act[dst + 2u + lane] = w;
        } else if (lane == 8u) {
            act[dst] = floatBitsToUint(round_f16(d));
        } else if (lane == 9u) {
            int sum = 0;
            for (uint j = 0u; j < 32u; ++j)
                sum += s_q[j];
            precise float s = float(sum) * d;
            act[dst + 1u] = floatBitsToUint(p.format == 4u ? round_f16(s) : 0.0);
        }
        return;
    }
    // Q8_K (quantize_row_q8_K_ref): the scale from the signed element of largest magnitude
    const uint dst = block * 81u;
    if (amax == 0.0) {
        for (uint i = lane; i < 81u; i += 32u)
            act[dst + i] = 0u;
        return;
    }
    const float iscale = div_rn(-127.0, s_val[0]);
    for (uint i = lane; i < 256u; i += 32u) {
        precise float scaled = iscale * x[base + i];
        s_q[i] = min(127, int(roundEven(scaled)));
    }
    barrier();
    for (uint w = lane; w < 64u; w += 32u) {
        uint v = 0u;
        for (uint j = 0u; j < 4u; ++j)
            v |= (uint(s_q[4u * w + j]) & 0xFFu) << (8u * j);
        act[dst + 17u + w] = v;
    }
    if (lane < 16u) {
        int sum = 0;
        for (uint k = 0u; k < 16u; ++k)
            sum += s_q[16u * lane + k];
        act[dst + 1u + lane] = uint(sum);
    } else if (lane == 16u) {
        act[dst] = floatBitsToUint(div_rn(1.0, iscale));
    }
}
