// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "backend/backend.h"

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

// --backend cpu|vulkan|auto, --device N, --vulkan-exact, --no-repack, --flash-attn, --deterministic and
// --cache-type-k/-v, shared by the commands that run a model.
struct BackendArgs {
    std::string backend = "cpu";
    int device = -1;
    bool vulkan_exact = false;       // the 64-bit shaders, bit-equal to the CPU (default: the f32 path)
    bool no_repack = false;          // the CPU in llama.cpp's plain order (default: its repacked order, as it runs)
    std::string flash_attn = "auto"; // llama.cpp's -fa: on, off, or auto (on for the CPU, as llama.cpp resolves it)
    bool deterministic = false;      // batch-invariant sums (ForwardRequest::batch_invariant), CPU only
    std::string cache_type_k = "f16", cache_type_v = "f16"; // llama.cpp's -ctk / -ctv: f16, q8_0, q4_0
};

// Whether the CPU runs llama.cpp's flash-attention order (--flash-attn on or auto).
bool flash_attention_of(const BackendArgs& a);
// The KV cache types asked for (parsed; the options' check admits only the three names).
engine::KvCacheTypes kv_cache_types_of(const BackendArgs& a);

void add_backend_options(CLI::App* cmd, BackendArgs& a);
// The backend asked for; a fallback to the CPU is reported on stderr.
std::unique_ptr<engine::Backend> make_cli_backend(const BackendArgs& a, std::shared_ptr<const engine::Model> model,
                                                  uint32_t n_ctx, int threads);
