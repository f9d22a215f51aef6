// SPDX-License-Identifier: GPL-3.0-or-later
#include "model/forward_cost.h"

#include "model/model.h"

#include <cmath>

namespace engine {

namespace {

// Σ_{p=1}^{m} min(p, window): keys seen by the queries at positions 0 … m − 1 (window 0: no cap).
double keys_seen_through(double m, double window)
{
    if (window <= 0.0 || m <= window)
        return m * (m + 1.0) / 2.0;
    return window * (window + 1.0) / 2.0 + (m - window) * window;
}

// Of the view's rows only: a fused tensor's Q, K and V views each count their own part.
double elements(const TensorView& t)
{
    return t ? static_cast<double>(t.rows()) * static_cast<double>(t.cols()) : 0.0;
}
double bytes(const TensorView& t)
{
    return t ? static_cast<double>(t.rows()) * static_cast<double>(t.row_bytes) : 0.0;
}

} // namespace

ForwardCost forward_cost(const Model& model, uint32_t n_tokens, uint32_t n_past)
{
    ForwardCost cost;
    if (n_tokens == 0)
        return cost;
    const ModelConfig& c = model.config();
    const ModelWeights& w = model.weights();
    const double n = n_tokens;
    const double D = c.head_dim_k;
    for (uint32_t il = 0; il < c.n_layer; ++il) {
        const LayerWeights& L = w.layers[il];
        double layer_elements = 0.0;
        for (const TensorView* t :
             {&L.attn_q, &L.attn_k, &L.attn_v, &L.attn_output, &L.ffn_gate, &L.ffn_up, &L.ffn_down, &L.ffn_gate_inp,
              &L.ffn_gate_shexp, &L.ffn_up_shexp, &L.ffn_down_shexp}) {
            layer_elements += elements(*t);
            cost.weight_bytes += bytes(*t);
        }
        cost.flops += 2.0 * layer_elements * n;
        if (L.is_moe()) {
            // Each token goes through k experts; a pass reads each expert its tokens chose once: k of
            // them for one token, and for n tokens the number a uniform router would touch,
            // E·(1 − (1 − k/E)^n) (the panel's load shows the real one).
            double expert_elements = 0.0, expert_bytes = 0.0;
            for (const TensorView* t : {&L.ffn_gate_exps, &L.ffn_up_exps, &L.ffn_down_exps}) {
                expert_elements += static_cast<double>(t->info->n_elements()) / c.n_expert;
                expert_bytes += static_cast<double>(t->info->n_bytes) / c.n_expert;
            }
            const double E = c.n_expert, k = c.n_expert_used;
            const double touched = n == 1.0 ? k : E * (1.0 - std::pow(1.0 - k / E, n));
            cost.flops += 2.0 * expert_elements * k * n;
            cost.weight_bytes += expert_bytes * touched;
        }
        // Keys seen by the queries at positions n_past … n_past + n_tokens − 1.
        const double window = model.layer_window(il);
        const double keys = keys_seen_through(double(n_past) + n, window) - keys_seen_through(double(n_past), window);
        cost.flops += 4.0 * c.n_head[il] * D * keys;
        cost.kv_bytes_read += keys * c.n_head_kv[il] * D * 2.0 * 2.0;
    }
    // Embedding lookup: one row per new token; the head: every row, for the last position only.
    cost.weight_bytes += n * static_cast<double>(w.token_embd.row_bytes);
    cost.weight_bytes += bytes(w.output);
    cost.flops += 2.0 * elements(w.output);
    return cost;
}

} // namespace engine
