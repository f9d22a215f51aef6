// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// Another quantization of a model the user has, to compare quantizations of the same weights: every
// weight matrix (2-D, rows a multiple of 32 values) becomes Q8_0 or Q4_0 from whatever type it was
// stored in (dequantized exactly, then quantized as ggml's reference quantizers do); vectors (norms,
// biases) and everything else are kept as they are; the metadata is copied, general.file_type set.

#include "quant/ggml_type.h"

#include <filesystem>
#include <functional>

namespace engine {

struct RequantizeReport {
    uint32_t tensors_requantized = 0, tensors_kept = 0;
    uint64_t bytes_before = 0, bytes_after = 0;
};

// Writes `out` (atomically: whole or not at all). Throws Error for a type it cannot write, a
// source it cannot read, or `out` equal to `in`. `progress(done, total)` after each tensor.
RequantizeReport requantize_model(const std::filesystem::path& in, const std::filesystem::path& out, GgmlType type,
                                  const std::function<void(uint32_t, uint32_t)>& progress = {});

} // namespace engine
