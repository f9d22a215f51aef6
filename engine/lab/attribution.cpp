// SPDX-License-Identifier: GPL-3.0-or-later
#include "lab/attribution.h"

#include "model/model.h"
#include "quant/dequant.h"
#include "util/error.h"

#include <algorithm>
#include <cmath>
#include <spdlog/fmt/fmt.h>

namespace engine {

namespace {

double dot(std::span<const double> d, const float* v)
{
    double s = 0.0;
    for (std::size_t i = 0; i < d.size(); ++i)
        s += d[i] * double(v[i]);
    return s;
}

std::vector<float> dequantized_row(const TensorView& t, int64_t r)
{
    std::vector<float> row(std::size_t(t.cols()));
    dequantize_row(t.type(), t.row(r), row.data(), t.cols());
    return row;
}

// 1 / sqrt(mean(x²) + eps), as RMSNorm scales, in double.
double rms_scale(const float* x, std::size_t n, float eps)
{
    double s = 0.0;
    for (std::size_t i = 0; i < n; ++i)
        s += double(x[i]) * double(x[i]);
    return 1.0 / std::sqrt(s / double(n) + double(eps));
}

} // namespace

double sum_of_parts(const Attribution& a)
{
    double s = 0.0;
    for (const AttributionPart& p : a.parts)
        s += p.value;
    return s;
}

Attribution attribute_logit(Backend& backend, std::span<const TokenId> tokens, TokenId token,
                            std::optional<TokenId> versus)
{
    const Model& model = backend.model();
    const ModelConfig& c = model.config();
    const ModelWeights& w = model.weights();
    for (TokenId t : {token, versus.value_or(token)})
        if (t < 0 || uint32_t(t) >= c.n_vocab)
            throw Error(fmt::format("token id {} is outside the vocabulary (0 … {})", t, c.n_vocab - 1));
    const uint32_t E = c.n_embd, D = c.head_dim_k, n = uint32_t(tokens.size());

    CaptureRequest capture;
    capture.sites = {Site::Embedding, Site::HeadOut, Site::AttentionOut, Site::MlpOut, Site::Residual};
    capture.expert_outputs = c.is_moe(); // each chosen expert's share of a mixture-of-experts layer
    const LabRun run = run_fresh(backend, tokens, &capture);
    const ForwardCaptures& cap = *run.captures;
    const uint32_t last = n - 1;
    const auto row_of = [&](Site site, uint32_t layer) {
        return cap.at(site, layer).data() + std::size_t(last) * site_width(c, site, layer);
    };

    Attribution a;
    a.token = token;
    a.versus = versus;
    a.position = last;
    // d = g ⊙ s ⊙ (w_token − w_versus), s the final norm's scale frozen at the final residual's.
    const float* x_final = row_of(Site::Residual, c.n_layer - 1);
    a.final_norm_scale = rms_scale(x_final, E, c.norm_eps);
    const std::vector<float> g = tensor_to_f32(w.output_norm);
    const std::vector<float> w_tok = dequantized_row(w.output, token);
    const std::vector<float> w_vs = versus ? dequantized_row(w.output, *versus) : std::vector<float>(E, 0.0f);
    // granite divides the logits by its logit scale: every part is measured in the logit's units
    const double head_scale = c.logit_scale ? 1.0 / double(*c.logit_scale) : 1.0;
    a.direction.resize(E);
    for (uint32_t i = 0; i < E; ++i)
        a.direction[i] = double(g[i]) * a.final_norm_scale * (double(w_tok[i]) - double(w_vs[i])) * head_scale;
    // granite scales each block's output before adding it to the residual stream
    const double branch_scale = c.residual_multiplier.value_or(1.0f);

    const auto add = [&](AttributionPart::Kind kind, std::string name, int32_t layer, int32_t head, double value) {
        a.parts.push_back({kind, std::move(name), layer, head, value});
    };
    add(AttributionPart::Kind::Embedding, "embedding", -1, -1, dot(a.direction, row_of(Site::Embedding, 0)));

    std::vector<float> o(E), row;
    for (uint32_t il = 0; il < c.n_layer; ++il) {
        const LayerWeights& L = w.layers[il];
        const uint32_t H = c.n_head[il];
        const float* heads = row_of(Site::HeadOut, il);
        // Each head's float share of the output projection: o_h = W_o[:, h·D … (h+1)·D) · a_h.
        std::vector<std::vector<double>> share(H, std::vector<double>(E, 0.0));
        for (uint32_t e = 0; e < E; ++e) {
            row = dequantized_row(L.attn_output, e);
            for (uint32_t h = 0; h < H; ++h) {
                double s = 0.0;
                for (uint32_t j = 0; j < D; ++j)
                    s += double(row[h * D + j]) * double(heads[h * D + j]);
                share[h][e] = s;
            }
        }
        // A post-norm (gemma) scales the sum: frozen at the heads' float sum (+ bias).
        double post_scale = 1.0;
        std::vector<float> post_g;
        if (model.traits().post_norms) {
            const std::vector<float> bias = tensor_to_f32(L.attn_output_bias);
            for (uint32_t e = 0; e < E; ++e) {
                double s = bias.empty() ? 0.0 : bias[e];
                for (uint32_t h = 0; h < H; ++h)
                    s += share[h][e];
                o[e] = float(s);
            }
            post_scale = rms_scale(o.data(), E, c.norm_eps);
            post_g = tensor_to_f32(L.post_attention_norm);
        }
        double heads_total = 0.0;
        for (uint32_t h = 0; h < H; ++h) {
            double v = 0.0;
            for (uint32_t e = 0; e < E; ++e)
                v += a.direction[e] * share[h][e] * (post_g.empty() ? 1.0 : double(post_g[e]) * post_scale) *
                     branch_scale;
            heads_total += v;
            add(AttributionPart::Kind::Head, fmt::format("L{} H{}", il, h), int32_t(il), int32_t(h), v);
        }
        const double attention = dot(a.direction, row_of(Site::AttentionOut, il));
        add(AttributionPart::Kind::AttentionOther, fmt::format("L{} attention, other", il), int32_t(il), -1,
            attention - heads_total);
        const double mlp = dot(a.direction, row_of(Site::MlpOut, il));
        const RoutingCapture* experts = nullptr;
        for (const RoutingCapture& rc : cap.routing)
            if (rc.layer == il && !rc.last_outputs.empty())
                experts = &rc;
        if (!experts) {
            add(AttributionPart::Kind::Mlp, fmt::format("L{} MLP", il), int32_t(il), -1, mlp);
            continue;
        }
        // a mixture of experts: each chosen expert's weighted output (× a residual multiplier), then the
        // rest of the block (a shared expert, and the rounding of the float sum)
        double experts_total = 0.0;
        for (uint32_t s = 0; s < experts->k; ++s) {
            const int32_t e = experts->experts[std::size_t(last) * experts->k + s];
            const double v = dot(a.direction, experts->last_outputs.data() + std::size_t(s) * E) * branch_scale;
            experts_total += v;
            add(AttributionPart::Kind::Expert, fmt::format("L{} expert {}", il, e), int32_t(il), e, v);
        }
        add(AttributionPart::Kind::Mlp,
            L.ffn_gate_shexp ? fmt::format("L{} shared expert and rounding", il)
                             : fmt::format("L{} experts, rounding", il),
            int32_t(il), -1, mlp - experts_total);
    }

    // The real logit before any soft-cap, from the pass itself.
    auto logit_of = [&](TokenId t) { return double(run.logits[std::size_t(t)]); };
    double real = logit_of(token) - (versus ? logit_of(*versus) : 0.0);
    double uncapped = real;
    if (c.final_logit_softcap) {
        const double soft_cap = *c.final_logit_softcap;
        const auto uncap = [&](TokenId t) {
            return soft_cap * std::atanh(std::clamp(logit_of(t) / soft_cap, -1.0 + 1e-15, 1.0 - 1e-15));
        };
        uncapped = uncap(token) - (versus ? uncap(*versus) : 0.0);
    }
    add(AttributionPart::Kind::OutputHead, "output head (quantized)", -1, -1, uncapped - dot(a.direction, x_final));
    if (c.final_logit_softcap)
        add(AttributionPart::Kind::SoftCap, "final soft-cap", -1, -1, real - uncapped);
    a.logit = real;
    return a;
}

} // namespace engine
