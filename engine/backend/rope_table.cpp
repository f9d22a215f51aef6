// SPDX-License-Identifier: GPL-3.0-or-later
#include "backend/rope_table.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>

namespace engine {

void rope_yarn_cos_sin(float theta_extrap, float freq_scale, const RopeYarn& yarn, int32_t i0, float& cos_theta,
                       float& sin_theta)
{
    const float theta_interp = freq_scale * theta_extrap;
    float theta = theta_interp;
    float mscale = yarn.attn_factor;
    if (yarn.ext_factor != 0.0f) {
        const float y = (static_cast<float>(i0 / 2) - yarn.corr_low) / std::max(0.001f, yarn.corr_high - yarn.corr_low);
        const float ramp_mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * yarn.ext_factor;
        theta = std::fma(theta_interp, 1.0f - ramp_mix, theta_extrap * ramp_mix);
        mscale *= std::fma(0.1f, std::log(1.0f / freq_scale), 1.0f);
    }
    cos_theta = std::cos(theta) * mscale;
    sin_theta = std::sin(theta) * mscale;
}

void rope_cos_sin(float* out, uint32_t pos, uint32_t n_tokens, uint32_t n_rot, float base, float freq_scale,
                  const float* factors, const RopeYarn& yarn)
{
    const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
    const uint32_t half_rot = n_rot / 2;
    for (uint32_t t = 0; t < n_tokens; ++t) {
        float theta_base = static_cast<float>(static_cast<int32_t>(pos + t));
        float* row = out + 2 * std::size_t(t) * half_rot;
        for (uint32_t i = 0; i < half_rot; ++i) {
            const float factor = factors ? factors[i] : 1.0f;
            rope_yarn_cos_sin(theta_base / factor, freq_scale, yarn, int32_t(2 * i), row[2 * i], row[2 * i + 1]);
            theta_base *= theta_scale;
        }
    }
}

float rope_query_temperature(float beta, uint32_t floor_positions, uint32_t pos)
{
    if (beta == 0.0f)
        return 1.0f;
    const float p = static_cast<float>(pos);
    return static_cast<float>(std::log(std::floor(p / static_cast<float>(floor_positions)) + 1.0) * beta + 1.0);
}

void RopeTables::add(float base, float freq_scale, const RopeYarn& yarn)
{
    const Rotation r{base, freq_scale, yarn};
    if (std::find(m_pairs.begin(), m_pairs.end(), r) == m_pairs.end())
        m_pairs.push_back(r);
}

uint32_t RopeTables::temperature_offset(uint32_t batch, uint32_t n_rot) const
{
    return static_cast<uint32_t>(std::max<std::size_t>(1, m_pairs.size()) * batch * (n_rot / 2));
}

std::size_t RopeTables::floats(uint32_t batch, uint32_t n_rot) const
{
    return 2 * (std::size_t(temperature_offset(batch, n_rot)) + (has_temperature() ? batch : 0));
}

uint32_t RopeTables::index_of(float base, float freq_scale, const RopeYarn& yarn) const
{
    const auto it = std::find(m_pairs.begin(), m_pairs.end(), Rotation{base, freq_scale, yarn});
    if (it == m_pairs.end())
        throw std::logic_error("a RoPE table the backend did not prepare");
    return static_cast<uint32_t>(it - m_pairs.begin());
}

void RopeTables::fill(float* out, uint32_t pos, uint32_t n_tokens, uint32_t batch, uint32_t n_rot,
                      const float* factors) const
{
    for (std::size_t table = 0; table < m_pairs.size(); ++table)
        rope_cos_sin(out + 2 * table * batch * (n_rot / 2), pos, n_tokens, n_rot, m_pairs[table].base,
                     m_pairs[table].freq_scale, factors, m_pairs[table].yarn);
    if (has_temperature()) {
        float* t = out + 2 * std::size_t(temperature_offset(batch, n_rot));
        for (uint32_t i = 0; i < n_tokens; ++i) {
            t[2 * i] = rope_query_temperature(m_temperature_beta, m_temperature_floor, pos + i);
            t[2 * i + 1] = 0.0f;
        }
    }
}

} // namespace engine
