// SPDX-License-Identifier: GPL-3.0-or-later
// kernel_quantize_act: the activations as the CPU backend's dot products see them. Before a matmul the
// CPU quantizes its input to the format the weight type's dot product consumes (activation_quant.cpp):
// Q8_0/Q8_1 blocks of 32 (scale amax/127 rounded to F16, q = round-half-even(x · 127/amax)), Q8_K
// blocks of 256 (scale −max/127 of the element with the largest magnitude, q ≤ 127), or F16. This
// writes x̃ = scale · q (or f16(x)) as f32, so that the f32 matmul that follows computes the CPU's
// dot product up to summation order. One workgroup of 32 lanes per block of one token.
#version 450

layout(local_size_x = 32) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };  // [n_tokens][cols]
layout(std430, binding = 1) writeonly buffer Y { float y[]; }; // [n_tokens][cols]

layout(push_constant) uniform Params {
    uint cols;
    uint n_blocks;  // over all tokens
    uint format;    // 1: F16, 2: Q8_0 / Q8_1, 3: Q8_K
    uint x_offset;  // floats
    uint groups_x;
} p;

shared float s_abs[32];
shared float s_val[32];
shared uint s_idx[32];

float round_f16(float v) { return unpackHalf2x16(packHalf2x16(vec2(v, 0.0))).x; }

void main()
{
    const uint block = gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x;
    if (block >= p.n_blocks)
        return;
    const uint lane = gl_LocalInvocationID.x;
    const uint bs = p.format == 3u ? 256u : 32u;
    const uint base = block * bs; // blocks never straddle tokens: cols is a multiple of the block size
    if (p.format == 1u) { // element-wise: `cols` is the element count then
        if (base + lane < p.cols)
            y[base + lane] = round_f16(x[p.x_offset + base + lane]);
        return;
    }
    // the element of largest magnitude (the first one on ties, as the CPU's strict comparison)
    float best_abs = -1.0, best = 0.0;
    uint best_i = 0xFFFFFFFFu;
    for (uint i = lane; i < bs; i += 32u) {
        const float v = x[p.x_offset + base + i];
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
    if (p.format == 2u) {
        const float d = round_f16(amax / 127.0);
        const float id = amax != 0.0 ? 127.0 / amax : 0.0;
        y[base + lane] = d * roundEven(x[p.x_offset + base + lane] * id);
    } else {
        if (amax == 0.0) {
            for (uint i = lane; i < bs; i += 32u)
                y[base + i] = 0.0;
            return;
        }
        const float iscale = -127.0 / s_val[0];
        const float d = 1.0 / iscale;
        for (uint i = lane; i < bs; i += 32u)
            y[base + i] = d * min(127.0, roundEven(iscale * x[p.x_offset + base + i]));
    }
}
