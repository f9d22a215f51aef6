// SPDX-License-Identifier: GPL-3.0-or-later
// The transformer forward pass on a Vulkan device: the same steps as the CPU backend
// (cpu_backend.cpp), each an operation of vk_ops.h recorded into one command buffer per batch,
// submitted once. Weights stay in their GGUF encoding on the device; activations are f32; the KV
// cache is F16 on the device while an accounting-only KvCache keeps the CPU backend's paged
// bookkeeping. Shapes: n = tokens of a micro-batch, E = n_embd, D = head_dim, H / Hkv = query / KV
// heads, F = n_ff, V = n_vocab.
#include "backend/vulkan/vulkan_backend.h"

#include "util/error.h"

#ifdef TOKENSCOPE_HAVE_VULKAN

#include "backend/vulkan/vk_context.h"
#include "backend/vulkan/vk_ops.h"
#include "kv/kv_sizing.h"
#include "model/model.h"
#include "util/fp16.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

namespace engine {

namespace {

using vk::Buffer;
using vk::DeviceMatrix;
using vk::Memory;

struct DeviceLayer {
    DeviceMatrix q, k, v, o, gate, up, down;
    Buffer attn_norm, ffn_norm, q_norm, k_norm, post_attn_norm, post_ffw_norm;
    Buffer q_bias, k_bias, v_bias, o_bias;
    Buffer k_cache, v_cache; // [Hkv][n_ctx][D] F16, two per word
    uint32_t rope_table = 0; // which (base, scale) cos/sin table this layer reads
};

class VulkanBackend final : public Backend {
public:
    VulkanBackend(std::shared_ptr<const Model> model, const VulkanBackendOptions& options);
    ~VulkanBackend() override;

    std::string name() const override { return "Vulkan (" + m_ctx->device_name() + ")"; }
    const Model& model() const override { return *m_model; }
    ForwardResult forward(const ForwardRequest& request) override;
    KvCache& kv_cache() override { return m_kv; }
    const KvCache& kv_cache() const override { return m_kv; }
    BackendMemory memory() const override;
    KvReadback read_kv(uint32_t layer, uint32_t kv_head) const override;
    std::vector<float> project_to_vocab(std::span<const float> residual) override;

private:
    void ensure_usable() const;
    void upload_weights();
    void allocate_scratch();
    // Runs tokens [b0, b1) of the request (positions pos0 + b0 …) and fills their part of the result.
    // `order`: the batch size whose summation order the CPU backend would use for the whole request.
    void run_chunk(std::span<const TokenId> tokens, uint32_t pos0_request, uint32_t b0, uint32_t n_total, int64_t first_out,
                   uint32_t order, const CaptureRequest* capture, ForwardCaptures* captures, std::vector<float>& logits);
    // K and V of positions [0, n) of one layer's KV head, as f32.
    void read_cache(uint32_t layer, uint32_t kv_head, uint32_t n, std::vector<float>& keys, std::vector<float>& values) const;
    void output_head(vk::Recorder& rec, const Buffer& x, uint32_t row0, uint32_t n_rows, uint32_t order, uint64_t download_offset,
                     Buffer& download);
    Buffer& capture_buffer(std::size_t i, uint64_t bytes);

    std::shared_ptr<const Model> m_model;
    std::unique_ptr<vk::Context> m_ctx;
    std::unique_ptr<vk::Kernels> m_k;
    std::unique_ptr<vk::Recorder> m_rec;
    KvCache m_kv;
    uint32_t m_n_ctx = 0;

    DeviceMatrix m_embd, m_output_own;
    const DeviceMatrix* m_output = nullptr; // m_output_own, or m_embd when tied
    std::vector<DeviceLayer> m_layers;
    Buffer m_output_norm;
    std::vector<std::pair<float, float>> m_rope_tables; // (base, freq_scale)
    std::vector<float> m_rope_factors;
    uint64_t m_weight_bytes = 0;

    // scratch for micro-batches of up to m_batch tokens
    uint32_t m_batch = 0, m_logit_rows = 0;
    Buffer m_ids, m_cs;                 // host-visible: token ids, cos/sin tables
    Buffer m_x, m_h, m_o;               // [n][E]
    Buffer m_q, m_attn;                 // [n][H·D]
    Buffer m_kb, m_vb;                  // [n][Hkv·D]
    Buffer m_gate, m_up;                // [n][F]
    Buffer m_logits;                    // [m_logit_rows][V]
    Buffer m_act;                       // [n][max(E, H·D, F)] quantized matmul input
    Buffer m_download;
    std::vector<Buffer> m_capture;      // attention weights of captured layers
    uint64_t m_scratch_bytes = 0;
};

// ---- construction -----------------------------------------------------------------------------------

VulkanBackend::VulkanBackend(std::shared_ptr<const Model> model, const VulkanBackendOptions& options)
    : m_model(std::move(model)), m_kv([&] {
          KvCacheConfig k = kv_cache_config_for(m_model->config(), options.n_ctx); // as the CPU backend
          k.host_storage = false;
          return k;
      }())
{
    const ModelConfig& c = m_model->config();
    m_n_ctx = m_kv.config().n_ctx;
    m_ctx = std::make_unique<vk::Context>(vk::ContextOptions{options.device, options.validation, options.max_binding_bytes});
    m_k = std::make_unique<vk::Kernels>(*m_ctx);
    m_rec = std::make_unique<vk::Recorder>(*m_ctx);
    if (c.head_dim_k != c.head_dim_v)
        throw UnsupportedError("the Vulkan backend needs equal key and value head dimensions");
    if (c.head_dim_k > vk::Kernels::kAttentionMaxHeadDim || c.head_dim_k % 2 != 0 || c.n_rot > c.head_dim_k)
        throw UnsupportedError(fmt::format("the Vulkan backend handles even head dimensions up to {} (the model has {})",
                                           vk::Kernels::kAttentionMaxHeadDim, c.head_dim_k));
    const auto t0 = std::chrono::steady_clock::now();
    upload_weights();
    allocate_scratch();
    spdlog::info("Vulkan backend: {} MiB of weights uploaded, micro-batches of {} tokens, KV cache {} MiB on the device ({:.1f} s)",
                 m_weight_bytes >> 20, m_batch,
                 (uint64_t(2) * c.n_layer * c.n_head_kv[0] * c.head_dim_k * m_n_ctx * 2) >> 20,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

VulkanBackend::~VulkanBackend()
{
    if (m_ctx)
        vkDeviceWaitIdle(m_ctx->device());
}

void VulkanBackend::upload_weights()
{
    const ModelWeights& w = m_model->weights();
    const ModelConfig& c = m_model->config();
    vk::Uploader up(*m_ctx);
    std::set<GgmlType> types;
    auto matrix = [&](const TensorView& t) {
        if (!t)
            throw FormatError("the model lacks a weight matrix the forward pass needs");
        types.insert(t.type());
        DeviceMatrix m = vk::upload_matrix(*m_ctx, up, t.type(), t.data, uint32_t(t.cols()), uint32_t(t.rows()), t.row_bytes);
        m_weight_bytes += m.bytes();
        return m;
    };
    auto vec = [&](const TensorView& t) {
        if (!t)
            return Buffer();
        const auto v = tensor_to_f32(t);
        m_weight_bytes += v.size() * sizeof(float);
        return vk::upload_buffer(*m_ctx, up, v.data(), v.size() * sizeof(float));
    };
    m_embd = vk::upload_matrix(*m_ctx, up, w.token_embd.type(), w.token_embd.data, uint32_t(w.token_embd.cols()),
                               uint32_t(w.token_embd.rows()), w.token_embd.row_bytes);
    m_weight_bytes += m_embd.bytes();
    if (w.tied_output || w.output.data == w.token_embd.data) {
        m_output = &m_embd;
        types.insert(m_embd.type);
    } else {
        m_output_own = matrix(w.output);
        m_output = &m_output_own;
    }
    const auto norm = tensor_to_f32(w.output_norm);
    m_output_norm = vk::upload_buffer(*m_ctx, up, norm.data(), norm.size() * sizeof(float));
    m_rope_factors = tensor_to_f32(w.rope_freqs);
    if (!m_rope_factors.empty() && m_rope_factors.size() < c.n_rot / 2)
        throw FormatError("rope_freqs has fewer factors than rotated pairs");

    for (uint32_t il = 0; il < c.n_layer; ++il) {
        const LayerWeights& L = w.layers[il];
        DeviceLayer& D = m_layers.emplace_back();
        D.q = matrix(L.attn_q);
        D.k = matrix(L.attn_k);
        D.v = matrix(L.attn_v);
        D.o = matrix(L.attn_output);
        D.gate = matrix(L.ffn_gate);
        D.up = matrix(L.ffn_up);
        D.down = matrix(L.ffn_down);
        D.attn_norm = vec(L.attn_norm);
        D.ffn_norm = vec(L.ffn_norm);
        D.q_norm = vec(L.attn_q_norm);
        D.k_norm = vec(L.attn_k_norm);
        D.post_attn_norm = vec(L.post_attention_norm);
        D.post_ffw_norm = vec(L.post_ffw_norm);
        D.q_bias = vec(L.attn_q_bias);
        D.k_bias = vec(L.attn_k_bias);
        D.v_bias = vec(L.attn_v_bias);
        D.o_bias = vec(L.attn_output_bias);
        const uint64_t cache_bytes = uint64_t(c.n_head_kv[il]) * m_n_ctx * c.head_dim_k * 2;
        if (cache_bytes > m_ctx->device_max_binding())
            throw UnsupportedError(fmt::format("layer {}'s KV cache for {} positions ({} MiB) exceeds one storage-buffer binding of "
                                               "this device ({} MiB): use a smaller context",
                                               il, m_n_ctx, cache_bytes >> 20, m_ctx->device_max_binding() >> 20));
        D.k_cache = Buffer(m_ctx.get(), cache_bytes, Memory::Device);
        D.v_cache = Buffer(m_ctx.get(), cache_bytes, Memory::Device);
        const std::pair<float, float> rope{m_model->layer_rope_base(il), c.layer_is_swa[il] ? 1.0f : c.rope_freq_scale};
        auto it = std::find(m_rope_tables.begin(), m_rope_tables.end(), rope);
        D.rope_table = uint32_t(it - m_rope_tables.begin());
        if (it == m_rope_tables.end())
            m_rope_tables.push_back(rope);
    }
    m_k->prepare(std::vector<GgmlType>(types.begin(), types.end()), m_embd.type);
    m_k->load_gelu_table(up);
}

void VulkanBackend::allocate_scratch()
{
    const ModelConfig& c = m_model->config();
    const uint64_t E = c.n_embd, D = c.head_dim_k;
    const uint64_t H = *std::max_element(c.n_head.begin(), c.n_head.end());
    const uint64_t Hkv = *std::max_element(c.n_head_kv.begin(), c.n_head_kv.end());
    const uint64_t F = *std::max_element(c.n_ff.begin(), c.n_ff.end());
    const uint64_t widest = std::max({E, H * D, F}) * sizeof(float);
    const uint64_t limit = m_ctx->max_binding();
    if (widest > limit || uint64_t(c.n_vocab) * sizeof(float) > limit)
        throw UnsupportedError("one token's activations exceed a storage-buffer binding of this device");
    m_batch = uint32_t(std::min<uint64_t>({128, limit / widest, m_n_ctx}));
    m_logit_rows = uint32_t(std::min<uint64_t>(m_batch, limit / (uint64_t(c.n_vocab) * sizeof(float))));
    auto dev = [&](uint64_t floats) {
        m_scratch_bytes += floats * sizeof(float);
        return Buffer(m_ctx.get(), floats * sizeof(float), Memory::Device);
    };
    m_x = dev(m_batch * E);
    m_h = dev(m_batch * E);
    m_o = dev(m_batch * E);
    m_q = dev(m_batch * H * D);
    m_attn = dev(m_batch * H * D);
    m_kb = dev(m_batch * Hkv * D);
    m_vb = dev(m_batch * Hkv * D);
    m_gate = dev(m_batch * F);
    m_up = dev(m_batch * F);
    m_act = dev(m_batch * std::max({E, H * D, F}));
    m_logits = dev(uint64_t(m_logit_rows) * c.n_vocab);
    m_ids = Buffer(m_ctx.get(), m_batch * sizeof(uint32_t), Memory::Upload);
    m_cs = Buffer(m_ctx.get(), std::max<std::size_t>(1, m_rope_tables.size()) * m_batch * (c.n_rot / 2) * 2 * sizeof(float), Memory::Upload);
}

Buffer& VulkanBackend::capture_buffer(std::size_t i, uint64_t bytes)
{
    if (m_capture.size() <= i)
        m_capture.resize(i + 1);
    if (m_capture[i].size() < bytes)
        m_capture[i] = Buffer(m_ctx.get(), bytes, Memory::Device);
    return m_capture[i];
}

void VulkanBackend::ensure_usable() const
{
    if (m_ctx->lost())
        throw Error(fmt::format("the Vulkan device ({}) was lost earlier; reopen the model or use the CPU backend", m_ctx->device_name()));
}

BackendMemory VulkanBackend::memory() const
{
    BackendMemory m;
    m.device = m_ctx->device_name();
    m.weight_bytes = m_weight_bytes;
    m.kv_bytes_allocated = m_kv.accounting().bytes_allocated;
    m.scratch_bytes = m_scratch_bytes;
    m.device_total = m_ctx->device_local_bytes();
    return m;
}

// ---- reading back -------------------------------------------------------------------------------

void VulkanBackend::read_cache(uint32_t layer, uint32_t kv_head, uint32_t n, std::vector<float>& keys, std::vector<float>& values) const
{
    const uint32_t D = m_model->config().head_dim_k;
    const uint64_t bytes = uint64_t(n) * D * 2, offset = uint64_t(kv_head) * m_n_ctx * D * 2;
    std::vector<uint16_t> k16(std::size_t(n) * D), v16(std::size_t(n) * D);
    vk::download(*m_ctx, m_layers[layer].k_cache, offset, k16.data(), bytes);
    vk::download(*m_ctx, m_layers[layer].v_cache, offset, v16.data(), bytes);
    keys.resize(k16.size());
    values.resize(v16.size());
    for (std::size_t i = 0; i < k16.size(); ++i) {
        keys[i] = fp16_to_f32(k16[i]);
        values[i] = fp16_to_f32(v16[i]);
    }
}

KvReadback VulkanBackend::read_kv(uint32_t layer, uint32_t kv_head) const
{
    const ModelConfig& c = m_model->config();
    check_kv_head(c, layer, kv_head);
    ensure_usable();
    KvReadback r;
    r.layer = layer;
    r.kv_head = kv_head;
    r.n_positions = m_kv.n_cached();
    r.head_dim = c.head_dim_k;
    r.held.assign(r.n_positions, false);
    read_cache(layer, kv_head, r.n_positions, r.keys, r.values);
    for (uint32_t p = 0; p < r.n_positions; ++p) {
        r.held[p] = m_kv.holds(layer, p);
        if (!r.held[p]) {
            std::fill_n(r.keys.begin() + std::ptrdiff_t(std::size_t(p) * r.head_dim), r.head_dim, 0.0f);
            std::fill_n(r.values.begin() + std::ptrdiff_t(std::size_t(p) * r.head_dim), r.head_dim, 0.0f);
        }
    }
    return r;
}

// ---- the forward pass ----------------------------------------------------------------------------

void VulkanBackend::output_head(vk::Recorder& rec, const Buffer& x, uint32_t row0, uint32_t n_rows, uint32_t order,
                                uint64_t download_offset, Buffer& download)
{
    const ModelConfig& c = m_model->config();
    // final norm of the wanted rows into h, then the LM head in groups that fit the logits buffer
    m_k->rmsnorm(rec, x, row0 * c.n_embd, m_output_norm, m_h, 0, c.n_embd, n_rows, c.norm_eps);
    for (uint32_t g = 0; g < n_rows; g += m_logit_rows) {
        const uint32_t rows = std::min(m_logit_rows, n_rows - g);
        m_k->matmul(rec, *m_output, m_h, g * c.n_embd, rows, m_logits, 0, c.n_vocab, m_act, order);
        rec.copy(m_logits.handle(), 0, download.handle(), download_offset + uint64_t(g) * c.n_vocab * sizeof(float),
                 uint64_t(rows) * c.n_vocab * sizeof(float));
    }
}

ForwardResult VulkanBackend::forward(const ForwardRequest& request)
{
    const ModelConfig& c = m_model->config();
    check_forward_request(c, request);
    const auto n = static_cast<uint32_t>(request.tokens.size());
    ensure_usable();
    const uint32_t pos0 = m_kv.n_cached();
    m_kv.reserve_until(pos0 + n); // throws when the context is full; the cache is unchanged then

    const CaptureRequest* capture = request.capture && !request.capture->empty() ? request.capture : nullptr;
    std::shared_ptr<ForwardCaptures> captures = capture ? std::make_shared<ForwardCaptures>() : nullptr;
    const int64_t first_out = request.all_logits ? 0 : int64_t(n) - 1;
    const auto order = uint32_t(std::max<std::size_t>(n, request.order_as_batch));
    ForwardResult result;
    result.n_vocab = c.n_vocab;
    result.logits.resize(std::size_t(n - uint32_t(first_out)) * c.n_vocab);

    // Attention weights of a captured layer must fit one binding: fewer tokens per micro-batch then.
    uint32_t batch = m_batch;
    if (capture && (capture->all_heads || !capture->heads.empty())) {
        const uint64_t H = *std::max_element(c.n_head.begin(), c.n_head.end());
        const uint64_t per_token = H * (pos0 + n) * sizeof(float);
        batch = uint32_t(std::min<uint64_t>(batch, std::max<uint64_t>(1, m_ctx->max_binding() / per_token)));
        if (per_token > m_ctx->max_binding())
            throw Error("the attention weights to capture for one token exceed a storage-buffer binding of this device");
    }
    if (captures && capture->residuals)
        captures->residuals.assign(c.n_layer, std::vector<float>(std::size_t(n) * c.n_embd));
    for (uint32_t b0 = 0; b0 < n; b0 += batch) {
        const uint32_t b1 = std::min(n, b0 + batch);
        run_chunk(request.tokens.subspan(b0, b1 - b0), pos0, b0, n, first_out, order, capture, captures.get(), result.logits);
    }

    // Keys and values the captured heads read, from the device cache (positions a window freed stay 0).
    if (captures) {
        std::map<std::pair<uint32_t, uint32_t>, std::pair<std::vector<float>, std::vector<float>>> kv;
        for (AttentionCapture& a : captures->attention) {
            auto key = std::make_pair(a.layer, a.kv_head);
            if (!kv.count(key))
                read_cache(a.layer, a.kv_head, a.n_keys, kv[key].first, kv[key].second);
            a.k = kv[key].first;
            a.v = kv[key].second;
            for (uint32_t j = 0; j < pos0; ++j)
                if (!m_kv.holds(a.layer, j)) {
                    std::fill_n(a.k.begin() + std::ptrdiff_t(std::size_t(j) * a.head_dim), a.head_dim, 0.0f);
                    std::fill_n(a.v.begin() + std::ptrdiff_t(std::size_t(j) * a.head_dim), a.head_dim, 0.0f);
                }
        }
    }
    apply_final_softcap(c, result.logits);
    m_kv.commit(pos0 + n);
    result.captures = std::move(captures);
    return result;
}

void VulkanBackend::run_chunk(std::span<const TokenId> tokens, uint32_t pos0_request, uint32_t b0, uint32_t n_total, int64_t first_out,
                              uint32_t order, const CaptureRequest* capture, ForwardCaptures* captures, std::vector<float>& logits)
{
    const Model& model = *m_model;
    const ModelConfig& c = model.config();
    const ArchitectureTraits& arch = model.traits();
    const auto n = static_cast<uint32_t>(tokens.size());
    const uint32_t pos = pos0_request + b0;
    const uint32_t E = c.n_embd, D = c.head_dim_k, V = c.n_vocab, half_rot = c.n_rot / 2;
    const QueryScaling scaling = query_scaling(model);

    // ---- host inputs: token ids and the cos/sin of every (position, pair) as the CPU computes them
    auto* ids = static_cast<uint32_t*>(m_ids.mapped());
    for (uint32_t t = 0; t < n; ++t)
        ids[t] = static_cast<uint32_t>(tokens[t]);
    auto* cs = static_cast<float*>(m_cs.mapped());
    for (std::size_t table = 0; table < m_rope_tables.size(); ++table)
        vk::rope_cos_sin(cs + 2 * table * m_batch * half_rot, pos, n, c.n_rot, m_rope_tables[table].first,
                         m_rope_tables[table].second, m_rope_factors.empty() ? nullptr : m_rope_factors.data());

    // ---- where results land in the download buffer
    const int64_t out_lo = std::max<int64_t>(first_out, b0), out_hi = b0 + n;
    const uint32_t n_out = out_hi > out_lo ? uint32_t(out_hi - out_lo) : 0;
    uint64_t size = uint64_t(n_out) * V * sizeof(float);
    const uint64_t residual_offset = size;
    const bool residuals = captures && capture->residuals;
    if (residuals)
        size += uint64_t(c.n_layer) * n * E * sizeof(float);
    struct LayerCapture {
        uint32_t layer = 0;
        uint64_t q_offset = 0, w_offset = 0;
        std::size_t buffer = 0;
    };
    std::vector<LayerCapture> layer_captures;
    const uint32_t n_keys = pos + n;
    if (captures) {
        for (uint32_t il = 0; il < c.n_layer; ++il) {
            bool any = false;
            for (uint32_t h = 0; h < c.n_head[il] && !any; ++h)
                any = capture->wants(il, h);
            if (!any)
                continue;
            LayerCapture lc;
            lc.layer = il;
            lc.q_offset = size;
            size += uint64_t(n) * c.n_head[il] * D * sizeof(float);
            lc.w_offset = size;
            size += uint64_t(n) * c.n_head[il] * n_keys * sizeof(float);
            lc.buffer = layer_captures.size();
            layer_captures.push_back(lc);
        }
    }
    if (m_download.size() < size)
        m_download = Buffer(m_ctx.get(), size, Memory::Download);

    // ---- record the whole chunk
    vk::Recorder& rec = *m_rec;
    vk::Kernels& k = *m_k;
    rec.begin();
    k.get_rows(rec, m_embd, m_ids, n, m_x, arch.embedding_scale ? std::sqrt(static_cast<float>(E)) : 1.0f);
    std::size_t next_capture = 0;
    for (uint32_t il = 0; il < c.n_layer; ++il) {
        DeviceLayer& L = m_layers[il];
        const uint32_t H = c.n_head[il], Hkv = c.n_head_kv[il], F = c.n_ff[il];
        k.rmsnorm(rec, m_x, 0, L.attn_norm, m_h, 0, E, n, c.norm_eps);
        k.matmul(rec, L.q, m_h, 0, n, m_q, 0, H * D, m_act, order);    // [n][H·D]
        k.matmul(rec, L.k, m_h, 0, n, m_kb, 0, Hkv * D, m_act, order); // [n][Hkv·D]
        k.matmul(rec, L.v, m_h, 0, n, m_vb, 0, Hkv * D, m_act, order); // [n][Hkv·D]
        if (L.q_bias)
            k.add(rec, m_q, 0, L.q_bias, n * H * D, H * D);
        if (L.k_bias)
            k.add(rec, m_kb, 0, L.k_bias, n * Hkv * D, Hkv * D);
        if (L.v_bias)
            k.add(rec, m_vb, 0, L.v_bias, n * Hkv * D, Hkv * D);
        if (arch.qk_norm) {
            k.rmsnorm(rec, m_q, 0, L.q_norm, m_q, 0, D, n * H, c.norm_eps);
            k.rmsnorm(rec, m_kb, 0, L.k_norm, m_kb, 0, D, n * Hkv, c.norm_eps);
        }
        const uint32_t cs_offset = L.rope_table * m_batch * half_rot;
        k.rope(rec, m_q, 0, m_cs, cs_offset, n, H, D, c.n_rot, arch.rope_neox, scaling.query);
        k.rope(rec, m_kb, 0, m_cs, cs_offset, n, Hkv, D, c.n_rot, arch.rope_neox, 1.0f);
        k.kv_store(rec, m_kb, m_vb, L.k_cache, L.v_cache, n, Hkv, D, pos, m_n_ctx);

        vk::Kernels::AttentionShape shape;
        shape.n_tokens = n;
        shape.n_heads = H;
        shape.n_kv_heads = Hkv;
        shape.head_dim = D;
        shape.pos0 = pos;
        shape.n_ctx = m_n_ctx;
        shape.window = model.layer_window(il);
        shape.scale = scaling.attention;
        shape.batched = order > 1;
        const LayerCapture* lc = next_capture < layer_captures.size() && layer_captures[next_capture].layer == il
                                     ? &layer_captures[next_capture++] : nullptr;
        Buffer* weights = nullptr;
        if (lc) {
            const uint64_t bytes = uint64_t(n) * H * n_keys * sizeof(float);
            weights = &capture_buffer(lc->buffer, bytes);
            rec.fill(weights->handle(), 0, bytes, 0);
            rec.copy(m_q.handle(), 0, m_download.handle(), lc->q_offset, uint64_t(n) * H * D * sizeof(float));
        }
        k.attention(rec, shape, m_q, L.k_cache, L.v_cache, m_attn, weights);
        if (lc)
            rec.copy(weights->handle(), 0, m_download.handle(), lc->w_offset, uint64_t(n) * H * n_keys * sizeof(float));

        k.matmul(rec, L.o, m_attn, 0, n, m_o, 0, E, m_act, order); // [n][E]
        if (L.o_bias)
            k.add(rec, m_o, 0, L.o_bias, n * E, E);
        if (arch.post_norms)
            k.rmsnorm(rec, m_o, 0, L.post_attn_norm, m_o, 0, E, n, c.norm_eps);
        k.add(rec, m_x, 0, m_o, n * E, n * E);
        k.rmsnorm(rec, m_x, 0, L.ffn_norm, m_h, 0, E, n, c.norm_eps);

        k.matmul(rec, L.gate, m_h, 0, n, m_gate, 0, F, m_act, order); // [n][F]
        k.matmul(rec, L.up, m_h, 0, n, m_up, 0, F, m_act, order);     // [n][F]
        k.glu(rec, m_gate, m_up, n * F, F, arch.gelu_ffn);
        k.matmul(rec, L.down, m_gate, 0, n, m_o, 0, E, m_act, order); // [n][E]
        if (arch.post_norms)
            k.rmsnorm(rec, m_o, 0, L.post_ffw_norm, m_o, 0, E, n, c.norm_eps);
        k.add(rec, m_x, 0, m_o, n * E, n * E);
        if (residuals)
            rec.copy(m_x.handle(), 0, m_download.handle(), residual_offset + uint64_t(il) * n * E * sizeof(float),
                     uint64_t(n) * E * sizeof(float));
    }
    if (n_out)
        output_head(rec, m_x, uint32_t(out_lo - b0), n_out, uint32_t(n_total - first_out), 0, m_download); // the CPU's rows
    rec.submit();

    // ---- results to the host
    const auto* down = static_cast<const std::byte*>(m_download.mapped());
    if (n_out)
        std::memcpy(logits.data() + std::size_t(out_lo - first_out) * V, down, std::size_t(n_out) * V * sizeof(float));
    if (residuals)
        for (uint32_t il = 0; il < c.n_layer; ++il)
            std::memcpy(captures->residuals[il].data() + std::size_t(b0) * E,
                        down + residual_offset + uint64_t(il) * n * E * sizeof(float), std::size_t(n) * E * sizeof(float));
    const uint32_t n_keys_total = pos0_request + n_total;
    for (const LayerCapture& lc : layer_captures) {
        const uint32_t il = lc.layer, H = c.n_head[il];
        const uint32_t group = H / c.n_head_kv[il];
        const auto* q = reinterpret_cast<const float*>(down + lc.q_offset);
        const auto* w = reinterpret_cast<const float*>(down + lc.w_offset);
        for (uint32_t h = 0; h < H; ++h) {
            if (!capture->wants(il, h))
                continue;
            // the capture of (il, h) for the whole request: found, or made on the first chunk
            AttentionCapture* a = nullptr;
            for (AttentionCapture& e : captures->attention)
                if (e.layer == il && e.head == h)
                    a = &e;
            if (!a) {
                a = &captures->attention.emplace_back();
                a->layer = il;
                a->head = h;
                a->kv_head = h / group;
                a->first_position = pos0_request;
                a->n_queries = n_total;
                a->n_keys = n_keys_total;
                a->head_dim = D;
                a->scale = scaling.attention;
                a->weights.assign(std::size_t(n_total) * n_keys_total, 0.0f);
                a->q.assign(std::size_t(n_total) * D, 0.0f);
            }
            for (uint32_t t = 0; t < n; ++t) {
                const std::size_t row = b0 + t;
                std::copy_n(w + (std::size_t(t) * H + h) * n_keys, n_keys, a->weights.begin() + std::ptrdiff_t(row * n_keys_total));
                for (uint32_t i = 0; i < D; ++i)
                    a->q[row * D + i] = fp16_to_f32(f32_to_fp16(q[(std::size_t(t) * H + h) * D + i]));
            }
        }
    }
}

std::vector<float> VulkanBackend::project_to_vocab(std::span<const float> residual)
{
    const ModelConfig& c = m_model->config();
    check_residual_width(c, residual);
    ensure_usable();
    Buffer staging(m_ctx.get(), residual.size_bytes(), Memory::Upload);
    std::memcpy(staging.mapped(), residual.data(), residual.size_bytes());
    const uint64_t bytes = uint64_t(c.n_vocab) * sizeof(float);
    if (m_download.size() < bytes)
        m_download = Buffer(m_ctx.get(), bytes, Memory::Download);
    vk::Recorder& rec = *m_rec;
    rec.begin();
    rec.copy(staging.handle(), 0, m_o.handle(), 0, residual.size_bytes());
    output_head(rec, m_o, 0, 1, 1, 0, m_download);
    rec.submit();
    std::vector<float> logits(c.n_vocab);
    std::memcpy(logits.data(), m_download.mapped(), bytes);
    apply_final_softcap(c, logits);
    return logits;
}

} // namespace

std::vector<VulkanDeviceInfo> list_vulkan_devices()
{
    std::vector<VulkanDeviceInfo> out;
    for (const auto& d : vk::enumerate_devices())
        out.push_back({d.index, d.name, d.type, d.driver, d.device_local_bytes, d.budget_bytes, d.usable, d.why_not});
    return out;
}

std::unique_ptr<Backend> make_vulkan_backend(std::shared_ptr<const Model> model, const VulkanBackendOptions& options)
{
    return std::make_unique<VulkanBackend>(std::move(model), options);
}

VulkanValidationReport vulkan_validation_report()
{
    const auto c = vk::validation_counts();
    return {c.errors, c.warnings};
}

} // namespace engine

#else // !TOKENSCOPE_HAVE_VULKAN

namespace engine {

std::vector<VulkanDeviceInfo> list_vulkan_devices() { return {}; }

std::unique_ptr<Backend> make_vulkan_backend(std::shared_ptr<const Model>, const VulkanBackendOptions&)
{
    throw UnsupportedError("Tokenscope was built without Vulkan; use the CPU backend");
}

VulkanValidationReport vulkan_validation_report() { return {}; }

} // namespace engine

#endif
