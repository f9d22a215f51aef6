// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// Interventions on a forward pass: the interpretability lab's way of changing the computation at a
// named place (a Site) and watching the prediction move. The pass applies them once, in
// forward_pass.cpp, on any backend; an empty list changes no bit of the result.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace engine {

struct ModelConfig;

// The places of the pass an intervention or a capture can name, in the order a layer meets them.
// Every site holds rows of one token each.
enum class Site : uint8_t {
    Embedding,    // [n][E] the scaled embeddings, before layer 0 (layer 0 only)
    HeadOut,      // [n][H·D] each head's attention output, before the output projection
    AttentionOut, // [n][E] the attention block's output as added to the residual (after a post-norm)
    ResidualMid,  // [n][E] the residual stream between the attention block and the MLP
    MlpOut,       // [n][E] the MLP block's output as added to the residual (after a post-norm)
    Residual,     // [n][E] the residual stream after the layer
};
inline constexpr std::size_t kSiteCount = 6;
std::string_view site_name(Site site);
// Floats per row of `site` at `layer`.
uint32_t site_width(const ModelConfig& config, Site site, uint32_t layer);

struct Intervention {
    enum class Op : uint8_t {
        Replace, // the rows' values become `values` (zero ablation: zeros; patching: another run's)
        Add,     // `values` is added (steering); only whole rows (no head)
    };
    Site site = Site::Residual;
    uint32_t layer = 0;
    int32_t head = -1; // HeadOut: only this head's D columns; -1: the whole row
    Op op = Op::Replace;
    uint32_t first = 0;        // first position (absolute, as in the KV cache)
    uint32_t count = 1;        // positions [first, first + count); with one row of values it may
                               // exceed the request (UINT32_MAX: from `first` on)
    std::vector<float> values; // [count][cols] or [cols] applied to every position
};

// Throws Error naming the first intervention that does not fit the model (layer, head, site, the
// number of values) or the positions [pos0, pos0 + n) of the request.
void check_interventions(const ModelConfig& config, std::span<const Intervention> interventions, uint32_t pos0,
                         uint32_t n);

// Columns an intervention touches within its site's row: [col0, col0 + cols).
struct ColumnRange {
    uint32_t col0 = 0, cols = 0;
};
ColumnRange intervention_columns(const ModelConfig& config, const Intervention& iv);

} // namespace engine
