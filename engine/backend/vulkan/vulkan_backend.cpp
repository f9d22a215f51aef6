// SPDX-License-Identifier: GPL-3.0-or-later
// The operations of the forward pass (backend/forward_pass.h) on a Vulkan device, each one or more
// shaders of vk_ops.h recorded into one command buffer per chunk and submitted once. Weights stay in
// their GGUF encoding on the device; activations are f32; the KV cache is F16 on the device while an
// accounting-only KvCache keeps the CPU backend's paged bookkeeping. Shapes as in forward_pass.h.
#include "backend/vulkan/vulkan_backend.h"

#include "util/error.h"

#ifdef TOKENSCOPE_HAVE_VULKAN

#include "backend/activation_buffers.h"
#include "backend/chunk_download.h"
#include "backend/forward_pass.h"
#include "backend/rope_table.h"
#include "backend/vulkan/vk_context.h"
#include "backend/vulkan/vk_ops.h"
#include "kv/kv_sizing.h"
#include "model/model.h"
#include "quant/activation_quant.h"
#include "util/fp16.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

namespace engine {

namespace {

std::atomic<uint64_t> g_decode_replays{0};

// TOKENSCOPE_VULKAN_REPLAY=0 records every decode step afresh (tests compare the two).
bool replay_allowed()
{
    const char* v = std::getenv("TOKENSCOPE_VULKAN_REPLAY");
    return !(v && std::string_view(v) == "0");
}

using vk::Buffer;
using vk::DeviceMatrix;
using vk::Memory;

class VulkanBackend final : public LayeredBackend {
public:
    VulkanBackend(std::shared_ptr<const Model> model, const VulkanBackendOptions& options);
    ~VulkanBackend() override;

    std::string name() const override { return "Vulkan (" + m_ctx->device_name() + ", " + m_ctx->arithmetic() + ")"; }
    std::string_view kind() const override { return "vulkan"; }
    KvCache& kv_cache() override { return m_kv; }
    const KvCache& kv_cache() const override { return m_kv; }
    BackendMemory memory() const override;

private:
    void ensure_usable() const override;
    uint32_t max_chunk_tokens(const ForwardRequest& request, uint32_t pos0) const override;
    void begin_chunk(const ChunkPlan& plan, ChunkSink& sink) override;
    bool replay_chunk(std::span<const TokenId> tokens) override;
    void embed(std::span<const TokenId> tokens, float scale) override;
    void load_residual(std::span<const float> rows) override;
    void rmsnorm(Act in, Act out, const TensorView& weight, uint32_t width, uint32_t n_rows, float eps) override;
    void matmul_rows(const TensorView& w, Act in, Act out, uint32_t row0, uint32_t n_rows, uint32_t order) override;
    void add_bias(Act x, const TensorView& bias, uint32_t n_rows) override;
    void rope(Act x, uint32_t n_heads, uint32_t head_dim, const RopeShape& rope, float scale) override;
    void scale_rows(Act x, uint32_t width, uint32_t n_rows, float factor) override;
    void store_kv(uint32_t layer, uint32_t n_kv_heads, uint32_t head_dim) override;
    void attention(const AttentionShape& shape, bool deliver) override;
    void glu(uint32_t width, uint32_t n_rows, bool gelu) override;
    void add_residual(uint32_t n_rows) override;
    void add_residual_rmsnorm(uint32_t n_rows, const TensorView& weight, Act out, float eps) override;
    void check_finite(uint32_t, uint32_t) override {} // the residual stream stays on the device
    void deliver_residual(uint32_t layer) override;
    void deliver_activation(Site site, uint32_t layer, Act a, uint32_t row_width) override;
    void edit_rows(Act a, const RowEdit& edit) override;
    void output_head(const TensorView& norm, const TensorView& output, uint32_t row0, uint32_t n_rows, uint32_t order,
                     float eps) override;
    void finish_chunk() override;
    void read_cache(uint32_t layer, uint32_t kv_head, uint32_t n, std::vector<float>& keys,
                    std::vector<float>& values) const override;

    void upload_weights();
    void allocate_scratch();
    Buffer& buffer(Act a) { return m_activations[a]; }
    const DeviceMatrix& matrix_of(const TensorView& t) const { return m_matrices.at(t.data); }
    const Buffer& vector_of(const TensorView& t) const { return m_vectors.at(t.data); }
    Buffer& capture_buffer(std::size_t i, uint64_t bytes);

    std::unique_ptr<vk::Context> m_ctx;
    std::unique_ptr<vk::Kernels> m_k;
    std::unique_ptr<vk::Recorder> m_rec;
    // The decode step (one token, its logits, nothing captured or changed) is recorded once and
    // resubmitted while the shape holds: the position it needs comes from m_step, the token from
    // m_ids and the rotary angles from m_cs, all rewritten by the host before each submission.
    std::unique_ptr<vk::Recorder> m_decode_rec;
    bool m_decode_recorded = false;  // m_decode_rec holds a finished decode step
    bool m_recording_decode = false; // this chunk is being recorded into m_decode_rec
    bool m_replayable = false;       // this chunk is a decode step m_decode_rec holds
    bool m_replaying = false;        // …which replay_chunk resubmits: the pass issues no operation
    vk::Recorder* m_active = nullptr;
    vk::Recorder& rec() { return *m_active; }
    KvCache m_kv;
    uint32_t m_n_ctx = 0;

    // Every weight the pass reads, by tensor (a tied output head is the embedding matrix).
    std::unordered_map<const std::byte*, DeviceMatrix> m_matrices;
    std::unordered_map<const std::byte*, Buffer> m_vectors;
    std::vector<std::pair<Buffer, Buffer>> m_caches; // per layer: K, V [Hkv][n_ctx][D] F16, two per word
    RopeTables m_rope_tables;                        // one cos/sin table per rotation (rope_tables)
    uint64_t m_weight_bytes = 0;

    // scratch for chunks of up to m_batch tokens
    uint32_t m_batch = 0, m_logit_rows = 0;
    Buffer m_ids, m_cs;                      // host-visible: token ids, cos/sin tables
    Buffer m_step;                           // host-visible: the chunk's first position (for replayed recordings)
    ActivationBuffers<Buffer> m_activations; // [n][E], [n][H·D], [n][Hkv·D], [n][F] by Act
    Buffer m_logits;                         // [m_logit_rows][V]
    Buffer m_act;                            // [n][max(E, H·D, F)] quantized matmul input
    Buffer m_download;
    std::vector<Buffer> m_capture; // attention weights of delivered layers
    Buffer m_staging;              // the logit lens's input
    uint64_t m_scratch_bytes = 0;

    // the chunk being recorded: where each result lands in m_download
    ChunkPlan m_plan;
    ChunkSink* m_sink = nullptr;
    uint64_t m_download_used = 0;   // results are recorded into m_download one after another
    std::size_t m_next_capture = 0; // the next attention layer's capture buffer
    ChunkDownload m_results;        // what landed where in m_download
    // Reserves `bytes` of m_download for a result; returns its offset.
    uint64_t take(uint64_t bytes) { return std::exchange(m_download_used, m_download_used + bytes); }
    std::vector<Buffer> m_edit_uploads; // the chunk's intervention values, alive until it is submitted

    // The quantized matmul input in m_act: which rows of which buffer, in which format. Q, K and V
    // read the same normed rows, as do gate and up: quantized once for each group, as the CPU
    // quantizes once per input. Every other operation may write a buffer and forgets it.
    struct ActHeld {
        Act in;
        uint32_t row0, n_rows, cols;
        ActivationFormat format;
        bool operator==(const ActHeld&) const = default;
    };
    std::optional<ActHeld> m_act_held;
};

// ---- construction -----------------------------------------------------------------------------------

VulkanBackend::VulkanBackend(std::shared_ptr<const Model> model, const VulkanBackendOptions& options)
    : LayeredBackend(std::move(model)), m_kv([&] {
          KvCacheConfig k = kv_cache_config_for(m_model->config(), options.n_ctx); // as the CPU backend
          k.host_storage = false;
          return k;
      }())
{
    const ModelConfig& c = m_model->config();
    if (c.is_moe()) // before the device is opened: `auto` falls back to the CPU at once
        throw UnsupportedError(fmt::format("the Vulkan backend does not run mixture-of-experts models ({}, {} "
                                           "experts); the CPU backend does",
                                           c.architecture, c.n_expert));
    m_n_ctx = m_kv.config().n_ctx;
    m_ctx = std::make_unique<vk::Context>(
        vk::ContextOptions{options.device, options.validation, options.max_binding_bytes, options.exact});
    m_k = std::make_unique<vk::Kernels>(*m_ctx);
    m_rec = std::make_unique<vk::Recorder>(*m_ctx);
    m_decode_rec = std::make_unique<vk::Recorder>(*m_ctx);
    m_active = m_rec.get();
    if (c.head_dim_k != c.head_dim_v)
        throw UnsupportedError("the Vulkan backend needs equal key and value head dimensions");
    if (c.head_dim_k > vk::Kernels::kAttentionMaxHeadDim || c.head_dim_k % 2 != 0 || c.n_rot > c.head_dim_k)
        throw UnsupportedError(
            fmt::format("the Vulkan backend handles even head dimensions up to {} (the model has {})",
                        vk::Kernels::kAttentionMaxHeadDim, c.head_dim_k));
    const auto t0 = std::chrono::steady_clock::now();
    upload_weights();
    allocate_scratch();
    spdlog::info("Vulkan backend: {} MiB of weights uploaded, micro-batches of {} tokens, KV cache {} MiB on the "
                 "device ({:.1f} s)",
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
    std::set<GgmlType> matmul_types;
    for_each_weight(*m_model, [&](const TensorView& t, WeightUse use) {
        if (use == WeightUse::Vector) {
            const auto v = tensor_to_f32(t);
            m_weight_bytes += v.size() * sizeof(float);
            m_vectors.emplace(t.data, vk::upload_buffer(*m_ctx, up, v.data(), v.size() * sizeof(float)));
            return;
        }
        if (!t)
            throw FormatError("the model lacks a weight matrix the forward pass needs");
        if (use == WeightUse::Matrix)
            matmul_types.insert(t.type());
        DeviceMatrix m =
            vk::upload_matrix(*m_ctx, up, t.type(), t.data, uint32_t(t.cols()), uint32_t(t.rows()), t.row_bytes);
        m_weight_bytes += m.bytes();
        m_matrices.emplace(t.data, std::move(m));
    });
    if (w.tied_output || w.output.data == w.token_embd.data) {
        matmul_types.insert(w.token_embd.type()); // the output head reads the embedding matrix
        if (!m_matrices.count(w.output.data))
            throw FormatError("the tied output head is not the embedding tensor");
    }

    // The cache: one K and one V buffer per layer of the accounting cache's configuration.
    for (const uint32_t n_kv_heads : m_kv.config().n_kv_heads) {
        const uint64_t cache_bytes = uint64_t(n_kv_heads) * m_n_ctx * c.head_dim_k * 2;
        if (cache_bytes > m_ctx->device_max_binding())
            throw UnsupportedError(
                fmt::format("layer {}'s KV cache for {} positions ({} MiB) exceeds one storage-buffer binding of "
                            "this device ({} MiB): use a smaller context",
                            m_caches.size(), m_n_ctx, cache_bytes >> 20, m_ctx->device_max_binding() >> 20));
        m_caches.emplace_back(Buffer(m_ctx.get(), cache_bytes, Memory::Device),
                              Buffer(m_ctx.get(), cache_bytes, Memory::Device));
    }
    m_rope_tables = rope_tables();
    m_k->prepare(std::vector<GgmlType>(matmul_types.begin(), matmul_types.end()), w.token_embd.type());
    m_k->load_gelu_table(up);
}

void VulkanBackend::allocate_scratch()
{
    const ModelConfig& c = m_model->config();
    const ActivationWidths widths = ActivationWidths::of(c);
    const uint64_t E = widths.embd;
    const uint64_t widest = widths.widest() * sizeof(float);
    const uint64_t limit = m_ctx->max_binding();
    if (widest > limit || uint64_t(c.n_vocab) * sizeof(float) > limit)
        throw UnsupportedError("one token's activations exceed a storage-buffer binding of this device");
    m_batch = uint32_t(std::min<uint64_t>({128, limit / widest, m_n_ctx}));
    m_logit_rows = uint32_t(std::min<uint64_t>(m_batch, limit / (uint64_t(c.n_vocab) * sizeof(float))));
    auto dev = [&](uint64_t floats) {
        m_scratch_bytes += floats * sizeof(float);
        return Buffer(m_ctx.get(), floats * sizeof(float), Memory::Device);
    };
    m_activations.allocate(m_batch, widths, dev);
    m_act = dev(m_batch * widths.widest());
    m_logits = dev(uint64_t(m_logit_rows) * c.n_vocab);
    m_ids = Buffer(m_ctx.get(), m_batch * sizeof(uint32_t), Memory::Upload);
    m_cs = Buffer(m_ctx.get(), m_rope_tables.floats(m_batch, c.n_rot) * sizeof(float), Memory::Upload);
    m_staging = Buffer(m_ctx.get(), E * sizeof(float), Memory::Upload);
    m_step = Buffer(m_ctx.get(), 16, Memory::Upload);
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
        throw Error(fmt::format("the Vulkan device ({}) was lost earlier; reopen the model or use the CPU backend",
                                m_ctx->device_name()));
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

void VulkanBackend::read_cache(uint32_t layer, uint32_t kv_head, uint32_t n, std::vector<float>& keys,
                               std::vector<float>& values) const
{
    const uint32_t D = m_model->config().head_dim_k;
    const uint64_t bytes = uint64_t(n) * D * 2, offset = uint64_t(kv_head) * m_n_ctx * D * 2;
    std::vector<uint16_t> k16(std::size_t(n) * D), v16(std::size_t(n) * D);
    vk::download(*m_ctx, m_caches[layer].first, offset, k16.data(), bytes);
    vk::download(*m_ctx, m_caches[layer].second, offset, v16.data(), bytes);
    keys.resize(k16.size());
    values.resize(v16.size());
    for (std::size_t i = 0; i < k16.size(); ++i) {
        keys[i] = fp16_to_f32(k16[i]);
        values[i] = fp16_to_f32(v16[i]);
    }
}

// ---- the operations: recorded into one command buffer per chunk, submitted by finish_chunk ------

uint32_t VulkanBackend::max_chunk_tokens(const ForwardRequest& request, uint32_t pos0) const
{
    // The attention weights of a delivered layer must fit one binding: fewer tokens per chunk then.
    const CaptureRequest* capture = request.capture;
    if (!capture || (!capture->all_heads && capture->heads.empty()))
        return m_batch;
    const ModelConfig& c = m_model->config();
    const uint64_t H = *std::max_element(c.n_head.begin(), c.n_head.end());
    const uint64_t per_token = H * (pos0 + request.tokens.size()) * sizeof(float);
    if (per_token > m_ctx->max_binding())
        throw Error("the attention weights to capture for one token exceed a storage-buffer binding of this device");
    return uint32_t(std::min<uint64_t>(m_batch, std::max<uint64_t>(1, m_ctx->max_binding() / per_token)));
}

void VulkanBackend::begin_chunk(const ChunkPlan& plan, ChunkSink& sink)
{
    m_act_held.reset();
    const ModelConfig& c = m_model->config();
    m_plan = plan;
    m_sink = &sink;
    const uint32_t n = plan.n_tokens;

    // The cos/sin of every (position, pair) as the CPU computes them, one table per (base, scale).
    auto* cs = static_cast<float*>(m_cs.mapped());
    const RopeShape r = rope_shape(0);
    m_rope_tables.fill(cs, plan.pos0, n, m_batch, c.n_rot, r.factors);

    // Results land in the download buffer one after another as they are recorded.
    m_results.clear();
    m_download_used = 0;
    m_next_capture = 0;
    m_edit_uploads.clear();
    const uint64_t size = ChunkDownload::bytes_for(plan, c);
    if (m_download.size() < size) {
        m_download = Buffer(m_ctx.get(), std::max<uint64_t>(size, 4), Memory::Download);
        m_decode_recorded = false; // it copies its logits into the buffer just replaced
    }
    *static_cast<uint32_t*>(m_step.mapped()) = plan.pos0;
    const bool decode_step = replay_allowed() && plan.replayable_decode_step();
    m_replayable = decode_step && m_decode_recorded;
    m_recording_decode = decode_step && !m_decode_recorded;
    m_active = decode_step ? m_decode_rec.get() : m_rec.get();
    if (!m_replayable)
        m_active->begin(m_recording_decode);
}

bool VulkanBackend::replay_chunk(std::span<const TokenId> tokens)
{
    if (!m_replayable)
        return false;
    // The recorded step reads its token from m_ids, its position from m_step and its angles from
    // m_cs: begin_chunk wrote the last two.
    *static_cast<uint32_t*>(m_ids.mapped()) = static_cast<uint32_t>(tokens.front());
    m_replaying = true;
    return true;
}

void VulkanBackend::embed(std::span<const TokenId> tokens, float scale)
{
    m_act_held.reset();
    auto* ids = static_cast<uint32_t*>(m_ids.mapped());
    for (std::size_t t = 0; t < tokens.size(); ++t)
        ids[t] = static_cast<uint32_t>(tokens[t]);
    m_k->get_rows(rec(), matrix_of(m_model->weights().token_embd), m_ids, uint32_t(tokens.size()), buffer(Act::X),
                  scale);
}

void VulkanBackend::load_residual(std::span<const float> rows)
{
    m_act_held.reset();
    std::memcpy(m_staging.mapped(), rows.data(), rows.size_bytes());
    rec().copy(m_staging.handle(), 0, buffer(Act::X).handle(), 0, rows.size_bytes());
}

void VulkanBackend::rmsnorm(Act in, Act out, const TensorView& weight, uint32_t width, uint32_t n_rows, float eps)
{
    m_act_held.reset();
    m_k->rmsnorm(rec(), buffer(in), 0, vector_of(weight), buffer(out), 0, width, n_rows, eps);
}

void VulkanBackend::matmul_rows(const TensorView& w, Act in, Act out, uint32_t row0, uint32_t n_rows, uint32_t order)
{
    const DeviceMatrix& m = matrix_of(w);
    const ActHeld wanted{in, row0, n_rows, m.cols, activation_format(m.type)};
    const bool ready = m_act_held == wanted && wanted.format != ActivationFormat::F32;
    m_act_held = out == in ? std::nullopt : std::optional(wanted);
    m_k->matmul(rec(), m, buffer(in), row0 * m.cols, n_rows, buffer(out), row0 * m.rows, m.rows, m_act, order, ready);
}

void VulkanBackend::add_bias(Act x, const TensorView& bias, uint32_t n_rows)
{
    m_act_held.reset();
    const auto width = uint32_t(bias.cols());
    m_k->add(rec(), buffer(x), 0, vector_of(bias), n_rows * width, width);
}

void VulkanBackend::rope(Act x, uint32_t n_heads, uint32_t head_dim, const RopeShape& r, float scale)
{
    m_act_held.reset();
    const uint32_t cs_offset = m_rope_tables.index_of(r.base, r.freq_scale, r.yarn()) * m_batch * (r.n_rot / 2);
    const uint32_t temp_offset =
        r.temperature_beta != 0.0f ? m_rope_tables.temperature_offset(m_batch, r.n_rot) : 0xFFFFFFFFu;
    m_k->rope(rec(), buffer(x), 0, m_cs, cs_offset, m_plan.n_tokens, n_heads, head_dim, r.n_rot, r.neox, scale,
              temp_offset);
}

// x ·= factor: the rotary shader without a rotated pair (n_rot 0) multiplies every element, the CPU's
// product bit for bit.
void VulkanBackend::scale_rows(Act x, uint32_t width, uint32_t n_rows, float factor)
{
    if (width % 2 != 0)
        throw UnsupportedError(fmt::format("the Vulkan backend scales rows of even widths only (not {})", width));
    m_act_held.reset();
    m_k->rope(rec(), buffer(x), 0, m_cs, 0, n_rows, 1, width, 0, false, factor);
}

void VulkanBackend::store_kv(uint32_t layer, uint32_t n_kv_heads, uint32_t head_dim)
{
    m_k->kv_store(rec(), buffer(Act::K), buffer(Act::V), m_caches[layer].first, m_caches[layer].second, m_plan.n_tokens,
                  n_kv_heads, head_dim, m_plan.pos0, m_n_ctx, m_recording_decode ? &m_step : nullptr);
}

void VulkanBackend::attention(const AttentionShape& s, bool deliver)
{
    m_act_held.reset();
    vk::Kernels::AttentionShape shape;
    shape.n_tokens = s.n_tokens;
    shape.n_heads = s.n_heads;
    shape.n_kv_heads = s.n_kv_heads;
    shape.head_dim = s.head_dim;
    shape.pos0 = s.pos0;
    shape.n_ctx = m_n_ctx;
    shape.window = s.window;
    shape.scale = s.scale;
    shape.batched = s.batched;
    shape.softcap = s.softcap;
    Buffer* weights = nullptr;
    const uint64_t weight_bytes = uint64_t(s.n_tokens) * s.n_heads * (s.pos0 + s.n_tokens) * sizeof(float);
    const uint64_t q_bytes = uint64_t(s.n_tokens) * s.n_heads * s.head_dim * sizeof(float);
    uint64_t q_offset = 0;
    if (deliver) {
        weights = &capture_buffer(m_next_capture++, weight_bytes);
        rec().fill(weights->handle(), 0, weight_bytes, 0);
        q_offset = take(q_bytes);
        rec().copy(buffer(Act::Q).handle(), 0, m_download.handle(), q_offset, q_bytes);
    }
    const auto& [k_cache, v_cache] = m_caches[s.layer];
    m_k->attention(rec(), shape, buffer(Act::Q), k_cache, v_cache, buffer(Act::Attn), weights,
                   m_recording_decode ? &m_step : nullptr);
    if (deliver) {
        const uint64_t w_offset = take(weight_bytes);
        rec().copy(weights->handle(), 0, m_download.handle(), w_offset, weight_bytes);
        m_results.attention(s.layer, q_offset, w_offset);
    }
}

void VulkanBackend::glu(uint32_t width, uint32_t n_rows, bool gelu)
{
    m_act_held.reset();
    m_k->glu(rec(), buffer(Act::Gate), buffer(Act::Up), n_rows * width, width, gelu);
}

void VulkanBackend::add_residual(uint32_t n_rows)
{
    m_act_held.reset();
    const uint32_t n = n_rows * m_model->config().n_embd;
    m_k->add(rec(), buffer(Act::X), 0, buffer(Act::O), n, n);
}

void VulkanBackend::add_residual_rmsnorm(uint32_t n_rows, const TensorView& weight, Act out, float eps)
{
    m_act_held.reset();
    m_k->add_rmsnorm(rec(), buffer(Act::X), buffer(Act::O), vector_of(weight), buffer(out), m_model->config().n_embd,
                     n_rows, eps);
}

void VulkanBackend::deliver_residual(uint32_t layer)
{
    const uint64_t bytes = uint64_t(m_plan.n_tokens) * m_model->config().n_embd * sizeof(float);
    const uint64_t offset = take(bytes);
    rec().copy(buffer(Act::X).handle(), 0, m_download.handle(), offset, bytes);
    m_results.residual(layer, offset);
}

void VulkanBackend::deliver_activation(Site site, uint32_t layer, Act a, uint32_t row_width)
{
    const uint64_t bytes = uint64_t(m_plan.n_tokens) * row_width * sizeof(float);
    const uint64_t offset = take(bytes);
    rec().copy(buffer(a).handle(), 0, m_download.handle(), offset, bytes);
    m_results.activation(site, layer, offset);
}

// The values go to a host-visible buffer of their own (recorded commands read it at submission);
// a replacement is copied row by row into the columns it names, an addition runs the add shader.
void VulkanBackend::edit_rows(Act a, const RowEdit& e)
{
    m_act_held.reset();
    const uint64_t n_values = uint64_t(e.per_row ? e.n_rows : 1) * e.cols;
    Buffer& upload = m_edit_uploads.emplace_back(m_ctx.get(), n_values * sizeof(float), Memory::Upload);
    std::memcpy(upload.mapped(), e.values, n_values * sizeof(float));
    Buffer& target = buffer(a);
    if (e.add) {
        if (e.col0 != 0 || e.cols != e.row_width)
            throw std::logic_error("an addition to part of a row");
        const uint32_t n = e.n_rows * e.row_width;
        m_k->add(rec(), target, e.row0 * e.row_width, upload, n, e.per_row ? n : e.row_width);
        return;
    }
    std::vector<VkBufferCopy> regions;
    for (uint32_t r = 0; r < e.n_rows; ++r)
        regions.push_back({uint64_t(e.per_row ? r : 0) * e.cols * sizeof(float),
                           (uint64_t(e.row0 + r) * e.row_width + e.col0) * sizeof(float),
                           uint64_t(e.cols) * sizeof(float)});
    rec().copy_regions(upload.handle(), target.handle(), regions);
}

void VulkanBackend::output_head(const TensorView& norm, const TensorView& output, uint32_t row0, uint32_t n_rows,
                                uint32_t order, float eps)
{
    m_act_held.reset();
    const ModelConfig& c = m_model->config();
    const DeviceMatrix& head = matrix_of(output);
    // final norm of the wanted rows into H, then the LM head in groups that fit the logits buffer
    m_k->rmsnorm(rec(), buffer(Act::X), row0 * c.n_embd, vector_of(norm), buffer(Act::H), 0, c.n_embd, n_rows, eps);
    for (uint32_t g = 0; g < n_rows; g += m_logit_rows) {
        const uint32_t rows = std::min(m_logit_rows, n_rows - g);
        m_k->matmul(rec(), head, buffer(Act::H), g * c.n_embd, rows, m_logits, 0, c.n_vocab, m_act, order);
        const uint64_t offset = take(uint64_t(rows) * c.n_vocab * sizeof(float));
        rec().copy(m_logits.handle(), 0, m_download.handle(), offset, uint64_t(rows) * c.n_vocab * sizeof(float));
        if (g == 0)
            m_results.logits(offset);
    }
}

void VulkanBackend::finish_chunk()
{
    m_act_held.reset();
    if (m_replaying) {
        m_decode_rec->resubmit();
        g_decode_replays.fetch_add(1, std::memory_order_relaxed);
    } else {
        m_active->submit();
        m_decode_recorded = m_decode_recorded || m_recording_decode;
    }
    m_replayable = m_replaying = m_recording_decode = false;
    m_active = m_rec.get();
    m_results.deliver(static_cast<const std::byte*>(m_download.mapped()), m_plan, m_model->config().n_vocab, *m_sink);
    m_sink = nullptr;
}

} // namespace

std::vector<VulkanDeviceInfo> list_vulkan_devices()
{
    std::vector<VulkanDeviceInfo> out;
    for (const auto& d : vk::enumerate_devices())
        out.push_back(
            {d.index, d.name, d.type, d.driver, d.device_local_bytes, d.budget_bytes, d.usable, d.float64, d.why_not});
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

uint64_t vulkan_decode_replays()
{
    return g_decode_replays.load(std::memory_order_relaxed);
}

} // namespace engine

#else // !TOKENSCOPE_HAVE_VULKAN

namespace engine {

std::vector<VulkanDeviceInfo> list_vulkan_devices()
{
    return {};
}

std::unique_ptr<Backend> make_vulkan_backend(std::shared_ptr<const Model>, const VulkanBackendOptions&)
{
    throw UnsupportedError("Tokenscope was built without Vulkan; use the CPU backend");
}

VulkanValidationReport vulkan_validation_report()
{
    return {};
}

uint64_t vulkan_decode_replays()
{
    return 0;
}

} // namespace engine

#endif

namespace engine {

int vulkan_device_rank(std::string_view type)
{
    if (type == "discrete GPU")
        return 4;
    if (type == "integrated GPU")
        return 3;
    if (type == "virtual GPU")
        return 2;
    if (type == "CPU")
        return 1;
    return 0;
}

int best_vulkan_device(const std::vector<VulkanDeviceInfo>& devices, int min_rank)
{
    int best = -1, best_rank = min_rank - 1;
    for (const VulkanDeviceInfo& d : devices)
        if (d.usable && vulkan_device_rank(d.type) > best_rank) {
            best = int(d.index);
            best_rank = vulkan_device_rank(d.type);
        }
    return best;
}

} // namespace engine
