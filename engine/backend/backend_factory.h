// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// Choosing a backend: the CPU, a CUDA device, a Vulkan device, or "auto" (a CUDA device when one is
// usable, else a Vulkan GPU, else the CPU; a software Vulkan device such as lavapipe is only used when
// asked for explicitly).

#include "backend/backend.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace engine {

enum class BackendKind { Cpu, Vulkan, Cuda, Auto };

std::string_view backend_kind_name(BackendKind kind);
// "cpu", "vulkan", "cuda", "auto" (case-insensitive); nullopt otherwise.
std::optional<BackendKind> parse_backend_kind(std::string_view text);

// A backend as the app's picker and settings name it: a kind, and for Vulkan its arithmetic.
struct BackendChoice {
    BackendKind kind = BackendKind::Cpu;
    bool vulkan_exact = false; // the 64-bit shaders, bit-equal to the CPU (default: the f32 path)
    WeightOrder cpu_order = WeightOrder::LlamaCppDefault; // the CPU backend's (and a fallback's) order
    bool deterministic = false; // sessions in batch-invariant mode (Session::set_batch_invariant), CPU only
    // The CPU's attention in llama.cpp's flash-attention order (its default there: -fa auto resolves to on
    // for a CPU); "cpu-plain" is llama.cpp's --no-repack -fa off, the order of the reference fixtures.
    bool flash_attention = true;
};
// parse_backend_kind's names, "vulkan-exact" / "auto-exact" (the exact arithmetic), "cpu-plain"
// (the CPU in llama.cpp's --no-repack -fa off order) and "cpu-deterministic" (batch-invariant sums).
std::optional<BackendChoice> parse_backend_choice(std::string_view text);

// Vulkan or CUDA requested explicitly but unavailable falls back to the CPU too; `fallback_note` (when not
// null) is set to the reason whenever the result is not the kind asked for, and cleared otherwise.
// `device`: a Vulkan (or CUDA) device index, -1 for the best one. `vulkan_exact`: VulkanBackendOptions::exact
// (a device without 64-bit floats then falls back to the CPU, saying why).
// Auto takes hardware GPUs only, unless TOKENSCOPE_VULKAN_AUTO_SOFTWARE=1 (tests on lavapipe).
// `cpu_order`: the CPU backend's summation order (CpuBackendOptions::order), a fallback's too;
// `flash_attention` likewise (CpuBackendOptions::flash_attention; GPU backends keep their attention).
// `kv_types`: a quantized KV cache runs on the CPU backend only (Vulkan and CUDA keep F16): asked for
// with another kind, the CPU is used and the note says why.
std::unique_ptr<Backend> make_backend(BackendKind kind, std::shared_ptr<const Model> model, uint32_t n_ctx, int threads,
                                      std::string* fallback_note, int device = -1, bool vulkan_exact = false,
                                      WeightOrder cpu_order = WeightOrder::Plain, KvCacheTypes kv_types = {},
                                      bool flash_attention = false);

} // namespace engine
