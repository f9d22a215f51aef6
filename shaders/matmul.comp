// SPDX-License-Identifier: GPL-3.0-or-later
// kernel_matmul: y[t][out_row0 + r] = W.row(r) · x[t] for every token t of the batch and every row r
// of one row range of a weight matrix (a range small enough for one storage-buffer binding). The
// weights stay in their GGUF encoding and are decoded 32 elements at a time (dequant.glsl); the
// activations are f32. Workgroup: THREADS lanes over the chunks of a row × ROWS rows; tokens in
// groups of NT so that each decoded chunk is used NT times.
#version 450

layout(local_size_x_id = 0, local_size_y_id = 1) in;
layout(constant_id = 0) const uint THREADS = 32;
layout(constant_id = 1) const uint ROWS = 2;
#define NT 8u

layout(std430, binding = 0) readonly buffer W { uint w_words[]; };   // rows of this range, raw bytes
layout(std430, binding = 1) readonly buffer X { float x[]; };        // [n_tokens][cols]
layout(std430, binding = 2) writeonly buffer Y { float y[]; };       // [n_tokens][out_stride]

layout(push_constant) uniform Params {
    uint cols;
    uint rows;       // rows in this range
    uint n_tokens;
    uint row_bytes;
    uint out_row0;   // first output column this range writes
    uint out_stride; // floats per output token row
    uint x_offset;   // floats
    uint y_offset;   // floats
    uint groups_x;   // workgroups per dispatch row (2-D dispatch of large matrices)
} p;

#include "dequant.glsl"

shared float partial[ROWS][NT][THREADS];

void main()
{
    const uint lane = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
    const uint group = gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x;
    const uint r = group * ROWS + ly;
    const bool in_range = r < p.rows;
    const uint n_chunks = (p.cols + 31u) / 32u;
    const uint row = r * p.row_bytes;

    for (uint t0 = 0u; t0 < p.n_tokens; t0 += NT) {
        float acc[NT];
        for (uint j = 0u; j < NT; ++j)
            acc[j] = 0.0;
        if (in_range) {
            for (uint c = lane; c < n_chunks; c += THREADS) {
                float v[32];
                dequant_chunk(row, c, p.cols, v);
                const uint e0 = 32u * c;
                const uint n_e = min(32u, p.cols - e0);
                for (uint j = 0u; j < NT; ++j) {
                    if (t0 + j >= p.n_tokens)
                        break;
                    const uint xb = p.x_offset + (t0 + j) * p.cols + e0;
                    float s = 0.0;
                    if (n_e == 32u) {
                        for (uint i = 0u; i < 32u; ++i)
                            s += v[i] * x[xb + i];
                    } else {
                        for (uint i = 0u; i < n_e; ++i)
                            s += v[i] * x[xb + i];
                    }
                    acc[j] += s;
                }
            }
        }
        for (uint j = 0u; j < NT; ++j)
            partial[ly][j][lane] = acc[j];
        barrier();
        for (uint s = THREADS / 2u; s > 0u; s >>= 1) {
            if (lane < s)
                for (uint j = 0u; j < NT; ++j)
                    partial[ly][j][lane] += partial[ly][j][lane + s];
            barrier();
        }
        if (in_range && lane < NT && t0 + lane < p.n_tokens)
            y[p.y_offset + (t0 + lane) * p.out_stride + p.out_row0 + r] = partial[ly][lane][0];
        barrier();
    }
}
