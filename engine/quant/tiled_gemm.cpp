// SPDX-License-Identifier: GPL-3.0-or-later
#include "quant/tiled_gemm.h"

#include "quant/activation_quant.h"
#include "quant/simd/vec_dot_simd.h"
#include "quant/vec_dot.h"

#include <cstring>

namespace engine {

namespace {
// One 256-element block of a panel: 64 groups of four quants × 16 tokens, 16 per-16 sums × 16
// tokens (int32), 16 scales. A multiple of 64 bytes, so every part stays aligned.
constexpr std::size_t kQuantBytes = 64 * kTiledPanelTokens * 4;
constexpr std::size_t kSumBytes = 16 * kTiledPanelTokens * sizeof(int32_t);
constexpr std::size_t kBlockBytes = kQuantBytes + kSumBytes + kTiledPanelTokens * sizeof(float);
static_assert(kBlockBytes % 64 == 0);
} // namespace

std::size_t tiled_panel_bytes(int64_t n)
{
    return static_cast<std::size_t>(n / 256) * kBlockBytes;
}

void pack_tiled_panel(const uint8_t* rows, std::size_t row_bytes, int count, int64_t n, uint8_t* panel)
{
    std::memset(panel, 0, tiled_panel_bytes(n));
    for (int64_t b = 0; b < n / 256; ++b) {
        uint8_t* block = panel + static_cast<std::size_t>(b) * kBlockBytes;
        auto* sums = reinterpret_cast<int32_t*>(block + kQuantBytes);
        auto* scales = reinterpret_cast<float*>(block + kQuantBytes + kSumBytes);
        for (int t = 0; t < count; ++t) {
            const auto& y = reinterpret_cast<const BlockQ8_K*>(rows + static_cast<std::size_t>(t) * row_bytes)[b];
            for (int g = 0; g < 64; ++g)
                std::memcpy(block + (g * kTiledPanelTokens + t) * 4, y.qs + 4 * g, 4);
            for (int g = 0; g < 16; ++g)
                sums[g * kTiledPanelTokens + t] = y.bsums[g];
            scales[t] = y.d;
        }
    }
}

TiledGemmFn tiled_gemm_for(GgmlType type)
{
    if (simd_level() != SimdLevel::Avx512)
        return nullptr;
    return simd::tiled_gemm_avx512(type);
}

TiledGemmFn repacked_gemm_for(GgmlType type, bool gemm)
{
    if (simd_level() != SimdLevel::Avx512)
        return nullptr;
    return simd::repacked_gemm_avx512(type, gemm);
}

} // namespace engine
