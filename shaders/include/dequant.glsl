// SPDX-License-Identifier: GPL-3.0-or-later
// Decoding of one 32-element chunk of a weight row, for the type selected by TYPE_<name>, with the
// formulas of engine/quant/dequant.cpp (block layouts: shared/reference/quants.md). Chunk c of a
// row holds elements 32c … 32c+31: one block of the legacy types, one eighth of a K-quant
// super-block. Float types read element by element and give 0 past `cols`.
#ifndef TOKENSCOPE_DEQUANT_GLSL
#define TOKENSCOPE_DEQUANT_GLSL

#include "bytes.glsl"

#if defined(TYPE_F32)
#define FLOAT_TYPE 1
#define BLOCK_BYTES 128u
#elif defined(TYPE_F16) || defined(TYPE_BF16)
#define FLOAT_TYPE 1
#define BLOCK_BYTES 64u
#elif defined(TYPE_Q4_0)
#define BLOCK_BYTES 18u
#elif defined(TYPE_Q4_1)
#define BLOCK_BYTES 20u
#elif defined(TYPE_Q5_0)
#define BLOCK_BYTES 22u
#elif defined(TYPE_Q5_1)
#define BLOCK_BYTES 24u
#elif defined(TYPE_Q8_0)
#define BLOCK_BYTES 34u
#elif defined(TYPE_Q2_K)
#define SUPER_BYTES 84u
#elif defined(TYPE_Q3_K)
#define SUPER_BYTES 110u
#elif defined(TYPE_Q4_K)
#define SUPER_BYTES 144u
#elif defined(TYPE_Q5_K)
#define SUPER_BYTES 176u
#elif defined(TYPE_Q6_K)
#define SUPER_BYTES 210u
#else
#error "define one TYPE_<name>"
#endif

// Byte offset of the block (or super-block) holding chunk c, and the chunk's index inside it.
#ifdef SUPER_BYTES
uint block_of(uint row, uint c) { return row + (c >> 3) * SUPER_BYTES; }
uint sub_of(uint c) { return c & 7u; }
#endif

// Four bytes as four unsigned values.
uvec4 bytes4(uint b) { const uint w = ld32(b); return uvec4(w & 0xFFu, (w >> 8) & 0xFFu, (w >> 16) & 0xFFu, w >> 24); }

void dequant_chunk(uint row, uint c, uint cols, precise out float v[32])
{
#if defined(TYPE_F32)
    for (uint i = 0u; i < 32u; ++i) {
        const uint e = 32u * c + i;
        v[i] = e < cols ? uintBitsToFloat(ld32(row + 4u * e)) : 0.0;
    }
#elif defined(TYPE_F16)
    for (uint i = 0u; i < 32u; ++i) {
        const uint e = 32u * c + i;
        v[i] = e < cols ? ld_half(row + 2u * e) : 0.0;
    }
#elif defined(TYPE_BF16)
    for (uint i = 0u; i < 32u; ++i) {
        const uint e = 32u * c + i;
        v[i] = e < cols ? uintBitsToFloat(ld16(row + 2u * e) << 16) : 0.0;
    }
#elif defined(TYPE_Q4_0)
    const uint b = row + c * BLOCK_BYTES; // d · qs[16]
    const float d = ld_half(b);
    for (uint k = 0u; k < 4u; ++k) {
        const uvec4 q = bytes4(b + 2u + 4u * k);
        for (uint j = 0u; j < 4u; ++j) {
            v[4u * k + j] = d * float(int(q[j] & 15u) - 8);
            v[4u * k + j + 16u] = d * float(int(q[j] >> 4) - 8);
        }
    }
#elif defined(TYPE_Q4_1)
    const uint b = row + c * BLOCK_BYTES; // d · m · qs[16]
    const float d = ld_half(b), m = ld_half(b + 2u);
    for (uint k = 0u; k < 4u; ++k) {
        const uvec4 q = bytes4(b + 4u + 4u * k);
        for (uint j = 0u; j < 4u; ++j) {
            v[4u * k + j] = d * float(q[j] & 15u) + m;
            v[4u * k + j + 16u] = d * float(q[j] >> 4) + m;
        }
    }
#elif defined(TYPE_Q5_0)
    const uint b = row + c * BLOCK_BYTES; // d · qh[4] · qs[16]
    const float d = ld_half(b);
    const uint qh = ld32(b + 2u);
    for (uint k = 0u; k < 4u; ++k) {
        const uvec4 q = bytes4(b + 6u + 4u * k);
        for (uint j = 0u; j < 4u; ++j) {
            const uint i = 4u * k + j;
            const uint lo = (q[j] & 15u) | (((qh >> i) & 1u) << 4);
            const uint hi = (q[j] >> 4) | (((qh >> (i + 16u)) & 1u) << 4);
            v[i] = d * float(int(lo) - 16);
            v[i + 16u] = d * float(int(hi) - 16);
        }
    }
#elif defined(TYPE_Q5_1)
    const uint b = row + c * BLOCK_BYTES; // d · m · qh[4] · qs[16]
    const float d = ld_half(b), m = ld_half(b + 2u);
    const uint qh = ld32(b + 4u);
    for (uint k = 0u; k < 4u; ++k) {
        const uvec4 q = bytes4(b + 8u + 4u * k);
        for (uint j = 0u; j < 4u; ++j) {
            const uint i = 4u * k + j;
            const uint lo = (q[j] & 15u) | (((qh >> i) & 1u) << 4);
            const uint hi = (q[j] >> 4) | (((qh >> (i + 16u)) & 1u) << 4);
            v[i] = d * float(lo) + m;
            v[i + 16u] = d * float(hi) + m;
        }
    }
#elif defined(TYPE_Q8_0)
    const uint b = row + c * BLOCK_BYTES; // d · qs[32] int8
    const float d = ld_half(b);
    for (uint k = 0u; k < 8u; ++k) {
        const int w = int(ld32(b + 2u + 4u * k));
        for (uint j = 0u; j < 4u; ++j)
            v[4u * k + j] = float(bitfieldExtract(w, int(8u * j), 8)) * d;
    }
#elif defined(TYPE_Q2_K)
    const uint b = block_of(row, c), sub = sub_of(c); // scales[16] · qs[64] · d · dmin
    const float d = ld_half(b + 80u), dmin = ld_half(b + 82u);
    const uint h = sub >> 2, j = sub & 3u;
    for (uint half_ = 0u; half_ < 2u; ++half_) {
        const uint sc = ld8(b + 2u * sub + half_);
        const float dl = d * float(sc & 15u);
        const float ml = dmin * float(sc >> 4);
        for (uint k = 0u; k < 4u; ++k) {
            const uvec4 q = bytes4(b + 16u + 32u * h + 16u * half_ + 4u * k);
            for (uint t = 0u; t < 4u; ++t)
                v[16u * half_ + 4u * k + t] = dl * float((q[t] >> (2u * j)) & 3u) - ml;
        }
    }
#elif defined(TYPE_Q3_K)
    const uint b = block_of(row, c), sub = sub_of(c); // hmask[32] · qs[64] · scales[12] · d
    const float d = ld_half(b + 108u);
    const uint h = sub >> 2, j = sub & 3u;
    for (uint half_ = 0u; half_ < 2u; ++half_) {
        const uint i = 2u * sub + half_; // scale index e / 16
        const uint low4 = i < 8u ? (ld8(b + 96u + i) & 15u) : (ld8(b + 96u + i - 8u) >> 4);
        const uint high2 = (ld8(b + 96u + 8u + (i & 3u)) >> (2u * (i >> 2))) & 3u;
        const float dl = d * float(int(low4 | (high2 << 4)) - 32);
        for (uint k = 0u; k < 4u; ++k) {
            const uint l0 = 16u * half_ + 4u * k;
            const uvec4 q = bytes4(b + 32u + 32u * h + l0);
            const uvec4 hm = bytes4(b + l0);
            for (uint t = 0u; t < 4u; ++t) {
                const int low = int((q[t] >> (2u * j)) & 3u);
                const bool high_set = ((hm[t] >> sub) & 1u) != 0u; // set: no -4 offset
                v[l0 + t] = dl * float(low - (high_set ? 0 : 4));
            }
        }
    }
#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
    const uint b = block_of(row, c), sub = sub_of(c); // d · dmin · scales[12] · [qh[32]] · qs[128]
    const float d = ld_half(b), dmin = ld_half(b + 2u);
    uint sc, m;
    if (sub < 4u) {
        sc = ld8(b + 4u + sub) & 63u;
        m = ld8(b + 4u + sub + 4u) & 63u;
    } else {
        sc = (ld8(b + 4u + sub + 4u) & 15u) | ((ld8(b + 4u + sub - 4u) >> 6) << 4);
        m = (ld8(b + 4u + sub + 4u) >> 4) | ((ld8(b + 4u + sub) >> 6) << 4);
    }
    const float dl = d * float(sc);
    const float ml = dmin * float(m);
#if defined(TYPE_Q4_K)
    const uint qs = b + 16u;
#else
    const uint qs = b + 48u;
#endif
    for (uint k = 0u; k < 8u; ++k) {
        const uvec4 q = bytes4(qs + 32u * (sub >> 1) + 4u * k);
#if defined(TYPE_Q5_K)
        const uvec4 qh = bytes4(b + 16u + 4u * k);
#endif
        for (uint t = 0u; t < 4u; ++t) {
            uint low = (sub & 1u) == 0u ? (q[t] & 15u) : (q[t] >> 4);
#if defined(TYPE_Q5_K)
            low |= ((qh[t] >> sub) & 1u) << 4;
#endif
            v[4u * k + t] = dl * float(low) - ml;
        }
    }
#elif defined(TYPE_Q6_K)
    const uint b = block_of(row, c), sub = sub_of(c); // ql[128] · qh[64] · scales[16] int8 · d
    const float d = ld_half(b + 208u);
    const uint h = sub >> 2, quarter = sub & 3u;
    for (uint half_ = 0u; half_ < 2u; ++half_) {
        const float dl = d * float(ld8s(b + 192u + 2u * sub + half_));
        for (uint k = 0u; k < 4u; ++k) {
            const uint l0 = 16u * half_ + 4u * k;
            const uvec4 ql = bytes4(b + 64u * h + l0 + 32u * (quarter & 1u));
            const uvec4 qh = bytes4(b + 128u + 32u * h + l0);
            for (uint t = 0u; t < 4u; ++t) {
                const uint low = quarter < 2u ? (ql[t] & 15u) : (ql[t] >> 4);
                const uint high = (qh[t] >> (2u * quarter)) & 3u;
                v[l0 + t] = dl * float(int(low | (high << 4)) - 32);
            }
        }
    }
#endif
}

#endif
