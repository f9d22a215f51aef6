// SPDX-License-Identifier: GPL-3.0-or-later
// kernel_add: a[a_offset + i] += b[i % period] for i < n — the residual add (period = n) and the
// broadcast bias add (period = width).
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint THREADS = 64;

layout(std430, binding = 0) buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };

layout(push_constant) uniform Params {
    uint n;
    uint period;
    uint a_offset;
    uint groups_x;
} p;

void main()
{
    const uint i = (gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x) * THREADS + gl_LocalInvocationID.x;
    if (i >= p.n)
        return;
    a[p.a_offset + i] += b[i % p.period];
}
