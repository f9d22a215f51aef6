// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// The flash-attention kernels' bodies, compiled portably (flash_attention.cpp), with AVX2 + FMA + F16C
// (simd/flash_attention_avx2.cpp) and, for the tile kernel, with AVX-512 (simd/flash_attention_avx512.cpp). Every fused
// multiply-add is written as std::fma, and no other product is followed by a sum, so both give the
// same bits (and llama.cpp's: its compiler fuses S·ms + vs and the partials' merge, its kernels use
// FMA). The exponentials of a tile's softmax are ggml's vectorised ones, eight at a time on AVX2.

#include "backend/cpu/attention_kernels.h"
#include "backend/cpu/flash_attention.h"
#include "quant/activation_quant.h"
#include "quant/dequant.h"
#include "quant/vec_dot.h"
#include "util/fp16.h"

#include <algorithm>
#include <cmath>
#include <limits>

#if defined(__AVX2__)
#include "backend/cpu/simd/expf8_avx2.h"
#endif
#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace engine::cpu {

// Internal linkage: each translation unit keeps its own copy, compiled with its own flags (an inline
// function with external linkage would let the linker pick one build for both).
namespace {

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// ggml's vec_scale / vec_mad in F16 (x86: widen eight lanes, multiply or fuse, narrow with round to
// nearest even; head_dim is whole 32-lane steps, so no scalar tail runs). With F16C the conversions
// are the instructions (the same roundings as the portable ones).
void scale_f16(uint16_t* y, uint32_t n, float v)
{
    uint32_t i = 0;
#if defined(__F16C__)
    const __m256 factor = _mm256_set1_ps(v);
    for (; i + 8 <= n; i += 8) {
        auto* at = reinterpret_cast<__m128i*>(y + i);
        const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(at));
        _mm_storeu_si128(at, _mm256_cvtps_ph(_mm256_mul_ps(x, factor), _MM_FROUND_TO_NEAREST_INT));
    }
#endif
    for (; i < n; ++i)
        y[i] = f32_to_fp16(fp16_to_f32(y[i]) * v);
}

void mad_f16(uint16_t* y, const uint16_t* x, uint32_t n, float v)
{
    uint32_t i = 0;
#if defined(__F16C__) && defined(__FMA__)
    const __m256 factor = _mm256_set1_ps(v);
    for (; i + 8 <= n; i += 8) {
        auto* at = reinterpret_cast<__m128i*>(y + i);
        const __m256 xs = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
        const __m256 sum = _mm256_fmadd_ps(xs, factor, _mm256_cvtph_ps(_mm_loadu_si128(at)));
        _mm_storeu_si128(at, _mm256_cvtps_ph(sum, _MM_FROUND_TO_NEAREST_INT));
    }
#endif
    for (; i < n; ++i)
        y[i] = f32_to_fp16(std::fma(fp16_to_f32(x[i]), v, fp16_to_f32(y[i])));
}

// F16 to f32, eight at a time with F16C.
void widen_f16(const uint16_t* x, float* y, uint32_t n)
{
    uint32_t i = 0;
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
#endif
    for (; i < n; ++i)
        y[i] = fp16_to_f32(x[i]);
}

// Each row's query in the keys' dot-product format (F16 for F16 keys, Q8_0 for quantized ones),
// row r at r · the row's bytes in scratch.q; returns that stride.
std::size_t prepare_queries(const FlashRow* rows, uint32_t n_rows, FlashScratch& scratch)
{
    const ActivationFormat q_format = activation_format(rows[0].types.k);
    const std::size_t stride = activation_row_bytes(q_format, rows[0].head_dim);
    scratch.q.resize(stride * n_rows);
    for (uint32_t r = 0; r < n_rows; ++r)
        quantize_activations(q_format, rows[r].q, scratch.q.data() + r * stride, rows[0].head_dim);
    return stride;
}

#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
#define TOKENSCOPE_FLASH_F16_DOT 1
// ggml's F16 dot (vec_dot_f16) over whole 32-element steps, the query already widened (its values
// are F16's): four 8-lane accumulators, summed (0 + 2) + (1 + 3), then horizontally — the same bits.
inline float dot_f16_key(const uint8_t* key, const float* q, uint32_t D)
{
    const auto* k = reinterpret_cast<const __m128i*>(key);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    for (uint32_t i = 0; i < D; i += 32, k += 4) {
        acc0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(k)), _mm256_loadu_ps(q + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(k + 1)), _mm256_loadu_ps(q + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(k + 2)), _mm256_loadu_ps(q + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(k + 3)), _mm256_loadu_ps(q + i + 24), acc3);
    }
    const __m256 lanes = _mm256_add_ps(_mm256_add_ps(acc0, acc2), _mm256_add_ps(acc1, acc3));
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(lanes), _mm256_extractf128_ps(lanes, 1));
    t = _mm_hadd_ps(t, t);
    t = _mm_hadd_ps(t, t);
    return _mm_cvtss_f32(t);
}
#endif

// llama.cpp's one-row kernel (ggml_compute_forward_flash_attn_ext_f16_one_chunk) over the slots
// [begin, end), masked ones skipped, for rows that share keys, values and scale (the query heads of
// one KV head at one position; often one row): each row's chain exactly as for that row alone, the
// rows taken in turn at each key so that the core overlaps their chains (one row's is a
// latency-bound sequence). Leaves each row's state in scratch.states and its accumulated values in
// scratch.acc (f32, [row][head_dim]); when `record` (one row), each score in scratch.scores.
// kq_dot(key, r): row r's q·k.
template <class KeyDot>
void flash_span_with(const FlashRow* rows, uint32_t n_rows, uint32_t begin, uint32_t end, FlashScratch& scratch,
                     bool record, KeyDot kq_dot)
{
    const FlashRow& row = rows[0];
    const uint32_t D = row.head_dim;
    const std::size_t all = std::size_t(n_rows) * D;
    const bool f16_values = row.types.v == GgmlType::F16;
    if (f16_values)
        scratch.acc16.assign(all, 0);
    else
        scratch.acc.assign(all, 0.0f);
    scratch.acc.resize(all);
    scratch.v.resize(D);
    scratch.states.assign(n_rows, FlashState{});

    // llama.cpp divides the scale by the soft cap once, then caps each score.
    const float scale = row.softcap != 0.0f ? row.scale / row.softcap : row.scale;
    for (uint32_t j = begin; j < end; ++j) {
        if (!row.keys[j])
            continue;
        if (!f16_values)
            dequantize_row(row.types.v, row.values[j], scratch.v.data(), D);
        for (uint32_t r = 0; r < n_rows; ++r) {
            FlashState& st = scratch.states[r];
            float s = kq_dot(row.keys[j], r) * scale;
            if (row.softcap != 0.0f)
                s = row.softcap * std::tanh(s);
            if (record)
                scratch.scores[j] = s;
            float ms = 1.0f; // rescales what was accumulated when s is a new maximum
            float vs = 1.0f; // this value's weight, expf(s − max)
            if (s > st.max) {
                const float old = st.max;
                st.max = s;
                ms = std::exp(old - st.max);
                if (f16_values)
                    scale_f16(scratch.acc16.data() + std::size_t(r) * D, D, ms);
                else
                    for (uint32_t i = 0; i < D; ++i)
                        scratch.acc[std::size_t(r) * D + i] *= ms;
            } else {
                vs = std::exp(s - st.max);
            }
            if (f16_values) {
                mad_f16(scratch.acc16.data() + std::size_t(r) * D, reinterpret_cast<const uint16_t*>(row.values[j]), D,
                        vs);
            } else {
                float* acc = scratch.acc.data() + std::size_t(r) * D;
                for (uint32_t i = 0; i < D; ++i)
                    acc[i] = std::fma(scratch.v[i], vs, acc[i]);
            }
            st.sum = std::fma(st.sum, ms, vs);
        }
    }
    if (f16_values)
        widen_f16(scratch.acc16.data(), scratch.acc.data(), uint32_t(all));
}

// flash_span_with with the keys' dot product: for F16 keys in whole 32-element steps ggml's F16 dot
// inlined, each query widened once; otherwise the type's vec_dot on the prepared queries.
void flash_span(const FlashRow* rows, uint32_t n_rows, uint32_t begin, uint32_t end, std::size_t q_stride,
                FlashScratch& scratch, bool record)
{
    const uint32_t D = rows[0].head_dim;
#if TOKENSCOPE_FLASH_F16_DOT
    if (rows[0].types.k == GgmlType::F16 && D % 32 == 0) {
        scratch.q_f32.resize(std::size_t(n_rows) * D);
        for (uint32_t r = 0; r < n_rows; ++r)
            widen_f16(reinterpret_cast<const uint16_t*>(scratch.q.data() + r * q_stride),
                      scratch.q_f32.data() + std::size_t(r) * D, D);
        const float* q = scratch.q_f32.data();
        return flash_span_with(rows, n_rows, begin, end, scratch, record, [q, D](const uint8_t* key, uint32_t r) {
            return dot_f16_key(key, q + std::size_t(r) * D, D);
        });
    }
#endif
    const VecDotFn dot = vec_dot_for(rows[0].types.k);
    const uint8_t* q = scratch.q.data();
    flash_span_with(rows, n_rows, begin, end, scratch, record,
                    [dot, q, q_stride, D](const uint8_t* key, uint32_t r) { return dot(key, q + r * q_stride, D); });
}

// out = acc / sum (0 when nothing was seen); the display weights from the recorded scores, the final
// maximum and sum (the output does not use them).
void finish_row(const FlashRow& row, FlashState st, const float* acc, const float* scores, float* out, float* weights)
{
    const float inv = st.sum == 0.0f ? 0.0f : 1.0f / st.sum;
    for (uint32_t i = 0; i < row.head_dim; ++i)
        out[i] = acc[i] * inv;
    if (weights)
        for (uint32_t j = 0; j < row.n_slots; ++j)
            weights[j] = (j >= row.first && row.keys[j]) ? std::exp(scores[j] - st.max) * inv : 0.0f;
}

// The one-row kernel for rows sharing keys, values, scale and slot range (flash_span_with) over all of
// their slots (n_chunks 0), or llama.cpp's decode path over 512 cells or more (its split-KV path):
// the n_cells cells cut into n_chunks equal chunks (the last shorter), each chunk's states from the
// one-row kernel, merged in chunk order (ggml_flash_attn_ext_reduce_partials; a chunk with nothing
// visible is passed over). `weights` (display, one row only) may be null.
[[maybe_unused]] void flash_attention_rows_impl(const FlashRow* rows, uint32_t n_rows, uint32_t n_cells,
                                                uint32_t n_chunks, float* const* outs, float* weights,
                                                FlashScratch& scratch)
{
    const FlashRow& row = rows[0];
    const uint32_t D = row.head_dim;
    const std::size_t q_stride = prepare_queries(rows, n_rows, scratch);
    const bool record = weights != nullptr;
    if (record)
        scratch.scores.assign(row.n_slots, kMinusInf);
    if (n_chunks == 0) {
        flash_span(rows, n_rows, row.first, row.n_slots, q_stride, scratch, record);
        for (uint32_t r = 0; r < n_rows; ++r)
            finish_row(rows[r], scratch.states[r], scratch.acc.data() + std::size_t(r) * D, scratch.scores.data(),
                       outs[r], r == 0 ? weights : nullptr);
        return;
    }
    std::vector<FlashState> merged(n_rows);
    scratch.merged.assign(std::size_t(n_rows) * D, 0.0f);
    const uint32_t chunk = (n_cells + n_chunks - 1) / n_chunks;
    for (uint32_t c0 = 0; c0 < n_cells; c0 += chunk) {
        const uint32_t begin = std::max(c0, row.first), end = std::min(c0 + chunk, row.n_slots);
        if (begin >= end)
            continue;
        flash_span(rows, n_rows, begin, end, q_stride, scratch, record);
        for (uint32_t r = 0; r < n_rows; ++r) {
            const FlashState part = scratch.states[r];
            if (part.sum == 0.0f)
                continue;
            FlashState& m = merged[r];
            const float max = std::fmax(m.max, part.max);
            const float keep = std::exp(m.max - max), add = std::exp(part.max - max);
            float* into = scratch.merged.data() + std::size_t(r) * D;
            const float* from = scratch.acc.data() + std::size_t(r) * D;
            for (uint32_t i = 0; i < D; ++i)
                into[i] = std::fma(into[i], keep, from[i] * add);
            m.sum = std::fma(m.sum, keep, part.sum * add);
            m.max = max;
        }
    }
    for (uint32_t r = 0; r < n_rows; ++r)
        finish_row(rows[r], merged[r], scratch.merged.data() + std::size_t(r) * D, scratch.scores.data(), outs[r],
                   r == 0 ? weights : nullptr);
}

[[maybe_unused]] void flash_attention_row_impl(const FlashRow& row, float* out, float* weights, FlashScratch& scratch)
{
    flash_attention_rows_impl(&row, 1, 0, 0, &out, weights, scratch);
}

[[maybe_unused]] void flash_attention_split_impl(const FlashRow& row, uint32_t n_cells, uint32_t n_chunks, float* out,
                                                 float* weights, FlashScratch& scratch)
{
    flash_attention_rows_impl(&row, 1, n_cells, n_chunks, &out, weights, scratch);
}

[[maybe_unused]] void flash_attention_group_impl(const FlashRow* rows, uint32_t n_rows, uint32_t n_cells,
                                                 uint32_t n_chunks, float* const* outs, FlashScratch& scratch)
{
    flash_attention_rows_impl(rows, n_rows, n_cells, n_chunks, outs, nullptr, scratch);
}

// ggml_vec_soft_max_f32 on a tile's 64 scores (AVX2 build): x ← exp(x − max) eight at a time, each
// eight summed in halves ((x0 + x4) + (x2 + x6)) + ((x1 + x5) + (x3 + x7)), the eights' sums added
// in double.
double softmax_tile(float* x, float max)
{
    double sum = 0.0;
    for (uint32_t c = 0; c < kFlashTile; c += 8) {
        float* v = x + c;
#if defined(__AVX2__)
        _mm256_storeu_ps(v, simd::expf8(_mm256_sub_ps(_mm256_loadu_ps(v), _mm256_set1_ps(max))));
#else
        for (int l = 0; l < 8; ++l)
            v[l] = softmax_expf(v[l] - max);
#endif
        const float a0 = v[4] + v[0], a1 = v[5] + v[1], a2 = v[6] + v[2], a3 = v[7] + v[3];
        sum += static_cast<double>((a0 + a2) + (a1 + a3));
    }
    return sum;
}

// The tile kernel's two products, each element an f32 chain of fused multiply-adds in order (so
// any blocking of rows and lanes gives the same bits): scores[r][t] = Σ_d q_r[d]·k_t[d] over the head
// (keys transposed, [d][64]), and acc_r[d] += Σ_t p_r[t]·v_t[d] over the tile's 64 cells. With SIMD,
// blocks of up to six rows × two vectors in registers, as llama.cpp's simd_gemm (AVX-512's vectors
// hold sixteen lanes, AVX2's eight: the same chains).
#if defined(__AVX512F__)
struct TileVec {
    using T = __m512;
    static constexpr uint32_t W = 16;
    static T zero() { return _mm512_setzero_ps(); }
    static T load(const float* p) { return _mm512_loadu_ps(p); }
    static void store(float* p, T v) { _mm512_storeu_ps(p, v); }
    static T broadcast(const float* p) { return _mm512_set1_ps(*p); }
    static T fma(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
};
#elif defined(__AVX2__) && defined(__FMA__)
struct TileVec {
    using T = __m256;
    static constexpr uint32_t W = 8;
    static T zero() { return _mm256_setzero_ps(); }
    static T load(const float* p) { return _mm256_loadu_ps(p); }
    static void store(float* p, T v) { _mm256_storeu_ps(p, v); }
    static T broadcast(const float* p) { return _mm256_broadcast_ss(p); }
    static T fma(T a, T b, T c) { return _mm256_fmadd_ps(a, b, c); }
};
#endif

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
template <int RM> void tile_scores_block(const float* const* q, const float* keys_t, uint32_t D, float* const* scores)
{
    using V = TileVec;
    for (uint32_t t0 = 0; t0 < kFlashTile; t0 += 2 * V::W) {
        typename V::T acc[RM][2];
        for (int r = 0; r < RM; ++r)
            acc[r][0] = acc[r][1] = V::zero();
        for (uint32_t d = 0; d < D; ++d) {
            const float* k = keys_t + std::size_t(d) * kFlashTile + t0;
            const typename V::T k0 = V::load(k), k1 = V::load(k + V::W);
            for (int r = 0; r < RM; ++r) {
                const typename V::T qd = V::broadcast(q[r] + d);
                acc[r][0] = V::fma(qd, k0, acc[r][0]);
                acc[r][1] = V::fma(qd, k1, acc[r][1]);
            }
        }
        for (int r = 0; r < RM; ++r) {
            V::store(scores[r] + t0, acc[r][0]);
            V::store(scores[r] + t0 + V::W, acc[r][1]);
        }
    }
}

template <int RM, int RN>
void tile_values_lanes(const float* const* p, const float* values, uint32_t D, uint32_t d0, float* const* acc_rows)
{
    using V = TileVec;
    typename V::T acc[RM][RN];
    for (int r = 0; r < RM; ++r)
        for (int n = 0; n < RN; ++n)
            acc[r][n] = V::load(acc_rows[r] + d0 + n * V::W);
    for (uint32_t t = 0; t < kFlashTile; ++t) {
        const float* v = values + std::size_t(t) * D + d0;
        typename V::T vs[RN];
        for (int n = 0; n < RN; ++n)
            vs[n] = V::load(v + n * V::W);
        for (int r = 0; r < RM; ++r) {
            const typename V::T pt = V::broadcast(p[r] + t);
            for (int n = 0; n < RN; ++n)
                acc[r][n] = V::fma(pt, vs[n], acc[r][n]);
        }
    }
    for (int r = 0; r < RM; ++r)
        for (int n = 0; n < RN; ++n)
            V::store(acc_rows[r] + d0 + n * V::W, acc[r][n]);
}

template <int RM> void tile_values_block(const float* const* p, const float* values, uint32_t D, float* const* acc_rows)
{
    using V = TileVec;
    uint32_t d0 = 0;
    for (; d0 + 2 * V::W <= D; d0 += 2 * V::W)
        tile_values_lanes<RM, 2>(p, values, D, d0, acc_rows);
    for (; d0 + V::W <= D; d0 += V::W)
        tile_values_lanes<RM, 1>(p, values, D, d0, acc_rows);
    for (; d0 < D; ++d0) // a head width that is not whole vectors
        for (int r = 0; r < RM; ++r)
            for (uint32_t t = 0; t < kFlashTile; ++t)
                acc_rows[r][d0] = std::fma(p[r][t], values[std::size_t(t) * D + d0], acc_rows[r][d0]);
}

// Six rows at a time, then the rest in one block.
template <template <int> class Block>
void tile_rows(const float* const* a, const float* b, uint32_t D, float* const* c, uint32_t n_rows)
{
    uint32_t r = 0;
    for (; r + 6 <= n_rows; r += 6)
        Block<6>::run(a + r, b, D, c + r);
    switch (n_rows - r) {
    case 5:
        Block<5>::run(a + r, b, D, c + r);
        break;
    case 4:
        Block<4>::run(a + r, b, D, c + r);
        break;
    case 3:
        Block<3>::run(a + r, b, D, c + r);
        break;
    case 2:
        Block<2>::run(a + r, b, D, c + r);
        break;
    case 1:
        Block<1>::run(a + r, b, D, c + r);
        break;
    default:
        break;
    }
}

template <int RM> struct ScoresBlock {
    static void run(const float* const* q, const float* k, uint32_t D, float* const* s)
    {
        tile_scores_block<RM>(q, k, D, s);
    }
};
template <int RM> struct ValuesBlock {
    static void run(const float* const* p, const float* v, uint32_t D, float* const* a)
    {
        tile_values_block<RM>(p, v, D, a);
    }
};

void tile_scores(const float* const* q, const float* keys_t, uint32_t D, float* const* scores, uint32_t n_rows)
{
    tile_rows<ScoresBlock>(q, keys_t, D, scores, n_rows);
}

void tile_values(const float* const* p, const float* values, uint32_t D, float* const* acc_rows, uint32_t n_rows)
{
    tile_rows<ValuesBlock>(p, values, D, acc_rows, n_rows);
}
#else
void tile_scores(const float* const* q, const float* keys_t, uint32_t D, float* const* scores, uint32_t n_rows)
{
    for (uint32_t r = 0; r < n_rows; ++r)
        for (uint32_t t = 0; t < kFlashTile; ++t) {
            float s = 0.0f;
            for (uint32_t d = 0; d < D; ++d)
                s = std::fma(q[r][d], keys_t[std::size_t(d) * kFlashTile + t], s);
            scores[r][t] = s;
        }
}

void tile_values(const float* const* p, const float* values, uint32_t D, float* const* acc_rows, uint32_t n_rows)
{
    for (uint32_t r = 0; r < n_rows; ++r)
        for (uint32_t t = 0; t < kFlashTile; ++t)
            for (uint32_t d = 0; d < D; ++d)
                acc_rows[r][d] = std::fma(p[r][t], values[std::size_t(t) * D + d], acc_rows[r][d]);
}
#endif

// llama.cpp's tiled kernel (ggml_compute_forward_flash_attn_ext_tiled, batches of 64 tokens or
// more, F16 keys and values): per tile of 64 cells from cell 0, each score an f32 chain of fused
// multiply-adds over the head in order (the query not rounded, the keys widened), scaled, capped,
// masked; the tile's maximum updates the row's (rescaling sum and accumulator), the softmax of the
// tile is added to the sum in double, and each value lane accumulates the tile's 64 products in cell
// order (a masked cell's weight is 0). A row's bits depend on no other row, so the rows may be grouped
// in any way (rows ordered by position: those that see a tile are a contiguous run).
void flash_attention_tile_impl(const FlashRow* rows, uint32_t n_rows, float* const* outs, float* const* weights,
                               FlashScratch& scratch)
{
    if (n_rows == 0)
        return;
    const uint32_t D = rows[0].head_dim;
    const uint16_t* const* keys = reinterpret_cast<const uint16_t* const*>(rows[0].keys);
    const uint16_t* const* values = reinterpret_cast<const uint16_t* const*>(rows[0].values);
    uint32_t n_slots = 0;
    for (uint32_t r = 0; r < n_rows; ++r)
        n_slots = std::max(n_slots, rows[r].n_slots);
    scratch.keys_t.resize(std::size_t(D) * kFlashTile);   // a tile's keys, transposed: [d][cell]
    scratch.values_f.resize(std::size_t(kFlashTile) * D); // a tile's values: [cell][d]
    scratch.acc.assign(std::size_t(n_rows) * D, 0.0f);
    scratch.scores.resize(std::size_t(n_rows) * kFlashTile);
    scratch.states.assign(n_rows, FlashState{});
    scratch.row_q.resize(n_rows);
    scratch.row_scores.resize(n_rows);
    scratch.row_acc.resize(n_rows);
    for (uint32_t r = 0; r < n_rows; ++r) {
        scratch.row_q[r] = rows[r].q;
        scratch.row_scores[r] = scratch.scores.data() + std::size_t(r) * kFlashTile;
        scratch.row_acc[r] = scratch.acc.data() + std::size_t(r) * D;
        if (weights && weights[r])
            std::fill_n(weights[r], rows[r].n_slots, kMinusInf); // the scores, until the end
    }
    const float scale = rows[0].softcap != 0.0f ? rows[0].scale / rows[0].softcap : rows[0].scale;
    const float softcap = rows[0].softcap;

    for (uint32_t c0 = 0; c0 < n_slots; c0 += kFlashTile) {
        const uint32_t c1 = std::min(n_slots, c0 + kFlashTile);
        // the rows that see a cell of this tile (a run, by position); llama.cpp skips a tile every row
        // of its query tile has masked, and for a row that sees none of it nothing changes either way
        uint32_t r_lo = n_rows, r_hi = 0;
        for (uint32_t r = 0; r < n_rows; ++r)
            if (std::max(c0, rows[r].first) < std::min(c1, rows[r].n_slots)) {
                r_lo = std::min(r_lo, r);
                r_hi = r + 1;
            }
        if (r_lo >= r_hi)
            continue;
        for (uint32_t t = 0; t < kFlashTile; ++t) {
            const uint32_t j = c0 + t;
            float* v = scratch.values_f.data() + std::size_t(t) * D;
            if (j < c1 && keys[j]) {
                widen_f16(keys[j], v, D); // through the value row's space, then across
                for (uint32_t d = 0; d < D; ++d)
                    scratch.keys_t[std::size_t(d) * kFlashTile + t] = v[d];
            } else {
                for (uint32_t d = 0; d < D; ++d)
                    scratch.keys_t[std::size_t(d) * kFlashTile + t] = 0.0f;
            }
            if (j < c1 && values[j])
                widen_f16(values[j], v, D);
            else
                std::fill_n(v, D, 0.0f);
        }
        const uint32_t n_run = r_hi - r_lo;
        tile_scores(scratch.row_q.data() + r_lo, scratch.keys_t.data(), D, scratch.row_scores.data() + r_lo, n_run);
        for (uint32_t r = r_lo; r < r_hi; ++r) {
            const FlashRow& row = rows[r];
            float* kq = scratch.row_scores[r];
            const uint32_t lo = std::max(c0, row.first), hi = std::min(c0 + kFlashTile, row.n_slots);
            float tile_max = kMinusInf;
            for (uint32_t t = 0; t < kFlashTile; ++t) {
                const uint32_t j = c0 + t;
                float s = kq[t] * scale;
                if (softcap != 0.0f)
                    s = std::tanh(s) * softcap;
                if (j < lo || j >= hi || !keys[j])
                    s = kMinusInf;
                kq[t] = s;
                tile_max = std::max(tile_max, s);
            }
            if (tile_max == kMinusInf) { // nothing seen: its weights stay 0, as llama.cpp's skipped row
                std::fill_n(kq, kFlashTile, 0.0f);
                continue;
            }
            FlashState& st = scratch.states[r];
            float* acc = scratch.row_acc[r];
            if (weights && weights[r])
                for (uint32_t j = lo; j < hi; ++j)
                    weights[r][j] = kq[j - c0];
            const float max = std::fmax(st.max, tile_max);
            if (max > st.max) {
                const float ms = std::exp(st.max - max);
                for (uint32_t d = 0; d < D; ++d)
                    acc[d] *= ms;
                st.sum *= ms;
            }
            st.max = max;
            st.sum = static_cast<float>(static_cast<double>(st.sum) + softmax_tile(kq, max));
        }
        tile_values(scratch.row_scores.data() + r_lo, scratch.values_f.data(), D, scratch.row_acc.data() + r_lo, n_run);
    }
    for (uint32_t r = 0; r < n_rows; ++r) {
        const FlashState& st = scratch.states[r];
        const float* acc = scratch.row_acc[r];
        const float inv = st.sum == 0.0f ? 0.0f : 1.0f / st.sum;
        for (uint32_t d = 0; d < D; ++d)
            outs[r][d] = acc[d] * inv;
        if (weights && weights[r])
            for (uint32_t j = 0; j < rows[r].n_slots; ++j)
                weights[r][j] = weights[r][j] == kMinusInf ? 0.0f : std::exp(weights[r][j] - st.max) * inv;
    }
}

} // namespace

} // namespace engine::cpu
