// SPDX-License-Identifier: GPL-3.0-or-later
#include "backend/chunk_download.h"

#include "backend/intervention.h"
#include "model/model_config.h"

#include <cstring>

namespace engine {

uint64_t ChunkDownload::bytes_for(const ChunkPlan& plan, const ModelConfig& c)
{
    const uint64_t n = plan.n_tokens;
    uint64_t size = uint64_t(plan.n_logit_rows) * c.n_vocab * sizeof(float);
    if (plan.residuals)
        size += uint64_t(c.n_layer) * n * c.n_embd * sizeof(float);
    for (Site site : plan.sites)
        for (uint32_t il = 0; il < (site == Site::Embedding ? 1 : c.n_layer); ++il)
            size += n * site_width(c, site, il) * sizeof(float);
    for (uint32_t il : plan.attention_layers)
        size += n * c.n_head[il] * (uint64_t(c.head_dim_k) + plan.pos0 + n) * sizeof(float);
    return size;
}

void ChunkDownload::clear()
{
    m_logits = 0;
    m_residuals.clear();
    m_attention.clear();
    m_activations.clear();
}

void ChunkDownload::deliver(const std::byte* data, const ChunkPlan& plan, uint32_t n_vocab, ChunkSink& sink) const
{
    const auto rows = [data](uint64_t offset) { return reinterpret_cast<const float*>(data + offset); };
    if (plan.n_logit_rows)
        std::memcpy(sink.logits(), data + m_logits, std::size_t(plan.n_logit_rows) * n_vocab * sizeof(float));
    for (const auto& [layer, offset] : m_residuals)
        sink.residual(layer, rows(offset));
    for (const Attention& a : m_attention)
        sink.attention(a.layer, rows(a.q_offset), rows(a.w_offset));
    for (const Activation& a : m_activations)
        sink.activation(a.site, a.layer, rows(a.offset));
}

} // namespace engine
