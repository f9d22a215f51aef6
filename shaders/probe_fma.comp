// SPDX-License-Identifier: GPL-3.0-or-later
// Does this device round GLSL's fma once? r[i] = fma(a[i], b[i], c[i]) for the host to compare with
// std::fma (vk_context.cpp). Where it does, the f32 shaders' fma_rn is the hardware's fma; where not
// (lavapipe: a multiply and an add), cpu_math.glsl emulates the single rounding.
#version 450

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer In { float abc[]; }; // [64][3]
layout(std430, binding = 1) writeonly buffer Out { float r[]; };  // [64]

void main()
{
    const uint i = gl_LocalInvocationID.x;
    precise float v = fma(abc[3u * i], abc[3u * i + 1u], abc[3u * i + 2u]);
    r[i] = v;
}
