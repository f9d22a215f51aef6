// SPDX-License-Identifier: GPL-3.0-or-later
// Scalar reference of the attention row: every fused multiply-add and every pairwise sum in the
// order the 8-lane SIMD code performs them, so both give the same bits.
#include "backend/cpu/attention_kernels.h"

#include "backend/cpu/simd/attention_simd.h"
#include "quant/vec_dot.h"
#include "util/fp16.h"
#include "util/ggml_expf.h"

#include <bit>
#include <cmath>
#include <limits>

namespace engine::cpu {

namespace {

inline float round_f16(float x)
{
    return fp16_to_f32(f32_to_fp16(x));
}

// Horizontal sums of 8 lanes in the two orders ggml uses.
inline float hsum8_halves(const float* a) // ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7))
{
    const float r0 = a[4] + a[0], r1 = a[5] + a[1], r2 = a[6] + a[2], r3 = a[7] + a[3];
    return (r0 + r2) + (r1 + r3);
}
inline float hsum8_hadd(const float* a) // ((a0+a4)+(a1+a5)) + ((a2+a6)+(a3+a7))
{
    const float t0 = a[0] + a[4], t1 = a[1] + a[5], t2 = a[2] + a[6], t3 = a[3] + a[7];
    return (t0 + t1) + (t2 + t3);
}

// F16 dot product, x and y given as f32 values of F16 numbers, length a multiple of 8.
float dot_f16_order(const float* x, const float* y, uint32_t n, bool batched)
{
    if (batched) { // one accumulator of 8 lanes
        float acc[8] = {};
        for (uint32_t i = 0; i < n; i += 8)
            for (int l = 0; l < 8; ++l)
                acc[l] = std::fma(x[i + l], y[i + l], acc[l]);
        return hsum8_halves(acc);
    }
    float acc[4][8] = {}; // four accumulators of 8 lanes over 32-element steps
    const uint32_t np = n & ~31u;
    for (uint32_t i = 0; i < np; i += 32)
        for (int j = 0; j < 4; ++j)
            for (int l = 0; l < 8; ++l)
                acc[j][l] = std::fma(x[i + 8 * j + l], y[i + 8 * j + l], acc[j][l]);
    for (int l = 0; l < 8; ++l) {
        acc[0][l] += acc[2][l];
        acc[1][l] += acc[3][l];
    }
    for (int l = 0; l < 8; ++l)
        acc[0][l] += acc[1][l];
    double sum = hsum8_hadd(acc[0]);
    for (uint32_t i = np; i < n; ++i)
        sum += static_cast<double>(x[i] * y[i]);
    return static_cast<float>(sum);
}

} // namespace

float softmax_expf(float x)
{
    return ggml_expf(x);
}

void attention_row_scalar(const AttentionRow& row, float* out, float* weights, AttentionScratch& s)
{
    const uint32_t D = row.head_dim;
    const uint32_t n_pad = (row.n_slots + 7) & ~7u;
    s.q16.resize(D);
    s.scores.resize(n_pad);
    s.acc.resize(D);
    std::vector<float> kf(D);
    for (uint32_t i = 0; i < D; ++i)
        s.q16[i] = round_f16(row.q[i]);

    // scores, masked slots −inf
    float max = -std::numeric_limits<float>::infinity();
    for (uint32_t j = 0; j < n_pad; ++j) {
        if (j >= row.n_slots || j < row.first || !row.keys[j]) {
            s.scores[j] = -std::numeric_limits<float>::infinity();
            continue;
        }
        for (uint32_t i = 0; i < D; ++i)
            kf[i] = fp16_to_f32(row.keys[j][i]);
        s.scores[j] = attention_score(dot_f16_order(kf.data(), s.q16.data(), D, row.batched), row);
        max = std::max(max, s.scores[j]);
    }
    // softmax: exponentials in chunks of 8, each chunk's sum (halves order) added in double
    double sum = 0.0;
    for (uint32_t c = 0; c < n_pad; c += 8) {
        float v[8];
        for (int l = 0; l < 8; ++l)
            v[l] =
                s.scores[c + l] == -std::numeric_limits<float>::infinity() ? 0.0f : softmax_expf(s.scores[c + l] - max);
        for (int l = 0; l < 8; ++l)
            s.scores[c + l] = v[l];
        sum += static_cast<double>(hsum8_halves(v));
    }
    const auto inv = static_cast<float>(1.0 / sum);
    for (uint32_t j = 0; j < row.n_slots; ++j)
        weights[j] = s.scores[j] * inv;

    // out[d] = Σ_j f16(p_j) · v_j[d], lanes by slot index as in the F16 dot over the cache cells
    std::vector<float> p16(n_pad, 0.0f), vcol(n_pad, 0.0f);
    for (uint32_t j = 0; j < row.n_slots; ++j)
        p16[j] = row.values[j] && j >= row.first ? round_f16(weights[j]) : 0.0f;
    const uint32_t n_dot = row.batched ? n_pad : ((row.n_slots + 255) & ~255u); // cells padded to 256
    p16.resize(n_dot, 0.0f);
    vcol.resize(n_dot, 0.0f);
    for (uint32_t d = 0; d < D; ++d) {
        for (uint32_t j = 0; j < row.n_slots; ++j)
            vcol[j] = row.values[j] && j >= row.first ? fp16_to_f32(row.values[j][d]) : 0.0f;
        out[d] = dot_f16_order(vcol.data(), p16.data(), n_dot, row.batched);
    }
}

void attention_row(const AttentionRow& row, float* out, float* weights, AttentionScratch& scratch)
{
    if (simd_level() != SimdLevel::Scalar) {
        simd::attention_row_avx2(row, out, weights, scratch);
        return;
    }
    attention_row_scalar(row, out, weights, scratch);
}

void attention_rows(const AttentionRow* rows, uint32_t n_rows, float* const* outs, float* const* weights,
                    AttentionScratch& scratch)
{
    if (simd_level() != SimdLevel::Scalar) {
        simd::attention_rows_avx2(rows, n_rows, outs, weights, scratch,
                                  simd_level() == SimdLevel::Avx512 ? simd::batched_attention_avx512()
                                                                    : simd::batched_attention_avx2());
        return;
    }
    for (uint32_t r = 0; r < n_rows; ++r)
        attention_row_scalar(rows[r], outs[r], weights[r], scratch);
}

} // namespace engine::cpu
