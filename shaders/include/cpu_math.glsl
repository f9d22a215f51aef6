// SPDX-License-Identifier: GPL-3.0-or-later
// The CPU backend's scalar arithmetic, step for step, so that a shader gives the same bits: F16
// rounding (util/fp16.h), correctly rounded division and square root (GLSL only promises a few
// ULP), the exponential of the softmax (attention_kernels.cpp) and ggml's two 8-lane horizontal
// sums. Every result that must not be contracted or reordered is `precise`.
#ifndef TOKENSCOPE_CPU_MATH_GLSL
#define TOKENSCOPE_CPU_MATH_GLSL

// fma(a, b, c) rounded once, as the CPU's fused multiply-add. GLSL's fma may be a multiply and an
// add (lavapipe's is); with 64-bit floats the product is exact and only the sum rounds (to double,
// then to float: a double rounding that differs from one rounding only when the double lands
// exactly on a float midpoint). In f32: the device's fma where it rounds once, else emulated.
#ifdef EXACT_F64
float fma_rn(float a, float b, float c)
{
    precise double r = double(a) * double(b) + double(c);
    return float(r);
}
#else
// a·b exactly as hi + lo (Dekker's product: Veltkamp splits, no fused operation needed)
vec2 two_prod(float a, float b)
{
    precise float p = a * b;
    precise float ac = 4097.0 * a;
    precise float ah = ac - (ac - a);
    precise float al = a - ah;
    precise float bc = 4097.0 * b;
    precise float bh = bc - (bc - b);
    precise float bl = b - bh;
    precise float e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
    return vec2(p, e);
}
// a + b exactly as hi + lo (Knuth's two-sum)
vec2 two_sum_f(float a, float b)
{
    precise float s = a + b;
    precise float bb = s - a;
    precise float e = (a - (s - bb)) + (b - bb);
    return vec2(s, e);
}
// 1 where the device's fma rounds once (probe_fma.comp, run when the device is opened): then it is
// used as it is; 0: the product split exactly (Dekker) and added with an error-free sum, the low
// parts rounded before the final sum: a single rounding in all but near-tie cases.
layout(constant_id = 8) const uint FMA_ROUNDS_ONCE = 0u;
float fma_rn(float a, float b, float c)
{
    if (FMA_ROUNDS_ONCE != 0u) {
        precise float f = fma(a, b, c);
        return f;
    }
    const vec2 p = two_prod(a, b);
    const vec2 s = two_sum_f(p.x, c);
    precise float r = s.x + (s.y + p.y);
    return r;
}
#endif

// Sums the CPU keeps in double, kept as two floats (hi + lo) where there are no 64-bit floats: 48
// bits, so that the rounded result is the double sum's in all but rare cases (a one-float sum
// drifts by ulps, and every ulp moves values across the F16 and Q8 roundings downstream).
#ifdef EXACT_F64
#define WIDE double
#define WIDE_ZERO 0.0lf
double wide_add(double a, float b) { precise double r = a + double(b); return r; }
double wide_add2(double a, double b) { precise double r = a + b; return r; }
float wide_float(double a) { return float(a); }
#else
#define WIDE vec2
#define WIDE_ZERO vec2(0.0)
vec2 wide_add(vec2 a, float b)
{
    const vec2 s = two_sum_f(a.x, b);
    precise float lo = a.y + s.y;
    return two_sum_f(s.x, lo);
}
vec2 wide_add2(vec2 a, vec2 b)
{
    const vec2 s = wide_add(a, b.x);
    return wide_add(vec2(s.x, 0.0), s.y + b.y);
}
float wide_float(vec2 a) { precise float r = a.x + a.y; return r; }
#endif

// f32 → F16 bits, round to nearest even (util/fp16.h's f32_to_fp16; packHalf2x16 leaves the
// rounding mode to the driver).
uint f16_bits(float f)
{
    const uint x = floatBitsToUint(f);
    const uint sign = (x >> 16) & 0x8000u;
    const uint a = x & 0x7FFFFFFFu;
    if (a > 0x7F800000u)
        return sign | 0x7E00u | ((a >> 13) & 0x3FFu);
    if (a >= 0x477FF000u)
        return sign | 0x7C00u;
    if (a < 0x38800000u) {
        if (a < 0x33000000u)
            return sign;
        const uint mant = (a & 0x7FFFFFu) | 0x800000u;
        const uint shift = 126u - (a >> 23);
        const uint h = mant >> shift;
        const uint rem = mant & ((1u << shift) - 1u);
        const uint mid = 1u << (shift - 1u);
        return sign | (h + ((rem > mid || (rem == mid && (h & 1u) != 0u)) ? 1u : 0u));
    }
    uint h = (a - 0x38000000u) >> 13;
    const uint rem = a & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u))
        ++h;
    return sign | h;
}

float round_f16(float v) { return unpackHalf2x16(f16_bits(v)).x; }

// binary32 → bfloat16 bits as ggml rounds: to nearest, ties to even; a NaN stays a quiet NaN.
uint bf16_bits(float v)
{
    const uint u = floatBitsToUint(v);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return (u >> 16) | 64u;
    return (u + (0x7FFFu + ((u >> 16) & 1u))) >> 16;
}

// a / b rounded to nearest: the quotient corrected by its exact remainder.
float div_rn(float a, float b)
{
    precise float q = a / b;
    if (isinf(q) || isnan(q) || q == 0.0 || isinf(b))
        return q;
    precise float r = fma_rn(-q, b, a);
    precise float q1 = fma_rn(r, 1.0 / b, q);
    return q1;
}

// sqrt(v) rounded to nearest, by one Newton step on the exact residual.
float sqrt_rn(float v)
{
    precise float s = sqrt(v);
    if (!(v > 0.0) || isinf(v))
        return s;
    precise float e = fma_rn(-s, s, v);
    precise float s1 = fma_rn(e, div_rn(0.5, s), s);
    return s1;
}

// ggml's vectorised expf (attention_kernels.cpp's softmax_expf), constant for constant.
float cpu_expf(float x)
{
    const float r = uintBitsToFloat(0x4B400000u);
    precise float z = fma_rn(x, uintBitsToFloat(0x3FB8AA3Bu), r);
    precise float n = z - r;
    precise float b = fma_rn(-n, uintBitsToFloat(0x35BFBE8Eu), fma_rn(-n, uintBitsToFloat(0x3F317200u), x));
    const uint e = floatBitsToUint(z) << 23;
    const float k = uintBitsToFloat(e + floatBitsToUint(1.0));
    precise float u = b * b;
    precise float j = fma_rn(fma_rn(fma_rn(uintBitsToFloat(0x3C072010u), b, uintBitsToFloat(0x3D2B9F17u)), u,
                              fma_rn(uintBitsToFloat(0x3E2AAF33u), b, uintBitsToFloat(0x3EFFFEDBu))),
                          u, uintBitsToFloat(0x3F7FFFF6u) * b);
    if (!(abs(n) > 126.0)) {
        precise float res = fma_rn(k, j, k);
        return res;
    }
    const uint g = n <= 0.0 ? 0x82000000u : 0u;
    const float s1 = uintBitsToFloat(g + 0x7F000000u);
    const float s2 = uintBitsToFloat(e - g);
    if (abs(n) > 192.0) {
        precise float res = s1 * s1;
        return res;
    }
    precise float res = fma_rn(s2, j, s2) * s1;
    return res;
}

// expm1f and tanhf as Debian 12's C library computes them (engine/util/glibc_tanhf.h, step for step:
// glibc 2.36's fdlibm code), for gemma2's soft-capped attention scores.
float cpu_expm1f(float x)
{
    uint hx = floatBitsToUint(x);
    const bool negative = (hx & 0x80000000u) != 0u;
    hx &= 0x7fffffffu;
    if (hx >= 0x4195b844u) {
        if (hx >= 0x42b17218u) {
            if (hx > 0x7f800000u) {
                precise float nan_ = x + x;
                return nan_;
            }
            if (hx == 0x7f800000u)
                return negative ? -1.0 : x;
            if (x > uintBitsToFloat(0x42b17180u))
                return uintBitsToFloat(0x7f800000u);
        }
        if (negative)
            return -1.0;
    }
    const float ln2_hi = uintBitsToFloat(0x3f317180u), ln2_lo = uintBitsToFloat(0x3717f7d1u);
    precise float hi, lo, c = 0.0;
    int k = 0;
    if (hx > 0x3eb17218u) {
        if (hx < 0x3F851592u) {
            precise float h0 = negative ? x + ln2_hi : x - ln2_hi;
            hi = h0;
            lo = negative ? -ln2_lo : ln2_lo;
            k = negative ? -1 : 1;
        } else {
            precise float kf = uintBitsToFloat(0x3fb8aa3bu) * x;
            precise float kr = kf + (negative ? -0.5 : 0.5);
            k = int(kr);
            const float t = float(k);
            precise float t_hi = t * ln2_hi;
            hi = x - t_hi;
            lo = t * ln2_lo;
        }
        precise float reduced = hi - lo;
        precise float d = hi - reduced;
        c = d - lo;
        x = reduced;
    } else if (hx < 0x33000000u) {
        return x;
    }
    precise float hfx = 0.5 * x;
    precise float hxs = x * hfx;
    precise float p5 = hxs * uintBitsToFloat(0xb457edbbu);
    precise float p4 = uintBitsToFloat(0x36867e54u) + p5;
    precise float m4 = hxs * p4;
    precise float p3 = uintBitsToFloat(0xb8a670cdu) + m4;
    precise float m3 = hxs * p3;
    precise float p2 = uintBitsToFloat(0x3ad00d01u) + m3;
    precise float m2 = hxs * p2;
    precise float p1 = uintBitsToFloat(0xbd088889u) + m2;
    precise float m1 = hxs * p1;
    precise float r1 = 1.0 + m1;
    precise float rh = r1 * hfx;
    precise float t = 3.0 - rh;
    precise float xt = x * t;
    precise float den = 6.0 - xt;
    precise float num = r1 - t;
    precise float e = hxs * div_rn(num, den);
    if (k == 0) {
        precise float xe = x * e;
        precise float xe_h = xe - hxs;
        precise float res = x - xe_h;
        return res;
    }
    precise float ec = e - c;
    precise float xec = x * ec;
    precise float e1 = xec - c;
    precise float e2 = e1 - hxs;
    if (k == -1) {
        precise float xe = x - e2;
        precise float h = 0.5 * xe;
        precise float res = h - 0.5;
        return res;
    }
    if (k == 1) {
        if (x < -0.25) {
            precise float xh = x + 0.5;
            precise float ex = e2 - xh;
            precise float res = -2.0 * ex;
            return res;
        }
        precise float xe = x - e2;
        precise float d2 = 2.0 * xe;
        precise float res = 1.0 + d2;
        return res;
    }
    if (k <= -2 || k > 56) {
        precise float ex = e2 - x;
        precise float y = 1.0 - ex;
        const float ys = uintBitsToFloat(floatBitsToUint(y) + (uint(k) << 23));
        precise float res = ys - 1.0;
        return res;
    }
    precise float y;
    if (k < 23) {
        const float t1 = uintBitsToFloat(0x3f800000u - (0x1000000u >> uint(k)));
        precise float ex = e2 - x;
        y = t1 - ex;
    } else {
        const float t2 = uintBitsToFloat(uint(0x7f - k) << 23);
        precise float et = e2 + t2;
        precise float y0 = x - et;
        y = y0 + 1.0;
    }
    return uintBitsToFloat(floatBitsToUint(y) + (uint(k) << 23));
}

float cpu_tanhf(float x)
{
    const uint jx = floatBitsToUint(x), ix = jx & 0x7fffffffu;
    const bool negative = (jx & 0x80000000u) != 0u;
    if (ix >= 0x7f800000u) {
        precise float r = negative ? div_rn(1.0, x) - 1.0 : div_rn(1.0, x) + 1.0;
        return r;
    }
    precise float z;
    if (ix < 0x41b00000u) {
        if (ix == 0u)
            return x;
        if (ix < 0x24000000u) {
            precise float one_x = 1.0 + x;
            precise float r = x * one_x;
            return r;
        }
        precise float ax2 = 2.0 * abs(x);
        if (ix >= 0x3f800000u) {
            precise float t = cpu_expm1f(ax2);
            precise float q = div_rn(2.0, t + 2.0);
            z = 1.0 - q;
        } else {
            precise float t = cpu_expm1f(-ax2);
            precise float t2 = t + 2.0;
            z = div_rn(-t, t2);
        }
    } else {
        z = 1.0;
    }
    return negative ? -z : z;
}

// ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)): _mm256 extract/add, movehl, movehdup.
float hsum8_halves(float a[8])
{
    precise float r0 = a[4] + a[0], r1 = a[5] + a[1], r2 = a[6] + a[2], r3 = a[7] + a[3];
    precise float s = (r0 + r2) + (r1 + r3);
    return s;
}

// ((a0+a4)+(a1+a5)) + ((a2+a6)+(a3+a7)): ggml's F16 reduction with hadd.
float hsum8_hadd(float a[8])
{
    precise float t0 = a[0] + a[4], t1 = a[1] + a[5], t2 = a[2] + a[6], t3 = a[3] + a[7];
    precise float s = (t0 + t1) + (t2 + t3);
    return s;
}

// ggml's F16 dot reduction: four 8-lane accumulators (over 32-element steps) added pairwise,
// (0 + 2) + (1 + 3) lane by lane, then summed by hadd.
float hsum_4x8(float acc[4][8])
{
    float r[8];
    for (uint l = 0u; l < 8u; ++l) {
        precise float a02 = acc[0][l] + acc[2][l];
        precise float a13 = acc[1][l] + acc[3][l];
        precise float s = a02 + a13;
        r[l] = s;
    }
    return hsum8_hadd(r);
}

#endif
