// SPDX-License-Identifier: GPL-3.0-or-later
#include "backend/rope_table.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>

namespace engine {

void rope_cos_sin(float* out, uint32_t pos, uint32_t n_tokens, uint32_t n_rot, float base, float freq_scale,
                  const float* factors)
{
    const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
    const uint32_t half_rot = n_rot / 2;
    for (uint32_t t = 0; t < n_tokens; ++t) {
        float theta_base = static_cast<float>(static_cast<int32_t>(pos + t));
        float* row = out + 2 * std::size_t(t) * half_rot;
        for (uint32_t i = 0; i < half_rot; ++i) {
            const float factor = factors ? factors[i] : 1.0f;
            const float theta = freq_scale * (theta_base / factor);
            row[2 * i] = std::cos(theta);
            row[2 * i + 1] = std::sin(theta);
            theta_base *= theta_scale;
        }
    }
}

uint32_t RopeTables::index_of(float base, float freq_scale) const
{
    const auto it = std::find(m_pairs.begin(), m_pairs.end(), std::make_pair(base, freq_scale));
    if (it == m_pairs.end())
        throw std::logic_error("a RoPE table the backend did not prepare");
    return static_cast<uint32_t>(it - m_pairs.begin());
}

void RopeTables::fill(float* out, uint32_t pos, uint32_t n_tokens, uint32_t batch, uint32_t n_rot,
                      const float* factors) const
{
    for (std::size_t table = 0; table < m_pairs.size(); ++table)
        rope_cos_sin(out + 2 * table * batch * (n_rot / 2), pos, n_tokens, n_rot, m_pairs[table].first,
                     m_pairs[table].second, factors);
}

} // namespace engine
