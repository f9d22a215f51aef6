// SPDX-License-Identifier: GPL-3.0-or-later
// kernel_get_rows: the embedding lookup. out[t] = decode(W.row(ids[t])) · scale for every token whose
// id falls in this row range [row0, row0 + rows) of the (possibly split) embedding matrix; tokens
// outside it are left to the dispatch of their own range. One workgroup per token.
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint THREADS = 32;

layout(std430, binding = 0) readonly buffer W { uint w_words[]; };
layout(std430, binding = 1) readonly buffer Ids { uint ids[]; };
layout(std430, binding = 2) writeonly buffer Out { float o[]; }; // [n_tokens][cols]

layout(push_constant) uniform Params {
    uint cols;
    uint row_bytes;
    uint row0;
    uint rows;
    uint n_tokens;
    float scale;
} p;

#include "dequant.glsl"

void main()
{
    const uint t = gl_WorkGroupID.x;
    if (t >= p.n_tokens)
        return;
    const uint id = ids[t];
    if (id < p.row0 || id >= p.row0 + p.rows)
        return;
    const uint row = (id - p.row0) * p.row_bytes;
    const uint n_chunks = (p.cols + 31u) / 32u;
    for (uint c = gl_LocalInvocationID.x; c < n_chunks; c += THREADS) {
        float v[32];
        dequant_chunk(row, c, p.cols, v);
        for (uint i = 0u; i < 32u && 32u * c + i < p.cols; ++i)
            o[t * p.cols + 32u * c + i] = v[i] * p.scale;
    }
}
