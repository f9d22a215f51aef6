// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace engine {

// ggml's rope_yarn beyond the plain rotation: the mix of interpolated and extrapolated angles (YaRN,
// ext_factor 0: none) between the correction dimensions, and the factor on cos and sin.
struct RopeYarn {
    float ext_factor = 0.0f;
    float attn_factor = 1.0f;
    float corr_low = 0.0f, corr_high = 0.0f;
    bool operator==(const RopeYarn&) const = default;
};

// cos and sin of the angle of pair index i0/2 (i0 even) whose unscaled angle is theta_extrap, as
// ggml's CPU rope computes them (its multiply-adds fused as its compiled C fuses them).
void rope_yarn_cos_sin(float theta_extrap, float freq_scale, const RopeYarn& yarn, int32_t i0, float& cos_theta,
                       float& sin_theta);

// The (cos, sin) pairs of the rotary embedding for positions pos … pos + n_tokens − 1: out[t][i][2]
// for the pair i < n_rot/2, computed exactly as the CPU backend's kernel_rope computes its angles.
// The GPU backends read these tables (rope.comp, the CUDA Rope kernel).
void rope_cos_sin(float* out, uint32_t pos, uint32_t n_tokens, uint32_t n_rot, float base, float freq_scale,
                  const float* factors, const RopeYarn& yarn = {});

// mistral3's query temperature at `pos`: 1 + beta·ln(floor(pos / floor_positions) + 1), as llama.cpp's
// llm_graph_input_attn_temp computes it (a float quotient, the logarithm in double); 1 when beta is 0.
float rope_query_temperature(float beta, uint32_t floor_positions, uint32_t pos);

// The distinct rotations (base, frequency scale, YaRN) of a model's layers, in the order added: a GPU
// backend keeps one cos/sin table per rotation for the positions of a chunk, side by side in one
// buffer, and each layer's RoPE reads the table of its own.
class RopeTables {
public:
    // Adds a table for the rotation unless it has one already.
    void add(float base, float freq_scale, const RopeYarn& yarn = {});
    std::size_t size() const { return m_pairs.size(); }
    // The queries' temperature (beta 0: none): `fill` then also writes (t(pos), 0) for every position
    // after the tables, at vec2 index temperature_offset.
    void set_query_temperature(float beta, uint32_t floor_positions)
    {
        m_temperature_beta = beta;
        m_temperature_floor = floor_positions;
    }
    bool has_temperature() const { return m_temperature_beta != 0.0f; }
    uint32_t temperature_offset(uint32_t batch, uint32_t n_rot) const;
    // The floats the tables (and temperatures) of `batch` positions take.
    std::size_t floats(uint32_t batch, uint32_t n_rot) const;
    // The table of a rotation; throws std::logic_error for one never added.
    uint32_t index_of(float base, float freq_scale, const RopeYarn& yarn = {}) const;
    // Every table for positions pos … pos + n_tokens − 1 (rope_cos_sin), table i starting at
    // out + 2 · i · batch · (n_rot / 2) floats.
    void fill(float* out, uint32_t pos, uint32_t n_tokens, uint32_t batch, uint32_t n_rot, const float* factors) const;

private:
    struct Rotation {
        float base, freq_scale;
        RopeYarn yarn;
        bool operator==(const Rotation&) const = default;
    };
    std::vector<Rotation> m_pairs;
    float m_temperature_beta = 0.0f;
    uint32_t m_temperature_floor = 0;
};

} // namespace engine
