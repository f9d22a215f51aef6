// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "quant/activation_quant.h"
#include "quant/ggml_type.h"

#include <cstddef>
#include <cstdint>

namespace engine {

// llama.cpp's tiled order for k-quant and IQ4_XS weights (dot_k_tiled in vec_dot_portable.h: per
// 256-element block res = d·s1, res = fma(−dmin, s2, res), acc = fma(res, d8, acc)) computed for
// many rows and tokens at once: each weight block is decoded once to byte codes and reused by every
// token, and sixteen tokens share each 512-bit product (one token per 32-bit lane; on AVX2, eight per
// 256-bit product, each half of a panel in turn). s1 and s2 are exact integers, so any way of summing
// them gives dot_k_tiled's bits.

// Tokens in one panel: the zmm lanes of the AVX-512 kernels (two ymm for the AVX2 ones).
inline constexpr int kTiledPanelTokens = 16;

// One block of a panel of a quantized format: the sixteen tokens' quants in groups of four, the sums of
// each sum_width quants (int32, sixteen tokens each), sixteen f32 scales. The packer and the kernels
// read this one layout; every part a multiple of 64 bytes, so each stays aligned.
struct TiledPanelBlock {
    int elements, sum_width;
    constexpr std::size_t quant_bytes() const { return static_cast<std::size_t>(elements) * kTiledPanelTokens; }
    constexpr std::size_t sum_bytes() const
    {
        return static_cast<std::size_t>(elements / sum_width) * kTiledPanelTokens * sizeof(int32_t);
    }
    constexpr std::size_t scales_offset() const { return quant_bytes() + sum_bytes(); }
    constexpr std::size_t bytes() const { return scales_offset() + kTiledPanelTokens * sizeof(float); }
};
inline constexpr TiledPanelBlock kTiledQ8K{256, 16}, kTiledQ80{32, 32};
static_assert(kTiledQ8K.bytes() % 64 == 0 && kTiledQ80.bytes() % 64 == 0);

// Bytes of one panel of sixteen activation rows of n elements in `format` (Q8_K, or Q8_0 for the
// repacked Q4_0 and IQ4_NL orders, or F32/F16/BF16 held as f32 rows; 0 for Q8_1).
std::size_t tiled_panel_bytes(ActivationFormat format, int64_t n);

// Packs `count` (≤ 16) quantized rows of n elements, row_bytes apart, into one panel: per block (256
// elements of Q8_K, 32 of Q8_0), the quants as [group of 4][token][4 bytes], the sums of each 16 (Q8_K)
// or 32 (Q8_0) quants as int32 [group][token], the scales as f32 [token]; float formats as f32 rows, token
// after token. Missing tokens are zero (their results are not used).
void pack_tiled_panel(ActivationFormat format, const uint8_t* rows, std::size_t row_bytes, int count, int64_t n,
                      uint8_t* panel);

// y[t · y_stride + r] = dot_k_tiled(row r of w, token t) for r < n_rows (rows w_row_bytes apart) and
// t_begin ≤ t < t_end, token t in panel t / 16 of consecutive panels of pack_tiled_panel (from token
// 0). Same bits as dot_k_tiled.
using TiledGemmFn = void (*)(const void* w, std::size_t w_row_bytes, int64_t n_rows, const uint8_t* panels,
                             int64_t t_begin, int64_t t_end, int64_t n, float* y, int64_t y_stride);

// The CPU's tiled matmul for `type` (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS; AVX-512 VNNI, or AVX2 with
// eight tokens to a register); nullptr on the portable path ($TOKENSCOPE_SIMD=scalar) — then the one-,
// four- and eight-row kernels run.
TiledGemmFn tiled_gemm_for(GgmlType type);
// The same engine in llama.cpp's repacked order (vec_dot_repacked(type, gemm)'s bits) for Q4_K (Q8_K
// panels), Q4_0 and IQ4_NL (Q8_0 panels); nullptr for other types and where the CPU has none.
TiledGemmFn repacked_gemm_for(GgmlType type, bool gemm);
// llama.cpp's batched (llamafile) order for F32, F16 and BF16 rows of a multiple of 8 (dot_float_batched's
// bits), the panels f32 rows (the F16/BF16 activations widened); nullptr elsewhere.
TiledGemmFn float_gemm_for(GgmlType type, int64_t n);
// How many rows a caller should hand `gemm` (of `type`) at a time: 64 (a task's rows decoded once,
// into L2), or 256 for a kernel that first converts all of the call's activations (BF16 with
// AVX512_BF16), which then splits them itself.
int64_t tiled_rows_per_task(GgmlType type, TiledGemmFn gemm);

} // namespace engine
