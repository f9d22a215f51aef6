// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// expf as ggml's vectorised softmax computes it (exact to its last bit), for the CPU backend and the
// CUDA kernels alike: one definition, so the two cannot drift apart.
#include "util/hd.h"

namespace engine {

TS_HD inline float ggml_expf(float x)
{
    using cuda::bits_float;
    using cuda::float_bits;
    using cuda::fma_rn;
    // exp(x) = 2^n · (1 + poly(b)), n = round(x / ln 2), b = x − n·ln 2 in two parts; large |n|
    // goes through two scale factors so that results near over/underflow stay exact.
    const float r = 0x1.8p23f;
    const float z = fma_rn(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fma_rn(-n, 0x1.7f7d1cp-20f, fma_rn(-n, 0x1.62e4p-1f, x));
    const uint32_t e = float_bits(z) << 23;
    const float k = bits_float(e + float_bits(1.0f));
    const float u = b * b;
    const float j =
        fma_rn(fma_rn(fma_rn(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fma_rn(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
               0x1.ffffecp-1f * b);
    if (!(cuda::abs_f(n) > 126.0f))
        return fma_rn(k, j, k);
    const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
    const float s1 = bits_float(g + 0x7f000000u);
    const float s2 = bits_float(e - g);
    if (cuda::abs_f(n) > 192.0f)
        return s1 * s1;
    return fma_rn(s2, j, s2) * s1;
}

} // namespace engine
