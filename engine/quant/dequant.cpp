// SPDX-License-Identifier: GPL-3.0-or-later
// Block layouts: shared/reference/quants.md. Each function decodes whole blocks, in the order of
// operations gguf-py uses, so that every element matches it bit for bit.
#include "quant/dequant.h"

#include "util/error.h"
#include "util/fp16.h"

#include <cstring>
#include <string>

namespace engine {

namespace {

constexpr int QK = 32;
constexpr int QK_K = 256;

uint16_t load_u16(const uint8_t* p)
{
    return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
float load_half(const uint8_t* p)
{
    return fp16_to_f32(load_u16(p));
}
uint32_t load_u32(const uint8_t* p)
{
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v; // little-endian hosts only (x86-64, aarch64)
}

// ---- legacy 32-element blocks ---------------------------------------------------------------

void dequant_q4_0(const uint8_t* b, float* y)
{ // d half · qs[16]
    const float d = load_half(b);
    const uint8_t* qs = b + 2;
    for (int j = 0; j < QK / 2; ++j) {
        y[j] = d * static_cast<float>((qs[j] & 0x0F) - 8);
        y[j + QK / 2] = d * static_cast<float>((qs[j] >> 4) - 8);
    }
}

void dequant_q4_1(const uint8_t* b, float* y)
{ // d half · m half · qs[16]
    const float d = load_half(b);
    const float m = load_half(b + 2);
    const uint8_t* qs = b + 4;
    for (int j = 0; j < QK / 2; ++j) {
        y[j] = d * static_cast<float>(qs[j] & 0x0F) + m;
        y[j + QK / 2] = d * static_cast<float>(qs[j] >> 4) + m;
    }
}

void dequant_q5_0(const uint8_t* b, float* y)
{ // d half · qh[4] · qs[16]
    const float d = load_half(b);
    const uint32_t qh = load_u32(b + 2);
    const uint8_t* qs = b + 6;
    for (int j = 0; j < QK / 2; ++j) {
        const int lo = (qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1u) << 4);
        const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
        y[j] = d * static_cast<float>(lo - 16);
        y[j + QK / 2] = d * static_cast<float>(hi - 16);
    }
}

void dequant_q5_1(const uint8_t* b, float* y)
{ // d half · m half · qh[4] · qs[16]
    const float d = load_half(b);
    const float m = load_half(b + 2);
    const uint32_t qh = load_u32(b + 4);
    const uint8_t* qs = b + 8;
    for (int j = 0; j < QK / 2; ++j) {
        const int lo = (qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1u) << 4);
        const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
        y[j] = d * static_cast<float>(lo) + m;
        y[j + QK / 2] = d * static_cast<float>(hi) + m;
    }
}

void dequant_q8_0(const uint8_t* b, float* y)
{ // d half · qs[32] int8
    const float d = load_half(b);
    const auto* qs = reinterpret_cast<const int8_t*>(b + 2);
    for (int j = 0; j < QK; ++j)
        y[j] = static_cast<float>(qs[j]) * d;
}

// ---- k-quants (256-element super-blocks) ------------------------------------------------------

void dequant_q2_k(const uint8_t* b, float* y)
{ // scales[16] · qs[64] · d half · dmin half
    const uint8_t* scales = b;
    const uint8_t* qs = b + 16;
    const float d = load_half(b + 80);
    const float dmin = load_half(b + 82);
    for (int e = 0; e < QK_K; ++e) {
        const int h = e / 128, j = (e % 128) / 32, l = e % 32;
        const uint8_t sc = scales[e / 16];
        const float dl = d * static_cast<float>(sc & 0x0F);
        const float ml = dmin * static_cast<float>(sc >> 4);
        const int q = (qs[32 * h + l] >> (2 * j)) & 3;
        y[e] = dl * static_cast<float>(q) - ml;
    }
}

void dequant_q3_k(const uint8_t* b, float* y)
{ // hmask[32] · qs[64] · scales[12] · d half
    const uint8_t* hmask = b;
    const uint8_t* qs = b + 32;
    const uint8_t* sc = b + 96;
    const float d = load_half(b + 108);
    float dl[16];
    for (int i = 0; i < 16; ++i) {
        const int low4 = i < 8 ? (sc[i] & 0x0F) : (sc[i - 8] >> 4);
        const int high2 = (sc[8 + i % 4] >> (2 * (i / 4))) & 3;
        dl[i] = d * static_cast<float>((low4 | (high2 << 4)) - 32);
    }
    for (int e = 0; e < QK_K; ++e) {
        const int h = e / 128, j = (e % 128) / 32, l = e % 32;
        const int low = (qs[32 * h + l] >> (2 * j)) & 3;
        const bool high_set = (hmask[l] >> (e / 32)) & 1; // set bit means "no -4 offset"
        y[e] = dl[e / 16] * static_cast<float>(low - (high_set ? 0 : 4));
    }
}

// The 12-byte packing of eight 6-bit scales and eight 6-bit mins shared by Q4_K and Q5_K.
void unpack_scale_min_k4(const uint8_t* q, uint8_t* sc, uint8_t* m)
{
    for (int j = 0; j < 8; ++j) {
        if (j < 4) {
            sc[j] = q[j] & 63;
            m[j] = q[j + 4] & 63;
        } else {
            sc[j] = static_cast<uint8_t>((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
            m[j] = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
        }
    }
}

void dequant_q4_k(const uint8_t* b, float* y)
{ // d half · dmin half · scales[12] · qs[128]
    const float d = load_half(b);
    const float dmin = load_half(b + 2);
    uint8_t sc[8], m[8];
    unpack_scale_min_k4(b + 4, sc, m);
    const uint8_t* qs = b + 16;
    for (int e = 0; e < QK_K; ++e) {
        const int sub = e / 32, c = e / 64, l = e % 32;
        const float dl = d * static_cast<float>(sc[sub]);
        const float ml = dmin * static_cast<float>(m[sub]);
        const uint8_t byte = qs[32 * c + l];
        const int q = (sub % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
        y[e] = dl * static_cast<float>(q) - ml;
    }
}

void dequant_q5_k(const uint8_t* b, float* y)
{ // d half · dmin half · scales[12] · qh[32] · qs[128]
    const float d = load_half(b);
    const float dmin = load_half(b + 2);
    uint8_t sc[8], m[8];
    unpack_scale_min_k4(b + 4, sc, m);
    const uint8_t* qh = b + 16;
    const uint8_t* qs = b + 48;
    for (int e = 0; e < QK_K; ++e) {
        const int sub = e / 32, c = e / 64, l = e % 32;
        const float dl = d * static_cast<float>(sc[sub]);
        const float ml = dmin * static_cast<float>(m[sub]);
        const uint8_t byte = qs[32 * c + l];
        const int low = (sub % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
        const int high = (qh[l] >> sub) & 1;
        y[e] = dl * static_cast<float>(low | (high << 4)) - ml;
    }
}

void dequant_q6_k(const uint8_t* b, float* y)
{ // ql[128] · qh[64] · scales[16] int8 · d half
    const uint8_t* ql = b;
    const uint8_t* qh = b + 128;
    const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
    const float d = load_half(b + 208);
    for (int e = 0; e < QK_K; ++e) {
        const int h = e / 128, r = e % 128;
        const int quarter = r / 32, l = r % 32;
        const uint8_t lbyte = ql[64 * h + l + 32 * (quarter % 2)];
        const int low = (quarter < 2) ? (lbyte & 0x0F) : (lbyte >> 4);
        const int high = (qh[32 * h + l] >> (2 * quarter)) & 3;
        const float dl = d * static_cast<float>(scales[e / 16]);
        y[e] = dl * static_cast<float>((low | (high << 4)) - 32);
    }
}

// ---- IQ4_NL / IQ4_XS: 4-bit indices into a non-linear table ------------------------------------

constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

void dequant_iq4_nl(const uint8_t* b, float* y)
{ // d half · qs[16]
    const float d = load_half(b);
    for (int j = 0; j < QK / 2; ++j) {
        y[j] = d * static_cast<float>(kIq4Values[b[2 + j] & 0x0F]);
        y[j + QK / 2] = d * static_cast<float>(kIq4Values[b[2 + j] >> 4]);
    }
}

void dequant_iq4_xs(const uint8_t* b, float* y)
{ // d half · scales_h u16 · scales_l[4] · qs[128]; sub-block scale d · (ls − 32)
    const float d = load_half(b);
    const uint16_t scales_h = load_u16(b + 2);
    for (int ib = 0; ib < QK_K / 32; ++ib) {
        const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0x0F) | (((scales_h >> (2 * ib)) & 3) << 4);
        const float dl = d * static_cast<float>(ls - 32);
        const uint8_t* qs = b + 8 + 16 * ib;
        for (int j = 0; j < 16; ++j) {
            y[32 * ib + j] = dl * static_cast<float>(kIq4Values[qs[j] & 0x0F]);
            y[32 * ib + 16 + j] = dl * static_cast<float>(kIq4Values[qs[j] >> 4]);
        }
    }
}

using BlockDecoder = void (*)(const uint8_t*, float*);

BlockDecoder block_decoder(GgmlType type)
{
    switch (type) {
    case GgmlType::Q4_0:
        return dequant_q4_0;
    case GgmlType::Q4_1:
        return dequant_q4_1;
    case GgmlType::Q5_0:
        return dequant_q5_0;
    case GgmlType::Q5_1:
        return dequant_q5_1;
    case GgmlType::Q8_0:
        return dequant_q8_0;
    case GgmlType::Q2_K:
        return dequant_q2_k;
    case GgmlType::Q3_K:
        return dequant_q3_k;
    case GgmlType::Q4_K:
        return dequant_q4_k;
    case GgmlType::Q5_K:
        return dequant_q5_k;
    case GgmlType::Q6_K:
        return dequant_q6_k;
    case GgmlType::IQ4_NL:
        return dequant_iq4_nl;
    case GgmlType::IQ4_XS:
        return dequant_iq4_xs;
    default:
        return nullptr;
    }
}

} // namespace

void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n, std::string_view what)
{
    const auto* p = static_cast<const uint8_t*>(src);
    switch (type) {
    case GgmlType::F32:
        std::memcpy(dst, p, static_cast<size_t>(n) * sizeof(float));
        return;
    case GgmlType::F16:
        for (int64_t i = 0; i < n; ++i)
            dst[i] = fp16_to_f32(load_u16(p + 2 * i));
        return;
    case GgmlType::BF16:
        for (int64_t i = 0; i < n; ++i)
            dst[i] = bf16_to_f32(load_u16(p + 2 * i));
        return;
    default:
        break;
    }
    const auto traits = ggml_type_traits(type);
    const BlockDecoder decode = block_decoder(type);
    if (!decode) {
        std::string msg = "quantization type " + std::string(traits.name) + " is not supported";
        if (!what.empty())
            msg += " (tensor " + std::string(what) + ")";
        throw UnsupportedError(msg);
    }
    const int64_t blocks = n / traits.block_elements;
    for (int64_t i = 0; i < blocks; ++i)
        decode(p + i * traits.block_bytes, dst + i * traits.block_elements);
}

} // namespace engine
