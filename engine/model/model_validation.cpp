// SPDX-License-Identifier: GPL-3.0-or-later
#include "model/model_validation.h"

#include "gguf/gguf_file.h"
#include "model/model.h"
#include "model/model_config.h"
#include "quant/dequant.h"
#include "tokenizer/vocab.h"
#include "util/error.h"

#include <cmath>
#include <cstring>
#include <span>
#include <spdlog/fmt/fmt.h>
#include <vector>

namespace engine {

namespace {

struct Checker {
    const gguf::GgufFile& file;
    std::string prefix; // "{arch}."

    [[noreturn]] void fail(const std::string& key, const std::string& what) const
    {
        throw FormatError(fmt::format("{}: metadata '{}' {}", file.name(), key, what));
    }
    [[noreturn]] void unsupported(const std::string& key, const std::string& what) const
    {
        throw UnsupportedError(fmt::format("{}: metadata '{}' {}", file.name(), key, what));
    }
    void count(const std::string& key, uint64_t value, uint64_t lo, uint64_t hi) const
    {
        if (value < lo || value > hi)
            fail(prefix + key, fmt::format("is {}; expected {} to {}", value, lo, hi));
    }
    void positive_finite(const std::string& key, double value, double upper = 1e30) const
    {
        if (!std::isfinite(value) || value <= 0.0 || value > upper)
            fail(prefix + key, fmt::format("is {}; expected a finite number above 0{}", value,
                                           upper < 1e30 ? fmt::format(" and at most {}", upper) : ""));
    }
};

} // namespace

void validate_hyperparameters(const gguf::GgufFile& file, const ModelConfig& c)
{
    const Checker ck{file, c.architecture + "."};
    ck.count("embedding_length", c.n_embd, 1, kMaxEmbedding);
    for (uint32_t il = 0; il < c.n_layer; ++il) {
        const std::string at = c.n_layer > 1 ? fmt::format(" (layer {})", il) : std::string();
        if (c.n_head[il] < 1 || c.n_head[il] > kMaxHeads)
            ck.fail(ck.prefix + "attention.head_count",
                    fmt::format("is {}{}; expected 1 to {}", c.n_head[il], at, kMaxHeads));
        if (c.n_head_kv[il] < 1 || c.n_head_kv[il] > c.n_head[il])
            ck.fail(ck.prefix + "attention.head_count_kv",
                    fmt::format("is {}{}; expected 1 to the head count ({})", c.n_head_kv[il], at, c.n_head[il]));
        // (KV heads dividing the head count: ModelConfig::from_gguf already refuses the rest.)
        if (c.n_head[il] != c.n_head[0] || c.n_head_kv[il] != c.n_head_kv[0])
            ck.unsupported(
                ck.prefix + (c.n_head[il] != c.n_head[0] ? "attention.head_count" : "attention.head_count_kv"),
                fmt::format("changes from layer to layer ({} in layer 0, {} in layer {}); Tokenscope needs one "
                            "head layout for every layer",
                            c.n_head[il] != c.n_head[0] ? c.n_head[0] : c.n_head_kv[0],
                            c.n_head[il] != c.n_head[0] ? c.n_head[il] : c.n_head_kv[il], il));
        if ((c.n_ff[il] < 1 && !c.is_moe()) || c.n_ff[il] > kMaxFeedForward)
            ck.fail(ck.prefix + "feed_forward_length",
                    fmt::format("is {}{}; expected 1 to {}", c.n_ff[il], at, kMaxFeedForward));
    }
    if (c.is_moe()) { // llama.cpp's asserts, and widths a scratch buffer can hold
        ck.count("expert_count", c.n_expert, 1, kMaxExperts);
        ck.count("expert_used_count", c.n_expert_used, 1, c.n_expert);
        ck.count(c.architecture == "qwen3moe" ? "expert_feed_forward_length" : "feed_forward_length", c.n_ff_exp, 1,
                 kMaxFeedForward);
        ck.count("expert_shared_feed_forward_length", c.n_ff_shexp, 0, kMaxFeedForward);
    }
    if (c.head_dim_k < kHeadDimMultiple || c.head_dim_k > kMaxHeadDim || c.head_dim_k % kHeadDimMultiple != 0)
        ck.unsupported(
            ck.prefix + "attention.key_length",
            fmt::format("is {}; Tokenscope's attention kernels take head dimensions that are a multiple of {} "
                        "from {} to {} (published models use 64, 80, 96, 128 or 256)",
                        c.head_dim_k, kHeadDimMultiple, kHeadDimMultiple, kMaxHeadDim));
    if (c.head_dim_v != c.head_dim_k)
        ck.unsupported(ck.prefix + "attention.value_length",
                       fmt::format("is {} but the key length is {}; they must be equal", c.head_dim_v, c.head_dim_k));
    if (c.n_rot > c.head_dim_k || c.n_rot % 2 != 0)
        ck.fail(ck.prefix + "rope.dimension_count",
                fmt::format("is {}; expected an even number no larger than the head dimension ({})", c.n_rot,
                            c.head_dim_k));
    ck.positive_finite("rope.freq_base", c.rope_freq_base);
    if (c.rope_freq_base_swa)
        ck.positive_finite("rope.freq_base_swa", *c.rope_freq_base_swa);
    ck.positive_finite("rope.scaling.factor (as a frequency scale)", c.rope_freq_scale);
    ck.positive_finite("attention.layer_norm_rms_epsilon", c.norm_eps, 1.0);
    if (c.attn_logit_softcap)
        ck.positive_finite("attn_logit_softcapping", *c.attn_logit_softcap);
    if (c.final_logit_softcap)
        ck.positive_finite("final_logit_softcapping", *c.final_logit_softcap);
    // RoPE scaling and the per-architecture multipliers (granite, mistral3): each multiplies or divides
    // every activation it touches, so one NaN, Inf, 0 or negative value would poison every logit.
    ck.positive_finite("rope.scaling.attn_factor (with YaRN's magnitude correction)", c.rope_attn_factor);
    ck.positive_finite("rope.scaling.yarn_beta_fast", c.yarn_beta_fast);
    ck.positive_finite("rope.scaling.yarn_beta_slow", c.yarn_beta_slow);
    if (c.rope_ext_factor > 0.0f && c.rope_n_ctx_orig == 0)
        ck.fail(ck.prefix + "rope.scaling.original_context_length",
                "is 0, and YaRN's correction dimensions divide by it");
    const std::pair<const char*, const std::optional<float>*> multipliers[] = {
        {"embedding_scale", &c.embedding_multiplier},
        {"residual_scale", &c.residual_multiplier},
        {"logit_scale", &c.logit_scale},
        {"attention.scale", &c.attention_scale},
        {"attention.temperature_scale", &c.attn_temperature_scale}};
    for (const auto& [key, value] : multipliers)
        if (value->has_value())
            ck.positive_finite(key, **value);
    bool any_swa = false;
    for (bool s : c.layer_is_swa)
        any_swa |= s;
    if (any_swa && c.sliding_window < 1)
        ck.fail(ck.prefix + "attention.sliding_window", "is 0 but layers use a sliding window");
    if (c.n_vocab < 1 || c.n_vocab > kMaxVocabulary)
        ck.fail("tokenizer.ggml.tokens", fmt::format("holds {} tokens; expected 1 to {}", c.n_vocab, kMaxVocabulary));
}

namespace {

// Where each block keeps its F16 scales (ggml's block layouts, shared/reference/quants.md).
struct ScaleLayout {
    GgmlType type;
    uint32_t offsets[2];
    uint32_t count;
};
constexpr ScaleLayout kScaleLayouts[] = {
    {GgmlType::Q4_0, {0, 0}, 1},   {GgmlType::Q4_1, {0, 2}, 2},   {GgmlType::Q5_0, {0, 0}, 1},
    {GgmlType::Q5_1, {0, 2}, 2},   {GgmlType::Q8_0, {0, 0}, 1},   {GgmlType::Q2_K, {80, 82}, 2},
    {GgmlType::Q3_K, {108, 0}, 1}, {GgmlType::Q4_K, {0, 2}, 2},   {GgmlType::Q5_K, {0, 2}, 2},
    {GgmlType::Q6_K, {208, 0}, 1}, {GgmlType::IQ4_NL, {0, 0}, 1}, {GgmlType::IQ4_XS, {0, 0}, 1},
};

// The first block of a quantized tensor whose F16 scale is NaN or infinite, or -1. One 16-bit load
// per block: a pass over the file that the first forward pass makes anyway.
int64_t first_non_finite_scale(const gguf::TensorInfo& t, std::span<const std::byte> data)
{
    for (const ScaleLayout& l : kScaleLayouts) {
        if (l.type != t.type.type)
            continue;
        const uint64_t bytes = t.type.block_bytes, blocks = data.size() / bytes;
        for (uint64_t b = 0; b < blocks; ++b)
            for (uint32_t k = 0; k < l.count; ++k) {
                uint16_t h;
                std::memcpy(&h, data.data() + b * bytes + l.offsets[k], 2);
                if ((h & 0x7C00u) == 0x7C00u)
                    return int64_t(b);
            }
    }
    return -1;
}

} // namespace

void validate_weights(const gguf::GgufFile& file, const ModelConfig& c, const ModelWeights& w, const Vocab& vocab)
{
    if (vocab.tokens.size() != c.n_vocab)
        throw FormatError(fmt::format("{}: the vocabulary has {} tokens but the model's embedding has {} rows "
                                      "(tensor 'token_embd.weight')",
                                      file.name(), vocab.tokens.size(), c.n_vocab));
    if (w.rope_freqs) {
        const auto* info = w.rope_freqs.info;
        if (info->ne[0] != c.n_rot / 2 || info->ne[1] != 1 || info->ne[2] != 1 || info->ne[3] != 1)
            throw FormatError(fmt::format("{}: tensor 'rope_freqs.weight' has shape {}; expected {} values (half the "
                                          "rotated dimension {})",
                                          file.name(), info->shape_string(), c.n_rot / 2, c.n_rot));
    }
    // Every float tensor of up to a million values — norms, biases, frequency factors — read once:
    // a NaN there would make every later number NaN without a word.
    constexpr uint64_t kScanLimit = 1u << 20;
    std::vector<float> row;
    for (const auto& t : file.tensors()) {
        const GgmlType type = t.type.type;
        if (type != GgmlType::F32 && type != GgmlType::F16 && type != GgmlType::BF16) {
            // The embedding of a model with its own output head is read a row at a time: scanning it
            // would bring all of it into memory at load (+92 MiB resident on the chat model). A bad
            // scale there shows as layer 0's non-finite output at the first pass instead.
            if (t.name == "token_embd.weight" && !w.tied_output)
                continue;
            if (const int64_t b = first_non_finite_scale(t, file.tensor_data(t)); b >= 0)
                throw FormatError(
                    fmt::format("{}: tensor '{}' has a NaN or infinite scale in block {}: the weights are "
                                "corrupt",
                                file.name(), t.name, b));
            continue;
        }
        if (t.n_elements() > kScanLimit)
            continue;
        const auto data = file.tensor_data(t);
        const uint64_t cols = t.ne[0], rows = cols ? t.n_elements() / cols : 0;
        const uint64_t row_bytes = rows ? data.size() / rows : 0;
        row.resize(cols);
        for (uint64_t r = 0; r < rows; ++r) {
            dequantize_row(type, data.data() + r * row_bytes, row.data(), int64_t(cols), t.name);
            for (uint64_t i = 0; i < cols; ++i) {
                if (!std::isfinite(row[i]))
                    throw FormatError(fmt::format("{}: tensor '{}' holds {} at element {}: the weights are corrupt",
                                                  file.name(), t.name, row[i], r * cols + i));
                if (t.name == "rope_freqs.weight" && row[i] <= 0.0f)
                    throw FormatError(fmt::format("{}: tensor 'rope_freqs.weight' holds {} at element {}; RoPE "
                                                  "frequency factors must be above 0",
                                                  file.name(), row[i], i));
            }
        }
    }
}

} // namespace engine
