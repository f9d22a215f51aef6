// SPDX-License-Identifier: GPL-3.0-or-later
#include "backend/cpu/simd/attention_simd.h"
#include "backend/cpu/simd/attention_x86_helpers.h"
#include "backend/cpu/simd/expf8_avx2.h"

#include <algorithm>
#include <immintrin.h>
#include <limits>
#include <vector>

namespace engine::cpu::simd {

namespace {

inline float hsum_halves(__m256 x) // ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7))
{
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

inline float hsum_hadd(__m256 x) // ((a0+a4)+(a1+a5)) + ((a2+a6)+(a3+a7))
{
    const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    const __m128 t1 = _mm_hadd_ps(t0, t0);
    return _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
}

// q·k with k in F16 and q given as F16-rounded f32.
inline float dot_k(const uint16_t* k, const float* q, uint32_t D, bool batched)
{
    if (batched) {
        __m256 acc = _mm256_setzero_ps();
        for (uint32_t i = 0; i < D; i += 8)
            acc = _mm256_fmadd_ps(load_f16(k + i), _mm256_loadu_ps(q + i), acc);
        return hsum_halves(acc);
    }
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const uint32_t np = D & ~31u;
    for (uint32_t i = 0; i < np; i += 32) {
        a0 = _mm256_fmadd_ps(load_f16(k + i), _mm256_loadu_ps(q + i), a0);
        a1 = _mm256_fmadd_ps(load_f16(k + i + 8), _mm256_loadu_ps(q + i + 8), a1);
        a2 = _mm256_fmadd_ps(load_f16(k + i + 16), _mm256_loadu_ps(q + i + 16), a2);
        a3 = _mm256_fmadd_ps(load_f16(k + i + 24), _mm256_loadu_ps(q + i + 24), a3);
    }
    a0 = _mm256_add_ps(a0, a2);
    a1 = _mm256_add_ps(a1, a3);
    a0 = _mm256_add_ps(a0, a1);
    double sum = hsum_hadd(a0);
    for (uint32_t i = np; i < D; ++i)
        sum += static_cast<double>(_cvtsh_ss(k[i]) * q[i]);
    return static_cast<float>(sum);
}

// NR rows' q·k against three keys (a short key list repeats its last key into lanes then ignored):
// each (row, key) is dot_k's batched chain, one 8-lane accumulator over D, then hsum_halves.
template <int NR>
void scores_tile(const AttentionRow* rows, const float* const q[NR], const uint16_t* const k[3], const uint32_t* live,
                 uint32_t n_live, float* const sc[NR], float* max)
{
    const uint32_t D = rows[0].head_dim;
    __m256 acc[NR][3];
    for (auto& a : acc)
        for (auto& x : a)
            x = _mm256_setzero_ps();
    for (uint32_t i = 0; i < D; i += 8) {
        const __m256 k0 = load_f16(k[0] + i), k1 = load_f16(k[1] + i), k2 = load_f16(k[2] + i);
        for (int r = 0; r < NR; ++r) {
            const __m256 qv = _mm256_loadu_ps(q[r] + i);
            acc[r][0] = _mm256_fmadd_ps(k0, qv, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(k1, qv, acc[r][1]);
            acc[r][2] = _mm256_fmadd_ps(k2, qv, acc[r][2]);
        }
    }
    for (int r = 0; r < NR; ++r)
        for (uint32_t kk = 0; kk < n_live; ++kk) {
            const uint32_t j = live[kk];
            if (j < rows[r].first || j >= rows[r].n_slots) { // outside this row's own range
                sc[r][j] = -std::numeric_limits<float>::infinity();
                continue;
            }
            sc[r][j] = attention_score(hsum_halves(acc[r][kk]), rows[r]);
            max[r] = std::max(max[r], sc[r][j]);
        }
}

// Prefill's scores of a group's rows for slots [j0, j1): tiles of up to three rows against three
// keys, so a key's F16 values are converted once for the rows and up to nine independent chains hide
// the multiply-add latency (seven rows go as 3 + 2 + 2). Same operations per (row, key), same bits.
// Raises max[r] to each row's maximum. Rows share the key array (null where masked for all, at and
// past n_slots too); a row also masks what lies outside its own [first, n_slots).
void batched_scores(const AttentionRow* rows, uint32_t n_rows, uint32_t n_slots, const float* q16, float* scores,
                    std::size_t stride, float* max, uint32_t j0, uint32_t j1, std::vector<float>& /*scratch*/)
{
    const AttentionRow& row0 = rows[0];
    const uint32_t D = row0.head_dim;
    live_key_groups<3>(row0, n_rows, n_slots, scores, stride, j0, j1, [&](const uint32_t* live, uint32_t n_live) {
        const uint16_t* k[3] = {row0.keys[live[0]], row0.keys[live[std::min(1u, n_live - 1)]],
                                row0.keys[live[std::min(2u, n_live - 1)]]};
        for (uint32_t r0 = 0; r0 < n_rows;) {
            const uint32_t left = n_rows - r0;
            const uint32_t nr = left == 4 ? 2 : std::min(3u, left); // 4 as 2 + 2, not 3 + 1
            const float* q[3];
            float* sc[3];
            for (uint32_t r = 0; r < nr; ++r) {
                q[r] = q16 + std::size_t(r0 + r) * D;
                sc[r] = scores + std::size_t(r0 + r) * stride;
            }
            if (nr == 3)
                scores_tile<3>(rows + r0, q, k, live, n_live, sc, max + r0);
            else if (nr == 2)
                scores_tile<2>(rows + r0, q, k, live, n_live, sc, max + r0);
            else
                scores_tile<1>(rows + r0, q, k, live, n_live, sc, max + r0);
            r0 += nr;
        }
    });
}

// Slots are visited in blocks of kSlotBlock (attention_simd.h), every row of the group going over a
// block before the next one: the block's keys and values stay in cache (L1/L2) while the group's
// query heads (4 per KV head on the default model, 7 on the chat model) read them, instead of each
// head streaming the whole cache again. A multiple of 8, so each slot keeps its lane. 32, 64, 128 and 256 tried: on
// the default model's 2,048-token prefill 380, 420, 414 and 432 tokens/s (2 threads, one run each).

// Prefill's weighted values of a group's rows over slots [j0, j1) (j0 a multiple of 8): slot j adds
// p_j · v_j[d] into lane j mod 8 of the (row, d) accumulator, slots in increasing order — llama.cpp's
// F16 matrix product over the transposed value cache, whose vectors run along the slots. The block's
// values are converted from F16 and transposed once for all the rows, eight d's at a time, into `vt`
// ([8][block] floats); then tiles of four d's by two rows keep eight accumulators in registers,
// each slot step reading four value vectors and two weight vectors (three rows spilled one of twelve
// accumulators: a store and a reload on every step's chain). Accumulators wait in `lanes`
// ([D][8] floats per row) between blocks (an exact store and load); the caller adds each up at the end.
// A masked slot reads zeros: fma(0, p, lane) is lane itself (a lane is never −0), and so is a finite
// value times a zero weight, so the loop needs no branch.
void batched_values(const AttentionRow* rows, uint32_t n_rows, uint32_t n, const float* p, std::size_t stride,
                    float* lanes, std::vector<float>& vt, uint32_t j0, uint32_t j1)
{
    const AttentionRow& row0 = rows[0];
    const uint32_t D = row0.head_dim;
    const uint32_t n_block = (j1 - j0 + 7) & ~7u;
    vt.resize(std::size_t(n_block) * 8);
    const uint16_t* v[kSlotBlock];
    for (uint32_t i = 0; i < n_block; ++i) {
        const uint32_t j = j0 + i;
        v[i] = j < n ? row0.values[j] : nullptr;
    }
    for (uint32_t d = 0; d < D; d += 8) {
        for (uint32_t i = 0; i < n_block; i += 8) {
            __m256 c[8];
            for (int k = 0; k < 8; ++k)
                c[k] = v[i + k] ? load_f16(v[i + k] + d) : _mm256_setzero_ps();
            transpose8(c); // c[k]: d + k of slots i … i + 7
            for (int k = 0; k < 8; ++k)
                _mm256_storeu_ps(vt.data() + std::size_t(k) * n_block + i, c[k]);
        }
        for (uint32_t dd = 0; dd < 8; dd += 4)
            for (uint32_t r0 = 0; r0 < n_rows; r0 += 2) {
                const uint32_t nr = std::min(2u, n_rows - r0);
                // a short tile repeats its last row (read, not stored back)
                const float* pr[2];
                float* acc_at[2];
                for (uint32_t r = 0; r < 2; ++r) {
                    const uint32_t row = r0 + std::min(r, nr - 1);
                    pr[r] = p + std::size_t(row) * stride + j0; // padded with zeros to whole steps of 8
                    acc_at[r] = lanes + (std::size_t(row) * D + d + dd) * 8;
                }
                __m256 acc[2][4];
                for (int r = 0; r < 2; ++r)
                    for (int k = 0; k < 4; ++k)
                        acc[r][k] = _mm256_loadu_ps(acc_at[r] + 8 * k);
                const float* x = vt.data() + std::size_t(dd) * n_block;
                for (uint32_t i = 0; i < n_block; i += 8) {
                    const __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + n_block + i),
                                 v2 = _mm256_loadu_ps(x + 2 * n_block + i), v3 = _mm256_loadu_ps(x + 3 * n_block + i);
                    for (int r = 0; r < 2; ++r) {
                        const __m256 pv = _mm256_loadu_ps(pr[r] + i);
                        acc[r][0] = _mm256_fmadd_ps(v0, pv, acc[r][0]);
                        acc[r][1] = _mm256_fmadd_ps(v1, pv, acc[r][1]);
                        acc[r][2] = _mm256_fmadd_ps(v2, pv, acc[r][2]);
                        acc[r][3] = _mm256_fmadd_ps(v3, pv, acc[r][3]);
                    }
                }
                for (uint32_t r = 0; r < nr; ++r)
                    for (int k = 0; k < 4; ++k)
                        _mm256_storeu_ps(acc_at[r] + 8 * k, acc[r][k]);
            }
    }
}

// out[d] = ((l4+l0) + (l6+l2)) + ((l5+l1) + (l7+l3)) over the lanes batched_values left.
void batched_values_sum(const float* lanes, uint32_t D, float* out)
{
    for (uint32_t d = 0; d < D; ++d)
        out[d] = hsum_halves(_mm256_loadu_ps(lanes + std::size_t(d) * 8));
}

} // namespace

void attention_rows_avx2(const AttentionRow* rows, uint32_t n_rows, float* const* outs, float* const* weights,
                         AttentionScratch& s, BatchedAttentionKernels batched_kernels)
{
    if (n_rows == 0)
        return;
    const AttentionRow& row0 = rows[0];
    // Rows may see different ranges of the shared arrays (the positions of a prompt's tile): the
    // arrays are walked to the furthest row's end, and each row's masked slots get exact zeros.
    uint32_t n_slots = 0, min_first = std::numeric_limits<uint32_t>::max();
    for (uint32_t r = 0; r < n_rows; ++r) {
        n_slots = std::max(n_slots, rows[r].n_slots);
        min_first = std::min(min_first, rows[r].first);
    }
    const uint32_t D = row0.head_dim;
    const bool batched = row0.batched;
    const uint32_t n_pad = (n_slots + 7) & ~7u;
    const uint32_t step = batched ? 8 : 32;
    const uint32_t n_dot = (n_slots + step - 1) / step * step; // p16 padded to whole accumulator steps
    const uint32_t stride = std::max(n_pad, n_dot);
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    // Slots before the first live one (a sliding window's past, for every row of the group) add
    // exact zeros to the softmax's sum and to every value lane: they are skipped, from a multiple of
    // 8 so that each slot keeps its lane and each chunk of 8 its members. On the default model's
    // windowed layers a 2,048-token prompt's rows see at most 512 of up to 2,048 slots.
    uint32_t first = min_first;
    while (first < n_slots && !row0.keys[first])
        ++first;
    const uint32_t j_lo = first & ~7u;
    s.q16.resize(std::size_t(n_rows) * D);
    s.scores.assign(std::size_t(n_rows) * stride, 0.0f);
    std::vector<float>& max = s.max;
    max.assign(n_rows, kNegInf);
    for (uint32_t r = 0; r < n_rows; ++r)
        for (uint32_t i = 0; i < D; i += 8)
            _mm256_storeu_ps(
                s.q16.data() + std::size_t(r) * D + i,
                _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(rows[r].q + i), _MM_FROUND_TO_NEAREST_INT)));

    // ---- scores, block by block
    for (uint32_t j0 = j_lo; j0 < n_pad; j0 += kSlotBlock) {
        const uint32_t j1 = std::min(n_pad, j0 + kSlotBlock);
        if (batched) {
            batched_kernels.scores(rows, n_rows, n_slots, s.q16.data(), s.scores.data(), stride, max.data(), j0, j1,
                                   s.keys);
            continue;
        }
        for (uint32_t r = 0; r < n_rows; ++r) {
            const AttentionRow& row = rows[r];
            const float* q16 = s.q16.data() + std::size_t(r) * D;
            float* scores = s.scores.data() + std::size_t(r) * stride;
            for (uint32_t j = j0; j < j1; ++j) {
                if (j >= row.n_slots || j < row.first || !row.keys[j]) {
                    scores[j] = kNegInf;
                    continue;
                }
                scores[j] = attention_score(dot_k(row.keys[j], q16, D, false), row);
                max[r] = std::max(max[r], scores[j]);
            }
        }
    }

    // ---- softmax per row: exponentials in chunks of 8, each chunk's sum added in double; then the
    // weights, and p rounded to F16 for the products with the values
    for (uint32_t r = 0; r < n_rows; ++r) {
        float* scores = s.scores.data() + std::size_t(r) * stride;
        double sum = 0.0;
        const __m256 vmax = _mm256_set1_ps(max[r]);
        for (uint32_t c = j_lo; c < n_pad; c += 8) {
            const __m256 x = _mm256_loadu_ps(scores + c);
            __m256 v = expf8(_mm256_sub_ps(x, vmax));
            v = _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(kNegInf), _CMP_EQ_OQ), v); // masked → exactly 0
            _mm256_storeu_ps(scores + c, v);
            sum += static_cast<double>(hsum_halves(v));
        }
        const __m256 inv = _mm256_set1_ps(static_cast<float>(1.0 / sum));
        for (uint32_t c = n_pad; c < n_dot; ++c)
            scores[c] = 0.0f;
        for (uint32_t c = j_lo; c < n_pad; c += 8)
            _mm256_storeu_ps(scores + c, _mm256_mul_ps(_mm256_loadu_ps(scores + c), inv));
        std::copy(scores, scores + rows[r].n_slots, weights[r]);
        for (uint32_t c = j_lo; c < n_dot; c += 8)
            _mm256_storeu_ps(scores + c,
                             _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(scores + c), _MM_FROUND_TO_NEAREST_INT)));
    }

    // ---- weighted values, block by block
    if (batched) {
        s.acc.assign(std::size_t(n_rows) * D * 8, 0.0f);
        for (uint32_t j0 = j_lo; j0 < n_slots; j0 += kSlotBlock)
            batched_kernels.values(rows, n_rows, n_slots, s.scores.data(), stride, s.acc.data(), s.values, j0,
                                   std::min(n_slots, j0 + kSlotBlock));
        for (uint32_t r = 0; r < n_rows; ++r)
            batched_values_sum(s.acc.data() + std::size_t(r) * D * 8, D, outs[r]);
        return;
    }
    // Decode: per (accumulator, lane) partial sums vectorised across d; four accumulators of eight
    // lanes follow the slot index (slot j: accumulator (j mod 32) / 8, lane j mod 8).
    const std::size_t acc_floats = std::size_t(4) * 8 * D;
    s.acc.assign(std::size_t(n_rows) * acc_floats, 0.0f);
    for (uint32_t j0 = j_lo; j0 < n_slots; j0 += kSlotBlock) {
        const uint32_t j1 = std::min(n_slots, j0 + kSlotBlock);
        for (uint32_t r = 0; r < n_rows; ++r) {
            const float* p = s.scores.data() + std::size_t(r) * stride;
            float* acc_row = s.acc.data() + std::size_t(r) * acc_floats;
            for (uint32_t j = j0; j < j1; ++j) {
                if (!rows[r].values[j] || p[j] == 0.0f)
                    continue; // adds an exact zero
                float* acc = acc_row + (std::size_t((j % 32) / 8) * 8 + j % 8) * D;
                const __m256 pj = _mm256_set1_ps(p[j]);
                const uint16_t* v = rows[r].values[j];
                for (uint32_t d = 0; d < D; d += 8)
                    _mm256_storeu_ps(acc + d, _mm256_fmadd_ps(load_f16(v + d), pj, _mm256_loadu_ps(acc + d)));
            }
        }
    }
    for (uint32_t r = 0; r < n_rows; ++r) {
        const float* acc = s.acc.data() + std::size_t(r) * acc_floats;
        auto lane = [&](uint32_t a, uint32_t l, uint32_t d) { return acc[(std::size_t(a) * 8 + l) * D + d]; };
        for (uint32_t d = 0; d < D; ++d) {
            float x[8];
            for (uint32_t l = 0; l < 8; ++l)
                x[l] = (lane(0, l, d) + lane(2, l, d)) + (lane(1, l, d) + lane(3, l, d));
            const float t0 = x[0] + x[4], t1 = x[1] + x[5], t2 = x[2] + x[6], t3 = x[3] + x[7];
            outs[r][d] = static_cast<float>(static_cast<double>((t0 + t1) + (t2 + t3)));
        }
    }
}

BatchedAttentionKernels batched_attention_avx2()
{
    return {batched_scores, batched_values};
}

void attention_row_avx2(const AttentionRow& row, float* out, float* weights, AttentionScratch& s)
{
    attention_rows_avx2(&row, 1, &out, &weights, s);
}

} // namespace engine::cpu::simd
