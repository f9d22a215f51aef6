// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "quant/activation_quant.h"
#include "quant/ggml_type.h"

#include <cstdint>
#include <string_view>

namespace engine {

// Dot product of one weight row (n elements, stored as its GGUF type) with one activation row in
// activation_format(type). Integer arithmetic inside each block, one float scale per block — no
// weight row is expanded to f32.
using VecDotFn = float (*)(const void* weight_row, const void* activations, int64_t n);

// Four activation rows against one weight row at once (prefill): the weight blocks are unpacked
// once for the four; each result is bit-identical to four vec_dot calls.
using VecDotX4Fn = void (*)(const void* weight_row, const void* const activations[4], int64_t n, float out[4]);

// Eight activation rows against one weight row (prefill, AVX2 and AVX-512), the rows packed by pack8_activations: block
// by block, the eight rows' blocks side by side, so a kernel walks one pointer instead of eight (eight pointers and
// eight accumulators left the compiler spilling).
using VecDotX8Fn = void (*)(const void* weight_row, const void* packed8, int64_t n, float out[8]);
// Sixteen rows: two consecutive groups of eight packed rows, `group_bytes` apart (AVX-512: the weight
// block unpacked once for the sixteen; each result is the one-row kernel's).
using VecDotX16Fn = void (*)(const void* weight_row, const void* packed16, std::size_t group_bytes, int64_t n,
                             float out[16]);
// nullptr where the CPU gives no sixteen-row kernel for the type.
VecDotX16Fn vec_dot_x16_for_batch(GgmlType type, int64_t n_tokens);
// Bytes of eight packed rows of n elements; 0 for a format with no packed layout (then no x8 kernel).
std::size_t packed8_bytes(ActivationFormat format, int64_t n);
// Q8_0: per block, the eight f16 scales widened to f32, then the eight rows' 32 quants plus 128 as
// unsigned bytes (what VNNI's unsigned-by-signed product wants; that kernel takes 128 · Σ weights
// back out, exactly; the AVX2 kernel flips the top bit back). Q8_K: per block, the eight rows' blocks. rows: eight
// quantized rows of n elements, row_bytes apart.
void pack8_activations(ActivationFormat format, const uint8_t* rows, std::size_t row_bytes, int64_t n, void* out);

// The implementation used for a weight type: the widest SIMD the CPU supports, else scalar.
// nullptr when the type has no dot product (IQ*, TQ*).
VecDotFn vec_dot_for(GgmlType type);
// The kernel for a weight row multiplied with a batch of n_tokens activation rows of n elements.
// llama.cpp changes its float summation order with the batch: F32, F16, BF16 and IQ4_NL weights use
// its llamafile matmul from 2 rows on, k-quants and IQ4_XS a scalar-per-element tiled matmul from 8 rows on (each
// block's integer sum scaled by the weight scale, then fused into the accumulator with the activation scale). The
// results here follow it, so prefill logits track llama.cpp's.
VecDotFn vec_dot_for_batch(GgmlType type, int64_t n, int64_t n_tokens);
// Which of those orders a batch of `order` rows takes for `type` rows of n elements: llama.cpp's
// llamafile (batched) order for F32/F16/BF16 rows of a multiple of 8 and IQ4_NL from 2 rows, its tiled
// order for k-quants and IQ4_XS from 8, else one row at a time. vec_dot_for_batch and the CPU
// backend's tiled matmul both choose by it.
enum class BatchOrder { Row, Batched, Tiled };
BatchOrder batch_order(GgmlType type, int64_t n, int64_t order);
VecDotX4Fn vec_dot_x4_for_batch(GgmlType type, int64_t n_tokens);
// nullptr where the CPU (or $TOKENSCOPE_SIMD) gives no eight-row kernel for the type.
VecDotX8Fn vec_dot_x8_for_batch(GgmlType type, int64_t n_tokens);
// The k-quant (and IQ4_XS) tiled order, portable (tests compare the SIMD version with it).
VecDotFn vec_dot_tiled_scalar(GgmlType type);
// llama.cpp's order for 2+ rows where its llamafile matmul takes them (F32, F16 and BF16 rows of a
// multiple of 8, IQ4_NL), portable; nullptr for other types and widths.
VecDotFn vec_dot_batched_scalar(GgmlType type, int64_t n);

// llama.cpp's repacked order (vec_dot_portable.h: dot_repacked_*), which its default x86 build uses for
// the matrices of these types it interleaves: Q4_0, IQ4_NL and Q4_K with a multiple of 8 rows — the
// output head too, also one tied to the embedding table (loaded a second time as the head); the
// table's own row lookups read it plain. The same for every batch size.
bool llama_cpp_repacks(GgmlType type, int64_t rows);
// Eight consecutive weight rows (row_bytes apart) against one activation row: out[i] for row i.
using VecDotRows8Fn = void (*)(const void* w, std::size_t row_bytes, const void* a, int64_t n, float out[8]);
// The same for four activation rows: out[t][i] for token t and row i.
using VecDotRows8x4Fn = void (*)(const void* w, std::size_t row_bytes, const void* const a[4], int64_t n,
                                 float out[4][8]);
// The widest kernels the CPU has for that order (nullptr for a type llama.cpp does not repack): its
// gemm's (gemm = true: the rows of a batch's whole groups of four, when it has four or more) or its
// gemv's (the others); the four-row kernels are the gemm's.
VecDotFn vec_dot_repacked(GgmlType type, bool gemm);
VecDotX4Fn vec_dot_repacked_x4(GgmlType type);
// Eight rows at once, each row's accumulator in a SIMD lane as llama.cpp's interleaved kernels keep
// it (the same bits as eight one-row calls); nullptr where the CPU has none.
VecDotRows8Fn vec_dot_repacked_rows8(GgmlType type, bool gemm);
// Eight consecutive rows at once with exactly the bits of eight `one_row` calls (the plain order's
// decode: each row's accumulator lanes kept apart in SIMD registers); nullptr where the CPU has no
// such kernel for that one-row kernel.
VecDotRows8Fn vec_dot_rows8_of(VecDotFn one_row);
// Eight rows against four tokens in the gemm's order (gemm = true) or its gemv's (each token summed as
// one gemv call sums it: what its mul_mat_id does for experts), each weight block decoded once for the
// four.
VecDotRows8x4Fn vec_dot_repacked_rows8x4(GgmlType type, bool gemm = true);
VecDotFn vec_dot_repacked_scalar(GgmlType type, bool gemm);

// The portable scalar implementation (tests compare every SIMD path against it).
VecDotFn vec_dot_scalar(GgmlType type);

// Avx512: AVX-512 F/BW/VL with VNNI (its kernels give the AVX2 kernels' bits, in fewer
// instructions); a CPU with AVX-512 but no VNNI runs the AVX2 kernels.
enum class SimdLevel { Scalar, Avx2, Avx512 };
// What the running CPU supports, capped by $TOKENSCOPE_SIMD (scalar | avx2 | avx512) when set.
SimdLevel simd_level();
std::string_view simd_level_name(SimdLevel level);

} // namespace engine
