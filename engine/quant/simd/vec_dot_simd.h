// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "quant/tiled_gemm.h"
#include "quant/vec_dot.h"

namespace engine::simd {

// AVX2 + FMA dot products for the types hot in decode (nullptr for the others, which then use the
// scalar code). Defined in vec_dot_avx2.cpp, which alone is compiled with -mavx2; call only after
// simd_level() says the CPU has AVX2.
VecDotFn vec_dot_avx2(GgmlType type);
VecDotX4Fn vec_dot_x4_avx2(GgmlType type);
// k-quants in llama.cpp's tiled order (see vec_dot_for_batch); nullptr for other types.
VecDotFn vec_dot_tiled_avx2(GgmlType type);
// The batched (llamafile) order of vec_dot_batched_scalar; nullptr where there is none.
VecDotFn vec_dot_batched_avx2(GgmlType type, int64_t n);
VecDotX4Fn vec_dot_tiled_x4_avx2(GgmlType type);
// Eight packed activation rows (pack8_activations) against one weight row; nullptr for types that
// have none (the four-row kernels then run).
VecDotX8Fn vec_dot_x8_avx2(GgmlType type);
VecDotX8Fn vec_dot_tiled_x8_avx2(GgmlType type);

// The AVX2 kernels of the types beyond the shipped models' mix (vec_dot_types_avx2.cpp): the
// functions above return them where their own file has none.
namespace types_avx2 {
VecDotFn one_row(GgmlType type);
VecDotFn batched(GgmlType type, int64_t n);
VecDotX4Fn x4(GgmlType type);
VecDotX8Fn x8(GgmlType type);
VecDotFn tiled(GgmlType type);
VecDotX4Fn tiled_x4(GgmlType type);
VecDotX8Fn tiled_x8(GgmlType type);
// llama.cpp's repacked order (vec_dot_repacked)
VecDotFn repacked(GgmlType type, bool gemm);
VecDotX4Fn repacked_x4(GgmlType type);
VecDotRows8Fn repacked_rows8(GgmlType type, bool gemm);
VecDotRows8x4Fn repacked_rows8x4(GgmlType type, bool gemm);
} // namespace types_avx2

// The tiled matmuls (tiled_gemm.h) on AVX2 (tiled_gemm_avx2.cpp): eight tokens to a register, the same
// bits as the AVX-512 ones.
TiledGemmFn tiled_gemm_avx2(GgmlType type);
TiledGemmFn repacked_gemm_avx2(GgmlType type, bool gemm);
TiledGemmFn float_gemm_avx2(GgmlType type);

// AVX-512 VNNI versions, bit-identical to the AVX2 ones (vec_dot_avx512.cpp, compiled with
// -mavx512vnni; call only after avx512_kernels_usable(), defined in vec_dot.cpp). nullptr for types
// that have none.
bool avx512_kernels_usable();
VecDotFn vec_dot_avx512(GgmlType type);
VecDotX4Fn vec_dot_x4_avx512(GgmlType type);
VecDotX8Fn vec_dot_x8_avx512(GgmlType type);
VecDotX16Fn vec_dot_x16_avx512(GgmlType type);
VecDotFn vec_dot_tiled_avx512(GgmlType type);
VecDotFn vec_dot_batched_avx512(GgmlType type, int64_t n);
VecDotX4Fn vec_dot_tiled_x4_avx512(GgmlType type);
VecDotX8Fn vec_dot_tiled_x8_avx512(GgmlType type);
VecDotRows8Fn vec_dot_repacked_rows8_avx512(GgmlType type, bool gemm);
VecDotRows8x4Fn vec_dot_repacked_rows8x4_avx512(GgmlType type, bool gemm);
// Eight rows with one_row's bits (vec_dot_rows8_of); nullptr where there is none.
VecDotRows8Fn vec_dot_rows8_of_avx512(VecDotFn one_row);
// The tiled order for many rows and tokens at once (tiled_gemm.h; tiled_gemm_avx512.cpp).
TiledGemmFn tiled_gemm_avx512(GgmlType type);
TiledGemmFn repacked_gemm_avx512(GgmlType type, bool gemm);
TiledGemmFn float_gemm_avx512(GgmlType type);
// BF16 × BF16 with AVX-512 BF16's VDPBF16PS, the FMA kernel's bits (bf16_gemm_avx512bf16.cpp, compiled
// with -mavx512bf16; call only where the CPU has AVX512_BF16 besides the above): nullptr where the
// instruction does not round as two fused multiply-adds.
TiledGemmFn bf16_pairs_gemm_avx512bf16();

} // namespace engine::simd
