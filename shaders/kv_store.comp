// SPDX-License-Identifier: GPL-3.0-or-later
// kernel_kv_store: the batch's keys (post-RoPE) and values, rounded to F16, written into the layer's
// cache at positions pos0 … pos0 + n_tokens − 1. Cache layout: [kv_head][n_ctx][head_dim] halves,
// two per uint. One invocation per (token, kv head, element pair).
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint THREADS = 64;

layout(std430, binding = 0) readonly buffer K { float k[]; };   // [n_tokens][n_kv_heads][head_dim]
layout(std430, binding = 1) readonly buffer V { float v[]; };   // [n_tokens][n_kv_heads][head_dim]
layout(std430, binding = 2) writeonly buffer KC { uint kc[]; };
layout(std430, binding = 3) writeonly buffer VC { uint vc[]; };
layout(std430, binding = 4) readonly buffer Step { uint step_pos0; }; // pos0 when p.pos0 is ~0u

layout(push_constant) uniform Params {
    uint n_tokens;
    uint n_kv_heads;
    uint head_dim;
    uint pos0;
    uint n_ctx;
    uint groups_x;
} p;

#include "cpu_math.glsl"

void main()
{
    const uint id = (gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x) * THREADS + gl_LocalInvocationID.x;
    const uint pairs = p.head_dim / 2u;
    if (id >= p.n_tokens * p.n_kv_heads * pairs)
        return;
    const uint i = id % pairs, th = id / pairs;
    const uint h = th % p.n_kv_heads, t = th / p.n_kv_heads;
    const uint src = th * p.head_dim + 2u * i;
    // a recording replayed for every decode step reads the position from a buffer the host rewrites
    const uint pos0 = p.pos0 == 0xFFFFFFFFu ? step_pos0 : p.pos0;
    const uint dst = (h * p.n_ctx + pos0 + t) * pairs + i;
    kc[dst] = f16_bits(k[src]) | (f16_bits(k[src + 1u]) << 16);
    vc[dst] = f16_bits(v[src]) | (f16_bits(v[src + 1u]) << 16);
}
