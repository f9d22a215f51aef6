// SPDX-License-Identifier: GPL-3.0-or-later
// kernel_glu: gate[i] = act(gate[i]) · up[i], act = SiLU (SwiGLU) or the tanh GELU (GeGLU). GELU is
// looked up in the CPU backend's own F16 table (indexed by the F16 bits of the input, clamps at
// ±10), so both backends give the same values bit for bit; SiLU divides by 1 + ggml's expf(−x) as the
// CPU's kernel_swiglu does over whole 8-lane chunks of a row (libm's expf for a row's tail: GLSL's
// exp there).
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint THREADS = 64;

layout(std430, binding = 0) buffer G { float g[]; };
layout(std430, binding = 1) readonly buffer U { float u[]; };
layout(std430, binding = 2) readonly buffer T { uint table[]; }; // 65,536 halves, two per word

layout(push_constant) uniform Params {
    uint n;
    uint gelu;
    uint groups_x;
    uint width; // elements per token row
} p;

#include "cpu_math.glsl"

void main()
{
    const uint i = (gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x) * THREADS + gl_LocalInvocationID.x;
    if (i >= p.n)
        return;
    const float x = g[i];
    float a;
    if (p.gelu != 0u) {
        if (x <= -10.0) {
            a = 0.0;
        } else if (x >= 10.0) {
            a = x;
        } else {
            const uint bits = f16_bits(x);
            const uint word = table[bits >> 1];
            a = unpackHalf2x16((bits & 1u) != 0u ? (word >> 16) : (word & 0xFFFFu)).x;
        }
    } else {
        const bool chunked = i % p.width < (p.width & ~7u);
        precise float den = 1.0 + (chunked ? cpu_expf(-x) : exp(-x));
        a = div_rn(x, den);
    }
    precise float r = a * u[i];
    g[i] = r;
}
