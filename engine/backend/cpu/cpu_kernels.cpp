// SPDX-License-Identifier: GPL-3.0-or-later
#include "backend/cpu/cpu_kernels.h"

#include "backend/backend.h"
#include "backend/cpu/attention_kernels.h"
#include "backend/cpu/simd/glu_simd.h"

#include "quant/tiled_gemm.h"
#include "quant/vec_dot.h"
#include "quant/vec_dot_portable.h"
#include "util/error.h"
#include "util/fp16.h"

#include <array>
#include <cmath>
#include <functional>
#include <spdlog/fmt/fmt.h>

namespace engine::cpu {

void kernel_rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i)
        sum += static_cast<double>(x[i] * x[i]);
    const float mean = static_cast<float>(sum / static_cast<double>(n));
    const float scale = 1.0f / std::sqrt(mean + eps);
    for (int64_t i = 0; i < n; ++i)
        y[i] = (x[i] * scale) * w[i];
}

void kernel_rope(float* x, int32_t n_rot, int32_t pos, float base, float freq_scale, bool neox,
                 const float* freq_factors, const RopeYarn& yarn)
{
    std::vector<float> cos_sin(static_cast<std::size_t>(n_rot));
    rope_cos_sin(cos_sin.data(), static_cast<uint32_t>(pos), 1, static_cast<uint32_t>(n_rot), base, freq_scale,
                 freq_factors, yarn);
    kernel_rope_rotate(x, n_rot, neox, cos_sin.data());
}

void kernel_rope_rotate(float* x, int32_t n_rot, bool neox, const float* cos_sin)
{
    for (int32_t i0 = 0; i0 < n_rot; i0 += 2) {
        const float c = cos_sin[i0], s = cos_sin[i0 + 1];
        const int32_t a = neox ? i0 / 2 : i0;
        const int32_t b = neox ? i0 / 2 + n_rot / 2 : i0 + 1;
        const float x0 = x[a], x1 = x[b];
        // The multiply-adds fused as ggml's compiled rope fuses them (its C is built with FMA contraction).
        x[a] = std::fma(x0, c, -(x1 * s));
        x[b] = std::fma(x0, s, x1 * c);
    }
}

// gelu(x) for every F16 x, rounded to F16: the table ggml's CPU backend uses (GGML_GELU_FP16).
const std::array<uint16_t, 65536>& gelu_f16_table()
{
    static const auto table = [] {
        std::array<uint16_t, 65536> t{};
        for (uint32_t i = 0; i < 65536; ++i) {
            const float x = fp16_to_f32(static_cast<uint16_t>(i));
            // 1 + 0.044715·x² is a fused multiply-add in ggml's compiled table (FMA contraction).
            const float inner = std::fma(0.044715f * x, x, 1.0f);
            const float g = 0.5f * x * (1.0f + std::tanh(0.79788456080286535587989211986876f * x * inner));
            t[i] = f32_to_fp16(g);
        }
        return t;
    }();
    return table;
}

void kernel_geglu(const float* gate, const float* up, float* y, int64_t n)
{
    const auto& table = gelu_f16_table();
    const int64_t done = simd_level() != SimdLevel::Scalar ? simd::geglu_avx2(gate, up, y, n) : 0;
    for (int64_t i = done; i < n; ++i) {
        const float x = gate[i];
        if (x <= -10.0f)
            y[i] = 0.0f;
        else if (x >= 10.0f)
            y[i] = x * up[i];
        else
            y[i] = fp16_to_f32(table[f32_to_fp16(x)]) * up[i];
    }
}

void kernel_swiglu(const float* gate, const float* up, float* y, int64_t n)
{
    // silu(x) = x / (1 + e^-x) with the exponential ggml's vector code uses (whole 8-lane chunks);
    // a tail that does not fill a chunk uses libm's expf, as there.
    const int64_t vec_end = n & ~int64_t(7);
    const int64_t done = simd_level() != SimdLevel::Scalar ? simd::swiglu_avx2(gate, up, y, n) : 0;
    for (int64_t i = done; i < vec_end; ++i)
        y[i] = (gate[i] / (1.0f + softmax_expf(-gate[i]))) * up[i];
    for (int64_t i = vec_end; i < n; ++i)
        y[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void MatMul::run(ThreadPool& pool, const TensorView& w, const float* x, int64_t n_tokens, float* y, int64_t order_batch,
                 bool x_unchanged, bool repacked, bool exact_order)
{
    const int64_t cols = w.cols();
    const ActivationFormat format = activation_format(w.type());
    const bool reuse = x_unchanged && m_holds.x == x && m_holds.n_tokens == n_tokens && m_holds.cols == cols &&
                       m_holds.format == format;
    if (!reuse)
        quantize_rows(pool, x, n_tokens, cols, format);
    multiply(pool, w, n_tokens, y, order_batch, repacked, exact_order);
}

void MatMul::quantize_rows(ThreadPool& pool, const float* x, int64_t n_tokens, int64_t cols, ActivationFormat format)
{
    const std::size_t row_bytes = activation_row_bytes(format, cols);
    m_holds = {};
    m_tiled_ready = false;
    m_quantized.resize(row_bytes * static_cast<std::size_t>(n_tokens));
    // Each token's row is quantized on its own, so splitting the tokens over threads changes no bit
    // (a prompt's activations are several MiB: a serial pass here left the other threads waiting).
    const auto quantize = [&](std::size_t begin, std::size_t end) {
        for (auto t = static_cast<int64_t>(begin); t < static_cast<int64_t>(end); ++t)
            quantize_activations(format, x + t * cols, m_quantized.data() + static_cast<std::size_t>(t) * row_bytes,
                                 cols);
    };
    if (n_tokens >= 8)
        pool.parallel_for(static_cast<std::size_t>(n_tokens), quantize);
    else
        quantize(0, static_cast<std::size_t>(n_tokens));
    // Whole groups of eight tokens also packed for the eight-row kernels, where the CPU has them.
    const std::size_t group_bytes = packed8_bytes(format, cols);
    const auto groups = static_cast<std::size_t>(n_tokens / 8);
    m_packed8.resize(simd_level() != SimdLevel::Scalar ? groups * group_bytes : 0);
    if (!m_packed8.empty())
        pool.parallel_for(groups, [&](std::size_t begin, std::size_t end) {
            for (std::size_t g = begin; g < end; ++g)
                pack8_activations(format, m_quantized.data() + g * 8 * row_bytes, row_bytes, cols,
                                  m_packed8.data() + g * group_bytes);
        });
    m_holds = {x, n_tokens, cols, format};
}

namespace {
// The tokens llama.cpp's repacked matmul takes through its gemm (a batch's whole groups of four; the
// rest through its gemv, which sums Q4_K in another order); deterministic mode takes every token
// through the gemm's order, whatever the batch; experts (exact_order) each through the gemv.
int64_t repacked_gemm_tokens(int64_t n_tokens, int64_t order_batch, bool exact_order)
{
    if (exact_order)
        return 0;
    if (order_batch >= kBatchInvariantOrder)
        return n_tokens;
    return n_tokens > 3 ? n_tokens - n_tokens % 4 : 0;
}
} // namespace

bool MatMul::tiled_multiply(ThreadPool& pool, const TensorView& w, int64_t n_tokens, float* y, int64_t order_batch,
                            bool repacked, bool exact_order)
{
    // From this many tokens the tiled matmuls beat the row kernels (a panel's lanes are then at least
    // half used, and decoding a row's blocks once pays off).
    constexpr int64_t kMinTokens = 16;
    if (n_tokens < kMinTokens || tiled_panel_bytes(m_holds.format, w.cols()) == 0)
        return false;
    const int64_t order = exact_order ? std::max<int64_t>(order_batch, 1) : std::max(n_tokens, order_batch);
    const int64_t gemm_tokens = repacked ? repacked_gemm_tokens(n_tokens, order_batch, exact_order) : n_tokens;
    // the order vec_dot_for_batch's kernels would take for this batch
    const BatchOrder chosen = batch_order(w.type(), w.cols(), order);
    const TiledGemmFn gemm = repacked                        ? repacked_gemm_for(w.type(), true)
                             : chosen == BatchOrder::Batched ? float_gemm_for(w.type(), w.cols())
                             : chosen == BatchOrder::Tiled   ? tiled_gemm_for(w.type())
                                                             : nullptr;
    const TiledGemmFn gemv = repacked ? repacked_gemm_for(w.type(), false) : nullptr;
    if (!gemm || (gemm_tokens < n_tokens && !gemv))
        return false;
    const int64_t cols = w.cols(), rows = w.rows();
    const std::size_t panel_bytes = tiled_panel_bytes(m_holds.format, cols),
                      row_bytes = activation_row_bytes(m_holds.format, cols);
    const auto panels = static_cast<std::size_t>((n_tokens + kTiledPanelTokens - 1) / kTiledPanelTokens);
    // F32 activations are already the float matmul's panels (f32 rows, token after token): no copy.
    const bool rows_are_panels = m_holds.format == ActivationFormat::F32;
    if (!m_tiled_ready && !rows_are_panels) {
        m_tiled.resize(panels * panel_bytes);
        pool.parallel_for(panels, [&](std::size_t begin, std::size_t end) {
            for (std::size_t p = begin; p < end; ++p) {
                const int64_t t0 = static_cast<int64_t>(p) * kTiledPanelTokens;
                pack_tiled_panel(m_holds.format, m_quantized.data() + static_cast<std::size_t>(t0) * row_bytes,
                                 row_bytes, static_cast<int>(std::min<int64_t>(kTiledPanelTokens, n_tokens - t0)), cols,
                                 m_tiled.data() + p * panel_bytes);
            }
        });
        m_tiled_ready = true;
    }
    // Sixty-four rows per task (tiled_rows_per_task), handed out as threads become free: a task decodes
    // or converts its rows once (into L2), then walks the prompt's tokens past all of them, so the
    // activations are read once per task.
    const int64_t rows_per_task = tiled_rows_per_task(w.type(), gemm);
    const uint8_t* tiled = rows_are_panels ? m_quantized.data() : m_tiled.data();
    pool.parallel_for_dynamic(static_cast<std::size_t>((rows + rows_per_task - 1) / rows_per_task), 1,
                              [&](std::size_t begin, std::size_t end) {
                                  const int64_t r0 = static_cast<int64_t>(begin) * rows_per_task;
                                  const int64_t r1 = std::min(rows, static_cast<int64_t>(end) * rows_per_task);
                                  if (gemm_tokens > 0)
                                      gemm(w.row(r0), w.row_bytes, r1 - r0, tiled, 0, gemm_tokens, cols, y + r0, rows);
                                  if (gemm_tokens < n_tokens)
                                      gemv(w.row(r0), w.row_bytes, r1 - r0, tiled, gemm_tokens, n_tokens, cols, y + r0,
                                           rows);
                              });
    return true;
}

void MatMul::multiply(ThreadPool& pool, const TensorView& w, int64_t n_tokens, float* y, int64_t order_batch,
                      bool repacked, bool exact_order)
{
    const int64_t cols = w.cols(), rows = w.rows();
    const std::size_t row_bytes = activation_row_bytes(m_holds.format, cols);
    const int64_t order = exact_order ? std::max<int64_t>(order_batch, 1) : std::max(n_tokens, order_batch);
    if (tiled_multiply(pool, w, n_tokens, y, order_batch, repacked, exact_order))
        return;
    const VecDotFn dot = repacked ? vec_dot_repacked(w.type(), false) : vec_dot_for_batch(w.type(), cols, order);
    if (!dot)
        throw UnsupportedError(fmt::format("no dot product for {} (tensor {})", w.info->type.name, w.info->name));
    const int64_t gemm_tokens = repacked ? repacked_gemm_tokens(n_tokens, order_batch, exact_order) : 0;
    const VecDotFn dot_gemm = repacked ? vec_dot_repacked(w.type(), true) : dot;
    const VecDotX4Fn dot4 = n_tokens < 4 ? nullptr
                            : repacked   ? vec_dot_repacked_x4(w.type())
                                         : vec_dot_x4_for_batch(w.type(), order);
    const VecDotX8Fn dot8 = m_packed8.empty() || repacked ? nullptr : vec_dot_x8_for_batch(w.type(), order);
    const VecDotX16Fn dot16 = m_packed8.empty() || repacked ? nullptr : vec_dot_x16_for_batch(w.type(), order);
    const std::size_t group_bytes = packed8_bytes(m_holds.format, cols);
    // A decode step's rows eight at a time where a kernel keeps the one-row kernel's bits (the plain
    // order of Q4_0 and IQ4_NL on AVX-512, as --no-repack runs them).
    const VecDotRows8Fn plain_rows8 = !repacked && n_tokens < 4 ? vec_dot_rows8_of(dot) : nullptr;
    const uint8_t* xq = m_quantized.data();
    // Rows in chunks of 16, tokens in tiles of 32: a tile's quantized activations and the chunk's
    // weight rows stay in L1 while every pair is multiplied (streaming all of a long prompt's
    // activations past each weight row made prefill wait on L2). Each (row, token) result is the
    // same single dot product whatever the tiling.
    constexpr int64_t kRowsPerTask = 16, kTokenTile = 32;
    const auto tasks = static_cast<std::size_t>((rows + kRowsPerTask - 1) / kRowsPerTask);
    // A prompt's row chunks are handed out as threads become free (a thread slowed by the machine no
    // longer holds the others at the end of every matrix). A decode step keeps one contiguous share
    // per thread: it streams the weights, and interleaved chunks broke the read-ahead (decode fell
    // from 83 to 53 tokens/s on the default model).
    const auto body = [&](std::size_t begin, std::size_t end) {
        for (std::size_t task = begin; task < end; ++task) {
            const int64_t r0 = static_cast<int64_t>(task) * kRowsPerTask;
            const int64_t r1 = std::min(rows, r0 + kRowsPerTask);
            for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokenTile) {
                const int64_t t1 = std::min(n_tokens, t0 + kTokenTile);
                int64_t r = r0;
                if (plain_rows8)
                    for (; r + 8 <= r1; r += 8)
                        for (int64_t t = t0; t < t1; ++t) {
                            float out[8];
                            plain_rows8(w.row(r), w.row_bytes, xq + static_cast<std::size_t>(t) * row_bytes, cols, out);
                            for (int i = 0; i < 8; ++i)
                                y[t * rows + r + i] = out[i];
                        }
                for (; r < r1; ++r) {
                    const std::byte* wr = w.row(r);
                    int64_t t = t0;
                    if (dot16) // sixteen tokens per pass: the weight block unpacked once for all of them
                        for (; t + 16 <= t1 && t % 8 == 0; t += 16) {
                            float out[16];
                            dot16(wr, m_packed8.data() + static_cast<std::size_t>(t / 8) * group_bytes, group_bytes,
                                  cols, out);
                            for (int i = 0; i < 16; ++i)
                                y[(t + i) * rows + r] = out[i];
                        }
                    if (dot8) // eight tokens per pass over the weight row (same bits as one at a time)
                        for (; t + 8 <= t1 && t % 8 == 0; t += 8) {
                            float out[8];
                            dot8(wr, m_packed8.data() + static_cast<std::size_t>(t / 8) * group_bytes, cols, out);
                            for (int i = 0; i < 8; ++i)
                                y[(t + i) * rows + r] = out[i];
                        }
                    if (dot4) // four tokens per pass (in the repacked order, the gemm's tokens only)
                        for (; t + 4 <= (repacked ? std::min(t1, gemm_tokens) : t1); t += 4) {
                            const void* a[4];
                            for (int i = 0; i < 4; ++i)
                                a[i] = xq + static_cast<std::size_t>(t + i) * row_bytes;
                            float out[4];
                            dot4(wr, a, cols, out);
                            for (int i = 0; i < 4; ++i)
                                y[(t + i) * rows + r] = out[i];
                        }
                    for (; t < t1; ++t)
                        y[t * rows + r] =
                            (t < gemm_tokens ? dot_gemm : dot)(wr, xq + static_cast<std::size_t>(t) * row_bytes, cols);
                }
            }
        }
    };
    // The repacked order's eight-row kernels: each of eight rows in its own SIMD lane, as llama.cpp's
    // interleaved layout has them (the same bits as one row at a time).
    const VecDotRows8Fn rows8 = repacked ? vec_dot_repacked_rows8(w.type(), false) : nullptr;
    const VecDotRows8Fn rows8_gemm = repacked ? vec_dot_repacked_rows8(w.type(), true) : nullptr;
    const VecDotRows8x4Fn rows8x4 = repacked ? vec_dot_repacked_rows8x4(w.type(), true) : nullptr;
    const VecDotRows8x4Fn rows8x4_gemv = repacked ? vec_dot_repacked_rows8x4(w.type(), false) : nullptr;
    const auto body_rows8 = [&](std::size_t begin, std::size_t end) {
        for (std::size_t task = begin; task < end; ++task) {
            const int64_t r0 = static_cast<int64_t>(task) * kRowsPerTask;
            const int64_t r1 = std::min(rows, r0 + kRowsPerTask);
            for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokenTile) {
                const int64_t t1 = std::min(n_tokens, t0 + kTokenTile);
                for (int64_t r = r0; r + 8 <= r1; r += 8) {
                    int64_t t = t0;
                    if (rows8x4) // the gemm's tokens four at a time: each weight block decoded once
                        for (; t + 4 <= std::min(t1, gemm_tokens); t += 4) {
                            const void* a[4];
                            for (int i = 0; i < 4; ++i)
                                a[i] = xq + static_cast<std::size_t>(t + i) * row_bytes;
                            float out[4][8];
                            rows8x4(w.row(r), w.row_bytes, a, cols, out);
                            for (int i = 0; i < 4; ++i)
                                for (int k = 0; k < 8; ++k)
                                    y[(t + i) * rows + r + k] = out[i][k];
                        }
                    if (rows8x4_gemv) // past the gemm's tokens (all of them for experts), four at a time
                        for (; t >= gemm_tokens && t + 4 <= t1; t += 4) {
                            const void* a[4];
                            for (int i = 0; i < 4; ++i)
                                a[i] = xq + static_cast<std::size_t>(t + i) * row_bytes;
                            float out[4][8];
                            rows8x4_gemv(w.row(r), w.row_bytes, a, cols, out);
                            for (int i = 0; i < 4; ++i)
                                for (int k = 0; k < 8; ++k)
                                    y[(t + i) * rows + r + k] = out[i][k];
                        }
                    for (; t < t1; ++t) {
                        float out[8];
                        (t < gemm_tokens ? rows8_gemm : rows8)(w.row(r), w.row_bytes,
                                                               xq + static_cast<std::size_t>(t) * row_bytes, cols, out);
                        for (int i = 0; i < 8; ++i)
                            y[t * rows + r + i] = out[i];
                    }
                }
            }
        }
    };
    using Range = std::function<void(std::size_t, std::size_t)>;
    const Range run = rows8 && rows8_gemm && rows % 8 == 0 ? Range(body_rows8) : Range(body);
    if (n_tokens >= 8)
        pool.parallel_for_dynamic(tasks, 1, run);
    else
        pool.parallel_for(tasks, run);
}

} // namespace engine::cpu
