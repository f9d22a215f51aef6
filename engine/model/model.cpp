// SPDX-License-Identifier: GPL-3.0-or-later
#include "model/model.h"

#include "model/model_validation.h"
#include "quant/dequant.h"
#include "util/error.h"

#include <spdlog/fmt/fmt.h>

namespace engine {

std::vector<float> tensor_to_f32(const TensorView& t)
{
    if (!t)
        return {};
    std::vector<float> out(static_cast<std::size_t>(t.cols()));
    dequantize_row(t.type(), t.data, out.data(), t.cols(), t.info->name);
    return out;
}

std::string_view architecture_name(Architecture arch)
{
    switch (arch) {
    case Architecture::Llama:
        return "llama";
    case Architecture::Qwen2:
        return "qwen2";
    case Architecture::Qwen3:
        return "qwen3";
    case Architecture::Gemma3:
        return "gemma3";
    }
    return "?";
}

float Model::layer_rope_base(uint32_t il) const
{
    if (m_config.layer_is_swa[il] && m_config.rope_freq_base_swa)
        return *m_config.rope_freq_base_swa;
    return m_config.rope_freq_base;
}

std::shared_ptr<const Model> Model::load(const std::filesystem::path& path)
{
    auto model = std::shared_ptr<Model>(new Model());
    model->m_file = gguf::GgufFile::open(path);
    const auto& file = *model->m_file;
    model->m_config = ModelConfig::from_gguf(file);
    const std::string& arch = model->m_config.architecture;
    ArchitectureTraits& t = model->m_traits;
    if (arch == "llama") {
        model->m_arch = Architecture::Llama;
    } else if (arch == "qwen2") {
        model->m_arch = Architecture::Qwen2;
        t.rope_neox = true;
    } else if (arch == "qwen3") {
        model->m_arch = Architecture::Qwen3;
        t.rope_neox = true;
        t.qk_norm = true;
    } else if (arch == "gemma3") {
        model->m_arch = Architecture::Gemma3;
        t = {.rope_neox = true,
             .embedding_scale = true,
             .qk_norm = true,
             .post_norms = true,
             .gelu_ffn = true,
             .query_prescaled = true};
    } else {
        throw UnsupportedError(fmt::format("{}: architecture '{}' is not supported (supported: gemma3, llama, "
                                           "qwen2, qwen3)",
                                           file.name(), arch));
    }
    validate_hyperparameters(file, model->m_config); // before any size is computed from them
    require_supported_tensor_types(file);
    model->m_tokenizer = std::make_unique<Tokenizer>(Vocab::from_gguf(file));
    model->bind_weights();
    validate_weights(file, model->m_config, model->m_weights, model->m_tokenizer->vocab());
    return model;
}

void Model::bind_weights()
{
    const auto& file = *m_file;
    const ModelConfig& c = m_config;
    auto view_of = [&](const gguf::TensorInfo* info) {
        TensorView v;
        v.info = info;
        v.data = file.tensor_data(*info).data();
        v.row_bytes = ggml_row_bytes(info->type, info->ne[0]);
        return v;
    };
    // A tensor that must exist with this shape (ne0, ne1; ne1 = 1 for vectors).
    auto get = [&](const std::string& name, uint64_t ne0, uint64_t ne1, bool required) -> TensorView {
        const gguf::TensorInfo* info = file.find_tensor(name);
        if (!info) {
            if (required)
                throw FormatError(
                    fmt::format("{}: tensor '{}' is missing (architecture {})", file.name(), name, c.architecture));
            return {};
        }
        if (info->ne[0] != ne0 || info->ne[1] != ne1 || info->ne[2] != 1 || info->ne[3] != 1)
            throw FormatError(fmt::format("{}: tensor '{}' has shape {} but {} × {} was expected", file.name(), name,
                                          info->shape_string(), ne0, ne1));
        return view_of(info);
    };

    const uint64_t n_embd = c.n_embd, n_vocab = c.n_vocab;
    m_weights.token_embd = get("token_embd.weight", n_embd, n_vocab, true);
    m_weights.output_norm = get("output_norm.weight", n_embd, 1, true);
    m_weights.output = get("output.weight", n_embd, n_vocab, false);
    if (!m_weights.output) {
        m_weights.output = m_weights.token_embd;
        m_weights.tied_output = true;
    }
    if (const auto* rf = file.find_tensor("rope_freqs.weight"))
        m_weights.rope_freqs = view_of(rf);

    const bool qk_norm = m_traits.qk_norm;
    for (uint32_t il = 0; il < c.n_layer; ++il) {
        const std::string p = fmt::format("blk.{}.", il);
        const uint64_t q_dim = uint64_t(c.head_dim_k) * c.n_head[il];
        const uint64_t k_dim = uint64_t(c.head_dim_k) * c.n_head_kv[il];
        const uint64_t v_dim = uint64_t(c.head_dim_v) * c.n_head_kv[il];
        const uint64_t o_in = uint64_t(c.head_dim_v) * c.n_head[il];
        LayerWeights L;
        L.attn_norm = get(p + "attn_norm.weight", n_embd, 1, true);
        L.attn_q = get(p + "attn_q.weight", n_embd, q_dim, true);
        L.attn_k = get(p + "attn_k.weight", n_embd, k_dim, true);
        L.attn_v = get(p + "attn_v.weight", n_embd, v_dim, true);
        L.attn_output = get(p + "attn_output.weight", o_in, n_embd, true);
        L.attn_q_bias = get(p + "attn_q.bias", q_dim, 1, false);
        L.attn_k_bias = get(p + "attn_k.bias", k_dim, 1, false);
        L.attn_v_bias = get(p + "attn_v.bias", v_dim, 1, false);
        L.attn_output_bias = get(p + "attn_output.bias", n_embd, 1, false);
        L.attn_q_norm = get(p + "attn_q_norm.weight", c.head_dim_k, 1, qk_norm);
        L.attn_k_norm = get(p + "attn_k_norm.weight", c.head_dim_k, 1, qk_norm);
        L.post_attention_norm = get(p + "post_attention_norm.weight", n_embd, 1, m_traits.post_norms);
        L.post_ffw_norm = get(p + "post_ffw_norm.weight", n_embd, 1, m_traits.post_norms);
        L.ffn_norm = get(p + "ffn_norm.weight", n_embd, 1, true);
        L.ffn_gate = get(p + "ffn_gate.weight", n_embd, c.n_ff[il], true);
        L.ffn_up = get(p + "ffn_up.weight", n_embd, c.n_ff[il], true);
        L.ffn_down = get(p + "ffn_down.weight", c.n_ff[il], n_embd, true);
        m_weights.layers.push_back(L);
    }
    for (const auto& t : file.tensors()) {
        m_parameters += t.n_elements();
        m_weight_bytes += t.n_bytes;
    }
}

} // namespace engine
