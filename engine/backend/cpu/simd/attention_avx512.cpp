// SPDX-License-Identifier: GPL-3.0-or-later
// Prefill's two batched attention loops on AVX-512: the same 8-lane chains as attention_avx2.cpp's
// (each (row, key) score one accumulator over D; each (row, d) value one accumulator over the slots,
// slot j in lane j mod 8), two chains per 512-bit register, one in each 256-bit half. A half does
// exactly what the AVX2 register did, so the bits are the same.
#include "backend/cpu/simd/attention_simd.h"
#include "backend/cpu/simd/attention_x86_helpers.h"

#include <algorithm>
#include <immintrin.h>
#include <limits>

// GCC 12's own AVX-512 intrinsics (the broadcast, the shuffles) start from an undefined register, which it reports as
// maybe uninitialized once the kernels are unrolled; a false alarm.
#if defined(__GNUC__) && !defined(__clang__) // clang has no such warning (and refuses to hear of it)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace engine::cpu::simd {

namespace { // NOLINT(cert-dcl59-cpp,google-build-namespaces): one translation unit's kernels

// attention_avx2.cpp's hsum_halves, ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)), of each 256-bit half, in
// element 0 of the half (a0 + a4 as a4 + a0: the same sum).
inline __m512 hsum_halves_x2(__m512 x)
{
    const __m512 b = _mm512_add_ps(x, _mm512_shuffle_f32x4(x, x, _MM_SHUFFLE(2, 3, 0, 1))); // a_i + a_(i+4)
    const __m512 c = _mm512_add_ps(b, _mm512_permute_ps(b, _MM_SHUFFLE(1, 0, 3, 2)));       // b0 + b2, b1 + b3
    return _mm512_add_ps(c, _mm512_permute_ps(c, _MM_SHUFFLE(2, 3, 0, 1)));                 // (b0+b2) + (b1+b3)
}

// Keys per group: four pairs, a pair's two keys side by side in each register.
constexpr uint32_t kKeys = 8;

// NR rows against a group's eight keys, converted to f32 in `kp` ([D / 8][pair][16]: for each 8 d's,
// the pairs' registers). A short group repeats its last key (lanes then ignored).
template <int NR>
void scores_tile(const AttentionRow* rows, const float* const q[NR], const float* kp, const uint32_t* live,
                 uint32_t n_live, float* const sc[NR], float* max)
{
    const uint32_t D = rows[0].head_dim;
    __m512 acc[NR][4];
    for (auto& a : acc)
        for (auto& x : a)
            x = _mm512_setzero_ps();
    for (uint32_t i = 0; i < D; i += 8, kp += 64) {
        const __m512 k0 = _mm512_load_ps(kp), k1 = _mm512_load_ps(kp + 16), k2 = _mm512_load_ps(kp + 32),
                     k3 = _mm512_load_ps(kp + 48);
#pragma GCC unroll 6
        for (int r = 0; r < NR; ++r) {
            const __m512 qv = _mm512_broadcast_f32x8(_mm256_loadu_ps(q[r] + i));
            acc[r][0] = _mm512_fmadd_ps(k0, qv, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(k1, qv, acc[r][1]);
            acc[r][2] = _mm512_fmadd_ps(k2, qv, acc[r][2]);
            acc[r][3] = _mm512_fmadd_ps(k3, qv, acc[r][3]);
        }
    }
    for (int r = 0; r < NR; ++r) {
        alignas(64) float sums[4][16];
        for (int p = 0; p < 4; ++p)
            _mm512_store_ps(sums[p], hsum_halves_x2(acc[r][p]));
        for (uint32_t kk = 0; kk < n_live; ++kk) {
            const uint32_t j = live[kk];
            if (j < rows[r].first || j >= rows[r].n_slots) { // outside this row's own range
                sc[r][j] = -std::numeric_limits<float>::infinity();
                continue;
            }
            sc[r][j] = attention_score(sums[kk / 2][8 * (kk % 2)], rows[r]);
            max[r] = std::max(max[r], sc[r][j]);
        }
    }
}

void batched_scores_avx512(const AttentionRow* rows, uint32_t n_rows, uint32_t n_slots, const float* q16, float* scores,
                           std::size_t stride, float* max, uint32_t j0, uint32_t j1, std::vector<float>& kp)
{
    const AttentionRow& row0 = rows[0];
    const uint32_t D = row0.head_dim;
    kp.resize(std::size_t(D) * kKeys + 16);
    // 64-byte aligned for the loads
    float* packed = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(kp.data()) + 63) & ~uintptr_t(63));
    live_key_groups<kKeys>(row0, n_rows, n_slots, scores, stride, j0, j1, [&](const uint32_t* live, uint32_t n_live) {
        const uint16_t* k[kKeys];
        for (uint32_t kk = 0; kk < kKeys; ++kk)
            k[kk] = row0.keys[live[std::min(kk, n_live - 1)]];
        for (uint32_t kk = 0; kk < kKeys; ++kk) {
            float* dst = packed + 8 * kk;
            for (uint32_t i = 0; i < D; i += 8, dst += 8 * kKeys)
                _mm256_store_ps(dst, load_f16(k[kk] + i));
        }
        for (uint32_t r0 = 0; r0 < n_rows;) {
            const uint32_t nr = std::min(6u, n_rows - r0);
            const float* q[6];
            float* sc[6];
            for (uint32_t r = 0; r < nr; ++r) {
                q[r] = q16 + std::size_t(r0 + r) * D;
                sc[r] = scores + std::size_t(r0 + r) * stride;
            }
            switch (nr) {
            case 6:
                scores_tile<6>(rows + r0, q, packed, live, n_live, sc, max + r0);
                break;
            case 5:
                scores_tile<5>(rows + r0, q, packed, live, n_live, sc, max + r0);
                break;
            case 4:
                scores_tile<4>(rows + r0, q, packed, live, n_live, sc, max + r0);
                break;
            case 3:
                scores_tile<3>(rows + r0, q, packed, live, n_live, sc, max + r0);
                break;
            case 2:
                scores_tile<2>(rows + r0, q, packed, live, n_live, sc, max + r0);
                break;
            default:
                scores_tile<1>(rows + r0, q, packed, live, n_live, sc, max + r0);
                break;
            }
            r0 += nr;
        }
    });
}

// The block's values converted and transposed eight d's at a time, as the AVX2 loop does, but laid
// out for pairs of d's: vt[pair][chunk of 8 slots][d of the pair][8 slots], so that one register
// holds d and d + 1 for eight slots — the two (row, d) chains whose lanes sit side by side in `lanes`
// ([D][8] floats per row). Tiles of four rows by four pairs (sixteen accumulators).
void batched_values_avx512(const AttentionRow* rows, uint32_t n_rows, uint32_t n, const float* p, std::size_t stride,
                           float* lanes, std::vector<float>& vt, uint32_t j0, uint32_t j1)
{
    const AttentionRow& row0 = rows[0];
    const uint32_t D = row0.head_dim;
    const uint32_t n_block = (j1 - j0 + 7) & ~7u;
    const uint32_t chunks = n_block / 8;
    vt.resize(std::size_t(n_block) * 8);
    const uint16_t* v[kSlotBlock];
    for (uint32_t i = 0; i < n_block; ++i) {
        const uint32_t j = j0 + i;
        v[i] = j < n ? row0.values[j] : nullptr;
    }
    for (uint32_t d = 0; d < D; d += 8) {
        for (uint32_t c = 0; c < chunks; ++c) {
            __m256 x[8];
            for (int k = 0; k < 8; ++k)
                x[k] = v[8 * c + k] ? load_f16(v[8 * c + k] + d) : _mm256_setzero_ps();
            transpose8(x); // x[k]: d + k of the chunk's slots
            for (int k = 0; k < 8; ++k)
                _mm256_storeu_ps(vt.data() + (std::size_t(k / 2) * chunks + c) * 16 + (k % 2) * 8, x[k]);
        }
        for (uint32_t r0 = 0; r0 < n_rows; r0 += 4) {
            const uint32_t nr = std::min(4u, n_rows - r0);
            // a short tile repeats its last row (read, not stored back)
            const float* pr[4];
            float* acc_at[4];
            for (uint32_t r = 0; r < 4; ++r) {
                const uint32_t row = r0 + std::min(r, nr - 1);
                pr[r] = p + std::size_t(row) * stride + j0; // padded with zeros to whole steps of 8
                acc_at[r] = lanes + (std::size_t(row) * D + d) * 8;
            }
            __m512 acc[4][4];
#pragma GCC unroll 4
            for (int r = 0; r < 4; ++r)
#pragma GCC unroll 4
                for (int k = 0; k < 4; ++k)
                    acc[r][k] = _mm512_loadu_ps(acc_at[r] + 16 * k);
            const float* x = vt.data();
            const std::size_t pair = std::size_t(chunks) * 16;
            for (uint32_t c = 0; c < chunks; ++c) {
                const __m512 v0 = _mm512_loadu_ps(x + 16 * c), v1 = _mm512_loadu_ps(x + pair + 16 * c),
                             v2 = _mm512_loadu_ps(x + 2 * pair + 16 * c), v3 = _mm512_loadu_ps(x + 3 * pair + 16 * c);
#pragma GCC unroll 4
                for (int r = 0; r < 4; ++r) {
                    const __m512 pv = _mm512_broadcast_f32x8(_mm256_loadu_ps(pr[r] + 8 * c));
                    acc[r][0] = _mm512_fmadd_ps(v0, pv, acc[r][0]);
                    acc[r][1] = _mm512_fmadd_ps(v1, pv, acc[r][1]);
                    acc[r][2] = _mm512_fmadd_ps(v2, pv, acc[r][2]);
                    acc[r][3] = _mm512_fmadd_ps(v3, pv, acc[r][3]);
                }
            }
            for (uint32_t r = 0; r < nr; ++r)
                for (int k = 0; k < 4; ++k)
                    _mm512_storeu_ps(acc_at[r] + 16 * k, acc[r][k]);
        }
    }
}

} // namespace

BatchedAttentionKernels batched_attention_avx512()
{
    return {batched_scores_avx512, batched_values_avx512};
}

} // namespace engine::cpu::simd
