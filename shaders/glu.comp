// SPDX-License-Identifier: GPL-3.0-or-later
// kernel_glu: gate[i] = act(gate[i]) · up[i], act = SiLU (SwiGLU) or the tanh GELU (GeGLU). GELU is
// evaluated as the CPU backend's table does: on the F16-rounded input, result rounded to F16, with
// the table's clamps at ±10.
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint THREADS = 64;

layout(std430, binding = 0) buffer G { float g[]; };
layout(std430, binding = 1) readonly buffer U { float u[]; };

layout(push_constant) uniform Params {
    uint n;
    uint gelu;
    uint groups_x;
} p;

float round_f16(float v) { return unpackHalf2x16(packHalf2x16(vec2(v, 0.0))).x; }

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
            const float h = round_f16(x);
            const float inner = fma(0.044715 * h, h, 1.0);
            a = round_f16(0.5 * h * (1.0 + tanh(0.79788456080286535587989211986876 * h * inner)));
        }
    } else {
        a = x / (1.0 + exp(-x));
    }
    g[i] = a * u[i];
}
