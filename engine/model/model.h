// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "tokenizer/tokenizer.h"

#include <array>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace engine {

enum class Architecture {
    Llama,
    Qwen2,
    Qwen3,
    Gemma3,
    Gemma2,
    Phi3,
    Granite,
    Olmo2,
    Smollm3,
    Mistral3,
    Qwen3Moe,
    Olmoe,
    GraniteMoe,
};
std::string_view architecture_name(Architecture arch);
// "gemma2, gemma3, granite, …": the architectures Model::load accepts, for messages.
std::string supported_architectures();

// A weight tensor inside the mapped file: ne[0] is the row length (input features), ne[1] the
// number of rows (output features).
struct TensorView {
    const gguf::TensorInfo* info = nullptr;
    const std::byte* data = nullptr;
    uint64_t row_bytes = 0;
    // A view of rows [row0, row0 + row_count) of a fused tensor (phi3's attn_qkv, its gate|up):
    // `data` points at row0; 0 means every row of the tensor.
    int64_t row0 = 0;
    int64_t row_count = 0;

    GgmlType type() const { return info->type.type; }
    int64_t cols() const { return static_cast<int64_t>(info->ne[0]); }
    int64_t rows() const { return row_count ? row_count : static_cast<int64_t>(info->ne[1]); }
    bool is_view() const { return row_count != 0; }
    // The rows [first, first + count) of this tensor, without a copy.
    TensorView view(int64_t first, int64_t count) const
    {
        TensorView v = *this;
        v.data = row(first);
        v.row0 = row0 + first;
        v.row_count = count;
        return v;
    }
    const std::byte* row(int64_t r) const { return data + static_cast<uint64_t>(r) * row_bytes; }
    explicit operator bool() const { return info != nullptr; }
};

// A 1-D tensor (norm weight, bias, RoPE factors) as f32, empty for a missing tensor: what every
// backend decodes once at load.
std::vector<float> tensor_to_f32(const TensorView& t);

struct LayerWeights {
    TensorView attn_norm, attn_q, attn_k, attn_v, attn_output;
    TensorView attn_q_bias, attn_k_bias, attn_v_bias, attn_output_bias; // qwen2 (optional elsewhere)
    TensorView attn_q_norm, attn_k_norm;                                // qwen3, gemma3
    TensorView post_attention_norm, post_ffw_norm;                      // gemma3
    TensorView ffn_norm, ffn_gate, ffn_up, ffn_down;
    TensorView ffn_gate_bias, ffn_up_bias, ffn_down_bias; // granite, mistral3 (optional)
    // Mixture of experts: the router [n_expert rows of E] and every expert's gate, up and down stacked
    // in one tensor each ({E, n_ff_exp, n_expert}, {n_ff_exp, E, n_expert}); expert() views one.
    TensorView ffn_gate_inp, ffn_gate_exps, ffn_up_exps, ffn_down_exps;
    TensorView ffn_gate_shexp, ffn_up_shexp, ffn_down_shexp; // granitemoe's shared expert (optional)
    bool is_moe() const { return bool(ffn_gate_inp); }
};

// Expert e's matrix of a stacked expert tensor: rows [e·rows, (e + 1)·rows) of its {cols, rows, n_expert}
// layout, a view without a copy.
inline TensorView expert_matrix(const TensorView& stacked, uint32_t e)
{
    const auto rows = static_cast<int64_t>(stacked.info->ne[1]);
    return stacked.view(int64_t(e) * rows, rows);
}

struct ModelWeights {
    TensorView token_embd;
    TensorView output_norm;
    TensorView output; // the LM head: `output.weight`, or token_embd when the embeddings are tied
    TensorView rope_freqs;
    TensorView rope_factors_long, rope_factors_short; // phi3's LongRoPE (128K-context models)
    bool tied_output = false;
    std::vector<LayerWeights> layers;
};

// How the architectures differ, as data the forward pass reads (shared/reference/gemma3.md §6).
struct ArchitectureTraits {
    bool rope_neox = false;       // rotate (i, i + n_rot/2) instead of (2i, 2i+1)
    bool embedding_scale = false; // gemma: x · sqrt(n_embd)
    bool qk_norm = false;
    bool post_norms = false;        // gemma: norms after attention and FFN
    bool gelu_ffn = false;          // GeGLU (gemma) instead of SwiGLU
    bool query_prescaled = false;   // gemma, phi3: Q · scale after RoPE, kq_scale 1
    bool pre_norms = true;          // olmo2: no attn_norm / ffn_norm, the blocks read X itself
    bool qk_norm_whole_row = false; // olmo2: Q and K normed over all heads together, not per head
    uint32_t no_rope_period = 0;    // smollm3 (4): layer il has no RoPE iff (il + 1) % period == 0
    // Mixture of experts: the chosen experts' weights divided by their sum (qwen3moe, granitemoe; not
    // olmoe). Gating is a softmax over every expert for all three (moe.md §3).
    bool moe_normalize_weights = false;
};

// A loaded model: the mapped GGUF, its hyperparameters, tokenizer and every weight bound by name
// and shape-checked. Immutable; shared between the engine thread and readers.
class Model {
public:
    // Throws FormatError (missing or mis-shaped tensor, bad metadata), UnsupportedError (unknown
    // architecture or quantization type) or IoError.
    static std::shared_ptr<const Model> load(const std::filesystem::path& path);

    const gguf::GgufFile& file() const { return *m_file; }
    const ModelConfig& config() const { return m_config; }
    Architecture architecture() const { return m_arch; }
    const ArchitectureTraits& traits() const { return m_traits; }
    const Tokenizer& tokenizer() const { return *m_tokenizer; }
    const ModelWeights& weights() const { return m_weights; }
    uint64_t parameter_count() const { return m_parameters; }
    // Parameters a token goes through: all but the experts it is not routed to (= parameter_count()
    // for a dense model).
    uint64_t active_parameter_count() const { return m_active_parameters; }
    // Bytes of one expert's gate, up and down in every layer (0 for a dense model).
    uint64_t expert_bytes_per_layer() const { return m_expert_bytes_per_layer; }
    uint64_t weight_bytes() const { return m_weight_bytes; }
    // Window of a layer in tokens (0: attends to everything before it).
    uint32_t layer_window(uint32_t il) const { return m_config.layer_is_swa[il] ? m_config.sliding_window : 0; }
    float layer_rope_base(uint32_t il) const;
    bool layer_has_rope(uint32_t il) const;

private:
    Model() = default;
    void bind_weights();

    std::shared_ptr<const gguf::GgufFile> m_file;
    ModelConfig m_config;
    Architecture m_arch = Architecture::Llama;
    ArchitectureTraits m_traits;
    std::unique_ptr<Tokenizer> m_tokenizer;
    ModelWeights m_weights;
    uint64_t m_parameters = 0;
    uint64_t m_active_parameters = 0;
    uint64_t m_expert_bytes_per_layer = 0;
    uint64_t m_weight_bytes = 0;
};

} // namespace engine
