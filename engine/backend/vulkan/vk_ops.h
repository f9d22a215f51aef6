// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// The operations of the forward pass on a Vulkan device, one shader each (shaders/<op>.comp ↔
// Kernels::<op>): each records one or more dispatches into a Recorder. Weight matrices live on the
// device in their GGUF encoding, split into row ranges that each fit one storage-buffer binding.
#ifdef TOKENSCOPE_HAVE_VULKAN

#include "backend/vulkan/vk_context.h"
#include "quant/ggml_type.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace engine::vk {

// A weight matrix on the device: rows [row0, row0 + rows) of each part in a buffer of its own.
struct DeviceMatrix {
    GgmlType type = GgmlType::F32;
    uint32_t cols = 0;
    uint32_t rows = 0;
    uint64_t row_bytes = 0;
    struct Part {
        uint32_t row0 = 0;
        uint32_t rows = 0;
        Buffer buffer;
    };
    std::vector<Part> parts;
    uint64_t bytes() const { return uint64_t(rows) * row_bytes; }
};

// Host → device copies through one reusable staging buffer.
class Uploader {
public:
    Uploader(Context& ctx, uint64_t staging_bytes = 64ull << 20);
    void upload(const Buffer& dst, uint64_t dst_offset, const void* data, uint64_t bytes);

private:
    Context& m_ctx;
    Recorder m_rec;
    Buffer m_staging;
};

// Splits `rows` rows of `row_bytes` each into parts of at most `max_binding` bytes and uploads them.
DeviceMatrix upload_matrix(Context& ctx, Uploader& up, GgmlType type, const void* data, uint32_t cols, uint32_t rows,
                           uint64_t row_bytes);
// A device buffer holding `data` (e.g. f32 norm weights).
Buffer upload_buffer(Context& ctx, Uploader& up, const void* data, uint64_t bytes);
// Device → host: `bytes` from `src` at `offset`.
void download(Context& ctx, const Buffer& src, uint64_t offset, void* out, uint64_t bytes);

// True when the shaders decode this weight type.
bool shader_reads(GgmlType type);

class Kernels {
public:
    explicit Kernels(Context& ctx) : m_ctx(ctx) {}
    Context& context() { return m_ctx; }

    // Builds the pipelines the forward pass of a model with these weight types uses (once per model).
    void prepare(const std::vector<GgmlType>& matmul_types, GgmlType embedding_type);

    // y[y_offset + t·out_stride + r] = w.row(r) · x[t] for t < n_tokens and every row, computed as the
    // CPU backend's dot product for w's type computes it for a batch of order_batch rows (its
    // summation order depends on the batch): x[x_offset + t·cols …] is first quantized into `act` in
    // the CPU's activation format for the type (quantize_act.comp) unless that format is f32, or
    // not when `act_ready` says `act` holds this input already (the previous matmul read the same
    // rows in the same format). Exact arithmetic: matmul.comp, one invocation per row. f32: on GPUs
    // matmul.comp's LANE_SPLIT build (eight invocations per row, one per SIMD lane), on CPU-type
    // devices its f32 build (one per row); for K-quants in the tiled order of 8+ rows,
    // matmul_tile_kq.comp (shared-memory tiles).
    void matmul(Recorder& rec, const DeviceMatrix& w, const Buffer& x, uint32_t x_offset, uint32_t n_tokens,
                const Buffer& y, uint32_t y_offset, uint32_t out_stride, const Buffer& act, uint32_t order_batch,
                bool act_ready = false);
    // act[t] = x[t] in the CPU's activation format for weight type `type`; returns the 32-bit words
    // per token written, 0 (nothing recorded) when that format is f32.
    uint32_t quantize_act(Recorder& rec, GgmlType type, const Buffer& x, uint32_t x_offset, uint32_t n_tokens,
                          uint32_t cols, const Buffer& act);
    // 32-bit words per token of quantize_act's output (0: the format is f32).
    static uint32_t activation_words(GgmlType type, uint32_t cols);
    // out[t] = decode(w.row(ids[t])) · scale, [n_tokens][cols].
    void get_rows(Recorder& rec, const DeviceMatrix& w, const Buffer& ids, uint32_t n_tokens, const Buffer& out,
                  float scale);
    // y rows = rmsnorm(x rows) ⊙ weight; y may be x.
    void rmsnorm(Recorder& rec, const Buffer& x, uint32_t x_offset, const Buffer& weight, const Buffer& y,
                 uint32_t y_offset, uint32_t width, uint32_t n_rows, float eps);
    // x rows += o rows, then y rows = rmsnorm(x rows) ⊙ weight: add() and rmsnorm() in one dispatch.
    void add_rmsnorm(Recorder& rec, const Buffer& x, const Buffer& o, const Buffer& weight, const Buffer& y,
                     uint32_t width, uint32_t n_rows, float eps);
    // In place over x [n_tokens][n_heads][head_dim]; cs holds (cos, sin) [n_tokens][n_rot/2] from cs_offset (vec2
    // units).
    // `temp_offset`: the vec2 index in `cs` of token 0's query temperature (mistral3), ~0u for none.
    void rope(Recorder& rec, const Buffer& x, uint32_t x_offset, const Buffer& cs, uint32_t cs_offset,
              uint32_t n_tokens, uint32_t n_heads, uint32_t head_dim, uint32_t n_rot, bool neox, float scale,
              uint32_t temp_offset = 0xFFFFFFFFu);
    // Writes k, v [n_tokens][n_kv_heads][head_dim] as F16 into the caches [n_kv_heads][n_ctx][head_dim] at pos0.
    // With `step` (a buffer whose first word the host sets to the position before each submission),
    // pos0 is read from it when the commands run: a recording replayed at every decode step.
    void kv_store(Recorder& rec, const Buffer& k, const Buffer& v, const Buffer& k_cache, const Buffer& v_cache,
                  uint32_t n_tokens, uint32_t n_kv_heads, uint32_t head_dim, uint32_t pos0, uint32_t n_ctx,
                  const Buffer* step = nullptr);
    struct AttentionShape {
        uint32_t n_tokens = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, pos0 = 0, n_ctx = 0, window = 0;
        float scale = 1.0f;
        bool batched = false; // the CPU's order for a request of 2+ tokens
        float softcap = 0.0f; // gemma2's attention soft-cap (0: none)
    };
    // out [n_tokens][n_heads][head_dim]; weights (when not null) [n_tokens][n_heads][pos0 + n_tokens].
    // `step`: as for kv_store (no weights then).
    void attention(Recorder& rec, const AttentionShape& s, const Buffer& q, const Buffer& k_cache,
                   const Buffer& v_cache, const Buffer& out, const Buffer* weights, const Buffer* step = nullptr);
    // gate[i] = act(gate[i]) · up[i] for i < n (rows of `width` elements).
    void glu(Recorder& rec, const Buffer& gate, const Buffer& up, uint32_t n, uint32_t width, bool gelu);
    // The CPU backend's F16 GELU table, which GeGLU looks its values up in (bit-equal results).
    void load_gelu_table(Uploader& up);
    // a[a_offset + i] += b[i % period] for i < n.
    void add(Recorder& rec, const Buffer& a, uint32_t a_offset, const Buffer& b, uint32_t n, uint32_t period);

    static constexpr uint32_t kAttentionMaxHeadDim = 512;

private:
    void matmul_kq_tiled(Recorder& rec, const DeviceMatrix& w, const Buffer& act, uint32_t n_tokens, const Buffer& y,
                         uint32_t y_offset, uint32_t out_stride);
    Pipeline& matmul_pipeline(GgmlType type, uint32_t tokens_per_invocation);
    Pipeline& get_rows_pipeline(GgmlType type);
    Pipeline& simple(const char* name, uint32_t n_bindings, uint32_t push_bytes);
    Pipeline& pipeline(const std::string& name, uint32_t n_bindings, uint32_t push_bytes, std::vector<uint32_t> spec);
    Context& m_ctx;
    Buffer m_dummy;
    Buffer m_gelu_table;
};

} // namespace engine::vk

#endif // TOKENSCOPE_HAVE_VULKAN
