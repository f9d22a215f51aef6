// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// flash_attention_row's body, compiled twice: portably (flash_attention.cpp) and with AVX2 + FMA +
// F16C (simd/flash_attention_avx2.cpp), where the compiler vectorizes the loops. Every fused
// multiply-add is written as std::fma, and no other product is followed by a sum, so both give the
// same bits (and llama.cpp's: its compiler fuses S·ms + vs, the values' accumulation uses FMA).

#include "backend/cpu/flash_attention.h"
#include "quant/activation_quant.h"
#include "quant/dequant.h"
#include "quant/vec_dot.h"
#include "util/fp16.h"

#include <cmath>
#include <limits>

namespace engine::cpu {

// Internal linkage: each translation unit keeps its own copy, compiled with its own flags (an inline
// function with external linkage would let the linker pick one build for both).
namespace {

// ggml's vec_scale / vec_mad in F16 (x86: widen eight lanes, multiply or fuse, narrow with round to
// nearest even; head_dim is whole 32-lane steps, so no scalar tail runs).
void scale_f16(uint16_t* y, uint32_t n, float v)
{
    for (uint32_t i = 0; i < n; ++i)
        y[i] = f32_to_fp16(fp16_to_f32(y[i]) * v);
}

void mad_f16(uint16_t* y, const uint16_t* x, uint32_t n, float v)
{
    for (uint32_t i = 0; i < n; ++i)
        y[i] = f32_to_fp16(std::fma(fp16_to_f32(x[i]), v, fp16_to_f32(y[i])));
}

void flash_attention_row_impl(const FlashRow& row, float* out, float* weights, FlashScratch& scratch)
{
    const uint32_t D = row.head_dim;
    const ActivationFormat q_format = activation_format(row.types.k);
    scratch.q.resize(activation_row_bytes(q_format, D));
    quantize_activations(q_format, row.q, scratch.q.data(), D);
    const VecDotFn kq_dot = vec_dot_for(row.types.k);
    const bool f16_values = row.types.v == GgmlType::F16;
    if (f16_values)
        scratch.acc16.assign(D, 0);
    else
        scratch.acc.assign(D, 0.0f);
    scratch.acc.resize(D);
    scratch.v.resize(D);
    if (weights)
        scratch.scores.assign(row.n_slots, -std::numeric_limits<float>::infinity());

    // llama.cpp divides the scale by the soft cap once, then caps each score.
    const float scale = row.softcap != 0.0f ? row.scale / row.softcap : row.scale;
    float sum = 0.0f;
    float max = -std::numeric_limits<float>::infinity();
    for (uint32_t j = row.first; j < row.n_slots; ++j) {
        if (!row.keys[j])
            continue;
        float s = kq_dot(row.keys[j], scratch.q.data(), D) * scale;
        if (row.softcap != 0.0f)
            s = row.softcap * std::tanh(s);
        if (weights)
            scratch.scores[j] = s;
        float ms = 1.0f; // rescales what was accumulated when s is a new maximum
        float vs = 1.0f; // this value's weight, expf(s − max)
        if (s > max) {
            const float old = max;
            max = s;
            ms = std::exp(old - max);
            if (f16_values)
                scale_f16(scratch.acc16.data(), D, ms);
            else
                for (uint32_t i = 0; i < D; ++i)
                    scratch.acc[i] *= ms;
        } else {
            vs = std::exp(s - max);
        }
        if (f16_values) {
            mad_f16(scratch.acc16.data(), reinterpret_cast<const uint16_t*>(row.values[j]), D, vs);
        } else {
            dequantize_row(row.types.v, row.values[j], scratch.v.data(), D);
            for (uint32_t i = 0; i < D; ++i)
                scratch.acc[i] = std::fma(scratch.v[i], vs, scratch.acc[i]);
        }
        sum = std::fma(sum, ms, vs);
    }
    if (f16_values)
        for (uint32_t i = 0; i < D; ++i)
            scratch.acc[i] = fp16_to_f32(scratch.acc16[i]);
    const float inv = sum == 0.0f ? 0.0f : 1.0f / sum;
    for (uint32_t i = 0; i < D; ++i)
        out[i] = scratch.acc[i] * inv;
    if (weights)
        for (uint32_t j = 0; j < row.n_slots; ++j)
            weights[j] = (j >= row.first && row.keys[j]) ? std::exp(scratch.scores[j] - max) * inv : 0.0f;
}

} // namespace

} // namespace engine::cpu
