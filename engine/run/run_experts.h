// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// The experts view's part of a saved run ("experts"): a mixture-of-experts model's routing of a
// sequence — per MoE layer each token's chosen experts (slot order) and their weights. Written and
// parsed here; run_validate.cpp checks it (ids in the vocabulary, experts in range and distinct per
// token, weights finite in [0, 1] and summing to 1 where the model normalises them).
#include "tokenizer/vocab.h"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace engine::run {

class Fields;

struct ExpertsDoc {
    std::string architecture, source; // source: "prompt" or "sequence"
    uint32_t n_expert = 0, k = 0;
    bool normalized = false, random_weights = false;
    std::vector<TokenId> ids;
    std::vector<uint32_t> layers;              // the MoE layers, ascending
    std::vector<std::vector<int32_t>> experts; // per layer: [n][k]
    std::vector<std::vector<float>> weights;   // per layer: [n][k]
};

struct ExpertsLimits {
    static constexpr int64_t kTokens = 2048;  // the panel's own limit
    static constexpr int64_t kLayers = 4096;  // the loader's
    static constexpr int64_t kExperts = 1024; // llama.cpp's
    // routes in all (tokens × layers × k): the document stays a few MiB of JSON
    static constexpr int64_t kRoutes = 1 << 21;
};

nlohmann::ordered_json experts_json(const ExpertsDoc& doc);
// Types and shapes (FormatError naming the field).
ExpertsDoc experts_from(const Fields& o);

} // namespace engine::run
