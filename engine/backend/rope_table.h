// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include <cstdint>

namespace engine {

// The (cos, sin) pairs of the rotary embedding for positions pos … pos + n_tokens − 1: out[t][i][2]
// for the pair i < n_rot/2, computed exactly as the CPU backend's kernel_rope computes its angles.
// The GPU backends read these tables (rope.comp, the CUDA Rope kernel).
void rope_cos_sin(float* out, uint32_t pos, uint32_t n_tokens, uint32_t n_rot, float base, float freq_scale,
                  const float* factors);

} // namespace engine
