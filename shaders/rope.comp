// SPDX-License-Identifier: GPL-3.0-or-later
// kernel_rope: rotary position embedding of every head of every token in place, pairs (i, i + n_rot/2)
// for the NEOX layout or (2i, 2i+1) otherwise, with the cos/sin of each (token, pair) computed on the
// host exactly as the CPU backend computes them; then every element is multiplied by `scale` (the
// query pre-scaling of gemma). One invocation per (token, head, pair).
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint THREADS = 64;

layout(std430, binding = 0) buffer X { float x[]; };               // [n_tokens][n_heads][head_dim]
layout(std430, binding = 1) readonly buffer CS { vec2 cs[]; };      // [n_tokens][n_rot/2] (cos, sin)

layout(push_constant) uniform Params {
    uint n_tokens;
    uint n_heads;
    uint head_dim;
    uint n_rot;
    uint neox;
    uint x_offset;
    float scale;
    uint cs_offset; // vec2 index of token 0's first pair
    uint groups_x;
    uint temp_offset; // vec2 index of token 0's query temperature (mistral3); ~0u: none
} p;

#include "cpu_math.glsl"

void main()
{
    const uint id = (gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x) * THREADS + gl_LocalInvocationID.x;
    const uint pairs = p.head_dim / 2u;
    if (id >= p.n_tokens * p.n_heads * pairs)
        return;
    const uint i = id % pairs, th = id / pairs, t = th / p.n_heads;
    const uint base = p.x_offset + th * p.head_dim;
    const uint half_rot = p.n_rot / 2u;
    // × the temperature (exactly 1 without one), then × scale, as the CPU multiplies
    const float temp = p.temp_offset != 0xFFFFFFFFu ? cs[p.temp_offset + t].x : 1.0;
    if (i < half_rot) {
        const vec2 c = cs[p.cs_offset + t * half_rot + i];
        const uint a = p.neox != 0u ? i : 2u * i;
        const uint b = p.neox != 0u ? i + half_rot : 2u * i + 1u;
        const float x0 = x[base + a], x1 = x[base + b];
        precise float r0 = fma_rn(x0, c.x, -(x1 * c.y));
        precise float r1 = fma_rn(x0, c.y, x1 * c.x);
        precise float t0 = r0 * temp, t1 = r1 * temp;
        precise float s0 = t0 * p.scale, s1 = t1 * p.scale;
        x[base + a] = s0;
        x[base + b] = s1;
    } else {
        const uint a = p.n_rot + 2u * (i - half_rot);
        precise float t0 = x[base + a] * temp, t1 = x[base + a + 1u] * temp;
        x[base + a] = t0 * p.scale;
        x[base + a + 1u] = t1 * p.scale;
    }
}
