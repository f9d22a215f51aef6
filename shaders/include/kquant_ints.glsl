// SPDX-License-Identifier: GPL-3.0-or-later
// The integers of one 32-element chunk of a K-quant super-block (chunk c of a row: elements 32c …
// 32c+31, sub-block c & 7 of super-block c >> 3), as the CPU's block sums use them
// (engine/quant/vec_dot.cpp, sums_*): the quantized values q (offsets applied), the scales of the
// chunk's two 16-element groups and, for types with minimums, their minimums. The CPU's integer sums
// per super-block are s1 = Σ scale·Σ q·q8 and s2 = Σ min·bsum; integers add in any order, so a
// shader that splits the work differently still gets them exactly. kq_d() gives (d, dmin).
#ifndef TOKENSCOPE_KQUANT_INTS_GLSL
#define TOKENSCOPE_KQUANT_INTS_GLSL

// Included by dequant.glsl (block_of, sub_of, bytes4, ld8…).
#ifdef SUPER_BYTES
#define KQUANT 1

vec2 kq_d(uint row, uint c)
{
    const uint b = block_of(row, c);
#if defined(TYPE_Q2_K)
    return vec2(ld_half(b + 80u), ld_half(b + 82u));
#elif defined(TYPE_Q3_K)
    return vec2(ld_half(b + 108u), 0.0);
#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
    return vec2(ld_half(b), ld_half(b + 2u));
#else // Q6_K
    return vec2(ld_half(b + 208u), 0.0);
#endif
}

void kq_chunk(uint row, uint c, out int q[32], out ivec2 sc, out ivec2 mn)
{
    const uint b = block_of(row, c), sub = sub_of(c);
    mn = ivec2(0);
#if defined(TYPE_Q2_K)
    const uint h = sub >> 2, j = sub & 3u;
    for (uint half_ = 0u; half_ < 2u; ++half_) {
        const uint s = ld8(b + 2u * sub + half_);
        sc[half_] = int(s & 15u);
        mn[half_] = int(s >> 4);
        for (uint k = 0u; k < 4u; ++k) {
            const uvec4 w = bytes4(b + 16u + 32u * h + 16u * half_ + 4u * k);
            for (uint t = 0u; t < 4u; ++t)
                q[16u * half_ + 4u * k + t] = int((w[t] >> (2u * j)) & 3u);
        }
    }
#elif defined(TYPE_Q3_K)
    const uint h = sub >> 2, j = sub & 3u;
    for (uint half_ = 0u; half_ < 2u; ++half_) {
        const uint i = 2u * sub + half_;
        const uint low4 = i < 8u ? (ld8(b + 96u + i) & 15u) : (ld8(b + 96u + i - 8u) >> 4);
        const uint high2 = (ld8(b + 96u + 8u + (i & 3u)) >> (2u * (i >> 2))) & 3u;
        sc[half_] = int(low4 | (high2 << 4)) - 32;
        for (uint k = 0u; k < 4u; ++k) {
            const uint l0 = 16u * half_ + 4u * k;
            const uvec4 w = bytes4(b + 32u + 32u * h + l0);
            const uvec4 hm = bytes4(b + l0);
            for (uint t = 0u; t < 4u; ++t)
                q[l0 + t] = int((w[t] >> (2u * j)) & 3u) - (((hm[t] >> sub) & 1u) != 0u ? 0 : 4);
        }
    }
#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
    uint s, m;
    if (sub < 4u) {
        s = ld8(b + 4u + sub) & 63u;
        m = ld8(b + 4u + sub + 4u) & 63u;
    } else {
        s = (ld8(b + 4u + sub + 4u) & 15u) | ((ld8(b + 4u + sub - 4u) >> 6) << 4);
        m = (ld8(b + 4u + sub + 4u) >> 4) | ((ld8(b + 4u + sub) >> 6) << 4);
    }
    sc = ivec2(int(s));
    mn = ivec2(int(m));
#if defined(TYPE_Q4_K)
    const uint qs = b + 16u;
#else
    const uint qs = b + 48u;
#endif
    for (uint k = 0u; k < 8u; ++k) {
        const uvec4 w = bytes4(qs + 32u * (sub >> 1) + 4u * k);
#if defined(TYPE_Q5_K)
        const uvec4 qh = bytes4(b + 16u + 4u * k);
#endif
        for (uint t = 0u; t < 4u; ++t) {
            uint low = (sub & 1u) == 0u ? (w[t] & 15u) : (w[t] >> 4);
#if defined(TYPE_Q5_K)
            low |= ((qh[t] >> sub) & 1u) << 4;
#endif
            q[4u * k + t] = int(low);
        }
    }
#else // Q6_K
    const uint h = sub >> 2, quarter = sub & 3u;
    for (uint half_ = 0u; half_ < 2u; ++half_) {
        sc[half_] = ld8s(b + 192u + 2u * sub + half_);
        for (uint k = 0u; k < 4u; ++k) {
            const uint l0 = 16u * half_ + 4u * k;
            const uvec4 ql = bytes4(b + 64u * h + l0 + 32u * (quarter & 1u));
            const uvec4 qh = bytes4(b + 128u + 32u * h + l0);
            for (uint t = 0u; t < 4u; ++t) {
                const uint low = quarter < 2u ? (ql[t] & 15u) : (ql[t] >> 4);
                q[l0 + t] = int(low | (((qh[t] >> (2u * quarter)) & 3u) << 4)) - 32;
            }
        }
    }
#endif
}

#endif // SUPER_BYTES
#endif
