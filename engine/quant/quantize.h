// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// Weight quantizers for requantizing a model: Q8_0 and Q4_0 blocks exactly as ggml's reference
// quantizers (quantize_row_q8_0_ref / quantize_row_q4_0_ref) and the gguf Python package make
// them — not the activation quantizer of activation_quant.h, which rounds differently.

#include "quant/ggml_type.h"

#include <cstddef>
#include <cstdint>

namespace engine {

// Whether quantize_row writes this type.
bool can_quantize_to(GgmlType type);
// Quantizes n floats (a multiple of the type's block size) into `out`.
void quantize_row(GgmlType type, const float* x, void* out, int64_t n);

} // namespace engine
