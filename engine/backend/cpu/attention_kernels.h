// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace engine::cpu {

// One query row of attention: scores = (q·k) · scale over the unmasked keys, a softmax, and the
// weighted sum of the values. The summation orders mirror ggml's x86 AVX2 CPU code so that logits
// follow llama.cpp closely (the model amplifies last-bit differences): q·k and p·v are F16 dot
// products in 8 lanes — one accumulator per lane when several queries are evaluated together
// (llama.cpp's tiled matmul), four per lane for a single query (its vec_dot) — the exponentials use
// the same polynomial, and the softmax sum adds 8-lane chunks in double.
struct AttentionRow {
    const float* q = nullptr;                // [D] query, already scaled where the model pre-scales
    const uint16_t* const* keys = nullptr;   // [n_slots] F16 key rows, nullptr where masked
    const uint16_t* const* values = nullptr; // [n_slots] F16 value rows, nullptr where masked
    uint32_t n_slots = 0;                    // key positions 0 … n_slots − 1
    uint32_t head_dim = 0;
    float scale = 1.0f;   // applied to q·k before the softmax
    bool batched = false; // evaluated together with other queries (prefill)
    uint32_t first = 0;   // slots before this one are masked too (the row's own window start)
    float softcap = 0.0f; // gemma2: q·k ← c·tanh(q·k · 1/c) before the scale (0: none)
};

// Per-thread scratch, reused between rows.
struct AttentionScratch {
    std::vector<float> q16, scores, acc, max;
    std::vector<float> values; // a block of value rows converted to f32, eight d's at a time
    std::vector<float> keys;   // a few keys converted to f32 (the AVX-512 scores)
    std::vector<double> sums;
};

// Writes out[D] and weights[n_slots] (softmax output, 0 where masked).
void attention_row(const AttentionRow& row, float* out, float* weights, AttentionScratch& scratch);
// Several rows that share the key and value arrays and the batching (the query heads of one KV head,
// at one position or at a few consecutive ones, each row with its own n_slots and first): each gets
// attention_row's bits; the SIMD version reads each block of the cache once for all of them.
void attention_rows(const AttentionRow* rows, uint32_t n_rows, float* const* outs, float* const* weights,
                    AttentionScratch& scratch);
// The portable implementation (the SIMD one must give identical bits; tests check).
void attention_row_scalar(const AttentionRow& row, float* out, float* weights, AttentionScratch& scratch);

// A score from q·k: soft-capped when the row asks (ggml's scale, tanh, scale), then × scale as
// ggml's soft_max_ext.
inline float attention_score(float qk, const AttentionRow& row)
{
    if (row.softcap != 0.0f)
        qk = std::tanh(qk * (1.0f / row.softcap)) * row.softcap;
    return qk * row.scale;
}

// expf as ggml's vectorised softmax computes it (exact to its last bit).
float softmax_expf(float x);

} // namespace engine::cpu
