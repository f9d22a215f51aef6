// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "quant/ggml_type.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace engine {

// Reference dequantization: turns `n` elements stored as `type` at `src` into f32 at `dst`.
// `n` must be a multiple of the type's block size. The arithmetic follows the order of the
// gguf-py reference (this file is compiled with -ffp-contract=off) so results are float-exact.
// Throws UnsupportedError naming the type (and `what`, e.g. the tensor) when it cannot be decoded.
void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n, std::string_view what = {});

} // namespace engine
