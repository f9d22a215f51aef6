// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// A mixture-of-experts router as llama.cpp's build_moe_ffn computes it (shared/reference/moe.md §3):
// softmax over every expert's logit, the top k by probability (its argsort, ties included), the
// chosen probabilities as weights, divided by their sum where the architecture says so. The forward
// pass routes every MoE layer through route_rows(), on every backend, with the interventions of the
// interpretability lab (force a token's experts, remove an expert) applied here and nowhere else.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace engine {

struct ModelConfig;

// The experts each row of a chunk goes to, in llama.cpp's slot order (descending probability): the
// experts' outputs are weighted and summed in this order.
struct ExpertRouting {
    uint32_t n_rows = 0, k = 0;
    std::vector<int32_t> experts; // [n_rows][k]
    std::vector<float> weights;   // [n_rows][k] as applied to each expert's output
};

// An intervention at the router. Positions are absolute (as in the KV cache), layers every MoE layer
// when `layer` is kAllLayers.
struct ExpertIntervention {
    enum class Kind : uint8_t {
        Force,      // the positions go to exactly `experts` (k of them), weighted by the router's own
                    // probabilities for them, normalised as the architecture does
        Remove,     // `experts` can no longer be chosen: their score is −∞ before the top-k, the next
                    // best take their place (the probabilities of the rest do not change)
        ZeroOutput, // `experts` are chosen as before but their output counts 0 (the weight is 0)
    };
    static constexpr int32_t kAllLayers = -1;
    Kind kind = Kind::Remove;
    int32_t layer = kAllLayers;
    uint32_t first = 0;            // positions [first, first + count)
    uint32_t count = UINT32_MAX;   // (UINT32_MAX: from `first` on)
    std::vector<uint32_t> experts; // expert ids
    bool covers(uint32_t il, uint32_t pos) const
    {
        return (layer == kAllLayers || uint32_t(layer) == il) && pos >= first &&
               uint64_t(pos) < uint64_t(first) + count;
    }
};
std::string expert_intervention_name(ExpertIntervention::Kind kind); // "force", "remove", "zero-output"

// Throws Error naming the first intervention that does not fit the model: a dense model, a layer it
// does not have, an expert id out of range, a Force without exactly k distinct experts, or removals
// that leave fewer than k experts to choose from.
void check_expert_interventions(const ModelConfig& config, std::span<const ExpertIntervention> interventions);

// ggml's soft_max of one row, bit for bit with its AVX2 build: the maximum, exponentials of x − max in
// chunks of 8 whose sums (halves order) accumulate in double, the tail through expf, then × f32(1/sum).
void router_softmax(const float* logits, float* probs, uint32_t n);

// What the router of one layer decided for the rows of a chunk (row r at position pos0 + r).
// `logits` [n_rows][n_expert] are the router's outputs; `probs` receives the gating output
// [n_rows][n_expert]. Throws Error naming the layer when a router output is not finite (a broken
// model would otherwise route on NaN).
ExpertRouting route_rows(const ModelConfig& config, bool normalize, uint32_t layer, const float* logits,
                         uint32_t n_rows, uint32_t pos0, std::span<const ExpertIntervention> interventions,
                         std::vector<float>& probs);

} // namespace engine
