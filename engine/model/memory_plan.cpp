// SPDX-License-Identifier: GPL-3.0-or-later
#include "model/memory_plan.h"

#include "gguf/gguf_file.h"
#include "kv/kv_calculator.h"
#include "kv/kv_sizing.h"
#include "model/model_config.h"
#include "quant/activation_quant.h"
#include "quant/tiled_gemm.h"

#include <algorithm>
#include <filesystem>
#include <spdlog/fmt/fmt.h>

namespace engine {

namespace {

// What the planner needs from the file besides the config.
struct FileFacts {
    uint64_t weight_bytes = 0;
    uint64_t layer_activation_row_bytes = 0; // widest quantized input row of a layer matrix
    uint64_t layer_panel_bytes = 0;          // its sixteen-token panel for the tiled matmul
    uint64_t head_activation_row_bytes = 0;  // the output head's (one row of logits per pass)
};

FileFacts facts_of(const gguf::GgufFile& file)
{
    FileFacts f;
    const gguf::TensorInfo* head = file.find_tensor("output.weight");
    if (!head)
        head = file.find_tensor("token_embd.weight"); // tied embeddings
    for (const auto& t : file.tensors()) {
        f.weight_bytes += t.n_bytes;
        if (t.n_dims >= 2 && t.name.starts_with("blk.")) {
            const ActivationFormat format = activation_format(t.type.type);
            const auto width = static_cast<int64_t>(t.ne[0]);
            f.layer_activation_row_bytes =
                std::max<uint64_t>(f.layer_activation_row_bytes, activation_row_bytes(format, width));
            // (F32 activations are the float matmul's panels as they are: no copy)
            if (format != ActivationFormat::F32)
                f.layer_panel_bytes = std::max<uint64_t>(f.layer_panel_bytes, tiled_panel_bytes(format, width));
        }
    }
    if (head)
        f.head_activation_row_bytes =
            activation_row_bytes(activation_format(head->type.type), static_cast<int64_t>(head->ne[0]));
    return f;
}

uint64_t scratch_bytes_for(const ModelConfig& c, const FileFacts& f, uint64_t n_batch, uint64_t n_ctx)
{
    const uint64_t E = c.n_embd, D = c.head_dim_k;
    const uint64_t H = c.n_head.empty() ? 0 : c.n_head[0];
    const uint64_t Hkv = c.n_head_kv.empty() ? 0 : c.n_head_kv[0];
    // (a shared expert runs through the FFN buffers too)
    const uint64_t F =
        std::max<uint64_t>(c.n_ff.empty() ? 0 : *std::max_element(c.n_ff.begin(), c.n_ff.end()), c.n_ff_shexp);
    // The nine float vectors of CpuBackend::forward (m_x, m_h, m_o, m_q, m_attn, m_k, m_v, m_gate, m_up).
    uint64_t floats = n_batch * (3 * E + 2 * H * D + 2 * Hkv * D + 2 * F);
    uint64_t moe_pairs = 0;
    if (c.is_moe()) { // every token's k outputs, and one expert's rows in and out (at most the batch's)
        const uint64_t k = c.n_expert_used, Fe = c.n_ff_exp;
        floats += n_batch * (k * E + 2 * E + 2 * Fe);
        moe_pairs = n_batch * k * sizeof(uint32_t);
    }
    const uint64_t quantized = std::max(n_batch * f.layer_activation_row_bytes, f.head_activation_row_bytes);
    // The tiled matmul's panels of a batch of 16+ tokens (AVX-512 VNNI CPUs; counted on every CPU).
    const uint64_t panels =
        n_batch >= kTiledPanelTokens ? (n_batch + kTiledPanelTokens - 1) / kTiledPanelTokens * f.layer_panel_bytes : 0;
    const uint64_t logits = uint64_t(c.n_vocab) * sizeof(float);
    const uint64_t row_pointers = 2 * Hkv * n_ctx * sizeof(void*);
    return floats * sizeof(float) + moe_pairs + quantized + panels + logits + row_pointers;
}

} // namespace

MemoryPlan plan_memory(const std::string& gguf_path, uint32_t n_ctx, uint32_t n_batch)
{
    // GgufFile maps the file and parses the header; tensor data is never read. Its errors name the file.
    const auto file = gguf::GgufFile::open(gguf_path);
    const ModelConfig config = ModelConfig::from_gguf(*file);
    const FileFacts facts = facts_of(*file);

    MemoryPlan p;
    p.name = config.name.empty() ? std::filesystem::path(gguf_path).stem().string() : config.name;
    p.architecture = config.architecture;
    p.n_ctx_requested = n_ctx;
    n_batch = std::max<uint32_t>(n_batch, 1);

    auto kv_at = [&](uint32_t ctx) { return kv_cache_peak_bytes(kv_cache_config_for(config, ctx), n_batch); };
    auto total_at = [&](uint32_t ctx) {
        const uint32_t capped = kv_cache_config_for(config, ctx).n_ctx;
        return facts.weight_bytes + kv_at(capped) + scratch_bytes_for(config, facts, std::min(n_batch, capped), capped);
    };

    const KvCacheConfig kv_config = kv_cache_config_for(config, n_ctx);
    p.n_ctx = kv_config.n_ctx;
    p.weight_bytes = facts.weight_bytes;
    for (const auto& t : file->tensors()) {
        p.parameters += t.n_elements();
        if (config.is_moe() && config.n_expert_used <= config.n_expert && t.name.find("_exps.") != std::string::npos)
            p.active_parameters -= t.n_elements() / config.n_expert * (config.n_expert - config.n_expert_used);
    }
    p.active_parameters += p.parameters;
    p.kv_bytes = kv_cache_peak_bytes(kv_config, n_batch);
    // A batch never exceeds the context.
    p.scratch_bytes = scratch_bytes_for(config, facts, std::min(n_batch, p.n_ctx), p.n_ctx);
    p.total_bytes = p.weight_bytes + p.kv_bytes + p.scratch_bytes;
    p.memory = system_memory();
    p.fits = p.memory.available == 0 || p.total_bytes <= p.memory.available;

    const std::string capped_note =
        p.n_ctx < n_ctx ? fmt::format(" (capped at the training context; {} requested)", format_grouped(n_ctx)) : "";
    const std::string needs =
        fmt::format("needs {} (weights {} + KV cache {} at {} tokens{} + working buffers {})",
                    format_binary_bytes(double(p.total_bytes)), format_binary_bytes(double(p.weight_bytes)),
                    format_binary_bytes(double(p.kv_bytes)), format_grouped(p.n_ctx), capped_note,
                    format_binary_bytes(double(p.scratch_bytes)));
    const std::string experts =
        config.is_moe() && config.n_expert_used <= config.n_expert
            ? fmt::format(" (a mixture of experts: a token reads {} of {} experts per layer, {:.0f} M of {:.0f} M "
                          "parameters, but every expert is held)",
                          config.n_expert_used, config.n_expert, double(p.active_parameters) / 1e6,
                          double(p.parameters) / 1e6)
            : std::string();
    const std::string who = p.name + experts;
    if (p.memory.available == 0) {
        p.message = fmt::format("{} {}; this machine's free memory is unknown.", who, needs);
    } else if (p.fits) {
        p.message =
            fmt::format("{} {}; {} of {} is available.", who, needs, format_binary_bytes(double(p.memory.available)),
                        format_binary_bytes(double(p.memory.total)));
    } else {
        // The largest context that fits (the total grows with the context).
        uint32_t lo = 0, hi = p.n_ctx;
        while (lo < hi) {
            const uint32_t mid = lo + (hi - lo + 1) / 2;
            if (total_at(mid) <= p.memory.available)
                lo = mid;
            else
                hi = mid - 1;
        }
        const std::string advice =
            lo > 0 ? fmt::format("choose a smaller context: at most about {} tokens fit", format_grouped(lo))
                   : std::string("the weights alone leave no room: choose a smaller model or quantization");
        p.message = fmt::format("{} will not fit in memory: it {}, but only {} of {} is available; {}.", who, needs,
                                format_binary_bytes(double(p.memory.available)),
                                format_binary_bytes(double(p.memory.total)), advice);
    }
    return p;
}

} // namespace engine
