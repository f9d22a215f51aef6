// SPDX-License-Identifier: GPL-3.0-or-later
// The operations of the forward pass (backend/forward_pass.h) as launches of kernels/kernels.h on a
// cuda::Device, queued in order and synchronised once per chunk. Weights stay in their GGUF encoding
// on the device; activations are f32; quantized matmuls read activations quantized on the
// device (in the CPU's format for the weight type), once per group of matrices that share an input; the KV cache is F16
// on the device while an accounting-only KvCache keeps the CPU backend's paged bookkeeping. Shapes as in
// forward_pass.h.
#include "backend/cuda/cuda_backend.h"

#include "backend/activation_buffers.h"
#include "backend/chunk_download.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cuda/cuda_module.h"
#include "backend/cuda/emulated_device.h"
#include "backend/forward_pass.h"
#include "backend/rope_table.h"
#include "kv/kv_sizing.h"
#include "model/model.h"
#include "quant/activation_quant.h"
#include "util/error.h"
#include "util/fp16.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

namespace engine {

namespace {

std::atomic<uint64_t> g_decode_replays{0};

// TOKENSCOPE_CUDA_REPLAY=0 records every decode step afresh (tests compare the two).
bool replay_allowed()
{
    const char* v = std::getenv("TOKENSCOPE_CUDA_REPLAY");
    return !(v && std::string_view(v) == "0");
}

// A device failure (std::runtime_error from the module) as the engine's Error, naming the device.
template <class F> auto device_call(const std::string& device, F&& f) -> decltype(f())
{
    try {
        return f();
    } catch (const Error&) {
        throw;
    } catch (const std::runtime_error& e) {
        throw Error(fmt::format("CUDA device {}: {}", device, e.what()));
    }
}

// One allocation of device (or pinned host) memory, freed with its owner.
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    DeviceBuffer(cuda::Device* dev, std::size_t bytes, bool host = false)
        : m_dev(dev), m_bytes(bytes), m_host(host), m_ptr(host ? dev->alloc_host(bytes) : dev->alloc(bytes))
    {
    }
    DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept
    {
        std::swap(m_dev, o.m_dev);
        std::swap(m_bytes, o.m_bytes);
        std::swap(m_host, o.m_host);
        std::swap(m_ptr, o.m_ptr);
        return *this;
    }
    ~DeviceBuffer()
    {
        if (m_ptr)
            m_host ? m_dev->release_host(m_ptr) : m_dev->release(m_ptr);
    }
    template <class T = void> T* get() const { return static_cast<T*>(m_ptr); }
    float* f() const { return get<float>(); }
    std::size_t size() const { return m_bytes; }

private:
    cuda::Device* m_dev = nullptr;
    std::size_t m_bytes = 0;
    bool m_host = false;
    void* m_ptr = nullptr;
};

struct DeviceMatrix {
    GgmlType type{};
    uint32_t rows = 0, cols = 0;
    uint64_t row_bytes = 0;
    DeviceBuffer data;
};

bool kernels_read(GgmlType t)
{
    return !cuda::is_quantized(t) || cuda::block_bytes(t) != 0;
}

class CudaBackend final : public LayeredBackend {
public:
    CudaBackend(std::shared_ptr<const Model> model, std::unique_ptr<cuda::Device> device, const CudaBackendOptions& o);
    ~CudaBackend() override;

    std::string name() const override { return "CUDA (" + m_device_name + ")"; }
    std::string_view kind() const override { return "cuda"; }
    KvCache& kv_cache() override { return m_kv; }
    const KvCache& kv_cache() const override { return m_kv; }
    BackendMemory memory() const override;

private:
    void ensure_usable() const override;
    uint32_t max_chunk_tokens(const ForwardRequest&, uint32_t) const override { return m_batch; }
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
    float* buffer(Act a) { return m_activations[a].f(); }
    const DeviceMatrix& matrix_of(const TensorView& t) const { return m_matrices.at(t.data); }
    const float* vector_of(const TensorView& t) const { return m_vectors.at(t.data).f(); }
    // Queues a copy of `bytes` from device memory into the download buffer; returns its offset.
    uint64_t download(const void* src, uint64_t bytes);
    void matmul_into(const DeviceMatrix& m, const float* in, uint32_t n_rows, float* out, uint32_t out_stride,
                     uint32_t order, bool quantized_ready);

    std::unique_ptr<cuda::Device> m_dev;
    std::string m_device_name;
    uint64_t m_device_total = 0;
    KvCache m_kv;
    uint32_t m_n_ctx = 0;
    bool m_lost = false;
    std::string m_lost_why;

    std::unordered_map<const std::byte*, DeviceMatrix> m_matrices;
    std::unordered_map<const std::byte*, DeviceBuffer> m_vectors;
    std::vector<std::pair<DeviceBuffer, DeviceBuffer>> m_caches; // per layer: K, V [Hkv][n_ctx][D] F16
    RopeTables m_rope_tables;                                    // one cos/sin table per rotation (rope_tables)
    DeviceBuffer m_gelu_table;                                   // [65536] F16
    uint64_t m_weight_bytes = 0;

    // scratch for chunks of up to m_batch tokens
    uint32_t m_batch = 0, m_logit_rows = 0;
    DeviceBuffer m_ids, m_cs, m_step;                // device copies of the host's token ids, cos/sin tables, position
    DeviceBuffer m_ids_host, m_cs_host, m_step_host; // pinned: the host writes them before each chunk
    ActivationBuffers<DeviceBuffer> m_activations;   // [n][E], [n][H·D], [n][Hkv·D], [n][F] by Act
    DeviceBuffer m_logits;
    DeviceBuffer m_scores;                   // [n][H][n_ctx] attention scores, then weights
    DeviceBuffer m_act;                      // [n][max(E, H·D, F) / 32] Q8_1 blocks
    DeviceBuffer m_download;                 // pinned
    std::vector<DeviceBuffer> m_edit_values; // the chunk's intervention values, alive until it ran
    uint64_t m_scratch_bytes = 0;

    // the chunk being issued
    ChunkPlan m_plan;
    ChunkSink* m_sink = nullptr;
    uint64_t m_download_used = 0;
    ChunkDownload m_results; // what landed where in m_download

    // The decode step (one token, its logits, nothing captured or changed) is recorded once and
    // replayed while its shape holds: its kernels read the position from m_step, the token from m_ids
    // and the angles from m_cs, which the host rewrites (pinned copies) before each replay.
    bool m_decode_recorded = false;
    bool m_recording = false;
    bool m_replayable = false; // this chunk is a decode step the device holds recorded
    bool m_replaying = false;  // …which replay_chunk runs again: the pass issues no operation
    const uint32_t* step_arg() const { return m_recording ? m_step.get<uint32_t>() : nullptr; }

    // The quantized matmul input in m_act (which rows of which buffer): Q, K and V read the same normed
    // rows, as do gate and up, and are quantized once per group.
    struct ActHeld {
        Act in;
        uint32_t row0, n_rows, cols;
        ActivationFormat format;
        bool operator==(const ActHeld&) const = default;
    };
    std::optional<ActHeld> m_act_held;
};

// ---- construction -----------------------------------------------------------------------------------

CudaBackend::CudaBackend(std::shared_ptr<const Model> model, std::unique_ptr<cuda::Device> device,
                         const CudaBackendOptions& options)
    : LayeredBackend(std::move(model)), m_dev(std::move(device)), m_kv([&] {
          KvCacheConfig k = kv_cache_config_for(m_model->config(), options.n_ctx); // as the CPU backend
          k.host_storage = false;
          return k;
      }())
{
    const ModelConfig& c = m_model->config();
    const cuda::DeviceInfo info = m_dev->info();
    m_device_name = info.name;
    m_device_total = info.total_bytes;
    m_n_ctx = m_kv.config().n_ctx;
    if (c.is_moe())
        throw UnsupportedError(fmt::format(
            "the CUDA backend does not run mixture-of-experts models ({}, {} experts); the CPU backend does",
            c.architecture, c.n_expert));
    if (c.head_dim_k != c.head_dim_v)
        throw UnsupportedError("the CUDA backend needs equal key and value head dimensions");
    if (c.head_dim_k % 2 != 0 || c.n_rot > c.head_dim_k)
        throw UnsupportedError(
            fmt::format("the CUDA backend handles even head dimensions (the model has {})", c.head_dim_k));
    const auto t0 = std::chrono::steady_clock::now();
    device_call(m_device_name, [&] {
        upload_weights();
        allocate_scratch();
        m_dev->synchronize();
    });
    spdlog::info("CUDA backend on {}: {} MiB of weights uploaded, micro-batches of {} tokens, KV cache {} MiB on "
                 "the device ({:.1f} s)",
                 m_device_name, m_weight_bytes >> 20, m_batch,
                 (uint64_t(2) * c.n_layer * c.n_head_kv[0] * c.head_dim_k * m_n_ctx * 2) >> 20,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

CudaBackend::~CudaBackend()
{
    try {
        m_dev->synchronize();
    } catch (const std::exception&) {
        // a lost device: the buffers are freed below all the same
    }
}

void CudaBackend::upload_weights()
{
    const ModelWeights& w = m_model->weights();
    for_each_weight(*m_model, [&](const TensorView& t, WeightUse use) {
        if (use == WeightUse::Vector) {
            const auto v = tensor_to_f32(t);
            DeviceBuffer b(m_dev.get(), v.size() * sizeof(float));
            m_dev->copy_to_device(b.get(), v.data(), v.size() * sizeof(float));
            m_dev->synchronize(); // the host vector goes out of scope
            m_weight_bytes += b.size();
            m_vectors.emplace(t.data, std::move(b));
            return;
        }
        if (!t)
            throw FormatError("the model lacks a weight matrix the forward pass needs");
        if (!kernels_read(t.type()))
            throw UnsupportedError(fmt::format("the CUDA backend does not read {} weights", ggml_type_name(t.type())));
        if (cuda::is_quantized(t.type()) && t.cols() % (cuda::is_k_quant(t.type()) ? 256 : 32) != 0)
            throw UnsupportedError(
                fmt::format("a {} matrix with rows of {} elements (the CUDA kernels need multiples of 32)",
                            ggml_type_name(t.type()), t.cols()));
        DeviceMatrix m;
        m.type = t.type();
        m.rows = uint32_t(t.rows());
        m.cols = uint32_t(t.cols());
        m.row_bytes = t.row_bytes;
        m.data = DeviceBuffer(m_dev.get(), std::size_t(m.row_bytes) * m.rows);
        m_dev->copy_to_device(m.data.get(), t.data, m.data.size()); // the mapped file outlives the copy
        m_weight_bytes += m.data.size();
        m_matrices.emplace(t.data, std::move(m));
    });
    if ((w.tied_output || w.output.data == w.token_embd.data) && !m_matrices.count(w.output.data))
        throw FormatError("the tied output head is not the embedding tensor");
    const ModelConfig& c = m_model->config();
    for (const uint32_t n_kv_heads : m_kv.config().n_kv_heads) {
        const std::size_t bytes = std::size_t(n_kv_heads) * m_n_ctx * c.head_dim_k * 2;
        m_caches.emplace_back(DeviceBuffer(m_dev.get(), bytes), DeviceBuffer(m_dev.get(), bytes));
    }
    m_rope_tables = rope_tables();
    const auto& table = cpu::gelu_f16_table();
    m_gelu_table = DeviceBuffer(m_dev.get(), sizeof table);
    m_dev->copy_to_device(m_gelu_table.get(), table.data(), sizeof table);
}

void CudaBackend::allocate_scratch()
{
    const ModelConfig& c = m_model->config();
    const ActivationWidths widths = ActivationWidths::of(c);
    const uint64_t H = widths.heads;
    // the attention scores of a chunk hold n · H · n_ctx floats: fewer tokens per chunk for long contexts
    const uint64_t scores_budget = uint64_t(256) << 20;
    m_batch = uint32_t(std::clamp<uint64_t>(scores_budget / (H * m_n_ctx * sizeof(float)), 1, 256));
    m_batch = std::min(m_batch, m_n_ctx);
    m_logit_rows =
        uint32_t(std::clamp<uint64_t>((uint64_t(256) << 20) / (uint64_t(c.n_vocab) * sizeof(float)), 1, m_batch));
    auto dev = [&](uint64_t floats) {
        m_scratch_bytes += floats * sizeof(float);
        return DeviceBuffer(m_dev.get(), floats * sizeof(float));
    };
    m_activations.allocate(m_batch, widths, dev);
    m_logits = dev(uint64_t(m_logit_rows) * c.n_vocab);
    m_scores = dev(uint64_t(m_batch) * H * m_n_ctx);
    // quantized matmul inputs: F16 takes the most bytes of the activation formats
    const uint64_t widest = widths.widest();
    m_act = DeviceBuffer(m_dev.get(), m_batch * activation_row_bytes(ActivationFormat::F16, int64_t(widest)));
    m_scratch_bytes += m_act.size();
    const std::size_t cs_floats = m_rope_tables.floats(m_batch, c.n_rot);
    m_ids = DeviceBuffer(m_dev.get(), m_batch * sizeof(uint32_t));
    m_ids_host = DeviceBuffer(m_dev.get(), m_batch * sizeof(uint32_t), true);
    m_cs = DeviceBuffer(m_dev.get(), cs_floats * sizeof(float));
    m_cs_host = DeviceBuffer(m_dev.get(), cs_floats * sizeof(float), true);
    m_step = DeviceBuffer(m_dev.get(), 16);
    m_step_host = DeviceBuffer(m_dev.get(), 16, true);
}

void CudaBackend::ensure_usable() const
{
    if (m_lost)
        throw Error(fmt::format("the CUDA device ({}) failed earlier ({}); reopen the model or use another backend",
                                m_device_name, m_lost_why));
}

BackendMemory CudaBackend::memory() const
{
    BackendMemory m;
    m.device = m_device_name;
    m.weight_bytes = m_weight_bytes;
    m.kv_bytes_allocated = m_kv.accounting().bytes_allocated;
    m.scratch_bytes = m_scratch_bytes;
    m.device_total = m_device_total;
    return m;
}

void CudaBackend::read_cache(uint32_t layer, uint32_t kv_head, uint32_t n, std::vector<float>& keys,
                             std::vector<float>& values) const
{
    const uint32_t D = m_model->config().head_dim_k;
    const std::size_t count = std::size_t(n) * D, offset = std::size_t(kv_head) * m_n_ctx * D;
    std::vector<uint16_t> k16(count), v16(count);
    device_call(m_device_name, [&] {
        m_dev->copy_to_host(k16.data(), m_caches[layer].first.get<uint16_t>() + offset, count * 2);
        m_dev->copy_to_host(v16.data(), m_caches[layer].second.get<uint16_t>() + offset, count * 2);
        m_dev->synchronize();
    });
    keys.resize(count);
    values.resize(count);
    for (std::size_t i = 0; i < count; ++i) {
        keys[i] = fp16_to_f32(k16[i]);
        values[i] = fp16_to_f32(v16[i]);
    }
}

// ---- the operations: queued on the device, synchronised by finish_chunk --------------------------

void CudaBackend::begin_chunk(const ChunkPlan& plan, ChunkSink& sink)
{
    m_act_held.reset();
    if (m_recording || m_replayable) { // the previous chunk stopped before finish_chunk (an error)
        m_dev->drop_recording();
        m_decode_recorded = m_recording = m_replayable = m_replaying = false;
    }
    const ModelConfig& c = m_model->config();
    m_plan = plan;
    m_sink = &sink;
    const uint32_t n = plan.n_tokens;

    // results land in the pinned download buffer: logits, residuals, sites, attention
    const uint64_t size = ChunkDownload::bytes_for(plan, c);
    if (m_download.size() < size) {
        device_call(m_device_name, [&] { m_download = DeviceBuffer(m_dev.get(), std::max<uint64_t>(size, 4), true); });
        m_decode_recorded = false; // it copies its logits into the buffer just replaced
        m_dev->drop_recording();
    }
    m_download_used = 0;
    m_results.clear(); // a replayed step downloads nothing else: its logits lead the buffer
    m_edit_values.clear();

    // the host's inputs of the chunk: its first position and the rotary angles
    *m_step_host.get<uint32_t>() = plan.pos0;
    float* cs = m_cs_host.f();
    const RopeShape r = rope_shape(0);
    m_rope_tables.fill(cs, plan.pos0, n, m_batch, c.n_rot, r.factors);

    const bool decode_step = replay_allowed() && plan.replayable_decode_step();
    m_replayable = decode_step && m_decode_recorded;
    m_recording = decode_step && !m_decode_recorded;
    if (m_recording)
        m_dev->begin_recording();
    if (!m_replayable) {
        m_dev->copy_to_device(m_step.get(), m_step_host.get(), sizeof(uint32_t));
        m_dev->copy_to_device(m_cs.get(), m_cs_host.get(), m_cs.size());
    }
}

bool CudaBackend::replay_chunk(std::span<const TokenId> tokens)
{
    if (!m_replayable)
        return false;
    // The recorded step's copies read the token, position and angles from the pinned host buffers:
    // begin_chunk wrote the last two.
    *m_ids_host.get<uint32_t>() = static_cast<uint32_t>(tokens.front());
    m_replaying = true;
    return true;
}

uint64_t CudaBackend::download(const void* src, uint64_t bytes)
{
    const uint64_t offset = m_download_used;
    m_dev->copy_to_host(m_download.get<std::byte>() + offset, src, bytes);
    m_download_used += bytes;
    return offset;
}

void CudaBackend::embed(std::span<const TokenId> tokens, float scale)
{
    m_act_held.reset();
    auto* ids = m_ids_host.get<uint32_t>();
    for (std::size_t t = 0; t < tokens.size(); ++t)
        ids[t] = static_cast<uint32_t>(tokens[t]);
    m_dev->copy_to_device(m_ids.get(), m_ids_host.get(), tokens.size() * sizeof(uint32_t));
    const DeviceMatrix& table = matrix_of(m_model->weights().token_embd);
    m_dev->launch(cuda::GetRows::Args{table.type, table.data.get<uint8_t>(), table.row_bytes, m_ids.get<uint32_t>(),
                                      uint32_t(tokens.size()), table.cols, scale, buffer(Act::X)});
}

void CudaBackend::load_residual(std::span<const float> rows)
{
    m_act_held.reset();
    // the values must outlive the queued copy
    DeviceBuffer& staging = m_edit_values.emplace_back(m_dev.get(), rows.size_bytes(), true);
    std::memcpy(staging.get(), rows.data(), rows.size_bytes());
    m_dev->copy_to_device(m_activations[Act::X].get(), staging.get(), rows.size_bytes());
}

void CudaBackend::rmsnorm(Act in, Act out, const TensorView& weight, uint32_t width, uint32_t n_rows, float eps)
{
    m_act_held.reset();
    m_dev->launch(cuda::RmsNorm::Args{buffer(in), nullptr, vector_of(weight), buffer(out), width, n_rows, eps});
}

void CudaBackend::matmul_into(const DeviceMatrix& m, const float* in, uint32_t n_rows, float* out, uint32_t out_stride,
                              uint32_t order, bool quantized_ready)
{
    const ActivationFormat format = activation_format(m.type);
    const uint8_t* x = reinterpret_cast<const uint8_t*>(in);
    uint64_t x_row_bytes = uint64_t(m.cols) * sizeof(float);
    if (format != ActivationFormat::F32) {
        x = m_act.get<uint8_t>();
        x_row_bytes = activation_row_bytes(format, m.cols);
        if (!quantized_ready)
            m_dev->launch(cuda::QuantizeAct::Args{in, m.cols, n_rows, format, m_act.get<uint8_t>()});
    }
    // the CPU's summation order for the batch (at least the rows given): eight threads per row where
    // that order keeps the CPU's eight lanes, else one
    const cuda::MatmulRows::Args args{m.type, m.data.get<uint8_t>(),   m.row_bytes, m.rows,     m.cols, x, x_row_bytes,
                                      n_rows, std::max(order, n_rows), out,         out_stride, 0};
    if (cuda::MatmulLanes::handles(m.type, args.order))
        m_dev->launch(cuda::MatmulLanes::Args{args});
    else
        m_dev->launch(args);
}

void CudaBackend::matmul_rows(const TensorView& w, Act in, Act out, uint32_t row0, uint32_t n_rows, uint32_t order)
{
    const DeviceMatrix& m = matrix_of(w);
    const ActHeld wanted{in, row0, n_rows, m.cols, activation_format(m.type)};
    const bool ready = m_act_held == wanted && wanted.format != ActivationFormat::F32;
    m_act_held = out == in ? std::nullopt : std::optional(wanted);
    matmul_into(m, buffer(in) + uint64_t(row0) * m.cols, n_rows, buffer(out) + uint64_t(row0) * m.rows, m.rows, order,
                ready);
}

void CudaBackend::add_bias(Act x, const TensorView& bias, uint32_t n_rows)
{
    m_act_held.reset();
    const auto width = uint64_t(bias.cols());
    m_dev->launch(cuda::Add::Args{buffer(x), vector_of(bias), n_rows * width, width});
}

void CudaBackend::rope(Act x, uint32_t n_heads, uint32_t head_dim, const RopeShape& r, float scale)
{
    m_act_held.reset();
    const float* cs =
        m_cs.f() + std::size_t(m_rope_tables.index_of(r.base, r.freq_scale, r.yarn())) * m_batch * (r.n_rot / 2) * 2;
    const float* temperature = r.temperature_beta != 0.0f
                                   ? m_cs.f() + 2 * std::size_t(m_rope_tables.temperature_offset(m_batch, r.n_rot))
                                   : nullptr;
    m_dev->launch(
        cuda::Rope::Args{buffer(x), cs, m_plan.n_tokens, n_heads, head_dim, r.n_rot, r.neox, scale, temperature});
}

// x ·= factor: the rotary kernel without a rotated pair (n_rot 0) multiplies every element, the CPU's
// product bit for bit.
void CudaBackend::scale_rows(Act x, uint32_t width, uint32_t n_rows, float factor)
{
    if (width % 2 != 0)
        throw UnsupportedError(fmt::format("the CUDA backend scales rows of even widths only (not {})", width));
    m_act_held.reset();
    m_dev->launch(cuda::Rope::Args{buffer(x), m_cs.f(), n_rows, 1, width, 0, false, factor});
}

void CudaBackend::store_kv(uint32_t layer, uint32_t n_kv_heads, uint32_t head_dim)
{
    m_dev->launch(cuda::KvStore::Args{buffer(Act::K), buffer(Act::V), m_caches[layer].first.get<uint16_t>(),
                                      m_caches[layer].second.get<uint16_t>(), m_plan.n_tokens, n_kv_heads, head_dim,
                                      m_plan.pos0, m_n_ctx, step_arg()});
}

void CudaBackend::attention(const AttentionShape& s, bool deliver)
{
    m_act_held.reset();
    cuda::AttnShape shape{step_arg(), s.n_tokens, s.n_heads, s.n_kv_heads, s.head_dim, s.pos0, m_n_ctx, s.window,
                          // a recorded step runs at every later position: rows as long as the cache
                          m_recording ? m_n_ctx : s.pos0 + s.n_tokens, s.batched};
    const auto& [k_cache, v_cache] = m_caches[s.layer];
    uint64_t q_delivered = 0;
    if (deliver) {
        const uint64_t q_offset =
            download(m_activations[Act::Q].get(), uint64_t(s.n_tokens) * s.n_heads * s.head_dim * sizeof(float));
        q_delivered = q_offset;
    }
    m_dev->launch(cuda::AttnScores::Args{shape, buffer(Act::Q), k_cache.get<uint16_t>(), s.scale, m_scores.f(),
                                         s.softcap, s.softcap != 0.0f ? 1.0f / s.softcap : 0.0f});
    m_dev->launch(cuda::AttnSoftmax::Args{shape, m_scores.f()});
    m_dev->launch(cuda::AttnValues::Args{shape, m_scores.f(), v_cache.get<uint16_t>(), buffer(Act::Attn)});
    if (deliver) // rows of pos0 + n keys: the layout the sink takes
        m_results.attention(
            s.layer, q_delivered,
            download(m_scores.get(), uint64_t(s.n_tokens) * s.n_heads * shape.key_stride * sizeof(float)));
}

void CudaBackend::glu(uint32_t width, uint32_t n_rows, bool gelu)
{
    m_act_held.reset();
    m_dev->launch(cuda::Glu::Args{buffer(Act::Gate), buffer(Act::Up), uint64_t(n_rows) * width, width, gelu,
                                  m_gelu_table.get<uint16_t>()});
}

void CudaBackend::add_residual(uint32_t n_rows)
{
    m_act_held.reset();
    const uint64_t n = uint64_t(n_rows) * m_model->config().n_embd;
    m_dev->launch(cuda::Add::Args{buffer(Act::X), buffer(Act::O), n, n});
}

void CudaBackend::add_residual_rmsnorm(uint32_t n_rows, const TensorView& weight, Act out, float eps)
{
    m_act_held.reset();
    m_dev->launch(cuda::RmsNorm::Args{buffer(Act::X), buffer(Act::O), vector_of(weight), buffer(out),
                                      m_model->config().n_embd, n_rows, eps});
}

void CudaBackend::deliver_residual(uint32_t layer)
{
    m_results.residual(layer,
                       download(m_activations[Act::X].get(), uint64_t(m_plan.n_tokens) * m_model->config().n_embd * 4));
}

void CudaBackend::deliver_activation(Site site, uint32_t layer, Act a, uint32_t row_width)
{
    m_results.activation(site, layer, download(buffer(a), uint64_t(m_plan.n_tokens) * row_width * sizeof(float)));
}

void CudaBackend::edit_rows(Act a, const RowEdit& e)
{
    m_act_held.reset();
    if (e.add && (e.col0 != 0 || e.cols != e.row_width))
        throw std::logic_error("an addition to part of a row");
    const std::size_t bytes = std::size_t(e.per_row ? e.n_rows : 1) * e.cols * sizeof(float);
    m_edit_values.emplace_back(m_dev.get(), bytes, true);
    m_edit_values.emplace_back(m_dev.get(), bytes);
    // both inserted before either is referred to: an insertion may move the earlier ones
    const DeviceBuffer& host = m_edit_values[m_edit_values.size() - 2];
    const DeviceBuffer& dev = m_edit_values.back();
    std::memcpy(host.get(), e.values, bytes);
    m_dev->copy_to_device(dev.get(), host.get(), bytes);
    m_dev->launch(
        cuda::EditRows::Args{buffer(a), dev.f(), e.row_width, e.row0, e.n_rows, e.col0, e.cols, e.per_row, e.add});
}

void CudaBackend::output_head(const TensorView& norm, const TensorView& output, uint32_t row0, uint32_t n_rows,
                              uint32_t order, float eps)
{
    m_act_held.reset();
    const ModelConfig& c = m_model->config();
    const DeviceMatrix& head = matrix_of(output);
    // final norm of the wanted rows into H, then the head in groups that fit the logits buffer
    m_dev->launch(cuda::RmsNorm::Args{buffer(Act::X) + uint64_t(row0) * c.n_embd, nullptr, vector_of(norm),
                                      buffer(Act::H), c.n_embd, n_rows, eps});
    for (uint32_t g = 0; g < n_rows; g += m_logit_rows) {
        const uint32_t rows = std::min(m_logit_rows, n_rows - g);
        matmul_into(head, buffer(Act::H) + uint64_t(g) * c.n_embd, rows, m_logits.f(), c.n_vocab, order, false);
        const uint64_t offset = download(m_logits.get(), uint64_t(rows) * c.n_vocab * sizeof(float));
        if (g == 0)
            m_results.logits(offset);
    }
}

void CudaBackend::finish_chunk()
{
    m_act_held.reset();
    try {
        if (m_replaying) {
            m_dev->replay(); // its copies read the token, position and angles the host just wrote
            g_decode_replays.fetch_add(1, std::memory_order_relaxed);
        } else if (m_recording) {
            m_dev->end_recording(); // runs the step it recorded
            m_decode_recorded = true;
        }
        m_dev->synchronize();
    } catch (const std::runtime_error& e) {
        m_replayable = m_replaying = m_recording = false;
        m_lost = true;
        m_lost_why = e.what();
        throw Error(fmt::format("CUDA device {}: {}", m_device_name, e.what()));
    }
    m_replayable = m_replaying = m_recording = false;
    m_results.deliver(m_download.get<const std::byte>(), m_plan, m_model->config().n_vocab, *m_sink);
    m_edit_values.clear();
    m_sink = nullptr;
}

} // namespace

CudaDeviceListing list_cuda_devices()
{
    CudaDeviceListing out;
    std::string why;
    const cuda::Module* module = cuda::load_module(why);
    if (!module) {
        out.why_unavailable = why;
        return out;
    }
    cuda::DeviceInfo infos[16];
    char error[512] = {};
    const int n = module->list(infos, 16, error, sizeof error);
    if (n < 0) {
        out.why_unavailable = error;
        return out;
    }
    for (int i = 0; i < n; ++i)
        out.devices.push_back({infos[i].index, infos[i].name, infos[i].compute_major, infos[i].compute_minor,
                               infos[i].total_bytes, infos[i].free_bytes, infos[i].multiprocessors,
                               infos[i].memory_bandwidth});
    if (out.devices.empty())
        out.why_unavailable = "the NVIDIA driver lists no CUDA device";
    return out;
}

std::unique_ptr<Backend> make_cuda_backend(std::shared_ptr<const Model> model, const CudaBackendOptions& options)
{
    std::unique_ptr<cuda::Device> device;
    if (options.emulate) {
        device = cuda::make_emulated_device();
    } else {
        device = cuda::open_device(options.device < 0 ? 0 : options.device);
    }
    return std::make_unique<CudaBackend>(std::move(model), std::move(device), options);
}

uint64_t cuda_decode_replays()
{
    return g_decode_replays.load(std::memory_order_relaxed);
}

} // namespace engine
