// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The KV-cache calculator: the size of a key/value cache for any model "on paper", from its shape
// alone (shared/reference/kv-cache.md §1–3). Presets are read from the models' published
// configuration files; the loaded model's shape comes from its GGUF metadata.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace engine {

struct ModelConfig; // from model/model_config.h

struct KvModelShape {
    std::string name;
    uint32_t n_layer = 0;
    uint32_t n_head = 0;    // query heads
    uint32_t n_head_kv = 0; // KV heads (GQA); == n_head for multi-head attention
    uint32_t head_dim = 0;
    uint32_t sliding_window = 0;   // tokens; 0: no sliding-window layers
    uint32_t n_sliding_layers = 0; // how many layers use the window
    uint32_t context_length = 0;   // the model's maximum context
    uint64_t parameters = 0;       // for weight-size defaults
    std::string source;            // the configuration it comes from
};

// Llama 3.1 8B/70B/405B, Llama 3 8B, Mistral 7B v0.3, Qwen 2.5 7B/72B, Gemma 3 270M/1B/4B/27B,
// GPT-2, in that order.
const std::vector<KvModelShape>& kv_presets();

// The loaded model's shape: the largest per-layer query and KV head counts, head_dim = key_length,
// sliding layers counted from the config's per-layer pattern (0 when it has no window).
KvModelShape kv_shape_of(const ModelConfig& config, std::string name, uint64_t parameters);

enum class KvDtype { F32, F16, BF16, FP8, INT8, INT4 };
// Bytes per cached element: 4, 2, 2, 1, 1, 0.5. The per-block scales of quantized caches (INT8,
// INT4, and FP8 with per-tensor scales) are not counted: llama.cpp's q8_0 costs 34/32 B and q4_0
// 18/32 B per element, this calculator 1 and 0.5 (see shared/reference/kv-cache.md §1).
double kv_dtype_bytes(KvDtype dtype);
std::string_view kv_dtype_name(KvDtype dtype); // "FP32", "FP16", "BF16", "FP8", "INT8", "INT4"

struct KvCalcInput {
    KvModelShape shape;
    uint64_t context = 0; // tokens per sequence
    uint32_t sequences = 1;
    KvDtype dtype = KvDtype::F16;
    bool full_mha = false;         // the same model with n_head KV heads (no GQA)
    bool sliding_window = true;    // cap the sliding layers at their window (false: all layers hold the full context)
    double offload_fraction = 0.0; // share of the cache held in CPU memory (clamped to [0, 1])
    uint64_t gpu_bytes = 0;        // GPU memory; 0: no GPU figures
    uint64_t weight_bytes = 0;     // weights on the GPU
};

struct KvCalcResult {
    // 2 (K and V) × layers × KV heads × head_dim × bytes per element, every layer counted (the
    // classic figure, sliding windows ignored). Always a whole number of bytes, INT4 included
    // (its 0.5 B cancels the factor 2), so the integer is exact; bytes_per_token_exact is the same
    // value as a double for convenience.
    uint64_t bytes_per_token = 0;
    double bytes_per_token_exact = 0.0;
    uint64_t bytes_per_sequence = 0; // at `context`, sliding layers capped at their window when enabled
    uint64_t total_bytes = 0;        // × sequences
    uint64_t gpu_cache_bytes = 0;    // (1 − offload) of total, rounded to the nearest byte
    uint64_t cpu_cache_bytes = 0;    // total − gpu_cache_bytes
    // floor((gpu_bytes − weight_bytes) / GPU share of one sequence); 0 when there is no GPU
    // figure, the weights leave no room or one sequence does not fit. When the whole cache is
    // offloaded (the GPU holds none of it) the GPU sets no limit: UINT64_MAX.
    uint64_t sequences_fit = 0;
    // "2 × 80 layers × 8 KV heads × 128 dims × 131,072 tokens × 2 B = 42,949,672,960 B" (per
    // sequence; sliding layers listed separately when they apply, sequences multiplied after).
    std::string formula;
};

// Sums saturate at UINT64_MAX instead of wrapping for absurd inputs.
KvCalcResult calculate_kv(const KvCalcInput& input);

// Memory against context for a chart: `points` (context, total bytes) pairs, contexts evenly
// spaced from 0 to max_context inclusive (one point: max_context only; none when points ≤ 0).
std::vector<std::pair<uint64_t, uint64_t>> kv_curve(const KvCalcInput& input, uint64_t max_context, int points);

// "40.00 GiB" style binary formatting (B, KiB, MiB, GiB, TiB, PiB; two decimals, whole bytes
// below 1 KiB) and "42.95 GB" decimal formatting (B, kB, MB, GB, TB, PB), for UI and CLI.
std::string format_binary_bytes(double bytes);
std::string format_decimal_bytes(double bytes);

// 42949672960 → "42,949,672,960" (used by the formula; handy for tooltips).
std::string format_grouped(uint64_t value);

} // namespace engine
