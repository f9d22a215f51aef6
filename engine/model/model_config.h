// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace engine {
namespace gguf {
class GgufFile;
}

// Hyperparameters of a transformer, read from `{arch}.*` metadata as llama.cpp reads them
// (shared/reference/gguf.md §7, gemma3.md). Per-layer values are expanded to one per layer.
struct ModelConfig {
    std::string architecture;
    std::string name; // general.name, may be empty
    uint32_t n_layer = 0;
    uint32_t n_embd = 0;
    uint32_t n_ctx_train = 0;
    uint32_t n_vocab = 0;
    std::vector<uint32_t> n_head;    // per layer
    std::vector<uint32_t> n_head_kv; // per layer
    std::vector<uint32_t> n_ff;      // per layer
    uint32_t head_dim_k = 0;         // key_length
    uint32_t head_dim_v = 0;         // value_length
    uint32_t n_rot = 0;
    float rope_freq_base = 10000.0f;
    std::optional<float> rope_freq_base_swa; // local (sliding-window) layers, when they differ
    float rope_freq_scale = 1.0f;
    std::string rope_scaling_type = "none";
    float norm_eps = 1e-5f;
    uint32_t sliding_window = 0;    // 0: no sliding-window layers
    std::vector<bool> layer_is_swa; // per layer: uses the sliding window
    std::optional<float> attn_logit_softcap;
    std::optional<float> final_logit_softcap;
    std::optional<uint32_t> file_type;

    // Throws FormatError when a required key is missing or malformed.
    static ModelConfig from_gguf(const gguf::GgufFile& file);
};

// Throws UnsupportedError naming the first tensor whose type Tokenscope cannot decode (IQ*, TQ*, …)
// and its type, so a model is refused before any weight is touched.
void require_supported_tensor_types(const gguf::GgufFile& file);

// Sliding-window layer pattern used when the file carries no explicit one: Gemma 2 alternates,
// Gemma 3 has five local layers for every global one.
std::vector<bool> default_swa_pattern(const std::string& arch, uint32_t n_layer);

} // namespace engine
