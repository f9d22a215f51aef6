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

namespace {

// The architectures the forward pass runs and what sets each apart (shared/reference/
// architectures.md §0b): the rest is hyperparameters and optional tensors.
struct ArchitectureEntry {
    std::string_view name;
    Architecture arch;
    ArchitectureTraits traits;
};
const ArchitectureEntry kArchitectures[] = {
    {"gemma2",
     Architecture::Gemma2,
     {.rope_neox = true, .embedding_scale = true, .post_norms = true, .gelu_ffn = true, .query_prescaled = true}},
    {"gemma3",
     Architecture::Gemma3,
     {.rope_neox = true,
      .embedding_scale = true,
      .qk_norm = true,
      .post_norms = true,
      .gelu_ffn = true,
      .query_prescaled = true}},
    {"granite", Architecture::Granite, {}},
    {"granitemoe", Architecture::GraniteMoe, {.moe_normalize_weights = true}},
    {"llama", Architecture::Llama, {}},
    {"mistral3", Architecture::Mistral3, {}},
    {"olmo2",
     Architecture::Olmo2,
     {.rope_neox = true, .qk_norm = true, .post_norms = true, .pre_norms = false, .qk_norm_whole_row = true}},
    {"olmoe", Architecture::Olmoe, {.rope_neox = true, .qk_norm = true, .qk_norm_whole_row = true}},
    {"phi3", Architecture::Phi3, {.rope_neox = true, .query_prescaled = true}},
    {"qwen2", Architecture::Qwen2, {.rope_neox = true}},
    {"qwen3", Architecture::Qwen3, {.rope_neox = true, .qk_norm = true}},
    {"qwen3moe", Architecture::Qwen3Moe, {.rope_neox = true, .qk_norm = true, .moe_normalize_weights = true}},
    {"smollm3", Architecture::Smollm3, {.no_rope_period = 4}},
};

} // namespace

std::string_view architecture_name(Architecture arch)
{
    for (const auto& e : kArchitectures)
        if (e.arch == arch)
            return e.name;
    return "?";
}

std::string supported_architectures()
{
    std::string out;
    for (const auto& e : kArchitectures)
        out += (out.empty() ? "" : ", ") + std::string(e.name);
    return out;
}

bool Model::layer_has_rope(uint32_t il) const
{
    if (!m_config.rope_enabled)
        return false;
    return m_traits.no_rope_period == 0 || (il + 1) % m_traits.no_rope_period != 0;
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
    // the architecture first: an unknown one is refused by name before its keys are read
    const std::string arch(file.get_string("general.architecture").value_or(""));
    if (arch.empty())
        throw FormatError(fmt::format("{}: general.architecture is missing", file.name()));
    const ArchitectureEntry* entry = nullptr;
    for (const auto& e : kArchitectures)
        if (e.name == arch)
            entry = &e;
    if (!entry)
        throw UnsupportedError(fmt::format("{}: architecture '{}' is not supported (supported: {})", file.name(), arch,
                                           supported_architectures()));
    model->m_arch = entry->arch;
    model->m_traits = entry->traits;
    model->m_config = ModelConfig::from_gguf(file);
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
    // gemma2's head is always the embedding (llama.cpp ignores an output tensor there)
    if (m_arch != Architecture::Gemma2)
        m_weights.output = get("output.weight", n_embd, n_vocab, false);
    if (!m_weights.output) {
        m_weights.output = m_weights.token_embd;
        m_weights.tied_output = true;
    }
    if (const auto* rf = file.find_tensor("rope_freqs.weight"))
        m_weights.rope_freqs = view_of(rf);
    m_weights.rope_factors_long = get("rope_factors_long.weight", c.n_rot / 2, 1, false);
    m_weights.rope_factors_short = get("rope_factors_short.weight", c.n_rot / 2, 1, false);

    // A fused tensor's consecutive row blocks (Q|K|V; phi3's gate|up), as views of it: no copy.
    const auto split_rows = [&](const std::string& name, std::initializer_list<uint64_t> rows) {
        uint64_t total = 0;
        for (const uint64_t r : rows)
            total += r;
        const TensorView whole = get(name, n_embd, total, true);
        std::vector<TensorView> parts;
        int64_t first = 0;
        for (const uint64_t r : rows) {
            parts.push_back(whole.view(first, int64_t(r)));
            first += int64_t(r);
        }
        return parts;
    };
    // A stacked expert tensor {ne0, ne1, n_expert}.
    const auto get_experts = [&](const std::string& name, uint64_t ne0, uint64_t ne1) -> TensorView {
        const gguf::TensorInfo* info = file.find_tensor(name);
        if (!info)
            throw FormatError(
                fmt::format("{}: tensor '{}' is missing (architecture {})", file.name(), name, c.architecture));
        if (info->ne[0] != ne0 || info->ne[1] != ne1 || info->ne[2] != c.n_expert || info->ne[3] != 1)
            throw FormatError(fmt::format("{}: tensor '{}' has shape {} but {} × {} × {} (experts) was expected",
                                          file.name(), name, info->shape_string(), ne0, ne1, c.n_expert));
        return view_of(info);
    };
    const auto bind_experts = [&](LayerWeights& L, const std::string& p) {
        L.ffn_gate_inp = get(p + "ffn_gate_inp.weight", n_embd, c.n_expert, true);
        L.ffn_gate_exps = get_experts(p + "ffn_gate_exps.weight", n_embd, c.n_ff_exp);
        L.ffn_up_exps = get_experts(p + "ffn_up_exps.weight", n_embd, c.n_ff_exp);
        L.ffn_down_exps = get_experts(p + "ffn_down_exps.weight", c.n_ff_exp, n_embd);
        if (c.n_ff_shexp > 0) {
            L.ffn_gate_shexp = get(p + "ffn_gate_shexp.weight", n_embd, c.n_ff_shexp, true);
            L.ffn_up_shexp = get(p + "ffn_up_shexp.weight", n_embd, c.n_ff_shexp, true);
            L.ffn_down_shexp = get(p + "ffn_down_shexp.weight", c.n_ff_shexp, n_embd, true);
        }
        if (file.find_tensor(p + "ffn_gate_up_exps.weight") || file.find_tensor(p + "ffn_gate_inp.bias") ||
            file.find_tensor(p + "exp_probs_b.bias"))
            throw UnsupportedError(fmt::format("{}: layer {} has expert tensors {} does not read (fused gate|up, "
                                               "router bias or selection bias)",
                                               file.name(), p.substr(4, p.size() - 5), c.architecture));
    };
    const ArchitectureTraits& tr = m_traits;
    for (uint32_t il = 0; il < c.n_layer; ++il) {
        const std::string p = fmt::format("blk.{}.", il);
        const uint64_t q_dim = uint64_t(c.head_dim_k) * c.n_head[il];
        const uint64_t k_dim = uint64_t(c.head_dim_k) * c.n_head_kv[il];
        const uint64_t v_dim = uint64_t(c.head_dim_v) * c.n_head_kv[il];
        const uint64_t o_in = uint64_t(c.head_dim_v) * c.n_head[il];
        const uint64_t n_ff = c.n_ff[il];
        LayerWeights L;
        L.attn_norm = get(p + "attn_norm.weight", n_embd, 1, tr.pre_norms);
        // Q, K and V as one fused tensor (llama.cpp's create_tensor_qkv: rows [0, q) are Q, then K,
        // then V)
        if (file.find_tensor(p + "attn_qkv.weight")) {
            const auto qkv = split_rows(p + "attn_qkv.weight", {q_dim, k_dim, v_dim});
            L.attn_q = qkv[0];
            L.attn_k = qkv[1];
            L.attn_v = qkv[2];
            if (file.find_tensor(p + "attn_qkv.bias"))
                throw UnsupportedError(
                    fmt::format("{}: tensor '{}attn_qkv.bias' (a fused Q/K/V bias) is not supported", file.name(), p));
        } else {
            L.attn_q = get(p + "attn_q.weight", n_embd, q_dim, true);
            L.attn_k = get(p + "attn_k.weight", n_embd, k_dim, true);
            L.attn_v = get(p + "attn_v.weight", n_embd, v_dim, true);
        }
        L.attn_output = get(p + "attn_output.weight", o_in, n_embd, true);
        L.attn_q_bias = get(p + "attn_q.bias", q_dim, 1, false);
        L.attn_k_bias = get(p + "attn_k.bias", k_dim, 1, false);
        L.attn_v_bias = get(p + "attn_v.bias", v_dim, 1, false);
        L.attn_output_bias = get(p + "attn_output.bias", n_embd, 1, false);
        // per-head norms (qwen3, gemma3) or over the whole projected row (olmo2)
        L.attn_q_norm = get(p + "attn_q_norm.weight", tr.qk_norm_whole_row ? q_dim : c.head_dim_k, 1, tr.qk_norm);
        L.attn_k_norm = get(p + "attn_k_norm.weight", tr.qk_norm_whole_row ? k_dim : c.head_dim_k, 1, tr.qk_norm);
        L.post_attention_norm = get(p + "post_attention_norm.weight", n_embd, 1, tr.post_norms);
        L.post_ffw_norm = get(p + "post_ffw_norm.weight", n_embd, 1, tr.post_norms);
        L.ffn_norm = get(p + "ffn_norm.weight", n_embd, 1, tr.pre_norms);
        if (const auto* up = file.find_tensor(p + "ffn_up.weight");
            !file.find_tensor(p + "ffn_gate.weight") && up && up->ne[1] == 2 * n_ff) {
            // phi3: gate and up fused in ffn_up, the gate first (ggml's swiglu of one tensor)
            const auto gate_up = split_rows(p + "ffn_up.weight", {n_ff, n_ff});
            L.ffn_gate = gate_up[0];
            L.ffn_up = gate_up[1];
        } else if (c.is_moe()) {
            bind_experts(L, p);
        } else {
            L.ffn_gate = get(p + "ffn_gate.weight", n_embd, n_ff, true);
            L.ffn_up = get(p + "ffn_up.weight", n_embd, n_ff, true);
        }
        if (!c.is_moe())
            L.ffn_down = get(p + "ffn_down.weight", n_ff, n_embd, true);
        L.ffn_gate_bias = get(p + "ffn_gate.bias", n_ff, 1, false);
        L.ffn_up_bias = get(p + "ffn_up.bias", n_ff, 1, false);
        L.ffn_down_bias = get(p + "ffn_down.bias", n_embd, 1, false);
        m_weights.layers.push_back(L);
    }
    for (const auto& t : file.tensors()) {
        m_parameters += t.n_elements();
        m_weight_bytes += t.n_bytes;
    }
    // Active parameters: a token reads n_expert_used of each layer's n_expert experts.
    m_active_parameters = m_parameters;
    for (const LayerWeights& L : m_weights.layers) {
        if (!L.is_moe())
            continue;
        for (const TensorView* t : {&L.ffn_gate_exps, &L.ffn_up_exps, &L.ffn_down_exps}) {
            const uint64_t per_expert = t->info->n_elements() / c.n_expert;
            m_active_parameters -= per_expert * (c.n_expert - c.n_expert_used);
            m_expert_bytes_per_layer += t->info->n_bytes / c.n_expert;
        }
    }
    if (!m_weights.layers.empty() && c.n_layer)
        m_expert_bytes_per_layer /= c.n_layer;
}

} // namespace engine
