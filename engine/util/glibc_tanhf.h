// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// tanhf as Debian 12's C library computes it (glibc 2.36, the generic single-precision code that
// x86-64 uses: tanh through expm1, fdlibm's algorithm), operation for operation, so that a device
// that has no such function can give the CPU's bits. gemma2 soft-caps every attention score with
// tanh: the CPU backend calls the C library (llama.cpp does the same, so the two agree on any
// machine); the CUDA kernels call this, and shaders/include/cpu_math.glsl holds the same steps.
// test_architectures checks it against the C library on this machine.
#include "util/hd.h"

namespace engine {

TS_HD inline float glibc_expm1f(float x)
{
    using cuda::bits_float;
    using cuda::div_rn;
    using cuda::float_bits;
    const float o_threshold = 8.8721679688e+01f, ln2_hi = 6.9313812256e-01f, ln2_lo = 9.0580006145e-06f,
                invln2 = 1.4426950216e+00f;
    const float Q1 = -3.3333335072e-02f, Q2 = 1.5873016091e-03f, Q3 = -7.9365076090e-05f, Q4 = 4.0082177293e-06f,
                Q5 = -2.0109921195e-07f;
    uint32_t hx = float_bits(x);
    const bool negative = (hx & 0x80000000u) != 0;
    hx &= 0x7fffffffu;
    if (hx >= 0x4195b844u) { // |x| ≥ 27·ln 2
        if (hx >= 0x42b17218u) {
            if (hx > 0x7f800000u)
                return x + x; // NaN
            if (hx == 0x7f800000u)
                return negative ? -1.0f : x;
            if (x > o_threshold)
                return bits_float(0x7f800000u); // overflow
        }
        if (negative)
            return -1.0f; // tiny − 1 rounds to −1
    }
    float hi, lo, c = 0.0f;
    int32_t k = 0;
    if (hx > 0x3eb17218u) { // |x| > ln 2 / 2: reduce the argument
        if (hx < 0x3F851592u) {
            hi = negative ? x + ln2_hi : x - ln2_hi;
            lo = negative ? -ln2_lo : ln2_lo;
            k = negative ? -1 : 1;
        } else {
            const float kf = invln2 * x;
            k = int32_t(kf + (negative ? -0.5f : 0.5f));
            const float t = float(k);
            const float t_hi = t * ln2_hi;
            hi = x - t_hi;
            lo = t * ln2_lo;
        }
        const float reduced = hi - lo;
        const float d = hi - reduced;
        c = d - lo;
        x = reduced;
    } else if (hx < 0x33000000u) { // |x| < 2^-25
        return x;
    }
    const float hfx = 0.5f * x;
    const float hxs = x * hfx;
    const float p5 = hxs * Q5, p4 = Q4 + p5, m4 = hxs * p4, p3 = Q3 + m4, m3 = hxs * p3, p2 = Q2 + m3, m2 = hxs * p2,
                p1 = Q1 + m2, m1 = hxs * p1;
    const float r1 = 1.0f + m1;
    const float rh = r1 * hfx;
    const float t = 3.0f - rh;
    const float xt = x * t;
    const float den = 6.0f - xt;
    const float num = r1 - t;
    float e = hxs * div_rn(num, den);
    if (k == 0) {
        const float xe = x * e;
        const float xe_h = xe - hxs;
        return x - xe_h;
    }
    const float ec = e - c;
    const float xec = x * ec;
    e = xec - c;
    e = e - hxs;
    if (k == -1) {
        const float xe = x - e;
        const float h = 0.5f * xe;
        return h - 0.5f;
    }
    if (k == 1) {
        if (x < -0.25f) {
            const float xh = x + 0.5f;
            const float ex = e - xh;
            return -2.0f * ex;
        }
        const float xe = x - e;
        const float d = 2.0f * xe;
        return 1.0f + d;
    }
    if (k <= -2 || k > 56) { // exp(x) − 1 ≈ exp(x)
        const float ex = e - x;
        float y = 1.0f - ex;
        y = bits_float(float_bits(y) + (uint32_t(k) << 23));
        return y - 1.0f;
    }
    float y;
    if (k < 23) {
        const float t1 = bits_float(0x3f800000u - (0x1000000u >> k)); // 1 − 2^-k
        const float ex = e - x;
        y = t1 - ex;
    } else {
        const float t2 = bits_float(uint32_t(0x7f - k) << 23); // 2^-k
        const float et = e + t2;
        y = x - et;
        y = y + 1.0f;
    }
    return bits_float(float_bits(y) + (uint32_t(k) << 23));
}

TS_HD inline float glibc_tanhf(float x)
{
    using cuda::abs_f;
    using cuda::div_rn;
    using cuda::float_bits;
    const uint32_t jx = float_bits(x), ix = jx & 0x7fffffffu;
    const bool negative = (jx & 0x80000000u) != 0;
    if (ix >= 0x7f800000u) // ±∞ → ±1, NaN → NaN
        return negative ? div_rn(1.0f, x) - 1.0f : div_rn(1.0f, x) + 1.0f;
    float z;
    if (ix < 0x41b00000u) { // |x| < 22
        if (ix == 0)
            return x;
        if (ix < 0x24000000u) { // |x| < 2^-55
            const float one_x = 1.0f + x;
            return x * one_x;
        }
        const float ax2 = 2.0f * abs_f(x);
        if (ix >= 0x3f800000u) { // |x| ≥ 1
            const float t = glibc_expm1f(ax2);
            const float q = div_rn(2.0f, t + 2.0f);
            z = 1.0f - q;
        } else {
            const float t = glibc_expm1f(-ax2);
            z = div_rn(-t, t + 2.0f);
        }
    } else {
        z = 1.0f; // 1 − tiny
    }
    return negative ? -z : z;
}

} // namespace engine
