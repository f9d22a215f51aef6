// SPDX-License-Identifier: GPL-3.0-or-later
#include "session/attention_recorder.h"

#include <algorithm>

namespace engine {

const CaptureRequest& AttentionRecorder::request(uint32_t n_layer, const std::vector<uint32_t>& heads_per_layer,
                                                 uint32_t next_length)
{
    uint64_t heads = 0;
    for (uint32_t h : heads_per_layer)
        heads += h;
    // Half a square of floats per head (the causal rows) at the length the sequence will reach.
    const uint64_t need = heads * uint64_t(next_length) * (uint64_t(next_length) + 1) / 2 * sizeof(float);
    m_request = CaptureRequest{};
    const bool everything = need <= m_budget;
    for (uint32_t il = 0; il < n_layer; ++il) {
        const bool focus = std::find(m_focus.begin(), m_focus.end(), il) != m_focus.end();
        if (!everything && !focus)
            continue;
        for (uint32_t h = 0; h < (il < heads_per_layer.size() ? heads_per_layer[il] : 0); ++h)
            m_request.heads.emplace_back(il, h);
    }
    // Heads no longer recorded lose their rows: a matrix with holes would mislead.
    std::erase_if(m_heads, [&](const auto& entry) { return !m_request.wants(entry.first.first, entry.first.second); });
    return m_request;
}

void AttentionRecorder::add(const ForwardCaptures& captures)
{
    for (const AttentionCapture& c : captures.attention) {
        Head& h = m_heads[{c.layer, c.head}];
        h.layer = c.layer;
        h.head = c.head;
        h.kv_head = c.kv_head;
        h.head_dim = c.head_dim;
        h.scale = c.scale;
        if (h.rows.size() > c.first_position) {
            h.rows.resize(c.first_position);
            h.q.resize(c.first_position);
        }
        if (h.rows.size() < c.first_position) {
            // Rows before this pass were not recorded for this head: it starts afresh here and stays
            // incomplete until the sequence is recomputed.
            h.rows.assign(c.first_position, {});
            h.q.assign(c.first_position, {});
        }
        for (uint32_t i = 0; i < c.n_queries; ++i) {
            const uint32_t pos = c.first_position + i;
            const float* w = c.weights.data() + std::size_t(i) * c.n_keys;
            h.rows.emplace_back(w, w + pos + 1);
            const float* q = c.q.data() + std::size_t(i) * c.head_dim;
            h.q.emplace_back(q, q + c.head_dim);
        }
        h.k = c.k;
        h.v = c.v;
        h.n_keys = c.n_keys;
        m_length = std::max<uint32_t>(m_length, c.first_position + c.n_queries);
    }
    if (!captures.attention.empty())
        m_length = captures.attention.front().first_position + captures.attention.front().n_queries;
}

void AttentionRecorder::truncate(uint32_t n)
{
    for (auto& [key, h] : m_heads) {
        if (h.rows.size() > n) {
            h.rows.resize(n);
            h.q.resize(n);
        }
        h.n_keys = std::min(h.n_keys, n);
        h.k.resize(std::size_t(h.n_keys) * h.head_dim);
        h.v.resize(std::size_t(h.n_keys) * h.head_dim);
    }
    m_length = std::min(m_length, n);
}

void AttentionRecorder::clear()
{
    m_heads.clear();
    m_length = 0;
}

const AttentionRecorder::Head* AttentionRecorder::complete(uint32_t layer, uint32_t head) const
{
    const auto it = m_heads.find({layer, head});
    if (it == m_heads.end() || it->second.rows.size() != m_length || it->second.n_keys < m_length)
        return nullptr;
    for (const auto& row : it->second.rows)
        if (row.empty())
            return nullptr;
    return &it->second;
}

uint64_t AttentionRecorder::bytes() const
{
    uint64_t b = 0;
    for (const auto& [key, h] : m_heads) {
        for (const auto& r : h.rows)
            b += r.size() * sizeof(float);
        for (const auto& r : h.q)
            b += r.size() * sizeof(float);
        b += (h.k.size() + h.v.size()) * sizeof(float);
    }
    return b;
}

} // namespace engine
