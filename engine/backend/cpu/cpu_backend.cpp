// SPDX-License-Identifier: GPL-3.0-or-later
// The transformer forward pass on the CPU, written once for every supported architecture; the
// differences (norm placement, q/k norms, RoPE layout, FFN activation, embedding scale) are data in
// ArchitectureTraits. Shapes in comments: n = tokens in the batch, E = n_embd, D = head_dim,
// H / Hkv = query / KV heads, F = n_ff, V = n_vocab.
#include "backend/backend.h"
#include "backend/cpu/attention_kernels.h"
#include "backend/cpu/cpu_kernels.h"
#include "kv/kv_sizing.h"

#include "model/memory_plan.h"
#include "model/model.h"
#include "quant/dequant.h"
#include "util/error.h"
#include "util/fp16.h"

#include <algorithm>
#include <cmath>
#include <spdlog/fmt/fmt.h>
#include <sys/sysinfo.h>

namespace engine {

namespace {

struct LayerVectors {
    std::vector<float> attn_norm, ffn_norm, q_norm, k_norm, post_attn_norm, post_ffw_norm;
    std::vector<float> q_bias, k_bias, v_bias, o_bias;
};

class CpuBackend final : public Backend {
public:
    CpuBackend(std::shared_ptr<const Model> model, const CpuBackendOptions& options);

    std::string name() const override { return fmt::format("CPU ({} threads)", m_pool.size()); }
    const Model& model() const override { return *m_model; }
    ForwardResult forward(const ForwardRequest& request) override;
    KvCache& kv_cache() override { return m_kv; }
    const KvCache& kv_cache() const override { return m_kv; }
    BackendMemory memory() const override;
    KvReadback read_kv(uint32_t layer, uint32_t kv_head) const override;
    std::vector<float> project_to_vocab(std::span<const float> residual) override;

private:
    void attention(uint32_t il, uint32_t pos0, int64_t n, bool batched, const float* q, float* out, const CaptureRequest* capture,
                   ForwardCaptures* captures);

    std::shared_ptr<const Model> m_model;
    ThreadPool m_pool;
    KvCache m_kv;
    std::vector<LayerVectors> m_vectors;
    std::vector<float> m_output_norm;
    std::vector<float> m_rope_freqs;
    cpu::MatMul m_matmul;
    // scratch, grown to the largest batch seen
    std::vector<float> m_x, m_h, m_q, m_k, m_v, m_attn, m_o, m_gate, m_up;
};

namespace {

// The cache for a context, checked against this machine's memory before anything is allocated: a
// file or a flag asking for 2^31 tokens gets a sentence, not a machine out of memory.
KvCacheConfig checked_kv_config(const ModelConfig& c, uint32_t n_ctx)
{
    constexpr uint32_t kMaxContext = 1u << 24;
    if (n_ctx == 0 || n_ctx > kMaxContext)
        throw Error(fmt::format("a context of {} tokens is not possible: use 1 to {}", n_ctx, kMaxContext));
    KvCacheConfig config = kv_cache_config_for(c, n_ctx); // shared with the memory planner
    const uint64_t need = kv_cache_peak_bytes(config, 128);
    const SystemMemory memory = system_memory();
    if (memory.available && need > memory.available)
        throw Error(fmt::format("a context of {} tokens needs {:.2f} GiB of KV cache but {:.2f} GiB of memory is "
                                "available: use a smaller context",
                                config.n_ctx, double(need) / (1u << 30), double(memory.available) / (1u << 30)));
    return config;
}

} // namespace

CpuBackend::CpuBackend(std::shared_ptr<const Model> model, const CpuBackendOptions& options)
    : m_model(std::move(model)), m_pool(options.threads > 0 ? options.threads : default_thread_count()),
      m_kv(checked_kv_config(m_model->config(), options.n_ctx))
{
    const ModelWeights& w = m_model->weights();
    for (const LayerWeights& L : w.layers) {
        m_vectors.push_back({tensor_to_f32(L.attn_norm), tensor_to_f32(L.ffn_norm), tensor_to_f32(L.attn_q_norm),
                             tensor_to_f32(L.attn_k_norm), tensor_to_f32(L.post_attention_norm), tensor_to_f32(L.post_ffw_norm),
                             tensor_to_f32(L.attn_q_bias), tensor_to_f32(L.attn_k_bias), tensor_to_f32(L.attn_v_bias),
                             tensor_to_f32(L.attn_output_bias)});
    }
    m_output_norm = tensor_to_f32(w.output_norm);
    m_rope_freqs = tensor_to_f32(w.rope_freqs);
}

BackendMemory CpuBackend::memory() const
{
    BackendMemory m;
    m.device = "CPU";
    m.weight_bytes = m_model->weight_bytes();
    m.kv_bytes_allocated = m_kv.accounting().bytes_allocated;
    for (const auto* v : {&m_x, &m_h, &m_q, &m_k, &m_v, &m_attn, &m_o, &m_gate, &m_up})
        m.scratch_bytes += v->capacity() * sizeof(float);
    struct sysinfo info {};
    if (sysinfo(&info) == 0)
        m.device_total = uint64_t(info.totalram) * info.mem_unit;
    return m;
}

KvReadback CpuBackend::read_kv(uint32_t layer, uint32_t kv_head) const
{
    const ModelConfig& c = m_model->config();
    check_kv_head(c, layer, kv_head);
    KvReadback r;
    r.layer = layer;
    r.kv_head = kv_head;
    r.n_positions = m_kv.n_cached();
    r.head_dim = c.head_dim_k;
    r.keys.assign(std::size_t(r.n_positions) * r.head_dim, 0.0f);
    r.values.assign(std::size_t(r.n_positions) * r.head_dim, 0.0f);
    r.held.assign(r.n_positions, false);
    for (uint32_t p = 0; p < r.n_positions; ++p) {
        if (!m_kv.holds(layer, p))
            continue;
        r.held[p] = true;
        const uint16_t* k = m_kv.key(layer, p, kv_head);
        const uint16_t* v = m_kv.value(layer, p, kv_head);
        for (uint32_t i = 0; i < r.head_dim; ++i) {
            r.keys[std::size_t(p) * r.head_dim + i] = fp16_to_f32(k[i]);
            r.values[std::size_t(p) * r.head_dim + i] = fp16_to_f32(v[i]);
        }
    }
    return r;
}

void add_bias(float* y, const std::vector<float>& bias, int64_t n_tokens)
{
    if (bias.empty())
        return;
    const auto width = static_cast<int64_t>(bias.size());
    for (int64_t t = 0; t < n_tokens; ++t)
        for (int64_t i = 0; i < width; ++i)
            y[t * width + i] += bias[static_cast<std::size_t>(i)];
}

ForwardResult CpuBackend::forward(const ForwardRequest& request)
{
    const Model& model = *m_model;
    const ModelConfig& c = model.config();
    const ArchitectureTraits& arch = model.traits();
    const ModelWeights& w = model.weights();
    check_forward_request(c, request);
    const auto n = static_cast<int64_t>(request.tokens.size());
    const uint32_t pos0 = m_kv.n_cached();
    const auto order = static_cast<int64_t>(std::max<std::size_t>(request.tokens.size(), request.order_as_batch));
    m_kv.reserve_until(pos0 + static_cast<uint32_t>(n));

    const int64_t E = c.n_embd, D = c.head_dim_k;
    const int64_t H = c.n_head[0], Hkv = c.n_head_kv[0], F = *std::max_element(c.n_ff.begin(), c.n_ff.end());
    m_x.resize(static_cast<std::size_t>(n * E));   // [n][E] residual stream
    m_h.resize(static_cast<std::size_t>(n * E));   // [n][E] normed input of a block
    m_o.resize(static_cast<std::size_t>(n * E));   // [n][E] block output
    m_q.resize(static_cast<std::size_t>(n * H * D));
    m_k.resize(static_cast<std::size_t>(n * Hkv * D));
    m_v.resize(static_cast<std::size_t>(n * Hkv * D));
    m_attn.resize(static_cast<std::size_t>(n * H * D));
    m_gate.resize(static_cast<std::size_t>(n * F));
    m_up.resize(static_cast<std::size_t>(n * F));

    const CaptureRequest* capture = request.capture && !request.capture->empty() ? request.capture : nullptr;
    std::shared_ptr<ForwardCaptures> captures = capture ? std::make_shared<ForwardCaptures>() : nullptr;

    // ---- embeddings -----------------------------------------------------------------------------
    const float embd_scale = std::sqrt(static_cast<float>(E));
    for (int64_t t = 0; t < n; ++t) {
        float* x = m_x.data() + t * E;
        dequantize_row(w.token_embd.type(), w.token_embd.row(request.tokens[static_cast<std::size_t>(t)]), x, E);
        if (arch.embedding_scale)
            for (int64_t i = 0; i < E; ++i)
                x[i] *= embd_scale;
    }

    // ---- transformer blocks ---------------------------------------------------------------------
    for (uint32_t il = 0; il < c.n_layer; ++il) {
        const LayerWeights& L = w.layers[il];
        const LayerVectors& V = m_vectors[il];
        const int64_t Hl = c.n_head[il], Hkvl = c.n_head_kv[il], Fl = c.n_ff[il];

        for (int64_t t = 0; t < n; ++t)
            cpu::kernel_rmsnorm(m_x.data() + t * E, V.attn_norm.data(), m_h.data() + t * E, E, c.norm_eps);

        m_matmul.run(m_pool, L.attn_q, m_h.data(), n, m_q.data(), order); // [n][Hl·D]
        m_matmul.run(m_pool, L.attn_k, m_h.data(), n, m_k.data(), order); // [n][Hkvl·D]
        m_matmul.run(m_pool, L.attn_v, m_h.data(), n, m_v.data(), order); // [n][Hkvl·D]
        add_bias(m_q.data(), V.q_bias, n);
        add_bias(m_k.data(), V.k_bias, n);
        add_bias(m_v.data(), V.v_bias, n);

        const float base = model.layer_rope_base(il);
        const float freq_scale = c.layer_is_swa[il] ? 1.0f : c.rope_freq_scale;
        const float* factors = m_rope_freqs.empty() ? nullptr : m_rope_freqs.data();
        const float q_scale = query_scaling(model).query;
        for (int64_t t = 0; t < n; ++t) {
            const auto pos = static_cast<int32_t>(pos0 + t);
            for (int64_t h = 0; h < Hl; ++h) {
                float* q = m_q.data() + (t * Hl + h) * D;
                if (arch.qk_norm)
                    cpu::kernel_rmsnorm(q, V.q_norm.data(), q, D, c.norm_eps);
                cpu::kernel_rope(q, static_cast<int32_t>(c.n_rot), pos, base, freq_scale, arch.rope_neox, factors);
                if (q_scale != 1.0f)
                    for (int64_t i = 0; i < D; ++i)
                        q[i] *= q_scale;
            }
            for (int64_t h = 0; h < Hkvl; ++h) {
                float* k = m_k.data() + (t * Hkvl + h) * D;
                if (arch.qk_norm)
                    cpu::kernel_rmsnorm(k, V.k_norm.data(), k, D, c.norm_eps);
                cpu::kernel_rope(k, static_cast<int32_t>(c.n_rot), pos, base, freq_scale, arch.rope_neox, factors);
                uint16_t* kc = m_kv.key(il, static_cast<uint32_t>(pos), static_cast<uint32_t>(h));
                uint16_t* vc = m_kv.value(il, static_cast<uint32_t>(pos), static_cast<uint32_t>(h));
                const float* v = m_v.data() + (t * Hkvl + h) * D;
                for (int64_t i = 0; i < D; ++i) {
                    kc[i] = f32_to_fp16(k[i]);
                    vc[i] = f32_to_fp16(v[i]);
                }
            }
        }

        attention(il, pos0, n, order > 1, m_q.data(), m_attn.data(), capture, captures.get());

        m_matmul.run(m_pool, L.attn_output, m_attn.data(), n, m_o.data(), order); // [n][E]
        add_bias(m_o.data(), V.o_bias, n);
        for (int64_t t = 0; t < n; ++t) {
            float* o = m_o.data() + t * E;
            if (arch.post_norms)
                cpu::kernel_rmsnorm(o, V.post_attn_norm.data(), o, E, c.norm_eps);
            float* x = m_x.data() + t * E;
            for (int64_t i = 0; i < E; ++i)
                x[i] += o[i];
            cpu::kernel_rmsnorm(x, V.ffn_norm.data(), m_h.data() + t * E, E, c.norm_eps);
        }

        m_matmul.run(m_pool, L.ffn_gate, m_h.data(), n, m_gate.data(), order); // [n][Fl]
        m_matmul.run(m_pool, L.ffn_up, m_h.data(), n, m_up.data(), order);     // [n][Fl]
        m_pool.parallel_for(static_cast<std::size_t>(n), [&](std::size_t begin, std::size_t end) { // rows are independent
            for (auto t = static_cast<int64_t>(begin); t < static_cast<int64_t>(end); ++t) {
                float* g = m_gate.data() + t * Fl;
                if (arch.gelu_ffn)
                    cpu::kernel_geglu(g, m_up.data() + t * Fl, g, Fl);
                else
                    cpu::kernel_swiglu(g, m_up.data() + t * Fl, g, Fl);
            }
        });
        m_matmul.run(m_pool, L.ffn_down, m_gate.data(), n, m_o.data(), order); // [n][E]
        for (int64_t t = 0; t < n; ++t) {
            float* o = m_o.data() + t * E;
            if (arch.post_norms)
                cpu::kernel_rmsnorm(o, V.post_ffw_norm.data(), o, E, c.norm_eps);
            float* x = m_x.data() + t * E;
            for (int64_t i = 0; i < E; ++i)
                x[i] += o[i];
        }
        // A broken model is named where it breaks: the first layer whose output is NaN or infinite.
        for (int64_t i = 0; i < n * E; ++i)
            if (!std::isfinite(m_x[static_cast<std::size_t>(i)]))
                throw Error(fmt::format("layer {} produced a non-finite value ({}) at position {}: the model's weights "
                                        "or hyperparameters are broken",
                                        il, m_x[static_cast<std::size_t>(i)], pos0 + static_cast<uint32_t>(i / E)));
        if (captures && capture->residuals)
            captures->residuals.emplace_back(m_x.begin(), m_x.begin() + n * E);
    }

    // ---- output ---------------------------------------------------------------------------------
    const int64_t first_out = request.all_logits ? 0 : n - 1;
    const int64_t n_out = n - first_out;
    for (int64_t t = 0; t < n_out; ++t)
        cpu::kernel_rmsnorm(m_x.data() + (first_out + t) * E, m_output_norm.data(), m_h.data() + t * E, E, c.norm_eps);
    ForwardResult result;
    result.n_vocab = c.n_vocab;
    result.logits.resize(static_cast<std::size_t>(n_out) * c.n_vocab);
    m_matmul.run(m_pool, w.output, m_h.data(), n_out, result.logits.data()); // only the rows whose logits are wanted, as llama.cpp
    apply_final_softcap(c, result.logits);
    m_kv.commit(pos0 + static_cast<uint32_t>(n));
    result.captures = std::move(captures);
    return result;
}

std::vector<float> CpuBackend::project_to_vocab(std::span<const float> residual)
{
    const ModelConfig& c = m_model->config();
    check_residual_width(c, residual);
    std::vector<float> normed(c.n_embd);
    cpu::kernel_rmsnorm(residual.data(), m_output_norm.data(), normed.data(), c.n_embd, c.norm_eps);
    std::vector<float> logits(c.n_vocab);
    // One row, as the forward pass computes the last position's logits (the summation order
    // depends on the row count).
    m_matmul.run(m_pool, m_model->weights().output, normed.data(), 1, logits.data());
    apply_final_softcap(c, logits);
    return logits;
}

// softmax(q·kᵀ · scale + mask) · v for every (token, head) of the batch, keys and values from the
// cache, as llama.cpp computes it without flash attention (see attention_kernels.h).
void CpuBackend::attention(uint32_t il, uint32_t pos0, int64_t n, bool batched, const float* q_all, float* out,
                           const CaptureRequest* capture, ForwardCaptures* captures)
{
    const ModelConfig& c = m_model->config();
    const int64_t D = c.head_dim_k, H = c.n_head[il], Hkv = c.n_head_kv[il];
    const int64_t group = H / Hkv;
    const uint32_t window = m_model->layer_window(il);
    const float scale = query_scaling(*m_model).attention;
    const uint32_t n_keys = pos0 + static_cast<uint32_t>(n);

    // Capture buffers first, so that worker threads only write rows into them.
    std::vector<AttentionCapture*> capture_of(static_cast<std::size_t>(H), nullptr);
    if (capture && captures) {
        for (int64_t h = 0; h < H; ++h) {
            if (!capture->wants(il, static_cast<uint32_t>(h)))
                continue;
            AttentionCapture& a = captures->attention.emplace_back();
            a.layer = il;
            a.head = static_cast<uint32_t>(h);
            a.kv_head = static_cast<uint32_t>(h / group);
            a.first_position = pos0;
            a.n_queries = static_cast<uint32_t>(n);
            a.n_keys = n_keys;
            a.head_dim = static_cast<uint32_t>(D);
            a.scale = scale;
            a.weights.assign(std::size_t(n) * n_keys, 0.0f);
            a.q.assign(std::size_t(n) * D, 0.0f);
        }
        // Pointers are taken after every emplace_back (the vector may have moved).
        std::size_t next = captures->attention.size();
        for (int64_t h = H - 1; h >= 0; --h)
            if (capture->wants(il, static_cast<uint32_t>(h)))
                capture_of[static_cast<std::size_t>(h)] = &captures->attention[--next];
    }

    // Row pointers into the paged cache for every position this batch can see; null where a
    // sliding window has freed the block (those positions are masked anyway).
    std::vector<const uint16_t*> keys(std::size_t(Hkv) * n_keys, nullptr), values(std::size_t(Hkv) * n_keys, nullptr);
    for (uint32_t kvh = 0; kvh < Hkv; ++kvh)
        for (uint32_t j = 0; j < n_keys; ++j)
            if (m_kv.holds(il, j) || j >= pos0) {
                keys[std::size_t(kvh) * n_keys + j] = m_kv.key(il, j, kvh);
                values[std::size_t(kvh) * n_keys + j] = m_kv.value(il, j, kvh);
            }

    m_pool.parallel_for(static_cast<std::size_t>(n * H), [&](std::size_t begin, std::size_t end) {
        cpu::AttentionScratch scratch;
        std::vector<const uint16_t*> k_row, v_row;
        std::vector<float> weights;
        for (std::size_t task = begin; task < end; ++task) {
            const int64_t t = static_cast<int64_t>(task) / H, h = static_cast<int64_t>(task) % H;
            const auto kvh = static_cast<uint32_t>(h / group);
            const uint32_t pos = pos0 + static_cast<uint32_t>(t);
            const uint32_t lo = (window && pos + 1 > window) ? pos + 1 - window : 0;
            // Causal and sliding-window mask: slots outside [lo, pos] stay null.
            k_row.assign(pos + 1, nullptr);
            v_row.assign(pos + 1, nullptr);
            for (uint32_t j = lo; j <= pos; ++j) {
                k_row[j] = keys[std::size_t(kvh) * n_keys + j];
                v_row[j] = values[std::size_t(kvh) * n_keys + j];
            }
            weights.resize(pos + 1);
            cpu::AttentionRow row;
            row.q = q_all + (t * H + h) * D;
            row.keys = k_row.data();
            row.values = v_row.data();
            row.n_slots = pos + 1;
            row.head_dim = static_cast<uint32_t>(D);
            row.scale = scale;
            row.batched = batched;
            cpu::attention_row(row, out + (t * H + h) * D, weights.data(), scratch);
            if (AttentionCapture* a = capture_of[static_cast<std::size_t>(h)]) {
                std::copy(weights.begin(), weights.end(), a->weights.begin() + std::ptrdiff_t(std::size_t(t) * n_keys));
                for (int64_t i = 0; i < D; ++i)
                    a->q[std::size_t(t * D + i)] = fp16_to_f32(f32_to_fp16(row.q[i]));
            }
        }
    });

    // Keys and values the captured heads read, from the cache (positions freed by a window stay 0).
    for (AttentionCapture* a : capture_of) {
        if (!a)
            continue;
        a->k.assign(std::size_t(n_keys) * D, 0.0f);
        a->v.assign(std::size_t(n_keys) * D, 0.0f);
        for (uint32_t j = 0; j < n_keys; ++j) {
            if (j < pos0 && !m_kv.holds(il, j))
                continue; // freed by the sliding window (positions ≥ pos0 were written by this pass)
            const uint16_t* k = m_kv.key(il, j, a->kv_head);
            const uint16_t* v = m_kv.value(il, j, a->kv_head);
            for (int64_t i = 0; i < D; ++i) {
                a->k[std::size_t(j) * D + i] = fp16_to_f32(k[i]);
                a->v[std::size_t(j) * D + i] = fp16_to_f32(v[i]);
            }
        }
    }
}

} // namespace

std::unique_ptr<Backend> make_cpu_backend(std::shared_ptr<const Model> model, const CpuBackendOptions& options)
{
    return std::make_unique<CpuBackend>(std::move(model), options);
}

} // namespace engine
