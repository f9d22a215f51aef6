// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "backend/backend.h"
#include "model/model_config.h"

#include <cstdint>
#include <map>
#include <vector>

namespace engine {

// Attention as the engine computed it during a sequence's real forward passes — a prefill's
// batches and every decode step — assembled row by row into whole query × key matrices. Each
// pass contributes the rows of the positions it evaluated; stepping back drops rows; the keys and
// values are those of the latest pass (the cache's contents), held once per KV head however many
// query heads share it. Memory is bounded: when everything the recording would hold at the length
// the sequence will reach (rows, queries, keys and values) passes the budget, only the layers in
// `focus` are kept.
class AttentionRecorder {
public:
    struct Head {
        uint32_t layer = 0, head = 0, kv_head = 0, head_dim = 0;
        float scale = 1.0f;
        std::vector<std::vector<float>> rows; // row i: weights over keys 0..i (i + 1 values)
        std::vector<std::vector<float>> q;    // row i: the query of position i
    };
    // One KV head's keys and values from the latest pass.
    struct KeysValues {
        std::vector<float> k, v; // [n_keys][head_dim]
        uint32_t n_keys = 0;
    };

    explicit AttentionRecorder(uint64_t budget_bytes = 96ull << 20) : m_budget(budget_bytes) {}

    // What the next passes should capture: every head of every layer while within budget, else
    // the focus layers only.
    const CaptureRequest& request(const ModelConfig& config, uint32_t next_length);
    void set_focus(std::vector<uint32_t> layers) { m_focus = std::move(layers); }

    // Adds the rows one pass computed. Rows at or beyond its first position are replaced.
    void add(const ForwardCaptures& captures);
    // Keeps rows 0..n−1 (the sequence was cut back to n tokens).
    void truncate(uint32_t n);
    void clear();

    uint32_t length() const { return m_length; }
    // A head whose rows cover the whole sequence, or null.
    const Head* complete(uint32_t layer, uint32_t head) const;
    // The keys and values a complete head reads.
    const KeysValues& keys_values(const Head& head) const { return m_kv.at({head.layer, head.kv_head}); }
    // Every byte the recording holds.
    uint64_t bytes() const;
    // What the recording of every head of `layers` layers would hold at `length` tokens.
    static uint64_t bytes_needed(const ModelConfig& config, const std::vector<uint32_t>& layers, uint32_t length);

private:
    uint64_t m_budget;
    std::vector<uint32_t> m_focus;
    std::map<std::pair<uint32_t, uint32_t>, Head> m_heads;    // (layer, head)
    std::map<std::pair<uint32_t, uint32_t>, KeysValues> m_kv; // (layer, KV head)
    uint32_t m_length = 0;                                    // rows every complete head has
    CaptureRequest m_request;
};

} // namespace engine
