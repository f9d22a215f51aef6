// SPDX-License-Identifier: GPL-3.0-or-later
#include "quant/tiled_gemm.h"

#include "quant/activation_quant.h"
#include "quant/simd/vec_dot_simd.h"
#include "quant/vec_dot.h"

#include "util/fp16.h"

#include <cstring>

namespace engine {

namespace {
template <class Block, int Elements, int SumWidth>
void pack_blocks(const uint8_t* rows, std::size_t row_bytes, int count, int64_t n, uint8_t* panel)
{
    constexpr TiledPanelBlock layout{Elements, SumWidth};
    for (int64_t b = 0; b < n / Elements; ++b) {
        uint8_t* block = panel + static_cast<std::size_t>(b) * layout.bytes();
        auto* sums = reinterpret_cast<int32_t*>(block + layout.quant_bytes());
        auto* scales = reinterpret_cast<float*>(block + layout.scales_offset());
        for (int t = 0; t < count; ++t) {
            const auto& y = reinterpret_cast<const Block*>(rows + static_cast<std::size_t>(t) * row_bytes)[b];
            for (int g = 0; g < Elements / 4; ++g)
                std::memcpy(block + (g * kTiledPanelTokens + t) * 4, y.qs + 4 * g, 4);
            if constexpr (Elements == 256) {
                for (int g = 0; g < 16; ++g)
                    sums[g * kTiledPanelTokens + t] = y.bsums[g];
                scales[t] = y.d;
            } else {
                int sum = 0;
                for (int i = 0; i < Elements; ++i)
                    sum += y.qs[i];
                sums[t] = sum;
                scales[t] = fp16_to_f32(y.d);
            }
        }
    }
}
} // namespace

std::size_t tiled_panel_bytes(ActivationFormat format, int64_t n)
{
    switch (format) {
    case ActivationFormat::Q8_K:
        return static_cast<std::size_t>(n / 256) * kTiledQ8K.bytes();
    case ActivationFormat::Q8_0:
        return static_cast<std::size_t>(n / 32) * kTiledQ80.bytes();
    case ActivationFormat::F32:
    case ActivationFormat::F16:
    case ActivationFormat::BF16:
        return static_cast<std::size_t>(n) * kTiledPanelTokens * sizeof(float);
    default:
        return 0;
    }
}

void pack_tiled_panel(ActivationFormat format, const uint8_t* rows, std::size_t row_bytes, int count, int64_t n,
                      uint8_t* panel)
{
    std::memset(panel, 0, tiled_panel_bytes(format, n));
    if (format == ActivationFormat::Q8_K)
        pack_blocks<BlockQ8_K, 256, 16>(rows, row_bytes, count, n, panel);
    else if (format == ActivationFormat::Q8_0)
        pack_blocks<BlockQ8_0, 32, 32>(rows, row_bytes, count, n, panel);
    else
        for (int t = 0; t < count; ++t) {
            const uint8_t* row = rows + static_cast<std::size_t>(t) * row_bytes;
            auto* out = reinterpret_cast<float*>(panel) + static_cast<std::size_t>(t) * n;
            for (int64_t i = 0; i < n; ++i) {
                uint16_t h = 0;
                if (format != ActivationFormat::F32)
                    std::memcpy(&h, row + 2 * i, 2);
                out[i] = format == ActivationFormat::F16    ? fp16_to_f32(h)
                         : format == ActivationFormat::BF16 ? bf16_to_f32(h)
                                                            : reinterpret_cast<const float*>(row)[i];
            }
        }
}

namespace {
// BF16's matmul with AVX512_BF16 (vdpbf16ps, the FMA kernel's bits), where the CPU has it and
// rounds it as that kernel needs; nullptr elsewhere.
TiledGemmFn bf16_pairs_gemm()
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (simd_level() == SimdLevel::Avx512 && __builtin_cpu_supports("avx512bf16"))
        return simd::bf16_pairs_gemm_avx512bf16();
#endif
    return nullptr;
}

// The AVX-512 kernel where the CPU runs them, the AVX2 one where it runs those, none on the portable path.
template <class Avx512, class Avx2> TiledGemmFn for_simd_level(Avx512 avx512, Avx2 avx2)
{
    switch (simd_level()) {
    case SimdLevel::Avx512:
        return avx512();
    case SimdLevel::Avx2:
        return avx2();
    default:
        return nullptr;
    }
}
} // namespace

TiledGemmFn tiled_gemm_for(GgmlType type)
{
    return for_simd_level([&] { return simd::tiled_gemm_avx512(type); }, [&] { return simd::tiled_gemm_avx2(type); });
}

TiledGemmFn float_gemm_for(GgmlType type, int64_t n)
{
    if (n % 8 != 0)
        return nullptr;
    if (type == GgmlType::BF16)
        if (TiledGemmFn f = bf16_pairs_gemm())
            return f;
    return for_simd_level([&] { return simd::float_gemm_avx512(type); }, [&] { return simd::float_gemm_avx2(type); });
}

int64_t tiled_rows_per_task(GgmlType type, TiledGemmFn gemm)
{
    return type == GgmlType::BF16 && gemm && gemm == bf16_pairs_gemm() ? 256 : 64;
}

TiledGemmFn repacked_gemm_for(GgmlType type, bool gemm)
{
    return for_simd_level([&] { return simd::repacked_gemm_avx512(type, gemm); },
                          [&] { return simd::repacked_gemm_avx2(type, gemm); });
}

} // namespace engine
