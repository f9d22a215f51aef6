// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "backend/rope_table.h"
#include "model/model.h"
#include "quant/activation_quant.h"
#include "util/thread_pool.h"

#include <array>
#include <cstdint>
#include <vector>

namespace engine::cpu {

// y = x / sqrt(mean(x²) + eps) ⊙ w, squares summed in double as ggml does.
void kernel_rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps);

// Rotary position embedding of one head in place: pairs (i, i + n_rot/2) for NEOX, (2i, 2i+1)
// otherwise; theta advances by multiplying with base^(−2/n_rot) as ggml's rope does.
// `yarn`: ggml's YaRN mix and magnitude factor (the default: none).
void kernel_rope(float* x, int32_t n_rot, int32_t pos, float base, float freq_scale, bool neox,
                 const float* freq_factors, const RopeYarn& yarn = {});
// The same rotation with the position's (cos, sin) pairs given (rope_cos_sin): a token's heads share them.
void kernel_rope_rotate(float* x, int32_t n_rot, bool neox, const float* cos_sin);

// GeGLU with ggml's F16 GELU table: y = gelu(gate) · up; SwiGLU: y = silu(gate) · up.
// gelu(x) for every F16 x as F16 bits, the table kernel_geglu reads (the Vulkan GeGLU reads it too).
const std::array<uint16_t, 65536>& gelu_f16_table();
void kernel_geglu(const float* gate, const float* up, float* y, int64_t n);
void kernel_swiglu(const float* gate, const float* up, float* y, int64_t n);

// y[t][r] = W.row(r) · x[t] for t < n_tokens: activations quantized once to the weight type's
// format, rows split across the pool.
class MatMul {
public:
    // order_batch: the batch size whose summation order to use (≥ n_tokens). x_unchanged: the
    // caller vouches that x holds what it held at the previous run; if that run quantized the same
    // x (same address, rows, width and format) its quantized rows are used again — Q, K and V (and
    // gate and up) read one input, which is then quantized once for the group.
    // repacked: llama.cpp's repacked order for this matrix (vec_dot_repacked; the caller checks
    // llama_cpp_repacks), whatever the batch. exact_order: sum in the order of a batch of exactly
    // order_batch rows whatever n_tokens is, and in the repacked order through the gemv only (llama.cpp's
    // mul_mat_id for experts: each result one vec_dot).
    void run(ThreadPool& pool, const TensorView& w, const float* x, int64_t n_tokens, float* y, int64_t order_batch = 0,
             bool x_unchanged = false, bool repacked = false, bool exact_order = false);

private:
    void quantize_rows(ThreadPool& pool, const float* x, int64_t n_tokens, int64_t cols, ActivationFormat format);
    void multiply(ThreadPool& pool, const TensorView& w, int64_t n_tokens, float* y, int64_t order_batch, bool repacked,
                  bool exact_order);

    struct Quantized {
        const float* x = nullptr;
        int64_t n_tokens = 0, cols = 0;
        ActivationFormat format{};
    };
    std::vector<uint8_t> m_quantized;
    // The tiled matmul (tiled_gemm.h) where it applies (a k-quant or IQ4_XS matrix in the tiled order, or
    // a Q4_K one in the repacked order; enough tokens; a CPU that has it): true when it ran.
    bool tiled_multiply(ThreadPool& pool, const TensorView& w, int64_t n_tokens, float* y, int64_t order_batch,
                        bool repacked, bool exact_order);

    std::vector<uint8_t> m_packed8; // groups of eight tokens packed for the eight-row kernels (or empty)
    std::vector<uint8_t> m_tiled;   // panels of sixteen Q8_K tokens for the tiled matmul, built when first used
    bool m_tiled_ready = false;     // m_tiled holds m_quantized's panels
    Quantized m_holds;              // what m_quantized holds
};

} // namespace engine::cpu
