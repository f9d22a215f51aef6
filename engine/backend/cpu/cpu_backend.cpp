// SPDX-License-Identifier: GPL-3.0-or-later
// The operations of the forward pass (backend/forward_pass.h) on the CPU: host buffers, the thread
// pool, the SIMD kernels chosen at run time and the paged F16 KV cache. Shapes as in forward_pass.h.
#include "backend/cpu/attention_kernels.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/flash_attention.h"
#include "backend/forward_pass.h"
#include "kv/kv_sizing.h"

#include "model/memory_plan.h"
#include "model/model.h"
#include "quant/activation_quant.h"
#include "quant/dequant.h"
#include "quant/quantize.h"
#include "quant/vec_dot.h"
#include "quant/vec_dot_portable.h"
#include "util/cache_line_allocator.h"
#include "util/error.h"
#include "util/fp16.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <stdexcept>
#include <sys/sysinfo.h>
#include <unordered_map>

namespace engine {

namespace {

// The cache for a context, checked against this machine's memory before anything is allocated: a
// file or a flag asking for 2^31 tokens gets a sentence, not a machine out of memory.
KvCacheConfig checked_kv_config(const ModelConfig& c, uint32_t n_ctx, KvCacheTypes types)
{
    constexpr uint32_t kMaxContext = 1u << 24;
    if (n_ctx == 0 || n_ctx > kMaxContext)
        throw Error(fmt::format("a context of {} tokens is not possible: use 1 to {}", n_ctx, kMaxContext));
    KvCacheConfig config = kv_cache_config_for(c, n_ctx, types); // shared with the memory planner
    const uint64_t need = kv_cache_peak_bytes(config, 128);
    const SystemMemory memory = system_memory();
    if (memory.available && need > memory.available)
        throw Error(fmt::format("a context of {} tokens needs {:.2f} GiB of KV cache but {:.2f} GiB of memory is "
                                "available: use a smaller context",
                                config.n_ctx, double(need) / (1u << 30), double(memory.available) / (1u << 30)));
    return config;
}

// Row pointers into the paged cache for every position a chunk starting at pos0 can see ([kv head]
// [position], as T: uint16_t for F16 rows, uint8_t for stored rows of any type); null where a sliding
// window has freed the block (those positions are masked anyway).
template <typename T>
void cache_rows(const KvStore& kv, uint32_t layer, uint32_t n_kv_heads, uint32_t n_keys, uint32_t pos0,
                std::vector<const T*>& keys, std::vector<const T*>& values)
{
    keys.assign(std::size_t(n_kv_heads) * n_keys, nullptr);
    values.assign(std::size_t(n_kv_heads) * n_keys, nullptr);
    for (uint32_t kvh = 0; kvh < n_kv_heads; ++kvh)
        for (uint32_t j = 0; j < n_keys; ++j)
            if (kv.holds(layer, j) || j >= pos0) {
                keys[std::size_t(kvh) * n_keys + j] = reinterpret_cast<const T*>(kv.key_row(layer, j, kvh));
                values[std::size_t(kvh) * n_keys + j] = reinterpret_cast<const T*>(kv.value_row(layer, j, kvh));
            }
}

// One head's key or value vector into the cache, converted as llama.cpp's KV store converts it (its
// CPU from_float of the cache type: F16 rounding to nearest even, Q8_0 as it quantizes activations,
// Q4_0 with its reference quantizer).
void store_vector(GgmlType type, const float* x, uint8_t* out, uint32_t n)
{
    switch (type) {
    case GgmlType::F16: // the activations' conversion: eight at a time where the CPU can, the same bits
        quantize_activations(ActivationFormat::F16, x, out, n);
        return;
    case GgmlType::Q8_0:
        quantize_activations(ActivationFormat::Q8_0, x, out, n);
        return;
    default:
        quantize_row(type, x, out, n);
        return;
    }
}

class CpuBackend final : public LayeredBackend {
public:
    CpuBackend(std::shared_ptr<const Model> model, const CpuBackendOptions& options);

    std::string name() const override
    {
        const KvCacheTypes kv = m_kv.types();
        return fmt::format("CPU ({} thread{}, llama.cpp order: {}{}{})", m_pool.size(), m_pool.size() == 1 ? "" : "s",
                           weight_order_name(m_repack ? WeightOrder::Repacked : WeightOrder::Plain),
                           m_flash ? ", flash attention" : "",
                           kv.quantized() ? ", KV cache " + kv_cache_types_name(kv) : std::string());
    }
    std::string_view kind() const override { return "cpu"; }
    bool batch_invariant_capable() const override { return true; }
    bool batch_invariant_always() const override { return m_batch_invariant; }
    bool multi_sequence_capable() const override { return true; }
    KvCache& kv_cache() override { return m_kv; }
    const KvCache& kv_cache() const override { return m_kv; }
    BackendMemory memory() const override;

private:
    void ensure_usable() const override {}
    uint32_t max_chunk_tokens(const ForwardRequest& request, uint32_t) const override
    {
        return static_cast<uint32_t>(request.tokens.size()); // one chunk: host memory grows with the batch
    }
    void begin_chunk(const ChunkPlan& plan, ChunkSink& sink) override;
    void embed(std::span<const TokenId> tokens, float scale) override;
    void load_residual(std::span<const float> rows) override;
    void rmsnorm(Act in, Act out, const TensorView& weight, uint32_t width, uint32_t n_rows, float eps) override;
    void matmul_rows(const TensorView& w, Act in, Act out, uint32_t row0, uint32_t n_rows, uint32_t order) override;
    void add_bias(Act x, const TensorView& bias, uint32_t n_rows) override;
    void router_logits(const TensorView& w, Act in, uint32_t row0, uint32_t n_rows, uint32_t order,
                       float* out) override;
    void moe_experts(const LayerWeights& layer, Act in, Act out, const ExpertRouting& routing, bool deterministic,
                     bool accumulate, float* last_row, uint32_t row0) override;
    void scale_rows(Act x, uint32_t width, uint32_t n_rows, float factor) override;
    void rope(Act x, uint32_t n_heads, uint32_t head_dim, const RopeShape& rope, float scale) override;
    void store_kv(uint32_t layer, uint32_t n_kv_heads, uint32_t head_dim) override;
    void attention(const AttentionShape& shape, bool deliver) override;
    // attention() for one sequence: rows [row0, row0 + shape.n_tokens) of the chunk, its cache `kv`
    void attention_rows(const AttentionShape& shape, KvStore& kv, uint32_t row0, bool deliver);
    void flash_attention_rows(const AttentionShape& shape, KvStore& kv, uint32_t row0, bool deliver);
    void glu(uint32_t width, uint32_t n_rows, bool gelu) override;
    void add_residual(uint32_t n_rows) override;
    void check_finite(uint32_t layer, uint32_t pos0) override;
    void deliver_residual(uint32_t layer) override;
    void deliver_activation(Site site, uint32_t layer, Act a, uint32_t) override
    {
        m_matmul_input.reset();
        m_sink->activation(site, layer, buffer(a).data());
    }
    void edit_rows(Act a, const RowEdit& edit) override;
    void output_head(const TensorView& norm, const TensorView& output, uint32_t row0, uint32_t n_rows, uint32_t order,
                     float eps) override;
    void output_head_rows(const TensorView& norm, const TensorView& output, std::span<const uint32_t> rows,
                          uint32_t order, float eps) override;
    void finish_chunk() override
    {
        m_sink = nullptr;
        m_matmul_input.reset();
    }
    void read_cache(uint32_t layer, uint32_t kv_head, uint32_t n, std::vector<float>& keys,
                    std::vector<float>& values) const override;

    LineAlignedFloats& buffer(Act a);
    // f(row) for every row of a chunk: split over the pool for a prompt, inline for a decode step
    // (rows are independent, so the split changes no bit).
    template <typename F> void rows_in_parallel(std::size_t n_rows, F&& f)
    {
        if (n_rows < 16) {
            for (std::size_t r = 0; r < n_rows; ++r)
                f(r);
            return;
        }
        m_pool.parallel_for(n_rows, [&](std::size_t begin, std::size_t end) {
            for (std::size_t r = begin; r < end; ++r)
                f(r);
        });
    }
    // Whether a matrix's products are summed in llama.cpp's repacked order (m_repack and a type and
    // row count it repacks).
    bool repacked_order(const TensorView& w) const;
    // A norm weight or bias as f32 (decoded once at load).
    const std::vector<float>& vector_of(const TensorView& t) const { return m_vectors.at(t.info); }

    ThreadPool m_pool;
    bool m_repack = false;       // llama.cpp's repacked order for the matrices it repacks
    bool m_flash = false;        // llama.cpp's flash-attention order (always for a quantized cache)
    uint32_t m_flash_splits = 1; // the threads among which llama.cpp splits a long decode step's cells
    bool m_batch_invariant = false;
    KvCache m_kv;
    std::unordered_map<const gguf::TensorInfo*, std::vector<float>> m_vectors;
    cpu::MatMul m_matmul;
    // The input of the last matmul while nothing has written any buffer since (every other
    // operation clears it): the next matmul of the same input reuses its quantized rows.
    std::optional<Act> m_matmul_input;
    ChunkPlan m_plan;
    std::vector<PlanSegment> m_segments; // the plan's, or the one sequence in m_kv
    std::vector<uint32_t> m_row_pos;     // position of each row of the chunk
    std::vector<KvStore*> m_row_kv;      // cache of each row of the chunk
    ChunkSink* m_sink = nullptr;
    // activations, grown to the largest chunk seen (widths in forward_pass.h's Act)
    LineAlignedFloats m_x, m_h, m_o, m_q, m_k, m_v, m_attn, m_gate, m_up;
    std::vector<float> m_weights; // a delivered layer's attention weights [n][H][n_keys]
    // an MoE layer's scratch: one expert's rows in, gate, up and down out; every (row, slot)'s output
    LineAlignedFloats m_moe_in, m_moe_gate, m_moe_up, m_moe_down, m_moe_slots;
    std::vector<uint32_t> m_moe_pairs; // (row · k + slot) grouped by expert
};

CpuBackend::CpuBackend(std::shared_ptr<const Model> model, const CpuBackendOptions& options)
    : LayeredBackend(std::move(model)), m_pool(options.threads > 0 ? options.threads : default_thread_count()),
      m_repack(resolved_weight_order(options.order) == WeightOrder::Repacked),
      m_flash(options.flash_attention || options.kv_types.quantized()),
      m_flash_splits(options.flash_splits > 0 ? options.flash_splits : uint32_t(m_pool.size())),
      m_batch_invariant(options.batch_invariant),
      m_kv(checked_kv_config(m_model->config(), options.n_ctx, options.kv_types))
{
    if (std::string why_not; options.huge_page_weights && !m_model->file().move_to_huge_pages(&why_not))
        spdlog::debug("CPU backend: weights stay in the page cache: {}", why_not);
    for_each_weight(*m_model, [&](const TensorView& t, WeightUse use) {
        if (use == WeightUse::Vector)
            m_vectors.emplace(t.info, tensor_to_f32(t));
    });
}

BackendMemory CpuBackend::memory() const
{
    BackendMemory m;
    m.device = "CPU";
    m.weight_bytes = m_model->weight_bytes();
    m.kv_bytes_allocated = m_kv.accounting().bytes_allocated;
    for (const auto* v : {&m_x, &m_h, &m_o, &m_q, &m_k, &m_v, &m_attn, &m_gate, &m_up, &m_moe_in, &m_moe_gate,
                          &m_moe_up, &m_moe_down, &m_moe_slots})
        m.scratch_bytes += v->capacity() * sizeof(float);
    m.scratch_bytes += m_moe_pairs.capacity() * sizeof(uint32_t);
    struct sysinfo info {};
    if (sysinfo(&info) == 0)
        m.device_total = uint64_t(info.totalram) * info.mem_unit;
    return m;
}

LineAlignedFloats& CpuBackend::buffer(Act a)
{
    switch (a) {
    case Act::X:
        return m_x;
    case Act::H:
        return m_h;
    case Act::O:
        return m_o;
    case Act::Q:
        return m_q;
    case Act::K:
        return m_k;
    case Act::V:
        return m_v;
    case Act::Attn:
        return m_attn;
    case Act::Gate:
        return m_gate;
    case Act::Up:
        return m_up;
    }
    throw std::logic_error("unknown activation buffer");
}

void CpuBackend::begin_chunk(const ChunkPlan& plan, ChunkSink& sink)
{
    m_matmul_input.reset();
    const ModelConfig& c = m_model->config();
    m_plan = plan;
    m_sink = &sink;
    m_segments = plan.segments;
    if (m_segments.empty())
        m_segments.push_back({0, plan.n_tokens, plan.pos0, &m_kv});
    m_row_pos.resize(plan.n_tokens);
    m_row_kv.resize(plan.n_tokens);
    for (const PlanSegment& seg : m_segments)
        for (uint32_t r = 0; r < seg.n_rows; ++r) {
            m_row_pos[seg.row0 + r] = seg.pos0 + r;
            m_row_kv[seg.row0 + r] = seg.kv;
        }
    const std::size_t n = plan.n_tokens, E = c.n_embd, D = c.head_dim_k;
    const std::size_t H = *std::max_element(c.n_head.begin(), c.n_head.end());
    const std::size_t Hkv = *std::max_element(c.n_head_kv.begin(), c.n_head_kv.end());
    const std::size_t F = std::max<std::size_t>(*std::max_element(c.n_ff.begin(), c.n_ff.end()), c.n_ff_shexp);
    m_x.resize(n * E);
    m_h.resize(n * E);
    m_o.resize(n * E);
    m_q.resize(n * H * D);
    m_k.resize(n * Hkv * D);
    m_v.resize(n * Hkv * D);
    m_attn.resize(n * H * D);
    m_gate.resize(n * F);
    m_up.resize(n * F);
}

void CpuBackend::embed(std::span<const TokenId> tokens, float scale)
{
    m_matmul_input.reset();
    const TensorView& embd = m_model->weights().token_embd;
    const int64_t E = m_model->config().n_embd;
    for (std::size_t t = 0; t < tokens.size(); ++t) {
        float* x = m_x.data() + int64_t(t) * E;
        dequantize_row(embd.type(), embd.row(tokens[t]), x, E);
        if (scale != 1.0f)
            for (int64_t i = 0; i < E; ++i)
                x[i] *= scale;
    }
}

void CpuBackend::load_residual(std::span<const float> rows)
{
    m_matmul_input.reset();
    std::copy(rows.begin(), rows.end(), m_x.begin());
}

void CpuBackend::rmsnorm(Act in, Act out, const TensorView& weight, uint32_t width, uint32_t n_rows, float eps)
{
    m_matmul_input.reset();
    const float* x = buffer(in).data();
    float* y = buffer(out).data();
    const float* w = vector_of(weight).data();
    rows_in_parallel(n_rows, [&](std::size_t r) { cpu::kernel_rmsnorm(x + r * width, w, y + r * width, width, eps); });
}

void CpuBackend::matmul_rows(const TensorView& w, Act in, Act out, uint32_t row0, uint32_t n_rows, uint32_t order)
{
    const bool repacked = repacked_order(w);
    m_matmul.run(m_pool, w, buffer(in).data() + std::size_t(row0) * std::size_t(w.cols()), n_rows,
                 buffer(out).data() + std::size_t(row0) * std::size_t(w.rows()), order, m_matmul_input == in, repacked);
    if (in == out)
        m_matmul_input.reset();
    else
        m_matmul_input = in;
}

void CpuBackend::router_logits(const TensorView& w, Act in, uint32_t row0, uint32_t n_rows, uint32_t order, float* out)
{
    m_matmul.run(m_pool, w, buffer(in).data() + std::size_t(row0) * std::size_t(w.cols()), n_rows, out, order,
                 m_matmul_input == in, false);
    m_matmul_input = in;
}

namespace {
// llama.cpp's mul_mat_id: each result one vec_dot of the weight row and the activation row (the
// one-row order), except (moe.md §4) K-quant and IQ4_XS experts that get 8+ rows, which its tiled
// matmul takes (the order of a batch of 8+), and repacked experts, always through the repacked gemv.
// Deterministic mode takes tiled-order experts through the tiled order whatever their row count.
uint32_t expert_order(GgmlType type, uint32_t rows, bool repacked, bool deterministic)
{
    if (repacked)
        return 1;
    switch (type) {
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::IQ4_XS:
        return deterministic ? kBatchInvariantOrder : rows >= portable::kTiledMinBatch ? rows : 1;
    default:
        return 1;
    }
}
} // namespace

void CpuBackend::moe_experts(const LayerWeights& L, Act in, Act out, const ExpertRouting& r, bool deterministic,
                             bool accumulate, float* last_row, uint32_t row0)
{
    m_matmul_input.reset();
    const ModelConfig& c = m_model->config();
    const std::size_t E = c.n_embd, F = c.n_ff_exp, k = r.k, n = r.n_rows;
    // (row, slot) pairs grouped by expert, rows outer and slots inner within each (llama.cpp's grouping;
    // each result is one dot product, so the grouping changes no bit)
    std::vector<uint32_t> first(c.n_expert + 1, 0);
    for (std::size_t i = 0; i < n * k; ++i)
        ++first[std::size_t(r.experts[i]) + 1];
    for (uint32_t e = 0; e < c.n_expert; ++e)
        first[e + 1] += first[e];
    m_moe_pairs.resize(n * k);
    std::vector<uint32_t> fill(first.begin(), first.end() - 1);
    for (std::size_t i = 0; i < n * k; ++i)
        m_moe_pairs[fill[std::size_t(r.experts[i])]++] = uint32_t(i);
    m_moe_slots.resize(n * k * E);
    const float* x = buffer(in).data() + std::size_t(row0) * E;
    for (uint32_t e = 0; e < c.n_expert; ++e) {
        const uint32_t m = first[e + 1] - first[e];
        if (m == 0)
            continue; // an expert no row chose is never read
        const uint32_t* pairs = m_moe_pairs.data() + first[e];
        m_moe_in.resize(m * E);
        for (uint32_t j = 0; j < m; ++j)
            std::copy_n(x + std::size_t(pairs[j] / k) * E, E, m_moe_in.data() + std::size_t(j) * E);
        const TensorView gate = expert_matrix(L.ffn_gate_exps, e), up = expert_matrix(L.ffn_up_exps, e),
                         down = expert_matrix(L.ffn_down_exps, e);
        const auto run = [&](const TensorView& w, const float* from, float* to, bool same_input) {
            const bool repacked = m_repack && llama_cpp_repacks(w.type(), w.rows());
            m_matmul.run(m_pool, w, from, m, to, expert_order(w.type(), m, repacked, deterministic), same_input,
                         repacked, true);
        };
        m_moe_gate.resize(m * F);
        m_moe_up.resize(m * F);
        m_moe_down.resize(m * E);
        run(gate, m_moe_in.data(), m_moe_gate.data(), false);
        run(up, m_moe_in.data(), m_moe_up.data(), true);
        for (uint32_t j = 0; j < m; ++j) {
            float* g = m_moe_gate.data() + std::size_t(j) * F;
            cpu::kernel_swiglu(g, m_moe_up.data() + std::size_t(j) * F, g, int64_t(F));
        }
        run(down, m_moe_gate.data(), m_moe_down.data(), false);
        for (uint32_t j = 0; j < m; ++j)
            std::copy_n(m_moe_down.data() + std::size_t(j) * E, E, m_moe_slots.data() + std::size_t(pairs[j]) * E);
    }
    // out = ((y0·w0 + y1·w1) + y2·w2) + …, each product rounded first (ggml_mul, then a chain of ggml_add)
    float* o = buffer(out).data() + std::size_t(row0) * E;
    rows_in_parallel(n, [&](std::size_t t) {
        float* dst = o + t * E;
        const float* y0 = m_moe_slots.data() + (t * k) * E;
        const float w0 = r.weights[t * k];
        for (std::size_t i = 0; i < E; ++i) {
            float sum = y0[i] * w0;
            for (std::size_t s = 1; s < k; ++s)
                sum = sum + m_moe_slots[(t * k + s) * E + i] * r.weights[t * k + s];
            dst[i] = accumulate ? dst[i] + sum : sum;
        }
    });
    if (last_row && n > 0) // the last row's products, as summed above
        for (std::size_t s = 0; s < k; ++s)
            for (std::size_t i = 0; i < E; ++i)
                last_row[s * E + i] = m_moe_slots[((n - 1) * k + s) * E + i] * r.weights[(n - 1) * k + s];
}

void CpuBackend::add_bias(Act x, const TensorView& bias, uint32_t n_rows)
{
    m_matmul_input.reset();
    const std::vector<float>& b = vector_of(bias);
    float* y = buffer(x).data();
    for (std::size_t t = 0; t < n_rows; ++t)
        for (std::size_t i = 0; i < b.size(); ++i)
            y[t * b.size() + i] += b[i];
}

void CpuBackend::scale_rows(Act x, uint32_t width, uint32_t n_rows, float factor)
{
    m_matmul_input.reset();
    float* y = buffer(x).data();
    for (std::size_t i = 0; i < std::size_t(n_rows) * width; ++i)
        y[i] *= factor;
}

void CpuBackend::rope(Act x, uint32_t n_heads, uint32_t head_dim, const RopeShape& r, float scale)
{
    m_matmul_input.reset();
    float* base = buffer(x).data();
    const RopeYarn yarn = r.yarn();
    rows_in_parallel(m_plan.n_tokens, [&](std::size_t t) {
        const auto pos = static_cast<int32_t>(m_row_pos[t]);
        const float temperature = rope_query_temperature(r.temperature_beta, r.temperature_floor, uint32_t(pos));
        // The token's angles once for all of its heads (their cos and sin were a fifth of a prefill's
        // time outside the matmuls when each head computed its own).
        thread_local std::vector<float> cos_sin;
        cos_sin.resize(r.n_rot);
        rope_cos_sin(cos_sin.data(), uint32_t(pos), 1, r.n_rot, r.base, r.freq_scale, r.factors, yarn);
        for (uint32_t h = 0; h < n_heads; ++h) {
            float* v = base + (t * n_heads + h) * head_dim;
            cpu::kernel_rope_rotate(v, static_cast<int32_t>(r.n_rot), r.neox, cos_sin.data());
            if (temperature != 1.0f)
                for (uint32_t i = 0; i < head_dim; ++i)
                    v[i] *= temperature;
            if (scale != 1.0f)
                for (uint32_t i = 0; i < head_dim; ++i)
                    v[i] *= scale;
        }
    });
}

void CpuBackend::store_kv(uint32_t layer, uint32_t n_kv_heads, uint32_t head_dim)
{
    m_matmul_input.reset();
    rows_in_parallel(m_plan.n_tokens, [&](std::size_t row) {
        const auto t = static_cast<uint32_t>(row);
        KvStore& kv = *m_row_kv[t];
        const uint32_t pos = m_row_pos[t];
        const KvCacheTypes types = kv.types();
        const uint32_t k_rot = cpu::kv_rotation_width(types.k, head_dim, true);
        const uint32_t v_rot = cpu::kv_rotation_width(types.v, head_dim, false);
        std::vector<float> rotated((k_rot || v_rot) ? head_dim : 0);
        // A rotated copy where llama.cpp rotates before storing (the activations stay as they are).
        const auto prepared = [&](const float* x, uint32_t width) {
            if (!width)
                return x;
            std::copy_n(x, head_dim, rotated.begin());
            cpu::hadamard_rotate(rotated.data(), head_dim, width);
            return static_cast<const float*>(rotated.data());
        };
        for (uint32_t h = 0; h < n_kv_heads; ++h) {
            const float* k = m_k.data() + (std::size_t(t) * n_kv_heads + h) * head_dim;
            const float* v = m_v.data() + (std::size_t(t) * n_kv_heads + h) * head_dim;
            store_vector(types.k, prepared(k, k_rot), kv.key_row(layer, pos, h), head_dim);
            store_vector(types.v, prepared(v, v_rot), kv.value_row(layer, pos, h), head_dim);
        }
    });
}

// softmax(q·kᵀ · scale + mask) · v for every (token, head) of the chunk, keys and values from the
// cache, as llama.cpp computes it without flash attention (attention_kernels.h) or with it
// (flash_attention.h).
void CpuBackend::attention(const AttentionShape& shape, bool deliver)
{
    m_matmul_input.reset();
    for (const PlanSegment& seg : m_segments) {
        AttentionShape s = shape;
        s.n_tokens = seg.n_rows;
        s.pos0 = seg.pos0;
        if (m_flash)
            flash_attention_rows(s, *seg.kv, seg.row0, deliver);
        else
            attention_rows(s, *seg.kv, seg.row0, deliver);
    }
    if (deliver) {
        m_sink->attention(shape.layer, m_q.data(), m_weights.data());
        m_weights = {};
    }
}

void CpuBackend::attention_rows(const AttentionShape& s, KvStore& kv, uint32_t row0, bool deliver)
{
    const uint32_t il = s.layer, D = s.head_dim, H = s.n_heads, Hkv = s.n_kv_heads, pos0 = s.pos0;
    const uint32_t group = H / Hkv;
    const uint32_t n_keys = pos0 + s.n_tokens;
    if (deliver)
        m_weights.assign(std::size_t(s.n_tokens) * H * n_keys, 0.0f);

    std::vector<const uint16_t*> keys, values;
    cache_rows(kv, il, Hkv, n_keys, pos0, keys, values);

    const float* q_all = m_q.data() + std::size_t(row0) * H * D;
    float* out = m_attn.data() + std::size_t(row0) * H * D;
    // One task is a group of the query heads that share a KV head (they read the same keys and values,
    // block by block, once for the group) at a few consecutive positions of a prompt (the value blocks
    // are converted once for all of them; each row keeps its own range and bits); a group is split
    // when there would be too few tasks to keep every thread busy (a decode step of the default model
    // has one KV head). Rows differ in cost (row t sees t + 1 keys): tasks are handed out in small
    // ranges, not halves.
    const uint32_t per_block = s.batched ? 4 : 1;
    const std::size_t blocks = (s.n_tokens + per_block - 1) / per_block;
    const std::size_t threads = m_pool.size();
    const std::size_t groups = blocks * Hkv;
    const uint32_t splits = uint32_t(std::clamp<std::size_t>((2 * threads + groups - 1) / groups, 1, group));
    const uint32_t per_task = (group + splits - 1) / splits;
    const std::size_t n_tasks = groups * splits;
    const auto window_start = [&](uint32_t pos) { return (s.window && pos + 1 > s.window) ? pos + 1 - s.window : 0u; };
    m_pool.parallel_for_dynamic(
        n_tasks, std::max<std::size_t>(1, n_tasks / (16 * threads)), [&](std::size_t begin, std::size_t end) {
            cpu::AttentionScratch scratch;
            std::vector<const uint16_t*> k_row, v_row;
            std::vector<float> weights;
            std::vector<cpu::AttentionRow> rows;
            std::vector<float*> outs, weight_rows;
            std::vector<std::size_t> weight_at;
            for (std::size_t task = begin; task < end; ++task) {
                const std::size_t block = task / (std::size_t(Hkv) * splits);
                const auto kvh = static_cast<uint32_t>((task / splits) % Hkv);
                const uint32_t h0 = kvh * group + static_cast<uint32_t>(task % splits) * per_task;
                const uint32_t h1 = std::min((kvh + 1) * group, h0 + per_task);
                const uint32_t t0 = static_cast<uint32_t>(block) * per_block;
                const uint32_t t1 = std::min(s.n_tokens, t0 + per_block);
                if (h0 >= h1)
                    continue;
                const uint32_t last = pos0 + t1 - 1;
                // Causal and sliding-window mask: slots outside [lo, pos] stay null for the block's
                // first position; a later row also masks what lies outside its own range.
                const uint32_t lo = window_start(pos0 + t0);
                k_row.assign(last + 1, nullptr);
                v_row.assign(last + 1, nullptr);
                for (uint32_t j = lo; j <= last; ++j) {
                    k_row[j] = keys[std::size_t(kvh) * n_keys + j];
                    v_row[j] = values[std::size_t(kvh) * n_keys + j];
                }
                rows.clear();
                outs.clear();
                weight_at.clear();
                std::size_t n_weights = 0;
                for (uint32_t t = t0; t < t1; ++t)
                    for (uint32_t h = h0; h < h1; ++h) {
                        const uint32_t pos = pos0 + t;
                        const std::size_t row_index = std::size_t(t) * H + h;
                        cpu::AttentionRow row;
                        row.q = q_all + row_index * D;
                        row.keys = k_row.data();
                        row.values = v_row.data();
                        row.n_slots = pos + 1;
                        row.first = window_start(pos);
                        row.head_dim = D;
                        row.scale = s.scale;
                        row.softcap = s.softcap;
                        row.batched = s.batched;
                        rows.push_back(row);
                        outs.push_back(out + row_index * D);
                        weight_at.push_back(n_weights);
                        n_weights += pos + 1;
                    }
                weights.resize(n_weights);
                weight_rows.clear();
                for (std::size_t at : weight_at)
                    weight_rows.push_back(weights.data() + at);
                cpu::attention_rows(rows.data(), uint32_t(rows.size()), outs.data(), weight_rows.data(), scratch);
                if (deliver) {
                    std::size_t r = 0;
                    for (uint32_t t = t0; t < t1; ++t)
                        for (uint32_t h = h0; h < h1; ++h, ++r)
                            std::copy_n(weight_rows[r], pos0 + t + 1,
                                        m_weights.begin() + std::ptrdiff_t((std::size_t(t) * H + h) * n_keys));
                }
            }
        });
}

// Flash attention (llama.cpp's -fa on, and any quantized cache), with llama.cpp's choice of kernel
// (flash_attention.h): tiles for a batch of 64 tokens or more, the cells split among its threads for
// a decode step over 512 cells or more — both over an F16 cache only — and row by row otherwise.
void CpuBackend::flash_attention_rows(const AttentionShape& s, KvStore& kv, uint32_t row0, bool deliver)
{
    const uint32_t il = s.layer, D = s.head_dim, H = s.n_heads, Hkv = s.n_kv_heads, pos0 = s.pos0;
    const uint32_t group = H / Hkv;
    const uint32_t n_keys = pos0 + s.n_tokens;
    if (deliver)
        m_weights.assign(std::size_t(s.n_tokens) * H * n_keys, 0.0f);
    std::vector<const uint8_t*> keys, values;
    cache_rows(kv, il, Hkv, n_keys, pos0, keys, values);
    const float* q_all = m_q.data() + std::size_t(row0) * H * D;
    float* out = m_attn.data() + std::size_t(row0) * H * D;
    const std::size_t threads = m_pool.size();
    const KvCacheTypes types = kv.types();
    const bool f16 = types.k == GgmlType::F16 && types.v == GgmlType::F16;
    const uint32_t k_rot = cpu::kv_rotation_width(types.k, D, true);
    const uint32_t v_rot = cpu::kv_rotation_width(types.v, D, false);
    // llama.cpp's KV length for this step: the cells up to the last one written, padded to 256.
    const uint32_t n_cells = std::max(256u, (n_keys + 255u) & ~255u);
    const bool tiled = f16 && s.batch >= cpu::kFlashTile;
    const bool split = f16 && s.batch == 1 && s.n_tokens == 1 && n_cells >= cpu::kFlashSplitMinCells;
    const auto row_of = [&](uint32_t t, uint32_t h) {
        const uint32_t pos = pos0 + t;
        const std::size_t kv_at = std::size_t(h / group) * n_keys;
        cpu::FlashRow row;
        row.q = q_all + (std::size_t(t) * H + h) * D;
        row.keys = keys.data() + kv_at;
        row.values = values.data() + kv_at;
        row.n_slots = pos + 1;
        row.first = (s.window && pos + 1 > s.window) ? pos + 1 - s.window : 0;
        row.head_dim = D;
        row.scale = s.scale;
        row.softcap = s.softcap;
        row.types = types;
        return row;
    };
    const auto weights_of = [&](uint32_t t, uint32_t h) {
        return deliver ? m_weights.data() + (std::size_t(t) * H + h) * n_keys : nullptr;
    };

    if (tiled) { // a task: one head's queries at up to 64 consecutive positions (one conversion of each cell tile)
        const std::size_t blocks = (s.n_tokens + cpu::kFlashTile - 1) / cpu::kFlashTile;
        const std::size_t n_tasks = blocks * H;
        m_pool.parallel_for_dynamic(n_tasks, 1, [&](std::size_t begin, std::size_t end) {
            cpu::FlashScratch scratch;
            std::vector<cpu::FlashRow> rows;
            std::vector<float*> outs, weights;
            for (std::size_t task = begin; task < end; ++task) {
                // the last blocks (the most cells) first
                const auto block = static_cast<uint32_t>(blocks - 1 - task / H);
                const auto h = static_cast<uint32_t>(task % H);
                rows.clear();
                outs.clear();
                weights.clear();
                for (uint32_t t = block * cpu::kFlashTile; t < std::min(s.n_tokens, (block + 1) * cpu::kFlashTile);
                     ++t) {
                    rows.push_back(row_of(t, h));
                    outs.push_back(out + (std::size_t(t) * H + h) * D);
                    weights.push_back(weights_of(t, h));
                }
                cpu::flash_attention_tile(rows.data(), uint32_t(rows.size()), outs.data(), weights.data(), scratch);
            }
        });
        return;
    }

    if (f16 && !deliver && group > 1) {
        // A task: some of the query heads of one KV head at one position, their chains interleaved key
        // by key (flash_attention_group); a group is split when there would be too few tasks for the
        // threads (the default model's decode step has one KV head).
        const std::size_t groups = std::size_t(s.n_tokens) * Hkv;
        const uint32_t splits = uint32_t(std::clamp<std::size_t>((2 * threads + groups - 1) / groups, 1, group));
        const uint32_t per_task = (group + splits - 1) / splits;
        const std::size_t n_tasks = groups * splits;
        m_pool.parallel_for_dynamic(
            n_tasks, std::max<std::size_t>(1, n_tasks / (16 * threads)), [&](std::size_t begin, std::size_t end) {
                cpu::FlashScratch scratch;
                std::vector<cpu::FlashRow> rows;
                std::vector<float*> outs;
                for (std::size_t task = begin; task < end; ++task) {
                    const auto t = static_cast<uint32_t>(task / (std::size_t(Hkv) * splits));
                    const auto kvh = static_cast<uint32_t>((task / splits) % Hkv);
                    const uint32_t h0 = kvh * group + static_cast<uint32_t>(task % splits) * per_task;
                    const uint32_t h1 = std::min((kvh + 1) * group, h0 + per_task);
                    rows.clear();
                    outs.clear();
                    for (uint32_t h = h0; h < h1; ++h) {
                        rows.push_back(row_of(t, h));
                        outs.push_back(out + (std::size_t(t) * H + h) * D);
                    }
                    if (!rows.empty())
                        cpu::flash_attention_group(rows.data(), uint32_t(rows.size()), n_cells,
                                                   split ? m_flash_splits : 0, outs.data(), scratch);
                }
            });
        return;
    }

    const std::size_t n_tasks = std::size_t(s.n_tokens) * H;
    m_pool.parallel_for_dynamic(
        n_tasks, std::max<std::size_t>(1, n_tasks / (16 * threads)), [&](std::size_t begin, std::size_t end) {
            cpu::FlashScratch scratch;
            std::vector<float> q_rotated(D);
            for (std::size_t task = begin; task < end; ++task) {
                const auto t = static_cast<uint32_t>(task / H);
                const auto h = static_cast<uint32_t>(task % H);
                cpu::FlashRow row = row_of(t, h);
                if (k_rot) { // queries rotated as the keys were (the buffer keeps the model's queries)
                    std::copy_n(row.q, D, q_rotated.begin());
                    cpu::hadamard_rotate(q_rotated.data(), D, k_rot);
                    row.q = q_rotated.data();
                }
                float* o = out + task * D;
                if (split)
                    cpu::flash_attention_split(row, n_cells, m_flash_splits, o, weights_of(t, h), scratch);
                else
                    cpu::flash_attention_row(row, o, weights_of(t, h), scratch);
                if (v_rot) // back from the values' rotation
                    cpu::hadamard_rotate(o, D, v_rot);
            }
        });
}

void CpuBackend::glu(uint32_t width, uint32_t n_rows, bool gelu)
{
    m_matmul_input.reset();
    m_pool.parallel_for(n_rows, [&](std::size_t begin, std::size_t end) { // rows are independent
        for (std::size_t t = begin; t < end; ++t) {
            float* g = m_gate.data() + t * width;
            if (gelu)
                cpu::kernel_geglu(g, m_up.data() + t * width, g, width);
            else
                cpu::kernel_swiglu(g, m_up.data() + t * width, g, width);
        }
    });
}

void CpuBackend::add_residual(uint32_t n_rows)
{
    m_matmul_input.reset();
    const std::size_t n = std::size_t(n_rows) * m_model->config().n_embd;
    for (std::size_t i = 0; i < n; ++i)
        m_x[i] += m_o[i];
}

void CpuBackend::check_finite(uint32_t layer, uint32_t pos0)
{
    m_matmul_input.reset();
    const std::size_t E = m_model->config().n_embd, n = std::size_t(m_plan.n_tokens) * E;
    for (std::size_t i = 0; i < n; ++i)
        if (!std::isfinite(m_x[i]))
            throw Error(fmt::format("layer {} produced a non-finite value ({}) at position {}: the model's weights "
                                    "or hyperparameters are broken",
                                    layer, m_x[i], pos0 + static_cast<uint32_t>(i / E)));
}

void CpuBackend::deliver_residual(uint32_t layer)
{
    m_matmul_input.reset();
    m_sink->residual(layer, m_x.data());
}

void CpuBackend::edit_rows(Act a, const RowEdit& e)
{
    m_matmul_input.reset();
    float* base = buffer(a).data();
    for (std::size_t r = 0; r < e.n_rows; ++r) {
        float* row = base + (e.row0 + r) * e.row_width + e.col0;
        const float* v = e.values + (e.per_row ? r * e.cols : 0);
        if (e.add)
            for (std::size_t i = 0; i < e.cols; ++i)
                row[i] += v[i];
        else
            std::copy_n(v, e.cols, row);
    }
}

bool CpuBackend::repacked_order(const TensorView& w) const
{
    // llama.cpp repacks every matrix its matmuls read, the output head included — also one tied to the
    // embedding table (it loads that table a second time as the head, into the repacking buffer); the
    // table's own lookups (get_rows) read the plain rows, as ours do
    return m_repack && llama_cpp_repacks(w.type(), w.rows());
}

void CpuBackend::output_head(const TensorView& norm, const TensorView& output, uint32_t row0, uint32_t n_rows,
                             uint32_t order, float eps)
{
    m_matmul_input.reset();
    const std::size_t E = m_model->config().n_embd;
    const float* w = vector_of(norm).data();
    for (std::size_t t = 0; t < n_rows; ++t)
        cpu::kernel_rmsnorm(m_x.data() + (row0 + t) * E, w, m_h.data() + t * E, int64_t(E), eps);
    m_matmul.run(m_pool, output, m_h.data(), n_rows, m_sink->logits(), order, false, repacked_order(output));
}

void CpuBackend::output_head_rows(const TensorView& norm, const TensorView& output, std::span<const uint32_t> rows,
                                  uint32_t order, float eps)
{
    m_matmul_input.reset();
    const std::size_t E = m_model->config().n_embd;
    const float* w = vector_of(norm).data();
    for (std::size_t t = 0; t < rows.size(); ++t)
        cpu::kernel_rmsnorm(m_x.data() + std::size_t(rows[t]) * E, w, m_h.data() + t * E, int64_t(E), eps);
    m_matmul.run(m_pool, output, m_h.data(), uint32_t(rows.size()), m_sink->logits(), order, false,
                 repacked_order(output));
}

void CpuBackend::read_cache(uint32_t layer, uint32_t kv_head, uint32_t n, std::vector<float>& keys,
                            std::vector<float>& values) const
{
    const uint32_t D = m_model->config().head_dim_k;
    keys.assign(std::size_t(n) * D, 0.0f);
    values.assign(std::size_t(n) * D, 0.0f);
    for (uint32_t p = 0; p < n; ++p) {
        // Positions a sliding window freed have no storage; those of a pass in progress (at or past
        // n_cached) are written but not yet committed.
        if (!m_kv.holds(layer, p) && p < m_kv.n_cached())
            continue;
        const KvCacheTypes types = m_kv.types();
        dequantize_row(types.k, m_kv.key_row(layer, p, kv_head), keys.data() + std::size_t(p) * D, D);
        dequantize_row(types.v, m_kv.value_row(layer, p, kv_head), values.data() + std::size_t(p) * D, D);
        // What the cache holds is rotated where llama.cpp rotates; the rotation is its own inverse.
        if (const uint32_t w = cpu::kv_rotation_width(types.k, D, true))
            cpu::hadamard_rotate(keys.data() + std::size_t(p) * D, D, w);
        if (const uint32_t w = cpu::kv_rotation_width(types.v, D, false))
            cpu::hadamard_rotate(values.data() + std::size_t(p) * D, D, w);
    }
}

} // namespace

std::string_view weight_order_name(WeightOrder order)
{
    return resolved_weight_order(order) == WeightOrder::Repacked ? "repacked" : "plain";
}

WeightOrder resolved_weight_order(WeightOrder order)
{
    if (order != WeightOrder::LlamaCppDefault)
        return order;
    return simd_level() != SimdLevel::Scalar ? WeightOrder::Repacked : WeightOrder::Plain;
}

std::unique_ptr<Backend> make_cpu_backend(std::shared_ptr<const Model> model, const CpuBackendOptions& options)
{
    return std::make_unique<CpuBackend>(std::move(model), options);
}

} // namespace engine
