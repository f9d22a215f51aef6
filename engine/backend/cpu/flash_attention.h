// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// Attention as llama.cpp's CPU flash-attention kernels compute it: with flash attention on (`-fa on`,
// and `-fa auto`, its default, which a CPU resolves to on), and always over a quantized KV cache (it
// reads one only with flash attention). Three kernels, chosen by llama.cpp by the batch
// (ggml_compute_forward_flash_attn_ext_f16):
// - one query row at a time (flash_attention_row): batches under 64 tokens, and any cache with a
//   quantized side, below;
// - tiles of queries against tiles of 64 cells (flash_attention_tile): batches of 64 tokens or more
//   over an F16 cache;
// - a decode step (one token) over 512 cells or more of an F16 cache (flash_attention_split): the
//   cells cut into as many chunks as llama.cpp has threads, each chunk run by the one-row kernel and
//   the chunks' results merged in order — so that step's bits depend on that thread count.
//
// The one-row kernel: for each query row on its own, the query
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
#include <limits>
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

// The running state of one query row: the largest score so far and the sum of the exponentials
// (the accumulated values, not yet divided by the sum, are kept beside it).
struct FlashState {
    float max = -std::numeric_limits<float>::infinity();
    float sum = 0.0f;
};

// llama.cpp's tile of cells (GGML_FA_TILE_KV) and the batch from which it tiles (GGML_FA_TILE_Q).
inline constexpr uint32_t kFlashTile = 64;
// A decode step splits its cells among the threads from this many cells on (llama.cpp's split-KV path).
inline constexpr uint32_t kFlashSplitMinCells = 512;

struct FlashScratch {
    std::vector<uint8_t> q;      // the query in the keys' dot-product format
    std::vector<float> q_f32;    // … widened back to f32 (F16 keys)
    std::vector<float> acc, v;   // f32 accumulator(s), a dequantized value row
    std::vector<uint16_t> acc16; // F16 accumulator (F16 values)
    std::vector<float> scores;
    std::vector<float> merged;               // the split kernel's merged accumulator
    std::vector<float> keys_t, values_f;     // the tile kernel's keys (transposed) and values in f32
    std::vector<FlashState> states;          // each row's state (the one-row and tile kernels)
    std::vector<const float*> row_q;         // … their queries
    std::vector<float*> row_scores, row_acc; // … and their scores and accumulators in the scratch
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

// A decode step over llama.cpp's n_cells cells (its padded KV length: at least 256, a multiple of 256,
// kFlashSplitMinCells or more here) split into n_chunks chunks (its thread count). F16 keys and values.
void flash_attention_split(const FlashRow& row, uint32_t n_cells, uint32_t n_chunks, float* out, float* weights,
                           FlashScratch& scratch);
void flash_attention_split_scalar(const FlashRow& row, uint32_t n_cells, uint32_t n_chunks, float* out, float* weights,
                                  FlashScratch& scratch);

// Rows that share keys, values, slot range and scale (the query heads of one KV head at one
// position): each row's out exactly as flash_attention_row (n_chunks 0) or flash_attention_split
// (n_cells, n_chunks) gives it, the rows' chains interleaved key by key.
// No weights (use the one-row kernels for those).
void flash_attention_group(const FlashRow* rows, uint32_t n_rows, uint32_t n_cells, uint32_t n_chunks,
                           float* const* outs, FlashScratch& scratch);

// Rows of a batch of kFlashTile tokens or more that share keys and values (rows[0]'s arrays, F16 keys
// and values; scale and soft cap also rows[0]'s): each row's out (and weights, where not null), each
// row's bits its own, however the rows are grouped.
void flash_attention_tile(const FlashRow* rows, uint32_t n_rows, float* const* outs, float* const* weights,
                          FlashScratch& scratch);
void flash_attention_tile_scalar(const FlashRow* rows, uint32_t n_rows, float* const* outs, float* const* weights,
                                 FlashScratch& scratch);

} // namespace engine::cpu
