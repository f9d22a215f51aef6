// SPDX-License-Identifier: GPL-3.0-or-later
#include "backend/rope_table.h"

#include <cmath>
#include <cstddef>

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

} // namespace engine
