// SPDX-License-Identifier: GPL-3.0-or-later
#include "backend/intervention.h"

#include "model/model_config.h"
#include "util/error.h"

#include <spdlog/fmt/fmt.h>

namespace engine {

std::string_view site_name(Site site)
{
    switch (site) {
    case Site::Embedding:
        return "embedding";
    case Site::HeadOut:
        return "head output";
    case Site::AttentionOut:
        return "attention output";
    case Site::ResidualMid:
        return "mid-layer residual";
    case Site::MlpOut:
        return "MLP output";
    case Site::Residual:
        return "residual";
    }
    return "?";
}

uint32_t site_width(const ModelConfig& c, Site site, uint32_t layer)
{
    return site == Site::HeadOut ? c.n_head[layer] * c.head_dim_k : c.n_embd;
}

ColumnRange intervention_columns(const ModelConfig& c, const Intervention& iv)
{
    if (iv.site == Site::HeadOut && iv.head >= 0)
        return {uint32_t(iv.head) * c.head_dim_k, c.head_dim_k};
    return {0, site_width(c, iv.site, iv.layer)};
}

void check_interventions(const ModelConfig& c, std::span<const Intervention> interventions, uint32_t pos0, uint32_t n)
{
    for (std::size_t i = 0; i < interventions.size(); ++i) {
        const Intervention& iv = interventions[i];
        const auto fail = [&](const std::string& why) {
            throw Error(fmt::format("intervention {} ({} of layer {}): {}", i + 1, site_name(iv.site), iv.layer, why));
        };
        if (iv.layer >= c.n_layer)
            fail(fmt::format("the model has {} layers", c.n_layer));
        if (iv.site == Site::Embedding && iv.layer != 0)
            fail("the embeddings exist before layer 0 only");
        if (iv.head >= 0 && iv.site != Site::HeadOut)
            fail("only a head output names a head");
        if (iv.head >= 0 && uint32_t(iv.head) >= c.n_head[iv.layer])
            fail(fmt::format("the layer has {} heads", c.n_head[iv.layer]));
        if (iv.op == Intervention::Op::Add && iv.head >= 0)
            fail("adding applies to whole rows, not to one head");
        if (iv.count == 0)
            fail("it names no position");
        const uint32_t cols = intervention_columns(c, iv).cols;
        const bool one_row = iv.values.size() == cols;
        if (!one_row && iv.values.size() != std::size_t(iv.count) * cols)
            fail(fmt::format("{} values given; {} per position are needed ({} or {})", iv.values.size(), cols, cols,
                             std::size_t(iv.count) * cols));
        // Per-position values must all land in this request: otherwise the caller's positions are off.
        if (!one_row && (iv.first < pos0 || uint64_t(iv.first) + iv.count > uint64_t(pos0) + n))
            fail(fmt::format("positions {}–{} are outside this pass's {}–{}", iv.first,
                             uint64_t(iv.first) + iv.count - 1, pos0, pos0 + n - 1));
    }
}

} // namespace engine
