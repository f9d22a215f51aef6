// SPDX-License-Identifier: GPL-3.0-or-later
#include "moe/routing.h"

#include "backend/cpu/attention_kernels.h"
#include "model/model_config.h"
#include "util/error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <spdlog/fmt/fmt.h>

namespace engine {

std::string expert_intervention_name(ExpertIntervention::Kind kind)
{
    switch (kind) {
    case ExpertIntervention::Kind::Force:
        return "force";
    case ExpertIntervention::Kind::Remove:
        return "remove";
    case ExpertIntervention::Kind::ZeroOutput:
        return "zero-output";
    }
    return "?";
}

void check_expert_interventions(const ModelConfig& c, std::span<const ExpertIntervention> interventions)
{
    if (interventions.empty())
        return;
    if (!c.is_moe())
        throw Error(
            fmt::format("the model ({}) has no experts: it is dense, so there is no router to change", c.architecture));
    // experts removed per layer (kAllLayers counted in every layer)
    std::vector<std::vector<bool>> removed(c.n_layer, std::vector<bool>(c.n_expert, false));
    for (std::size_t i = 0; i < interventions.size(); ++i) {
        const ExpertIntervention& iv = interventions[i];
        const std::string what = fmt::format("expert intervention {} ({})", i + 1, expert_intervention_name(iv.kind));
        if (iv.layer != ExpertIntervention::kAllLayers && (iv.layer < 0 || uint32_t(iv.layer) >= c.n_layer))
            throw Error(fmt::format("{}: layer {} does not exist (the model has {})", what, iv.layer, c.n_layer));
        if (iv.count == 0)
            throw Error(fmt::format("{}: it covers no position", what));
        if (iv.experts.empty())
            throw Error(fmt::format("{}: it names no expert", what));
        for (const uint32_t e : iv.experts)
            if (e >= c.n_expert)
                throw Error(fmt::format("{}: expert {} does not exist (the model has {}: 0 … {})", what, e, c.n_expert,
                                        c.n_expert - 1));
        if (iv.kind == ExpertIntervention::Kind::Force) {
            std::vector<uint32_t> sorted = iv.experts;
            std::sort(sorted.begin(), sorted.end());
            if (const auto twice = std::adjacent_find(sorted.begin(), sorted.end()); twice != sorted.end())
                throw Error(fmt::format("{}: expert {} is named twice; a token goes to {} distinct experts", what,
                                        *twice, c.n_expert_used));
            if (sorted.size() != c.n_expert_used)
                throw Error(fmt::format("{}: a token goes to exactly {} distinct experts in this model; {} were given",
                                        what, c.n_expert_used, iv.experts.size()));
        }
        if (iv.kind == ExpertIntervention::Kind::Remove)
            for (uint32_t il = 0; il < c.n_layer; ++il)
                if (iv.layer == ExpertIntervention::kAllLayers || uint32_t(iv.layer) == il)
                    for (const uint32_t e : iv.experts)
                        removed[il][e] = true;
    }
    for (uint32_t il = 0; il < c.n_layer; ++il) {
        const auto n_removed = uint32_t(std::count(removed[il].begin(), removed[il].end(), true));
        if (c.n_expert - n_removed < c.n_expert_used)
            throw Error(fmt::format("removing {} of layer {}'s {} experts leaves fewer than the {} each token needs",
                                    n_removed, il, c.n_expert, c.n_expert_used));
    }
}

void router_softmax(const float* x, float* y, uint32_t n)
{
    float max = -std::numeric_limits<float>::infinity();
    for (uint32_t i = 0; i < n; ++i)
        max = x[i] > max ? x[i] : max; // ggml_vec_max_f32
    double sum = 0.0;
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8) { // ggml_v_expf on 8 lanes, summed (hi + lo), (0+2, 1+3), (0 + 1)
        float e[8];
        for (int l = 0; l < 8; ++l)
            e[l] = y[i + l] = cpu::softmax_expf(x[i + l] - max);
        const float a0 = e[0] + e[4], a1 = e[1] + e[5], a2 = e[2] + e[6], a3 = e[3] + e[7];
        sum += static_cast<double>((a0 + a2) + (a1 + a3));
    }
    for (; i < n; ++i) {
        const float e = std::exp(x[i] - max);
        sum += static_cast<double>(e);
        y[i] = e;
    }
    const auto inv = static_cast<float>(1.0 / sum);
    for (uint32_t j = 0; j < n; ++j)
        y[j] *= inv;
}

ExpertRouting route_rows(const ModelConfig& c, bool normalize, uint32_t layer, const float* logits, uint32_t n_rows,
                         uint32_t pos0, std::span<const ExpertIntervention> interventions, std::vector<float>& probs)
{
    using Kind = ExpertIntervention::Kind;
    const uint32_t NE = c.n_expert, k = c.n_expert_used;
    ExpertRouting r;
    r.n_rows = n_rows;
    r.k = k;
    r.experts.resize(std::size_t(n_rows) * k);
    r.weights.resize(std::size_t(n_rows) * k);
    probs.resize(std::size_t(n_rows) * NE);
    std::vector<float> score(NE);
    std::vector<int32_t> order(NE);
    for (uint32_t t = 0; t < n_rows; ++t) {
        const float* x = logits + std::size_t(t) * NE;
        for (uint32_t e = 0; e < NE; ++e)
            if (!std::isfinite(x[e]))
                throw Error(fmt::format("layer {}'s router gave {} for expert {} at position {}: the model's "
                                        "numbers broke down before it",
                                        layer, x[e], e, pos0 + t));
        float* p = probs.data() + std::size_t(t) * NE;
        router_softmax(x, p, NE);
        const uint32_t pos = pos0 + t;

        // the selection scores: the probabilities, removed experts −∞
        std::copy(p, p + NE, score.begin());
        const ExpertIntervention* forced = nullptr;
        for (const ExpertIntervention& iv : interventions) {
            if (!iv.covers(layer, pos))
                continue;
            if (iv.kind == Kind::Remove)
                for (const uint32_t e : iv.experts)
                    score[e] = -std::numeric_limits<float>::infinity();
            else if (iv.kind == Kind::Force)
                forced = &iv; // the last one covering the position wins
        }
        // ggml's argsort (std::sort, comparator a > b: not stable, so ties fall as its sort leaves them)
        int32_t* chosen = r.experts.data() + std::size_t(t) * k;
        const auto descending = [&](int32_t a, int32_t b) { return score[a] > score[b]; };
        if (forced) {
            for (uint32_t s = 0; s < k; ++s)
                chosen[s] = int32_t(forced->experts[s]);
            std::sort(chosen, chosen + k, descending); // the slot order the router would give them
        } else {
            std::iota(order.begin(), order.end(), 0);
            std::sort(order.begin(), order.end(), descending);
            std::copy_n(order.begin(), k, chosen);
        }

        // weights: the (unbiased) probabilities of the chosen, divided by their sum where the
        // architecture normalises (ggml_sum_rows in double, clamped, one f32 division each)
        float* w = r.weights.data() + std::size_t(t) * k;
        for (uint32_t s = 0; s < k; ++s)
            w[s] = p[chosen[s]];
        if (normalize) {
            double sum = 0.0;
            for (uint32_t s = 0; s < k; ++s)
                sum += static_cast<double>(w[s]);
            const float denom = std::max(static_cast<float>(sum), 6.103515625e-5f);
            for (uint32_t s = 0; s < k; ++s)
                w[s] = w[s] / denom;
        }
        for (const ExpertIntervention& iv : interventions)
            if (iv.kind == Kind::ZeroOutput && iv.covers(layer, pos))
                for (uint32_t s = 0; s < k; ++s)
                    if (std::find(iv.experts.begin(), iv.experts.end(), uint32_t(chosen[s])) != iv.experts.end())
                        w[s] = 0.0f;
    }
    return r;
}

} // namespace engine
