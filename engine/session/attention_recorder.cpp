// SPDX-License-Identifier: GPL-3.0-or-later
#include "session/attention_recorder.h"

#include <algorithm>
#include <set>

namespace engine {

uint64_t AttentionRecorder::bytes_needed(const ModelConfig& c, const std::vector<uint32_t>& layers, uint32_t length)
{
    const uint64_t n = length, D = c.head_dim_k;
    uint64_t floats = 0;
    for (uint32_t il : layers) {
        // per query head: the causal rows (half a square) and the queries; per KV head: K and V
        floats += uint64_t(c.n_head[il]) * (n * (n + 1) / 2 + n * D);
        floats += uint64_t(c.n_head_kv[il]) * 2 * n * D;
    }
    return floats * sizeof(float);
}

const CaptureRequest& AttentionRecorder::request(const ModelConfig& c, uint32_t next_length)
{
    std::vector<uint32_t> every_layer(c.n_layer);
    for (uint32_t il = 0; il < c.n_layer; ++il)
        every_layer[il] = il;
    const bool everything = bytes_needed(c, every_layer, next_length) <= m_budget;
    m_request = CaptureRequest{};
    for (uint32_t il = 0; il < c.n_layer; ++il) {
        const bool focus = std::find(m_focus.begin(), m_focus.end(), il) != m_focus.end();
        if (!everything && !focus)
            continue;
        for (uint32_t h = 0; h < c.n_head[il]; ++h)
            m_request.heads.emplace_back(il, h);
    }
    // Heads no longer recorded lose their rows: a matrix with holes would mislead.
    std::erase_if(m_heads, [&](const auto& entry) { return !m_request.wants(entry.first.first, entry.first.second); });
    std::erase_if(m_kv, [&](const auto& entry) {
        return std::none_of(m_heads.begin(), m_heads.end(), [&](const auto& h) {
            return h.second.layer == entry.first.first && h.second.kv_head == entry.first.second;
        });
    });
    return m_request;
}

void AttentionRecorder::add(const ForwardCaptures& captures)
{
    std::set<std::pair<uint32_t, uint32_t>> updated; // (layer, KV head) whose K/V this pass replaced
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
        // The heads of one KV head carry the same keys and values: kept once.
        if (updated.insert({c.layer, c.kv_head}).second) {
            KeysValues& kv = m_kv[{c.layer, c.kv_head}];
            kv.k = c.k;
            kv.v = c.v;
            kv.n_keys = c.n_keys;
        }
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
    }
    const uint32_t D = m_heads.empty() ? 0 : m_heads.begin()->second.head_dim;
    for (auto& [key, kv] : m_kv) {
        kv.n_keys = std::min(kv.n_keys, n);
        kv.k.resize(std::size_t(kv.n_keys) * D);
        kv.v.resize(std::size_t(kv.n_keys) * D);
    }
    m_length = std::min(m_length, n);
}

void AttentionRecorder::clear()
{
    m_heads.clear();
    m_kv.clear();
    m_length = 0;
}

const AttentionRecorder::Head* AttentionRecorder::complete(uint32_t layer, uint32_t head) const
{
    const auto it = m_heads.find({layer, head});
    if (it == m_heads.end() || it->second.rows.size() != m_length)
        return nullptr;
    const auto kv = m_kv.find({layer, it->second.kv_head});
    if (kv == m_kv.end() || kv->second.n_keys < m_length)
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
    }
    for (const auto& [key, kv] : m_kv)
        b += (kv.k.size() + kv.v.size()) * sizeof(float);
    return b;
}

} // namespace engine
