// SPDX-License-Identifier: GPL-3.0-or-later
#include "backend/cpu/flash_attention.h"

#include "backend/cpu/flash_attention_impl.h"
#include "backend/cpu/simd/flash_attention_simd.h"
#include "quant/vec_dot.h"

#include <cmath>

namespace engine::cpu {

uint32_t kv_rotation_width(GgmlType type, uint32_t head_dim, bool key)
{
    if (type == GgmlType::F16 || head_dim == 0 || head_dim % 64 != 0)
        return 0;
    if (!key)
        return 64;
    uint32_t width = 64;
    while (head_dim % (width * 2) == 0)
        width *= 2;
    return width;
}

void hadamard_rotate(float* x, uint32_t n, uint32_t width)
{
    const float scale = 1.0f / std::sqrt(float(width));
    for (uint32_t at = 0; at + width <= n; at += width) {
        float* r = x + at;
        for (uint32_t i = 0; i < width; ++i)
            r[i] *= scale;
        for (uint32_t len = 1; len < width; len <<= 1)
            for (uint32_t i = 0; i < width; i += 2 * len)
                for (uint32_t j = 0; j < len; ++j) {
                    const float u = r[i + j], v = r[i + len + j];
                    r[i + j] = u + v;
                    r[i + len + j] = u - v;
                }
    }
}

void flash_attention_row(const FlashRow& row, float* out, float* weights, FlashScratch& scratch)
{
    if (simd_level() != SimdLevel::Scalar)
        return simd::flash_attention_row_avx2(row, out, weights, scratch);
    flash_attention_row_impl(row, out, weights, scratch);
}

void flash_attention_row_scalar(const FlashRow& row, float* out, float* weights, FlashScratch& scratch)
{
    flash_attention_row_impl(row, out, weights, scratch);
}

void flash_attention_split(const FlashRow& row, uint32_t n_cells, uint32_t n_chunks, float* out, float* weights,
                           FlashScratch& scratch)
{
    if (simd_level() != SimdLevel::Scalar)
        return simd::flash_attention_split_avx2(row, n_cells, n_chunks, out, weights, scratch);
    flash_attention_split_impl(row, n_cells, n_chunks, out, weights, scratch);
}

void flash_attention_split_scalar(const FlashRow& row, uint32_t n_cells, uint32_t n_chunks, float* out, float* weights,
                                  FlashScratch& scratch)
{
    flash_attention_split_impl(row, n_cells, n_chunks, out, weights, scratch);
}

void flash_attention_group(const FlashRow* rows, uint32_t n_rows, uint32_t n_cells, uint32_t n_chunks,
                           float* const* outs, FlashScratch& scratch)
{
    if (simd_level() != SimdLevel::Scalar)
        return simd::flash_attention_group_avx2(rows, n_rows, n_cells, n_chunks, outs, scratch);
    flash_attention_group_impl(rows, n_rows, n_cells, n_chunks, outs, scratch);
}

void flash_attention_tile(const FlashRow* rows, uint32_t n_rows, float* const* outs, float* const* weights,
                          FlashScratch& scratch)
{
    if (simd_level() == SimdLevel::Avx512)
        return simd::flash_attention_tile_avx512(rows, n_rows, outs, weights, scratch);
    if (simd_level() != SimdLevel::Scalar)
        return simd::flash_attention_tile_avx2(rows, n_rows, outs, weights, scratch);
    flash_attention_tile_impl(rows, n_rows, outs, weights, scratch);
}

void flash_attention_tile_scalar(const FlashRow* rows, uint32_t n_rows, float* const* outs, float* const* weights,
                                 FlashScratch& scratch)
{
    flash_attention_tile_impl(rows, n_rows, outs, weights, scratch);
}

} // namespace engine::cpu
