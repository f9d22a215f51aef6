// SPDX-License-Identifier: GPL-3.0-or-later
#include "run/run_experts.h"
#include "run/run_json.h"

#include <spdlog/fmt/fmt.h>

namespace engine::run {

using L = ExpertsLimits;

json experts_json(const ExpertsDoc& d)
{
    json layers = json::array();
    for (std::size_t i = 0; i < d.layers.size(); ++i) {
        json weights = json::array();
        for (const float w : d.weights[i])
            weights.push_back(num(w));
        layers.push_back({{"layer", d.layers[i]}, {"experts", d.experts[i]}, {"weights", weights}});
    }
    return {{"architecture", d.architecture},
            {"source", d.source},
            {"n_expert", d.n_expert},
            {"k", d.k},
            {"normalized", d.normalized},
            {"random_weights", d.random_weights},
            {"ids", d.ids},
            {"layers", layers}};
}

ExpertsDoc experts_from(const Fields& o)
{
    ExpertsDoc d;
    d.architecture = o.string("architecture");
    d.source = o.string("source");
    for (const char* key : {"n_expert", "k"}) // (a missing count would read as 0 experts)
        if (!o.has(key))
            refuse(o.at(key), "is missing");
    d.n_expert = uint32_t(o.integer("n_expert", 0, 1, L::kExperts));
    d.k = uint32_t(o.integer("k", 0, 1, L::kExperts));
    d.normalized = o.boolean("normalized");
    d.random_weights = o.boolean("random_weights");
    const json& ids = o.array("ids");
    if (int64_t(ids.size()) > L::kTokens)
        refuse(o.at("ids"), fmt::format("holds {} tokens, more than the limit of {}", ids.size(), L::kTokens));
    d.ids = int_list(ids, o.at("ids"));
    const json& layers = o.array("layers");
    if (int64_t(layers.size()) > L::kLayers)
        refuse(o.at("layers"), fmt::format("holds {} layers, more than the limit of {}", layers.size(), L::kLayers));
    if (int64_t(layers.size()) * int64_t(d.ids.size()) * d.k > L::kRoutes)
        refuse(o.at("layers"), fmt::format("holds more than {} routes", L::kRoutes));
    const std::size_t per_layer = d.ids.size() * d.k;
    for (std::size_t i = 0; i < layers.size(); ++i) {
        const Fields l(layers[i], fmt::format("{}[{}]", o.at("layers"), i));
        d.layers.push_back(uint32_t(l.integer("layer", 0, 0, L::kLayers - 1)));
        const json& experts = l.array("experts");
        const json& weights = l.array("weights");
        if (experts.size() != per_layer || weights.size() != per_layer)
            refuse(l.path(), fmt::format("holds {} experts and {} weights; {} tokens × k = {} means {} each",
                                         experts.size(), weights.size(), d.ids.size(), d.k, per_layer, per_layer));
        std::vector<int32_t> e;
        for (const int v : int_list(experts, l.at("experts")))
            e.push_back(int32_t(v));
        std::vector<float> w;
        for (const double v : number_list(weights, l.at("weights")))
            w.push_back(float(v));
        d.experts.push_back(std::move(e));
        d.weights.push_back(std::move(w));
    }
    return d;
}

} // namespace engine::run
