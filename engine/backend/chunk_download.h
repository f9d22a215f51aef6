// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "backend/forward_pass.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace engine {

struct ModelConfig;

// A GPU backend's results of one chunk, copied into one host-visible buffer as the chunk runs: how
// many bytes a plan may need, where each result was put, and their delivery to the sink once the
// device has finished. The Vulkan and CUDA backends share it; the CPU backend delivers as it goes.
class ChunkDownload {
public:
    // The most a chunk of this plan downloads: its logits, residuals, sites, and the queries and
    // weights of every delivered attention layer.
    static uint64_t bytes_for(const ChunkPlan& plan, const ModelConfig& config);

    void clear();
    void logits(uint64_t offset) { m_logits = offset; }
    void residual(uint32_t layer, uint64_t offset) { m_residuals.push_back({layer, offset}); }
    void attention(uint32_t layer, uint64_t q_offset, uint64_t w_offset)
    {
        m_attention.push_back({layer, q_offset, w_offset});
    }
    void activation(Site site, uint32_t layer, uint64_t offset) { m_activations.push_back({site, layer, offset}); }

    // Hands the sink every result recorded, read from `data` (the buffer's host view): the plan's
    // logit rows, then residuals, attention and sites in the order they were recorded.
    void deliver(const std::byte* data, const ChunkPlan& plan, uint32_t n_vocab, ChunkSink& sink) const;

private:
    struct Attention {
        uint32_t layer;
        uint64_t q_offset, w_offset;
    };
    struct Activation {
        Site site;
        uint32_t layer;
        uint64_t offset;
    };
    uint64_t m_logits = 0;
    std::vector<std::pair<uint32_t, uint64_t>> m_residuals; // (layer, offset)
    std::vector<Attention> m_attention;
    std::vector<Activation> m_activations;
};

} // namespace engine
