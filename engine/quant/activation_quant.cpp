// SPDX-License-Identifier: GPL-3.0-or-later
// Same rounding as ggml's CPU quantizers on x86: Q8_0/Q8_1 multiply by 127/amax and round half to
// even (its AVX path); Q8_K follows quantize_row_q8_K_ref.
#include "quant/activation_quant.h"

#include "quant/simd/activation_simd.h"
#include "quant/vec_dot.h"

#include "util/fp16.h"

#include <cmath>
#include <cstring>

namespace engine {

namespace {

// Round half to even through the float mantissa, as ggml's nearest_int.
inline int nearest_int(float v)
{
    float shifted = v + 12582912.f;
    int32_t i;
    std::memcpy(&i, &shifted, 4);
    return (i & 0x007fffff) - 0x00400000;
}

// One block of 32: amax, then qs[j] = round(x[j] · 127/amax); returns d = amax/127 and the quants' sum.
float q8_32_block(const float* x, int8_t qs[32], bool simd, int& sum)
{
    float amax = 0.0f;
    if (simd) {
        amax = simd::abs_max_avx2(x, 32);
    } else {
        for (int j = 0; j < 32; ++j)
            amax = std::max(amax, std::fabs(x[j]));
    }
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    if (simd) {
        sum = simd::q8_0_quants_avx2(x, id, qs);
    } else {
        sum = 0;
        for (int j = 0; j < 32; ++j) {
            qs[j] = static_cast<int8_t>(std::nearbyint(x[j] * id));
            sum += qs[j];
        }
    }
    return amax / 127.0f;
}

void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t n)
{
    const bool simd = simd_level() != SimdLevel::Scalar;
    int sum = 0;
    for (int64_t b = 0; b < n / 32; ++b, x += 32)
        y[b].d = f32_to_fp16(q8_32_block(x, y[b].qs, simd, sum));
}

void quantize_q8_1(const float* x, BlockQ8_1* y, int64_t n)
{
    const bool simd = simd_level() != SimdLevel::Scalar;
    for (int64_t b = 0; b < n / 32; ++b, x += 32) {
        int sum = 0;
        const float d = q8_32_block(x, y[b].qs, simd, sum);
        y[b].d = fp16_to_f32(f32_to_fp16(d));
        y[b].s = fp16_to_f32(f32_to_fp16(static_cast<float>(sum) * d));
    }
}

void quantize_q8_k(const float* x, BlockQ8_K* y, int64_t n)
{
    const bool simd = simd_level() != SimdLevel::Scalar;
    for (int64_t b = 0; b < n / 256; ++b, x += 256) {
        float max = 0.0f, amax = 0.0f;
        if (simd) { // the largest |x|, then its first holder: the scan's choice
            amax = simd::abs_max_avx2(x, 256);
            for (int j = 0; j < 256 && amax > 0.0f; ++j)
                if (std::fabs(x[j]) == amax) {
                    max = x[j];
                    break;
                }
        } else {
            for (int j = 0; j < 256; ++j) {
                const float ax = std::fabs(x[j]);
                if (ax > amax) {
                    amax = ax;
                    max = x[j];
                }
            }
        }
        if (amax == 0.0f) {
            std::memset(&y[b], 0, sizeof(BlockQ8_K));
            continue;
        }
        const float iscale = -127.0f / max;
        if (simd) {
            simd::q8_k_quants_avx2(x, iscale, y[b].qs, y[b].bsums);
        } else {
            for (int j = 0; j < 256; ++j)
                y[b].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
            for (int j = 0; j < 16; ++j) {
                int sum = 0;
                for (int k = 0; k < 16; ++k)
                    sum += y[b].qs[j * 16 + k];
                y[b].bsums[j] = static_cast<int16_t>(sum);
            }
        }
        y[b].d = 1.0f / iscale;
    }
}

} // namespace

ActivationFormat activation_format(GgmlType t)
{
    switch (t) {
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0:
        return ActivationFormat::Q8_0;
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
        return ActivationFormat::Q8_1;
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
        return ActivationFormat::Q8_K;
    case GgmlType::IQ4_NL:
        return ActivationFormat::Q8_0;
    case GgmlType::IQ4_XS:
        return ActivationFormat::Q8_K;
    case GgmlType::F16:
        return ActivationFormat::F16; // ggml multiplies F16 weights with F16 activations
    case GgmlType::BF16:
        return ActivationFormat::BF16; // … and BF16 weights with BF16 activations
    default:
        return ActivationFormat::F32;
    }
}

std::size_t activation_row_bytes(ActivationFormat f, int64_t n)
{
    const auto un = static_cast<std::size_t>(n);
    switch (f) {
    case ActivationFormat::F32:
        return un * sizeof(float);
    case ActivationFormat::F16:
    case ActivationFormat::BF16:
        return un * sizeof(uint16_t);
    case ActivationFormat::Q8_0:
        return un / 32 * sizeof(BlockQ8_0);
    case ActivationFormat::Q8_1:
        return un / 32 * sizeof(BlockQ8_1);
    case ActivationFormat::Q8_K:
        return un / 256 * sizeof(BlockQ8_K);
    }
    return 0;
}

void quantize_activations(ActivationFormat f, const float* x, void* out, int64_t n)
{
    switch (f) {
    case ActivationFormat::F32:
        std::memcpy(out, x, static_cast<std::size_t>(n) * sizeof(float));
        break;
    case ActivationFormat::F16:
        for (int64_t i = simd_level() != SimdLevel::Scalar ? simd::f32_to_f16_avx2(x, static_cast<uint16_t*>(out), n)
                                                           : 0;
             i < n; ++i)
            static_cast<uint16_t*>(out)[i] = f32_to_fp16(x[i]);
        break;
    case ActivationFormat::BF16:
        for (int64_t i = simd_level() != SimdLevel::Scalar ? simd::f32_to_bf16_avx2(x, static_cast<uint16_t*>(out), n)
                                                           : 0;
             i < n; ++i)
            static_cast<uint16_t*>(out)[i] = f32_to_bf16(x[i]);
        break;
    case ActivationFormat::Q8_0:
        quantize_q8_0(x, static_cast<BlockQ8_0*>(out), n);
        break;
    case ActivationFormat::Q8_1:
        quantize_q8_1(x, static_cast<BlockQ8_1*>(out), n);
        break;
    case ActivationFormat::Q8_K:
        quantize_q8_k(x, static_cast<BlockQ8_K*>(out), n);
        break;
    }
}

} // namespace engine
