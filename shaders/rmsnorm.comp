// SPDX-License-Identifier: GPL-3.0-or-later
// kernel_rmsnorm: y[r] = x[r] / sqrt(mean(x[r]²) + eps) ⊙ w for every row r (a token's residual, or
// one head of Q or K for the q/k norms), as the CPU backend's kernel_rmsnorm rounds it: the squares
// in f32 summed in double (two floats without 64-bit ones: cpu_math.glsl's WIDE), the scale
// 1 / sqrt(mean + eps) with correctly rounded square root and division. One workgroup per row; y
// may alias x.
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint THREADS = 64;

#ifdef ADD_RESIDUAL
// add_rmsnorm: x += o first (the residual add, add.comp's f32 sum), then the norm of the new rows
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 3) readonly buffer O { float o[]; }; // [n_rows][width] from x_offset
#else
layout(std430, binding = 0) readonly buffer X { float x[]; };
#endif
layout(std430, binding = 1) readonly buffer Wt { float w[]; };   // [width]
layout(std430, binding = 2) buffer Y { float y[]; };

layout(push_constant) uniform Params {
    uint width;
    uint n_rows;
    uint x_offset; // floats; row r starts at x_offset + r · width
    uint y_offset;
    float eps;
    uint groups_x;
} p;

#include "cpu_math.glsl"

shared WIDE partial[THREADS];

void main()
{
    const uint r = gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x;
    if (r >= p.n_rows)
        return; // uniform across the workgroup
    const uint lane = gl_LocalInvocationID.x;
    const uint xb = p.x_offset + r * p.width, yb = p.y_offset + r * p.width;
#ifdef ADD_RESIDUAL
    for (uint i = lane; i < p.width; i += THREADS) { // each invocation reads back only its own elements
        precise float v = x[xb + i] + o[xb + i];
        x[xb + i] = v;
    }
#endif
    WIDE s = WIDE_ZERO;
    for (uint i = lane; i < p.width; i += THREADS) {
        precise float sq = x[xb + i] * x[xb + i];
        s = wide_add(s, sq);
    }
    partial[lane] = s;
    barrier();
    for (uint k = THREADS / 2u; k > 0u; k >>= 1) {
        if (lane < k)
            partial[lane] = wide_add2(partial[lane], partial[lane + k]);
        barrier();
    }
#ifdef EXACT_F64
    const float mean = float(partial[0] / double(p.width));
#else
    // (hi + lo) / width rounded once: the quotient of hi corrected by the remainder and lo
    const vec2 total = partial[0];
    const float n = float(p.width);
    const float q = div_rn(total.x, n);
    precise float rem = fma_rn(-q, n, total.x) + total.y;
    precise float mean = q + div_rn(rem, n);
#endif
    precise float v = mean + p.eps;
    const float scale = div_rn(1.0, sqrt_rn(v));
    for (uint i = lane; i < p.width; i += THREADS) {
        precise float r = (x[xb + i] * scale) * w[i];
        y[yb + i] = r;
    }
}
