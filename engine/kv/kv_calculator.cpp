// SPDX-License-Identifier: GPL-3.0-or-later
#include "kv/kv_calculator.h"

#include "model/model_config.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <spdlog/fmt/fmt.h>

namespace engine {

// ---- presets ------------------------------------------------------------------------------------

namespace {

// The KV-relevant fields of each preset, as published in the model's config.json on Hugging Face
// (the file named in `source`): num_hidden_layers, num_attention_heads, num_key_value_heads,
// head_dim (or hidden_size / num_attention_heads where the file has no head_dim),
// max_position_embeddings, sliding_window and, for Gemma 3, the layer pattern (sliding_window_pattern
// 6: layer il is local iff il % 6 < 5). Parameter counts are the model cards' rounded figures; they
// only seed the weight-size default.
std::vector<KvModelShape> make_presets()
{
    // name, layers, heads, kv heads, head_dim, window, sliding layers, context, parameters, source
    return {
        // hidden_size 4096 / 32 heads = 128; rope_scaling llama3, max_position_embeddings 131072.
        {"Llama 3.1 8B", 32, 32, 8, 128, 0, 0, 131072, 8'030'000'000, "meta-llama/Llama-3.1-8B config.json"},
        // hidden_size 8192 / 64 heads = 128.
        {"Llama 3.1 70B", 80, 64, 8, 128, 0, 0, 131072, 70'600'000'000, "meta-llama/Llama-3.1-70B config.json"},
        // hidden_size 16384 / 128 heads = 128.
        {"Llama 3.1 405B", 126, 128, 8, 128, 0, 0, 131072, 405'900'000'000, "meta-llama/Llama-3.1-405B config.json"},
        // max_position_embeddings 8192 (trained on 8,192-token sequences).
        {"Llama 3 8B", 32, 32, 8, 128, 0, 0, 8192, 8'030'000'000, "meta-llama/Meta-Llama-3-8B config.json"},
        // v0.3: sliding_window null (no window), max_position_embeddings 32768.
        {"Mistral 7B v0.3", 32, 32, 8, 128, 0, 0, 32768, 7'250'000'000, "mistralai/Mistral-7B-v0.3 config.json"},
        // hidden_size 3584 / 28 heads = 128; the base model's max_position_embeddings is 131072
        // (use_sliding_window false). The Instruct model's config.json says 32768 (YaRN extends it).
        {"Qwen 2.5 7B", 28, 28, 4, 128, 0, 0, 131072, 7'610'000'000, "Qwen/Qwen2.5-7B config.json"},
        // hidden_size 8192 / 64 heads = 128; base max_position_embeddings 131072 (Instruct: 32768).
        {"Qwen 2.5 72B", 80, 64, 8, 128, 0, 0, 131072, 72'700'000'000, "Qwen/Qwen2.5-72B config.json"},
        // head_dim 256, sliding_window 512; layers 5, 11, 17 global → 15 sliding of 18.
        {"Gemma 3 270M", 18, 4, 1, 256, 512, 15, 32768, 268'000'000, "google/gemma-3-270m config.json"},
        // head_dim 256, sliding_window 512; layers 5, 11, 17, 23 global → 22 sliding of 26.
        {"Gemma 3 1B", 26, 4, 1, 256, 512, 22, 32768, 1'000'000'000, "google/gemma-3-1b-pt config.json"},
        // text_config: head_dim 256, sliding_window 1024; 5 global layers → 29 sliding of 34.
        // Parameters include the vision encoder (model card: 4.3B).
        {"Gemma 3 4B", 34, 8, 4, 256, 1024, 29, 131072, 4'300'000'000,
         "google/gemma-3-4b-pt config.json (text_config)"},
        // text_config: head_dim 128, sliding_window 1024; 10 global layers → 52 sliding of 62.
        {"Gemma 3 27B", 62, 32, 16, 128, 1024, 52, 131072, 27'400'000'000,
         "google/gemma-3-27b-pt config.json (text_config)"},
        // n_layer 12, n_head 12 (no GQA), n_embd 768 / 12 = 64, n_positions 1024.
        {"GPT-2", 12, 12, 12, 64, 0, 0, 1024, 124'000'000, "openai-community/gpt2 config.json"},
    };
}

// a × b, or UINT64_MAX when it does not fit.
uint64_t sat_mul(uint64_t a, uint64_t b)
{
    uint64_t r = 0;
    return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<uint64_t>::max() : r;
}

uint64_t sat_add(uint64_t a, uint64_t b)
{
    uint64_t r = 0;
    return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<uint64_t>::max() : r;
}

// Bytes per element in half-bytes, so that INT4 stays an integer.
uint64_t dtype_half_bytes(KvDtype dtype)
{
    switch (dtype) {
    case KvDtype::F32:
        return 8;
    case KvDtype::F16:
    case KvDtype::BF16:
        return 4;
    case KvDtype::FP8:
    case KvDtype::INT8:
        return 2;
    case KvDtype::INT4:
        return 1;
    }
    return 4;
}

// Cached elements (K and V) → bytes. The element count is always even (K and V), so halving is exact.
uint64_t elements_to_bytes(uint64_t elements, KvDtype dtype)
{
    const uint64_t half = dtype_half_bytes(dtype);
    if (elements % 2 == 0)
        return sat_mul(elements / 2, half);
    return sat_mul(elements, half) / 2;
}

struct CacheCells {
    uint64_t global_layers = 0;  // layers holding the whole context
    uint64_t sliding_layers = 0; // layers capped at the window
    uint64_t window_tokens = 0;  // min(context, window)
};

CacheCells cells_of(const KvCalcInput& in)
{
    const KvModelShape& s = in.shape;
    CacheCells c;
    const bool capped = in.sliding_window && s.sliding_window > 0 && s.n_sliding_layers > 0;
    c.sliding_layers = capped ? std::min(s.n_sliding_layers, s.n_layer) : 0;
    c.global_layers = s.n_layer - c.sliding_layers;
    c.window_tokens = std::min<uint64_t>(in.context, s.sliding_window);
    return c;
}

uint64_t kv_heads_of(const KvCalcInput& in)
{
    return in.full_mha ? std::max(in.shape.n_head, in.shape.n_head_kv) : in.shape.n_head_kv;
}

// Bytes of one sequence at `context` tokens.
uint64_t sequence_bytes(const KvCalcInput& in, uint64_t context)
{
    const CacheCells c = cells_of(in);
    const uint64_t row = 2ull * kv_heads_of(in) * in.shape.head_dim; // K and V elements per layer per token
    const uint64_t cells = sat_add(sat_mul(c.global_layers, context),
                                   sat_mul(c.sliding_layers, std::min<uint64_t>(context, in.shape.sliding_window)));
    return elements_to_bytes(sat_mul(row, cells), in.dtype);
}

std::string dtype_bytes_text(KvDtype dtype)
{
    return dtype == KvDtype::INT4 ? "0.5 B" : fmt::format("{} B", dtype_half_bytes(dtype) / 2);
}

} // namespace

const std::vector<KvModelShape>& kv_presets()
{
    static const std::vector<KvModelShape> presets = make_presets();
    return presets;
}

KvModelShape kv_shape_of(const ModelConfig& config, std::string name, uint64_t parameters)
{
    KvModelShape s;
    s.name = std::move(name);
    s.n_layer = config.n_layer;
    if (!config.n_head.empty())
        s.n_head = *std::max_element(config.n_head.begin(), config.n_head.end());
    if (!config.n_head_kv.empty())
        s.n_head_kv = *std::max_element(config.n_head_kv.begin(), config.n_head_kv.end());
    s.head_dim = config.head_dim_k;
    s.sliding_window = config.sliding_window;
    if (config.sliding_window)
        s.n_sliding_layers =
            static_cast<uint32_t>(std::count(config.layer_is_swa.begin(), config.layer_is_swa.end(), true));
    s.context_length = config.n_ctx_train;
    s.parameters = parameters;
    s.source = "GGUF metadata (" + (config.architecture.empty() ? std::string("?") : config.architecture) + ")";
    return s;
}

double kv_dtype_bytes(KvDtype dtype)
{
    return static_cast<double>(dtype_half_bytes(dtype)) / 2.0;
}

std::string_view kv_dtype_name(KvDtype dtype)
{
    switch (dtype) {
    case KvDtype::F32:
        return "FP32";
    case KvDtype::F16:
        return "FP16";
    case KvDtype::BF16:
        return "BF16";
    case KvDtype::FP8:
        return "FP8";
    case KvDtype::INT8:
        return "INT8";
    case KvDtype::INT4:
        return "INT4";
    }
    return "?";
}

// ---- the calculation ----------------------------------------------------------------------------

KvCalcResult calculate_kv(const KvCalcInput& in)
{
    const KvModelShape& s = in.shape;
    KvCalcResult r;
    const uint64_t kv_heads = kv_heads_of(in);
    r.bytes_per_token = elements_to_bytes(2ull * s.n_layer * kv_heads * s.head_dim, in.dtype);
    r.bytes_per_token_exact = static_cast<double>(r.bytes_per_token);
    r.bytes_per_sequence = sequence_bytes(in, in.context);
    r.total_bytes = sat_mul(r.bytes_per_sequence, in.sequences);

    const double offload = std::clamp(std::isfinite(in.offload_fraction) ? in.offload_fraction : 0.0, 0.0, 1.0);
    const double gpu_share = 1.0 - offload;
    if (offload == 0.0)
        r.gpu_cache_bytes = r.total_bytes;
    else
        r.gpu_cache_bytes = static_cast<uint64_t>(std::llround(static_cast<double>(r.total_bytes) * gpu_share));
    r.gpu_cache_bytes = std::min(r.gpu_cache_bytes, r.total_bytes);
    r.cpu_cache_bytes = r.total_bytes - r.gpu_cache_bytes;

    if (in.gpu_bytes > 0 && in.gpu_bytes > in.weight_bytes) {
        const uint64_t free_bytes = in.gpu_bytes - in.weight_bytes;
        if (offload == 0.0) {
            r.sequences_fit =
                r.bytes_per_sequence ? free_bytes / r.bytes_per_sequence : std::numeric_limits<uint64_t>::max();
        } else {
            const double per_sequence_gpu = static_cast<double>(r.bytes_per_sequence) * gpu_share;
            if (per_sequence_gpu <= 0.0) {
                r.sequences_fit = std::numeric_limits<uint64_t>::max();
            } else {
                const double fit = std::floor(static_cast<double>(free_bytes) / per_sequence_gpu);
                r.sequences_fit = fit >= 1.8e19 ? std::numeric_limits<uint64_t>::max() : static_cast<uint64_t>(fit);
            }
        }
    }

    // The formula, per sequence.
    const CacheCells c = cells_of(in);
    const std::string heads = fmt::format("{} KV heads{}", kv_heads, in.full_mha ? " (full multi-head)" : "");
    const std::string bytes = dtype_bytes_text(in.dtype);
    if (c.sliding_layers > 0) {
        r.formula =
            fmt::format("2 × {} × {} dims × {} × ({} global layers × {} tokens + {} sliding layers × {} tokens) = {} B",
                        heads, s.head_dim, bytes, c.global_layers, format_grouped(in.context), c.sliding_layers,
                        format_grouped(c.window_tokens), format_grouped(r.bytes_per_sequence));
    } else {
        r.formula = fmt::format("2 × {} layers × {} × {} dims × {} tokens × {} = {} B", s.n_layer, heads, s.head_dim,
                                format_grouped(in.context), bytes, format_grouped(r.bytes_per_sequence));
    }
    if (in.sequences != 1)
        r.formula +=
            fmt::format("; × {} sequences = {} B", format_grouped(in.sequences), format_grouped(r.total_bytes));
    return r;
}

std::vector<std::pair<uint64_t, uint64_t>> kv_curve(const KvCalcInput& input, uint64_t max_context, int points)
{
    std::vector<std::pair<uint64_t, uint64_t>> curve;
    if (points <= 0)
        return curve;
    curve.reserve(static_cast<std::size_t>(points));
    if (points == 1) {
        curve.emplace_back(max_context, sat_mul(sequence_bytes(input, max_context), input.sequences));
        return curve;
    }
    const auto steps = static_cast<uint64_t>(points - 1);
    for (uint64_t i = 0; i <= steps; ++i) {
        // i × max / steps without overflow for any max_context.
        const uint64_t context = (max_context / steps) * i + (max_context % steps) * i / steps;
        curve.emplace_back(context, sat_mul(sequence_bytes(input, context), input.sequences));
    }
    return curve;
}

// ---- formatting ---------------------------------------------------------------------------------

namespace {

std::string format_scaled(double bytes, double base, const std::array<const char*, 6>& units)
{
    if (!std::isfinite(bytes))
        return "? B";
    const bool negative = bytes < 0.0;
    double v = std::fabs(bytes);
    const char* sign = negative ? "-" : "";
    if (v < base)
        return fmt::format("{}{:.0f} B", sign, v);
    std::size_t unit = 0;
    while (v >= base && unit + 1 < units.size()) {
        v /= base;
        ++unit;
    }
    // 1023.999 KiB prints as 1024.00: move up one unit instead.
    if (std::round(v * 100.0) / 100.0 >= base && unit + 1 < units.size()) {
        v /= base;
        ++unit;
    }
    return fmt::format("{}{:.2f} {}", sign, v, units[unit]);
}

} // namespace

std::string format_binary_bytes(double bytes)
{
    return format_scaled(bytes, 1024.0, {"B", "KiB", "MiB", "GiB", "TiB", "PiB"});
}

std::string format_decimal_bytes(double bytes)
{
    return format_scaled(bytes, 1000.0, {"B", "kB", "MB", "GB", "TB", "PB"});
}

std::string format_grouped(uint64_t value)
{
    std::string digits = std::to_string(value);
    std::string out;
    const std::size_t n = digits.size();
    for (std::size_t i = 0; i < n; ++i) {
        out += digits[i];
        if (const std::size_t left = n - i - 1; left > 0 && left % 3 == 0)
            out += ',';
    }
    return out;
}

} // namespace engine
