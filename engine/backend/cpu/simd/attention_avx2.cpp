// SPDX-License-Identifier: GPL-3.0-or-later
#include "backend/cpu/simd/attention_simd.h"
#include "backend/cpu/simd/expf8_avx2.h"

#include <immintrin.h>
#include <limits>

namespace engine::cpu::simd {

namespace {

inline __m256 load_f16(const uint16_t* p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

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

// Prefill's scores: each key's q·k is dot_k's batched chain (one 8-lane accumulator over D, then
// hsum_halves), four keys at a time so that four independent chains hide the multiply-add latency
// (one chain alone waits on each FMA). Same operations per key, same bits. Returns the maximum.
float batched_scores(const AttentionRow& row, const float* q, float* scores, uint32_t n_pad)
{
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    const uint32_t D = row.head_dim;
    float max = kNegInf;
    uint32_t live[4];
    int n_live = 0;
    const auto flush = [&] {
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        if (n_live == 4) {
            const uint16_t *k0 = row.keys[live[0]], *k1 = row.keys[live[1]], *k2 = row.keys[live[2]],
                           *k3 = row.keys[live[3]];
            for (uint32_t i = 0; i < D; i += 8) {
                const __m256 qv = _mm256_loadu_ps(q + i);
                acc[0] = _mm256_fmadd_ps(load_f16(k0 + i), qv, acc[0]);
                acc[1] = _mm256_fmadd_ps(load_f16(k1 + i), qv, acc[1]);
                acc[2] = _mm256_fmadd_ps(load_f16(k2 + i), qv, acc[2]);
                acc[3] = _mm256_fmadd_ps(load_f16(k3 + i), qv, acc[3]);
            }
        } else {
            for (int k = 0; k < n_live; ++k)
                for (uint32_t i = 0; i < D; i += 8)
                    acc[k] = _mm256_fmadd_ps(load_f16(row.keys[live[k]] + i), _mm256_loadu_ps(q + i), acc[k]);
        }
        for (int k = 0; k < n_live; ++k) {
            scores[live[k]] = hsum_halves(acc[k]) * row.scale;
            max = std::max(max, scores[live[k]]);
        }
        n_live = 0;
    };
    for (uint32_t j = 0; j < n_pad; ++j) {
        if (j >= row.n_slots || !row.keys[j]) {
            scores[j] = kNegInf;
            continue;
        }
        live[n_live++] = j;
        if (n_live == 4)
            flush();
    }
    flush();
    return max;
}

// Prefill's weighted values: slot j adds p_j · v_j into lane j mod 8 of one accumulator per d,
// slots in increasing order, then out[d] = ((l4+l0) + (l6+l2)) + ((l5+l1) + (l7+l3)) — the order
// of the whole-row version, with the eight lanes of eight d's kept in registers while every slot
// passes (instead of a load and a store of the accumulator row per slot). p is F16-rounded.
void batched_values(const AttentionRow& row, const float* p, float* out)
{
    const uint32_t D = row.head_dim, n = row.n_slots;
    for (uint32_t d = 0; d < D; d += 8) {
        // eight named accumulators (an indexed array would live in memory)
        __m256 l0 = _mm256_setzero_ps(), l1 = l0, l2 = l0, l3 = l0, l4 = l0, l5 = l0, l6 = l0, l7 = l0;
        const auto add = [&](__m256& lane, uint32_t j) {
            if (j < n && row.values[j] && p[j] != 0.0f) // a masked or zero weight adds an exact zero
                lane = _mm256_fmadd_ps(load_f16(row.values[j] + d), _mm256_broadcast_ss(p + j), lane);
        };
        for (uint32_t j0 = 0; j0 < n; j0 += 8) {
            add(l0, j0);
            add(l1, j0 + 1);
            add(l2, j0 + 2);
            add(l3, j0 + 3);
            add(l4, j0 + 4);
            add(l5, j0 + 5);
            add(l6, j0 + 6);
            add(l7, j0 + 7);
        }
        const __m256 r0 = _mm256_add_ps(l4, l0), r1 = _mm256_add_ps(l5, l1);
        const __m256 r2 = _mm256_add_ps(l6, l2), r3 = _mm256_add_ps(l7, l3);
        _mm256_storeu_ps(out + d, _mm256_add_ps(_mm256_add_ps(r0, r2), _mm256_add_ps(r1, r3)));
    }
}

} // namespace

void attention_row_avx2(const AttentionRow& row, float* out, float* weights, AttentionScratch& s)
{
    const uint32_t D = row.head_dim;
    const uint32_t n_pad = (row.n_slots + 7) & ~7u;
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    s.q16.resize(D);
    s.scores.resize(n_pad);
    for (uint32_t i = 0; i < D; i += 8)
        _mm256_storeu_ps(s.q16.data() + i,
                         _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(row.q + i), _MM_FROUND_TO_NEAREST_INT)));

    float max = kNegInf;
    if (row.batched)
        max = batched_scores(row, s.q16.data(), s.scores.data(), n_pad);
    else
        for (uint32_t j = 0; j < n_pad; ++j) {
            if (j >= row.n_slots || !row.keys[j]) {
                s.scores[j] = kNegInf;
                continue;
            }
            s.scores[j] = dot_k(row.keys[j], s.q16.data(), D, row.batched) * row.scale;
            max = std::max(max, s.scores[j]);
        }
    double sum = 0.0;
    const __m256 vmax = _mm256_set1_ps(max);
    for (uint32_t c = 0; c < n_pad; c += 8) {
        const __m256 x = _mm256_loadu_ps(s.scores.data() + c);
        __m256 v = expf8(_mm256_sub_ps(x, vmax));
        v = _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(kNegInf), _CMP_EQ_OQ), v); // masked → exactly 0
        _mm256_storeu_ps(s.scores.data() + c, v);
        sum += static_cast<double>(hsum_halves(v));
    }
    const __m256 inv = _mm256_set1_ps(static_cast<float>(1.0 / sum));
    // p16 over the slots, padded with zeros to whole accumulator steps
    const uint32_t step = row.batched ? 8 : 32;
    const uint32_t n_dot = (row.n_slots + step - 1) / step * step;
    s.scores.resize(std::max(n_pad, n_dot), 0.0f);
    for (uint32_t c = n_pad; c < n_dot; ++c)
        s.scores[c] = 0.0f;
    for (uint32_t c = 0; c < n_pad; c += 8) {
        const __m256 p = _mm256_mul_ps(_mm256_loadu_ps(s.scores.data() + c), inv);
        _mm256_storeu_ps(s.scores.data() + c, p);
    }
    for (uint32_t j = 0; j < row.n_slots; ++j)
        weights[j] = s.scores[j];
    for (uint32_t c = 0; c < n_dot; c += 8) {
        const __m256 p = _mm256_loadu_ps(s.scores.data() + c);
        _mm256_storeu_ps(s.scores.data() + c, _mm256_cvtph_ps(_mm256_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT)));
    }

    if (row.batched) {
        batched_values(row, s.scores.data(), out);
        return;
    }
    // out[d]: per (accumulator, lane) partial sums vectorised across d; lanes follow the slot index.
    const uint32_t n_acc = row.batched ? 1 : 4;
    s.acc.assign(std::size_t(n_acc) * 8 * D, 0.0f);
    for (uint32_t j = 0; j < row.n_slots; ++j) {
        if (!row.values[j] || s.scores[j] == 0.0f)
            continue; // adds an exact zero
        const uint32_t a = row.batched ? 0 : (j % 32) / 8;
        float* acc = s.acc.data() + (std::size_t(a) * 8 + j % 8) * D;
        const __m256 p = _mm256_set1_ps(s.scores[j]);
        const uint16_t* v = row.values[j];
        for (uint32_t d = 0; d < D; d += 8)
            _mm256_storeu_ps(acc + d, _mm256_fmadd_ps(load_f16(v + d), p, _mm256_loadu_ps(acc + d)));
    }
    auto lane = [&](uint32_t a, uint32_t l, uint32_t d) { return s.acc[(std::size_t(a) * 8 + l) * D + d]; };
    for (uint32_t d = 0; d < D; ++d) {
        float x[8];
        if (row.batched) {
            for (uint32_t l = 0; l < 8; ++l)
                x[l] = lane(0, l, d);
            const float r0 = x[4] + x[0], r1 = x[5] + x[1], r2 = x[6] + x[2], r3 = x[7] + x[3];
            out[d] = (r0 + r2) + (r1 + r3);
        } else {
            for (uint32_t l = 0; l < 8; ++l)
                x[l] = (lane(0, l, d) + lane(2, l, d)) + (lane(1, l, d) + lane(3, l, d));
            const float t0 = x[0] + x[4], t1 = x[1] + x[5], t2 = x[2] + x[6], t3 = x[3] + x[7];
            out[d] = static_cast<float>(static_cast<double>((t0 + t1) + (t2 + t3)));
        }
    }
}

} // namespace engine::cpu::simd
