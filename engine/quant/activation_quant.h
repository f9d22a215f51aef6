// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "quant/ggml_type.h"

#include <cstddef>
#include <cstdint>

namespace engine {

// Activations are quantized before a quantized matmul, as llama.cpp does, so that the dot product
// runs on integers: Q8_0 blocks for the legacy weight types, Q8_1 (with the block sum) for the
// offset types Q4_1/Q5_1, Q8_K super-blocks (with 16-element sums) for the k-quants.
struct BlockQ8_0 {
    uint16_t d; // f16 scale
    int8_t qs[32];
};
struct BlockQ8_1 {
    float d;
    float s; // d · Σ qs
    int8_t qs[32];
};
struct BlockQ8_K {
    float d;
    int8_t qs[256];
    int16_t bsums[16];
};

enum class ActivationFormat { F32, F16, BF16, Q8_0, Q8_1, Q8_K };

// The activation format a weight type's dot product consumes.
ActivationFormat activation_format(GgmlType weight_type);
// Bytes one row of n activations takes in that format.
std::size_t activation_row_bytes(ActivationFormat format, int64_t n);
// Quantizes (or copies) one row of n f32 activations into `out`.
void quantize_activations(ActivationFormat format, const float* x, void* out, int64_t n);

} // namespace engine
