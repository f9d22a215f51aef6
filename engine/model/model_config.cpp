// SPDX-License-Identifier: GPL-3.0-or-later
#include "model/model_config.h"

#include "gguf/gguf_file.h"
#include "util/error.h"

#include <cmath>
#include <spdlog/fmt/fmt.h>

namespace engine {

std::vector<bool> default_swa_pattern(const std::string& arch, uint32_t n_layer)
{
    std::vector<bool> swa(n_layer, false);
    uint32_t period = 0;
    if (arch == "gemma3")
        period = 6; // layer il is local iff il % 6 < 5 (llama.cpp set_swa_pattern(6))
    else if (arch == "gemma2")
        period = 2; // even layers local, odd global
    else if (arch == "olmo2")
        period = 4; // OLMo 3: three local layers for every global one
    if (period)
        for (uint32_t il = 0; il < n_layer; ++il)
            swa[il] = il % period < period - 1;
    return swa;
}

void require_supported_tensor_types(const gguf::GgufFile& file)
{
    std::size_t count = 0;
    const gguf::TensorInfo* first = nullptr;
    for (const auto& t : file.tensors())
        if (!t.type.dequantizable && count++ == 0)
            first = &t;
    if (first)
        throw UnsupportedError(
            fmt::format("{}: tensor '{}' uses quantization type {}, which Tokenscope does not "
                        "support{} (supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, "
                        "Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS)",
                        file.name(), first->name, first->type.name,
                        count > 1 ? fmt::format("; {} tensors in all use unsupported types", count) : ""));
}

ModelConfig ModelConfig::from_gguf(const gguf::GgufFile& file)
{
    ModelConfig c;
    const auto arch = file.get_string("general.architecture");
    if (!arch || arch->empty())
        throw FormatError(fmt::format("{}: general.architecture is missing", file.name()));
    c.architecture = std::string(*arch);
    c.name = std::string(file.get_string("general.name").value_or(""));
    const std::string p = c.architecture + ".";

    auto fail = [&](const std::string& key, const std::string& what) {
        return FormatError(fmt::format("{}: metadata '{}' {}", file.name(), key, what));
    };
    auto require_u32 = [&](const std::string& key) -> uint32_t {
        const auto v = file.get_int(key);
        if (!v)
            throw fail(key, "is missing or not an integer");
        if (*v < 0 || *v > 0xFFFFFFFFll)
            throw fail(key, fmt::format("is out of range ({})", *v));
        return static_cast<uint32_t>(*v);
    };
    auto optional_u32 = [&](const std::string& key) -> std::optional<uint32_t> {
        if (!file.find(key))
            return std::nullopt;
        return require_u32(key);
    };
    // A scalar or one value per layer (llama.cpp's get_key_or_arr).
    auto per_layer = [&](const std::string& key, std::optional<uint32_t> fallback) -> std::vector<uint32_t> {
        const gguf::MetaValue* v = file.find(key);
        if (!v) {
            if (!fallback)
                throw fail(key, "is missing");
            return std::vector<uint32_t>(c.n_layer, *fallback);
        }
        if (const gguf::MetaArray* a = v->as_array()) {
            if (a->count != c.n_layer)
                throw fail(key, fmt::format("has {} entries for {} layers", a->count, c.n_layer));
            std::vector<uint32_t> out;
            for (uint64_t i = 0; i < a->count; ++i) {
                const auto x = a->int_at(i);
                if (!x || *x < 0 || *x > 0xFFFFFFFFll)
                    throw fail(key, "holds a value that is not a valid count");
                out.push_back(static_cast<uint32_t>(*x));
            }
            return out;
        }
        return std::vector<uint32_t>(c.n_layer, require_u32(key));
    };

    c.n_layer = require_u32(p + "block_count");
    if (c.n_layer == 0 || c.n_layer > 4096)
        throw fail(p + "block_count", fmt::format("is {}, not a plausible layer count", c.n_layer));
    c.n_embd = require_u32(p + "embedding_length");
    c.n_ctx_train = optional_u32(p + "context_length").value_or(0);
    c.n_head = per_layer(p + "attention.head_count", std::nullopt);
    c.n_head_kv = per_layer(p + "attention.head_count_kv", c.n_head.empty() ? 0 : c.n_head[0]);
    c.n_ff = per_layer(p + "feed_forward_length", 0u);
    const uint32_t n_head0 = c.n_head.empty() ? 0 : c.n_head[0];
    c.head_dim_k = optional_u32(p + "attention.key_length").value_or(n_head0 ? c.n_embd / n_head0 : 0);
    c.head_dim_v = optional_u32(p + "attention.value_length").value_or(n_head0 ? c.n_embd / n_head0 : 0);
    c.n_rot = optional_u32(p + "rope.dimension_count").value_or(c.head_dim_k);
    c.rope_freq_base = static_cast<float>(file.get_float(p + "rope.freq_base").value_or(10000.0));
    if (auto swa_base = file.get_float(p + "rope.freq_base_swa"))
        c.rope_freq_base_swa = static_cast<float>(*swa_base);
    else if (c.architecture == "gemma3")
        c.rope_freq_base_swa = 10000.0f; // hard-coded local-layer base in llama.cpp
    if (auto factor = file.get_float(p + "rope.scaling.factor"); factor && *factor != 0.0)
        c.rope_freq_scale = static_cast<float>(1.0 / *factor);
    if (auto type = file.get_string(p + "rope.scaling.type"))
        c.rope_scaling_type = std::string(*type);
    c.norm_eps = static_cast<float>(file.get_float(p + "attention.layer_norm_rms_epsilon")
                                        .value_or(file.get_float(p + "attention.layer_norm_epsilon").value_or(1e-5)));
    c.sliding_window = optional_u32(p + "attention.sliding_window").value_or(0);
    c.layer_is_swa =
        c.sliding_window ? default_swa_pattern(c.architecture, c.n_layer) : std::vector<bool>(c.n_layer, false);
    if (const gguf::MetaValue* v = file.find(p + "attention.sliding_window_pattern"); v && c.sliding_window) {
        if (const gguf::MetaArray* a = v->as_array()) { // one flag per layer (llama.cpp's load_swa_pattern)
            if (a->count != c.n_layer)
                throw fail(p + "attention.sliding_window_pattern",
                           fmt::format("has {} entries for {} layers", a->count, c.n_layer));
            for (uint32_t il = 0; il < c.n_layer; ++il) {
                const auto flag = a->bool_at(il);
                if (!flag)
                    throw fail(p + "attention.sliding_window_pattern", "holds a value that is not a boolean");
                c.layer_is_swa[il] = *flag;
            }
        } else if (auto pattern = optional_u32(p + "attention.sliding_window_pattern"); pattern && *pattern > 0) {
            for (uint32_t il = 0; il < c.n_layer; ++il)
                c.layer_is_swa[il] = il % *pattern < *pattern - 1;
        }
    }
    if (auto cap = file.get_float(p + "attn_logit_softcapping"); cap && *cap != 0.0)
        c.attn_logit_softcap = static_cast<float>(*cap);
    if (auto cap = file.get_float(p + "final_logit_softcapping"); cap && *cap != 0.0)
        c.final_logit_softcap = static_cast<float>(*cap);
    // RoPE scaling, as llama.cpp's load_hparams and llama_context read it
    // never scaled when the type says none; a factor without a type is linear (llama.cpp's default)
    if (file.get_string(p + "rope.scaling.type").value_or("linear") == "none")
        c.rope_freq_scale = 1.0f;
    c.rope_n_ctx_orig = optional_u32(p + "rope.scaling.original_context_length").value_or(c.n_ctx_train);
    if (auto f = file.get_float(p + "rope.scaling.yarn_beta_fast"))
        c.yarn_beta_fast = static_cast<float>(*f);
    if (auto f = file.get_float(p + "rope.scaling.yarn_beta_slow"))
        c.yarn_beta_slow = static_cast<float>(*f);
    if (c.rope_scaling_type == "yarn") {
        c.rope_ext_factor = 1.0f;
        const auto mscale = [](float scale, float m) {
            return scale <= 1.0f ? 1.0f : 0.1f * m * std::log(scale) + 1.0f;
        };
        const float factor = 1.0f / c.rope_freq_scale;
        const float log_mul = static_cast<float>(file.get_float(p + "rope.scaling.yarn_log_multiplier").value_or(0.0));
        c.rope_attn_factor = log_mul != 0.0f ? mscale(factor, 1.0f) / mscale(factor, log_mul) : mscale(factor, 1.0f);
        // cancels the factor ggml's rope_yarn applies on top (llama_context does the same)
        c.rope_attn_factor *= 1.0f / (1.0f + 0.1f * std::log(factor));
    }
    c.rope_attn_factor *= static_cast<float>(file.get_float(p + "rope.scaling.attn_factor").value_or(1.0));
    if (auto b = file.get_bool(p + "rope.scaling.finetuned"); b && c.architecture == "granite")
        c.rope_enabled = *b;
    const auto optional_float = [&](const std::string& key) -> std::optional<float> {
        if (auto v = file.get_float(key); v && *v != 0.0)
            return static_cast<float>(*v);
        return std::nullopt;
    };
    if (c.architecture == "granite" || c.architecture == "granitemoe") { // llama.cpp reads them for these only
        c.embedding_multiplier = optional_float(p + "embedding_scale");
        c.residual_multiplier = optional_float(p + "residual_scale");
        c.logit_scale = optional_float(p + "logit_scale");
        c.attention_scale = optional_float(p + "attention.scale");
        if (!c.logit_scale)
            throw fail(p + "logit_scale", "is missing or 0 (granite models need it)");
    }
    if (c.architecture == "mistral3") {
        c.attn_temperature_scale = optional_float(p + "attention.temperature_scale");
        if (c.attn_temperature_scale && c.rope_n_ctx_orig == 0)
            throw fail(p + "rope.scaling.original_context_length",
                       "is 0, and the attention temperature divides positions by it");
    }
    if (c.architecture == "gemma2") { // llama.cpp's defaults when the keys are absent
        if (!c.attn_logit_softcap && !file.find(p + "attn_logit_softcapping"))
            c.attn_logit_softcap = 50.0f;
        if (!c.final_logit_softcap && !file.find(p + "final_logit_softcapping"))
            c.final_logit_softcap = 30.0f;
        if (!file.find(p + "attention.sliding_window")) {
            c.sliding_window = 4096;
            c.layer_is_swa = default_swa_pattern(c.architecture, c.n_layer);
        }
    }
    if (c.architecture == "phi3") { // llama.cpp turns Phi's sliding window off (its PR 13676)
        c.sliding_window = 0;
        c.layer_is_swa.assign(c.n_layer, false);
    }

    // Experts (llama.cpp's load_hparams and each architecture's load_arch_hparams)
    if (c.architecture == "qwen3moe" || c.architecture == "olmoe" || c.architecture == "granitemoe") {
        c.n_expert = optional_u32(p + "expert_count").value_or(0);
        if (c.n_expert == 0)
            throw fail(p + "expert_count", "is missing or 0 (a mixture-of-experts model needs its experts)");
        const std::vector<uint32_t> used = per_layer(p + "expert_used_count", std::nullopt);
        for (uint32_t il = 1; il < c.n_layer; ++il)
            if (used[il] != used[0])
                throw UnsupportedError(fmt::format("{}: metadata '{}expert_used_count' changes from layer to layer "
                                                   "({} in layer 0, {} in layer {}); Tokenscope needs one",
                                                   file.name(), p, used[0], used[il], il));
        c.n_expert_used = used.empty() ? 0 : used[0];
        if (c.architecture == "qwen3moe") { // its own width, else feed_forward_length / experts used
            const std::vector<uint32_t> exp = per_layer(p + "expert_feed_forward_length", 0u);
            c.n_ff_exp = exp.empty() ? 0 : exp[0];
            for (uint32_t il = 1; il < c.n_layer; ++il)
                if (exp[il] != exp[0])
                    throw UnsupportedError(fmt::format("{}: metadata '{}expert_feed_forward_length' changes from "
                                                       "layer to layer; Tokenscope needs one",
                                                       file.name(), p));
            if (c.n_ff_exp == 0 && c.n_expert_used > 0 && !c.n_ff.empty())
                c.n_ff_exp = c.n_ff[0] / c.n_expert_used;
        } else {
            c.n_ff_exp = c.n_ff.empty() ? 0 : c.n_ff[0];
        }
        if (c.architecture == "granitemoe")
            c.n_ff_shexp = optional_u32(p + "expert_shared_feed_forward_length").value_or(0);
    }

    if (auto ft = file.get_int("general.file_type"); ft && *ft >= 0)
        c.file_type = static_cast<uint32_t>(*ft);

    if (auto n = file.get_int(p + "vocab_size"); n && *n > 0)
        c.n_vocab = static_cast<uint32_t>(*n);
    else if (const auto* tokens = file.get_array("tokenizer.ggml.tokens"))
        c.n_vocab = static_cast<uint32_t>(tokens->count);

    for (uint32_t il = 0; il < c.n_layer; ++il)
        if (c.n_head[il] && c.n_head_kv[il] && c.n_head[il] % c.n_head_kv[il] != 0)
            throw fail(
                p + "attention.head_count_kv",
                fmt::format("({}) does not divide the head count ({}) in layer {}", c.n_head_kv[il], c.n_head[il], il));
    return c;
}

} // namespace engine
