// SPDX-License-Identifier: GPL-3.0-or-later
#include "backend/backend.h"

#include "model/model.h"
#include "util/error.h"

#include <algorithm>
#include <cmath>
#include <spdlog/fmt/fmt.h>

namespace engine {

// Part of the Backend contract, shared by every backend and the attention recorder.
bool CaptureRequest::wants(uint32_t layer, uint32_t head) const
{
    if (all_heads)
        return true;
    return std::find(heads.begin(), heads.end(), std::make_pair(layer, head)) != heads.end();
}

const std::vector<float>& ForwardCaptures::at(Site site, uint32_t layer) const
{
    const auto& per_layer = site == Site::Residual ? residuals : activations[std::size_t(site)];
    if (layer >= per_layer.size() || per_layer[layer].empty())
        throw Error(fmt::format("the {} of layer {} was not captured", site_name(site), layer));
    return per_layer[layer];
}

BatchResult Backend::forward_batch(const BatchRequest&)
{
    throw UnsupportedError(fmt::format("{}: passes over several sequences at once (the serving lab) run on the CPU "
                                       "backend only",
                                       name()));
}

void check_forward_request(const ModelConfig& c, const ForwardRequest& request)
{
    if (request.tokens.empty())
        throw Error("nothing to evaluate: the batch is empty");
    for (TokenId t : request.tokens)
        if (t < 0 || static_cast<uint32_t>(t) >= c.n_vocab)
            throw Error(fmt::format("token id {} is outside the vocabulary (0 … {})", t, c.n_vocab - 1));
}

void check_kv_head(const ModelConfig& c, uint32_t layer, uint32_t kv_head)
{
    if (layer >= c.n_layer || kv_head >= c.n_head_kv[layer])
        throw Error(fmt::format("no KV cache for layer {} KV head {} (the model has {} layers, {} KV heads)", layer,
                                kv_head, c.n_layer, c.n_head_kv.empty() ? 0 : c.n_head_kv[0]));
}

void check_residual_width(const ModelConfig& c, std::span<const float> residual)
{
    if (residual.size() != c.n_embd)
        throw Error(fmt::format("logit lens: a residual vector has {} values, the model's width is {}", residual.size(),
                                c.n_embd));
}

void apply_output_scaling(const ModelConfig& c, std::span<float> logits)
{
    // as llama.cpp's graphs: ggml_scale by the reciprocal (not a division), then tanh and the cap
    if (c.logit_scale) {
        const float inv = 1.0f / *c.logit_scale;
        for (float& l : logits)
            l *= inv;
    }
    if (c.final_logit_softcap) {
        const float cap = *c.final_logit_softcap, inv = 1.0f / cap;
        for (float& l : logits)
            l = std::tanh(l * inv) * cap;
    }
}

QueryScaling query_scaling(const Model& model)
{
    const ModelConfig& c = model.config();
    const float inv_sqrt = 1.0f / std::sqrt(static_cast<float>(c.head_dim_k));
    if (model.traits().query_prescaled) {
        // Gemma 2 27B (46 layers) scales by the width per head instead (llama.cpp, from gemma_pytorch)
        if (model.architecture() == Architecture::Gemma2 && c.n_layer == 46 && c.n_head[0])
            return {1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_head[0])), 1.0f};
        return {inv_sqrt, 1.0f};
    }
    return {1.0f, c.attention_scale.value_or(inv_sqrt)};
}

} // namespace engine
