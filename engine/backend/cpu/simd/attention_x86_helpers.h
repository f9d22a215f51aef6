// SPDX-License-Identifier: GPL-3.0-or-later
// Small pieces the x86 attention files share. Internal linkage on purpose: each file compiles them with
// its own instruction-set flags, and one shared out-of-line copy built for AVX-512 would be called on
// CPUs without it (as quant/simd/x86_block_helpers.h).
#pragma once

#include "backend/cpu/attention_kernels.h"
#include "quant/simd/x86_block_helpers.h"

#include <cstddef>
#include <cstdint>
#include <immintrin.h>
#include <limits>

namespace engine::cpu::simd {
namespace { // NOLINT(cert-dcl59-cpp,google-build-namespaces): see above

inline __m256 load_f16(const uint16_t* p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

using engine::simd::transpose8; // (quant/simd/x86_block_helpers.h)

// Prefill's scores over slots [j0, j1): the live slots (a key, below n_slots) handed to
// score(live, n_live) in groups of up to N, in slot order; a masked slot gets −∞ in every row.
template <uint32_t N, class Score>
inline void live_key_groups(const AttentionRow& row0, uint32_t n_rows, uint32_t n_slots, float* scores,
                            std::size_t stride, uint32_t j0, uint32_t j1, Score&& score)
{
    uint32_t live[N];
    uint32_t n_live = 0;
    for (uint32_t j = j0; j < j1; ++j) {
        if (j >= n_slots || !row0.keys[j]) {
            for (uint32_t r = 0; r < n_rows; ++r)
                scores[std::size_t(r) * stride + j] = -std::numeric_limits<float>::infinity();
            continue;
        }
        live[n_live++] = j;
        if (n_live == N) {
            score(live, n_live);
            n_live = 0;
        }
    }
    if (n_live)
        score(live, n_live);
}

} // namespace
} // namespace engine::cpu::simd
