// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// Attention over a quantized KV cache, as llama.cpp's CPU flash-attention kernel computes it (it
// reads a quantized cache only with flash attention on): for each query row on its own, the query
// converted to the keys' dot-product format (Q8_0 for Q8_0 and Q4_0 keys, F16 for F16 keys), then
// one pass over the keys in position order with an online softmax — a new maximum rescales the
// running sum and the accumulated values — the values accumulated in f32 after dequantizing them
// (in F16 when the values are stored as F16), and one division by the sum at the end. A row's result
// depends on nothing else in the pass, so this path is batch-invariant as it stands.
//
// llama.cpp also rotates what it quantizes (its "attention rotation"): with quantized keys, queries
// and keys are multiplied by an orthonormal Walsh–Hadamard matrix before the keys are stored (q·k is
// unchanged in exact arithmetic, the outliers are spread over the block); with quantized values, the
// values before they are stored and the attention output after, by the 64-wide one (its own inverse).
// Both only where a head's width is a multiple of 64.

#include "kv/kv_cache_types.h"

#include <cstdint>
#include <vector>

namespace engine::cpu {

struct FlashRow {
    const float* q = nullptr;               // [head_dim] query, already scaled where the model pre-scales
    const uint8_t* const* keys = nullptr;   // [n_slots] stored key rows, nullptr where masked
    const uint8_t* const* values = nullptr; // [n_slots] stored value rows
    uint32_t n_slots = 0;                   // key positions 0 … n_slots − 1
    uint32_t first = 0;                     // slots before this one are masked (a sliding window)
    uint32_t head_dim = 0;                  // a multiple of 32
    float scale = 1.0f;                     // applied to q·k
    float softcap = 0.0f;                   // c·tanh(q·k · scale/c), llama.cpp's order (0: none)
    KvCacheTypes types;
};

struct FlashScratch {
    std::vector<uint8_t> q;      // the query in the keys' dot-product format
    std::vector<float> acc, v;   // f32 accumulator, a dequantized value row
    std::vector<uint16_t> acc16; // F16 accumulator (F16 values)
    std::vector<float> scores;
};

// The width of the rotation applied to keys (key = true: the largest power of two from 64 up that
// divides head_dim) or values (64), or 0 when that type is not rotated (F16, or head_dim not a
// multiple of 64).
uint32_t kv_rotation_width(GgmlType type, uint32_t head_dim, bool key);
// x ← H·x for each run of `width` values of x[0 … n): scaled by 1/√width first, then the butterflies
// (u + v, u − v) from stride 1 up, as llama.cpp's CPU computes its Hadamard product.
void hadamard_rotate(float* x, uint32_t n, uint32_t width);

// Writes out[head_dim]; with `weights`, the softmax weights too (weights[n_slots], 0 where masked:
// for display, computed from the final maximum and sum — the output does not use them).
void flash_attention_row(const FlashRow& row, float* out, float* weights, FlashScratch& scratch);
// The portable build of the same (tests check that the SIMD one gives identical bits).
void flash_attention_row_scalar(const FlashRow& row, float* out, float* weights, FlashScratch& scratch);

} // namespace engine::cpu
