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

#include "kquant_ints.glsl"

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
#else // K-quants: each 16-element group's value = d·scale·q − dmin·min (no minimums: d·scale·q)
    int q[32];
    ivec2 sc, mn;
    kq_chunk(row, c, q, sc, mn);
    const vec2 d = kq_d(row, c);
    for (uint g = 0u; g < 2u; ++g) {
        const float dl = d.x * float(sc[g]);
#if defined(TYPE_Q3_K) || defined(TYPE_Q6_K)
        for (uint i = 16u * g; i < 16u * g + 16u; ++i)
            v[i] = dl * float(q[i]);
#else
        const float ml = d.y * float(mn[g]);
        for (uint i = 16u * g; i < 16u * g + 16u; ++i)
            v[i] = dl * float(q[i]) - ml;
#endif
    }
#endif
}

#endif
