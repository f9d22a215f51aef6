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
    // RoPE scaling as llama.cpp applies it (ggml's rope_yarn): YaRN mixes interpolated and extrapolated
    // angles between the correction dimensions; cos and sin are multiplied by rope_attn_factor.
    float rope_ext_factor = 0.0f;  // 1 for rope.scaling.type = yarn
    float rope_attn_factor = 1.0f; // the magnitude scale, YaRN's correction included
    float yarn_beta_fast = 32.0f, yarn_beta_slow = 1.0f;
    uint32_t rope_n_ctx_orig = 0; // rope.scaling.original_context_length, else context_length
    bool rope_enabled = true;     // granite: rope.scaling.finetuned = false turns RoPE off everywhere
    // granite's multipliers (absent: 1): embeddings, each block's output before the residual add, and
    // the logits (multiplied by 1 / logit_scale); and its attention scale (absent: 1/sqrt(head_dim))
    std::optional<float> embedding_multiplier;
    std::optional<float> residual_multiplier;
    std::optional<float> logit_scale;
    std::optional<float> attention_scale;
    // mistral3: queries × 1 + β·ln(floor(pos / rope_n_ctx_orig) + 1) after RoPE
    std::optional<float> attn_temperature_scale;
    std::optional<uint32_t> file_type;
    // Mixture of experts (qwen3moe, olmoe, granitemoe; shared/reference/moe.md §1): each token's FFN is
    // the weighted sum of n_expert_used of n_expert experts of width n_ff_exp, chosen per token by a
    // router; granitemoe may add a shared expert of width n_ff_shexp that every token goes through.
    // n_expert 0: a dense model.
    uint32_t n_expert = 0;
    uint32_t n_expert_used = 0;
    uint32_t n_ff_exp = 0;
    uint32_t n_ff_shexp = 0;
    bool is_moe() const { return n_expert > 0; }

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
