// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// The per-block arithmetic of the CUDA kernels that is not the CPU's own code (the dot products are,
// quant/vec_dot_portable.h), for the device and the host alike: weight blocks unpacked to 8-bit
// integers with their scales (embedding rows), F16/BF16 values. Block layouts: shared/reference/quants.md.
// test_cuda_kernels checks every function against the CPU backend's.
#include "quant/ggml_type.h"
#include "quant/vec_dot_portable.h"
#include "util/hd.h"

namespace engine::cuda {

constexpr uint32_t kWarp = 32;

TS_HD inline float half_at(const uint8_t* p)
{
    return half_to_f32(load_u16(p));
}

TS_HD inline float round_f16(float x)
{
    return half_to_f32(f32_to_half(x));
}

// ---- weights: one 32-element group of a row as integers and scales ----------------------------------

// Element i of the group is d[i / 16] · q[i] + m[i / 16] (m only for types with a minimum: has_min),
// rounded once per operation exactly as the CPU's dequantization rounds.
struct WeightGroup {
    int32_t q4[8] = {}; // 32 int8 values, four to a word, in element order
    float d[2] = {0.0f, 0.0f};
    float m[2] = {0.0f, 0.0f};
    bool has_min = false;
};

TS_HD inline bool is_quantized(GgmlType t)
{
    return t != GgmlType::F32 && t != GgmlType::F16 && t != GgmlType::BF16;
}
TS_HD inline bool is_k_quant(GgmlType t)
{
    return t == GgmlType::Q2_K || t == GgmlType::Q3_K || t == GgmlType::Q4_K || t == GgmlType::Q5_K ||
           t == GgmlType::Q6_K || t == GgmlType::IQ4_XS;
}
// Bytes of one block (32 elements, 256 for the k-quants); 0 for a type the kernels do not read.
TS_HD inline uint32_t block_bytes(GgmlType t)
{
    switch (t) {
    case GgmlType::Q4_0:
        return 18;
    case GgmlType::Q4_1:
        return 20;
    case GgmlType::Q5_0:
        return 22;
    case GgmlType::Q5_1:
        return 24;
    case GgmlType::Q8_0:
        return 34;
    case GgmlType::Q2_K:
        return 84;
    case GgmlType::Q3_K:
        return 110;
    case GgmlType::Q4_K:
        return 144;
    case GgmlType::Q5_K:
        return 176;
    case GgmlType::Q6_K:
        return 210;
    case GgmlType::IQ4_NL:
        return 18;
    case GgmlType::IQ4_XS:
        return 136;
    default:
        return 0;
    }
}

TS_HD inline void put_q(WeightGroup& g, uint32_t i, int32_t q)
{
    const uint32_t w = i / 4, shift = 8 * (i % 4);
    g.q4[w] = int32_t((uint32_t(g.q4[w]) & ~(0xFFu << shift)) | ((uint32_t(q) & 0xFFu) << shift));
}
// Element i of the group's integers. The word is picked by a loop of selects, not by indexing: an
// index known only at run time would put the group in local memory on the device.
TS_HD inline int32_t get_q(const WeightGroup& g, uint32_t i)
{
    uint32_t word = 0;
    for (uint32_t w = 0; w < 8; ++w)
        word = w == i / 4 ? uint32_t(g.q4[w]) : word;
    return int32_t(int8_t(word >> (8 * (i % 4))));
}

// Group j (elements 32j … 32j + 31) of a row of quantized type t.
TS_HD inline WeightGroup unpack_group(GgmlType t, const uint8_t* row, uint32_t j)
{
    WeightGroup g;
    if (!is_k_quant(t)) {
        const uint8_t* b = row + uint64_t(j) * block_bytes(t);
        const float d = half_at(b);
        g.d[0] = g.d[1] = d;
        switch (t) {
        case GgmlType::Q4_0:
        case GgmlType::Q4_1: {
            const bool min = t == GgmlType::Q4_1;
            const uint8_t* qs = b + (min ? 4 : 2);
            for (uint32_t i = 0; i < 16; ++i) {
                put_q(g, i, int32_t(qs[i] & 0x0F) - (min ? 0 : 8));
                put_q(g, i + 16, int32_t(qs[i] >> 4) - (min ? 0 : 8));
            }
            if (min) {
                g.has_min = true;
                g.m[0] = g.m[1] = half_at(b + 2);
            }
            break;
        }
        case GgmlType::Q5_0:
        case GgmlType::Q5_1: {
            const bool min = t == GgmlType::Q5_1;
            const uint32_t qh = load_u32(b + (min ? 4 : 2));
            const uint8_t* qs = b + (min ? 8 : 6);
            for (uint32_t i = 0; i < 16; ++i) {
                put_q(g, i, int32_t((qs[i] & 0x0Fu) | (((qh >> i) & 1u) << 4)) - (min ? 0 : 16));
                put_q(g, i + 16, int32_t((qs[i] >> 4) | (((qh >> (i + 16)) & 1u) << 4)) - (min ? 0 : 16));
            }
            if (min) {
                g.has_min = true;
                g.m[0] = g.m[1] = half_at(b + 2);
            }
            break;
        }
        case GgmlType::IQ4_NL: // d · qs[16]: indices into the non-linear table
            for (uint32_t i = 0; i < 16; ++i) {
                put_q(g, i, portable::iq4_value(b[2 + i] & 0x0F));
                put_q(g, i + 16, portable::iq4_value(b[2 + i] >> 4));
            }
            break;
        default: // Q8_0
            for (uint32_t i = 0; i < 32; ++i)
                put_q(g, i, int32_t(int8_t(b[2 + i])));
            break;
        }
        return g;
    }
    const uint8_t* b = row + uint64_t(j / 8) * block_bytes(t);
    const uint32_t sub = j % 8; // 32-element sub-block within the 256-element block
    switch (t) {
    case GgmlType::Q2_K: { // scales[16] · qs[64] · d · dmin
        const float d = half_at(b + 80), dmin = half_at(b + 82);
        for (uint32_t l = 0; l < 32; ++l)
            put_q(g, l, portable::low2_of(b + 16, int(32 * sub + l)));
        for (uint32_t half = 0; half < 2; ++half) {
            const uint8_t sc = b[2 * sub + half];
            g.d[half] = d * float(sc & 0x0F);
            g.m[half] = -(dmin * float(sc >> 4));
        }
        g.has_min = true;
        break;
    }
    case GgmlType::Q3_K: { // hmask[32] · qs[64] · scales[12] · d
        const uint8_t* sc = b + 96;
        const float d = half_at(b + 108);
        for (uint32_t l = 0; l < 32; ++l) {
            const bool high = (b[l] >> sub) & 1u;
            put_q(g, l, portable::low2_of(b + 32, int(32 * sub + l)) - (high ? 0 : 4));
        }
        for (uint32_t half = 0; half < 2; ++half)
            g.d[half] = d * float(portable::q3_k_scale(sc, int(2 * sub + half)));
        break;
    }
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: { // d · dmin · scales[12] · (qh[32]) · qs[128]
        const bool five = t == GgmlType::Q5_K;
        const float d = half_at(b), dmin = half_at(b + 2);
        int sc = 0, m = 0;
        portable::scale_min_k4(b + 4, int(sub), sc, m);
        const uint8_t* qs = b + (five ? 48 : 16);
        for (uint32_t l = 0; l < 32; ++l) {
            const uint8_t byte = qs[32 * (sub / 2) + l];
            uint32_t q = sub % 2 == 0 ? (byte & 0x0Fu) : (byte >> 4);
            if (five)
                q |= ((b[16 + l] >> sub) & 1u) << 4;
            put_q(g, l, int32_t(q));
        }
        g.d[0] = g.d[1] = d * float(sc);
        g.m[0] = g.m[1] = -(dmin * float(m));
        g.has_min = true;
        break;
    }
    case GgmlType::IQ4_XS: { // d · scales_h · scales_l[4] · qs[128]; sub-block scale d · (ls − 32)
        const float dl = half_at(b) * float(portable::iq4_xs_scale(b, int(sub)));
        for (uint32_t l = 0; l < 32; ++l)
            put_q(g, l, portable::iq4_xs_q(b, int(sub), int(l)));
        g.d[0] = g.d[1] = dl;
        break;
    }
    default: { // Q6_K: ql[128] · qh[64] · scales[16] · d
        const float d = half_at(b + 208);
        const uint32_t h = sub / 4, quarter = sub % 4;
        for (uint32_t l = 0; l < 32; ++l) {
            const uint8_t lbyte = b[64 * h + l + 32 * (quarter % 2)];
            const uint32_t low = quarter < 2 ? (lbyte & 0x0Fu) : (lbyte >> 4);
            const uint32_t high = (b[128 + 32 * h + l] >> (2 * quarter)) & 3u;
            put_q(g, l, int32_t(low | (high << 4)) - 32);
        }
        for (uint32_t half = 0; half < 2; ++half)
            g.d[half] = d * float(int8_t(b[192 + 2 * sub + half]));
        break;
    }
    }
    return g;
}

// Element i of a group as f32, with the CPU's rounding (a type without minimum adds nothing, so
// that −0 stays −0).
TS_HD inline float group_value(const WeightGroup& g, uint32_t i)
{
    const bool hi = i >= 16;
    const float v = (hi ? g.d[1] : g.d[0]) * float(get_q(g, i));
    return g.has_min ? v + (hi ? g.m[1] : g.m[0]) : v;
}

// Element i of a row of a float type (F32, F16, BF16).
TS_HD inline float float_weight(GgmlType t, const uint8_t* row, uint32_t i)
{
    if (t == GgmlType::F32)
        return bits_float(load_u32(row + 4 * uint64_t(i)));
    const uint16_t h = load_u16(row + 2 * uint64_t(i));
    return t == GgmlType::F16 ? half_to_f32(h) : bits_float(uint32_t(h) << 16);
}

} // namespace engine::cuda
