// SPDX-License-Identifier: GPL-3.0-or-later
#ifdef TOKENSCOPE_HAVE_VULKAN

#include "backend/vulkan/vk_ops.h"

#include "backend/cpu/cpu_kernels.h"

#include "quant/activation_quant.h"
#include "util/error.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <spdlog/fmt/fmt.h>
#include <stdexcept>

namespace engine::vk {

namespace {

constexpr uint32_t kThreads = 64;     // matmul.comp's rows per workgroup, and every other shader's lanes
constexpr uint32_t kMatmulTokens = 4; // matmul.comp's NT (tokens per invocation) for batches

std::string lower(std::string_view s)
{
    std::string out(s);
    for (char& c : out)
        c = char(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

// Push-constant blocks, laid out as the shaders declare them.
struct MatmulPush {
    uint32_t cols, rows, n_tokens, row_bytes, out_row0, out_stride, a_offset, a_row_words, y_offset, groups_x, order;
};
struct MatmulTileKqPush {
    uint32_t cols, rows, n_tokens, row_bytes, out_row0, out_stride, a_row_words, y_offset, groups_x;
};
struct GetRowsPush {
    uint32_t cols, row_bytes, row0, rows, n_tokens;
    float scale;
};
struct RmsnormPush {
    uint32_t width, n_rows, x_offset, y_offset;
    float eps;
    uint32_t groups_x;
};
struct RopePush {
    uint32_t n_tokens, n_heads, head_dim, n_rot, neox, x_offset;
    float scale;
    uint32_t cs_offset, groups_x, temp_offset;
};
struct KvStorePush {
    uint32_t n_tokens, n_kv_heads, head_dim, pos0, n_ctx, groups_x;
};
struct AttentionPush {
    uint32_t n_tokens, n_heads, n_kv_heads, head_dim, pos0, n_ctx, window;
    float scale;
    uint32_t capture, n_keys, batched;
    float softcap, inv_softcap;
};
struct GluPush {
    uint32_t n, gelu, groups_x, width;
};
struct QuantizeActPush {
    uint32_t cols, n_blocks, format, x_offset, groups_x;
};
struct AddPush {
    uint32_t n, period, a_offset, groups_x;
};

uint32_t checked_u32(uint64_t v, const char* what)
{
    if (v > UINT32_MAX)
        throw Error(fmt::format("{} ({}) exceeds what the Vulkan shaders address", what, v));
    return uint32_t(v);
}

} // namespace

bool shader_reads(GgmlType type)
{
    switch (type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0:
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
        return true;
    default:
        return false;
    }
}

// ---- transfers --------------------------------------------------------------------------------

Uploader::Uploader(Context& ctx, uint64_t staging_bytes)
    : m_ctx(ctx), m_rec(ctx), m_staging(&ctx, std::min(staging_bytes, ctx.max_binding()), Memory::Upload)
{
}

void Uploader::upload(const Buffer& dst, uint64_t dst_offset, const void* data, uint64_t bytes)
{
    const auto* src = static_cast<const std::byte*>(data);
    for (uint64_t done = 0; done < bytes;) {
        const uint64_t n = std::min(bytes - done, m_staging.size());
        std::memcpy(m_staging.mapped(), src + done, n);
        m_rec.begin();
        m_rec.copy(m_staging.handle(), 0, dst.handle(), dst_offset + done, (n + 3) & ~uint64_t(3));
        m_rec.submit();
        done += n;
    }
}

DeviceMatrix upload_matrix(Context& ctx, Uploader& up, GgmlType type, const void* data, uint32_t cols, uint32_t rows,
                           uint64_t row_bytes)
{
    if (!shader_reads(type))
        throw UnsupportedError(fmt::format("the Vulkan backend cannot read {} weights", ggml_type_name(type)));
    DeviceMatrix m;
    m.type = type;
    m.cols = cols;
    m.rows = rows;
    m.row_bytes = row_bytes;
    // Whole rows per part; a part's buffer is padded to whole words, so leave room for that.
    const uint64_t max_rows = (ctx.max_binding() - 4) / row_bytes;
    if (max_rows == 0)
        throw UnsupportedError(
            fmt::format("one row of a weight matrix ({} bytes) is larger than a storage-buffer binding may be "
                        "({} bytes)",
                        row_bytes, ctx.max_binding()));
    const auto* bytes = static_cast<const std::byte*>(data);
    for (uint32_t r0 = 0; r0 < rows;) {
        const auto n = uint32_t(std::min<uint64_t>(max_rows, rows - r0));
        DeviceMatrix::Part part;
        part.row0 = r0;
        part.rows = n;
        part.buffer = Buffer(&ctx, uint64_t(n) * row_bytes, Memory::Device);
        up.upload(part.buffer, 0, bytes + uint64_t(r0) * row_bytes, uint64_t(n) * row_bytes);
        m.parts.push_back(std::move(part));
        r0 += n;
    }
    return m;
}

Buffer upload_buffer(Context& ctx, Uploader& up, const void* data, uint64_t bytes)
{
    Buffer b(&ctx, bytes, Memory::Device);
    up.upload(b, 0, data, bytes);
    return b;
}

void download(Context& ctx, const Buffer& src, uint64_t offset, void* out, uint64_t bytes)
{
    if (bytes == 0)
        return;
    Buffer staging(&ctx, bytes, Memory::Download);
    Recorder rec(ctx);
    rec.begin();
    rec.copy(src.handle(), offset, staging.handle(), 0, bytes);
    rec.submit();
    std::memcpy(out, staging.mapped(), bytes);
}

// ---- pipelines --------------------------------------------------------------------------------

Pipeline& Kernels::matmul_pipeline(GgmlType type, uint32_t tokens_per_invocation)
{
    return pipeline("matmul_" + lower(ggml_type_name(type)), 3, sizeof(MatmulPush), {kThreads, tokens_per_invocation});
}

// The "_f64" variant of a shader (fused multiply-adds rounded once, double sums where the CPU's are:
// bit-equal to the CPU backend) on devices with 64-bit floats, else the plain one.
Pipeline& Kernels::pipeline(const std::string& name, uint32_t n_bindings, uint32_t push_bytes,
                            std::vector<uint32_t> spec)
{
    return m_ctx.pipeline(m_ctx.has_float64() ? name + "_f64" : name, n_bindings, push_bytes, std::move(spec));
}

Pipeline& Kernels::get_rows_pipeline(GgmlType type)
{
    return pipeline("get_rows_" + lower(ggml_type_name(type)), 3, sizeof(GetRowsPush), {kThreads});
}

Pipeline& Kernels::simple(const char* name, uint32_t n_bindings, uint32_t push_bytes)
{
    return pipeline(name, n_bindings, push_bytes, {kThreads});
}

void Kernels::prepare(const std::vector<GgmlType>& matmul_types, GgmlType embedding_type)
{
    if (m_ctx.has_float64() || !m_ctx.matmul_lanes()) {
        for (GgmlType t : matmul_types) {
            matmul_pipeline(t, 1);
            matmul_pipeline(t, kMatmulTokens);
        }
    } // the others: built at first use
    pipeline("quantize_act", 2, sizeof(QuantizeActPush), {});
    get_rows_pipeline(embedding_type);
    pipeline("rmsnorm", 3, sizeof(RmsnormPush), {kThreads});
    pipeline("add_rmsnorm", 4, sizeof(RmsnormPush), {kThreads});
    simple("rope", 2, sizeof(RopePush));
    simple("kv_store", 5, sizeof(KvStorePush));
    pipeline("attention", 6, sizeof(AttentionPush), {});
    simple("glu", 3, sizeof(GluPush));
    simple("add", 2, sizeof(AddPush));
}

// ---- operations ---------------------------------------------------------------------------------

uint32_t Kernels::activation_words(GgmlType type, uint32_t cols)
{
    switch (activation_format(type)) {
    case ActivationFormat::F32:
        return 0;
    case ActivationFormat::F16:
    case ActivationFormat::BF16:
        return cols;
    case ActivationFormat::Q8_0:
    case ActivationFormat::Q8_1:
        return cols / 32 * 10;
    case ActivationFormat::Q8_K:
        return cols / 256 * 81;
    }
    return 0;
}

uint32_t Kernels::quantize_act(Recorder& rec, GgmlType type, const Buffer& x, uint32_t x_offset, uint32_t n_tokens,
                               uint32_t cols, const Buffer& act)
{
    uint32_t format = 0, block = 32;
    switch (activation_format(type)) {
    case ActivationFormat::F32:
        return 0;
    case ActivationFormat::F16:
        format = 1;
        break;
    case ActivationFormat::BF16:
        format = 5;
        break;
    case ActivationFormat::Q8_0:
        format = 2;
        break;
    case ActivationFormat::Q8_1:
        format = 4;
        break;
    case ActivationFormat::Q8_K:
        format = 3;
        block = 256;
        break;
    }
    const uint64_t elements = uint64_t(n_tokens) * cols;
    const bool per_element = format == 1 || format == 5; // F16, BF16: any width
    if (!per_element && cols % block != 0)
        throw Error(fmt::format("internal error: {} activations of width {} do not fill whole blocks",
                                ggml_type_name(type), cols));
    const uint64_t blocks = (elements + block - 1) / block;
    uint32_t gy = 1;
    const uint32_t gx = rec.split_groups(blocks, &gy);
    const QuantizeActPush push{per_element ? checked_u32(elements, "an activation count") : cols,
                               checked_u32(blocks, "a block count"), format, x_offset, gx};
    rec.dispatch(pipeline("quantize_act", 2, sizeof(push), {}), {whole(x), whole(act)}, &push, sizeof(push), gx, gy);
    return activation_words(type, cols);
}

void Kernels::matmul_kq_tiled(Recorder& rec, const DeviceMatrix& w, const Buffer& act, uint32_t n_tokens,
                              const Buffer& y, uint32_t y_offset, uint32_t out_stride)
{
    Pipeline& p = m_ctx.pipeline("matmul_tile_kq_" + lower(ggml_type_name(w.type)), 3, sizeof(MatmulTileKqPush), {});
    const uint32_t token_groups = (n_tokens + 31) / 32;
    if (token_groups > m_ctx.limits().max_group_count[2])
        throw Error("internal error: a matmul's tokens exceed the device's workgroup count");
    const uint32_t a_row_words = w.cols / 256 * 81; // quantize_act.comp's Q8_K blocks
    for (const auto& part : w.parts) {
        uint32_t gy = 1;
        const uint32_t gx = rec.split_groups((part.rows + 63) / 64, &gy);
        const MatmulTileKqPush push{w.cols,    part.rows,  n_tokens,    checked_u32(w.row_bytes, "a row's size"),
                                    part.row0, out_stride, a_row_words, y_offset,
                                    gx};
        rec.dispatch(p, {whole(part.buffer), whole(act), whole(y)}, &push, sizeof(push), gx, gy, token_groups);
    }
}

void Kernels::matmul(Recorder& rec, const DeviceMatrix& w, const Buffer& x, uint32_t x_offset, uint32_t n_tokens,
                     const Buffer& y, uint32_t y_offset, uint32_t out_stride, const Buffer& act, uint32_t order_batch,
                     bool act_ready)
{
    const uint32_t act_words =
        act_ready ? activation_words(w.type, w.cols) : quantize_act(rec, w.type, x, x_offset, n_tokens, w.cols, act);
    const bool quantized = act_words != 0;
    const Buffer& input = quantized ? act : x;
    // The CPU's summation order for this batch size (vec_dot_for_batch): k-quants tiled from 8 rows,
    // float weights batched from 2.
    const uint32_t order = std::max(order_batch, n_tokens);
    const bool k_quant = activation_format(w.type) == ActivationFormat::Q8_K;
    const bool exact = m_ctx.has_float64();
    if (!exact && k_quant && order >= 8) {
        matmul_kq_tiled(rec, w, act, n_tokens, y, y_offset, out_stride);
        return;
    }
    const bool float_weights = w.type == GgmlType::F32 || w.type == GgmlType::F16 || w.type == GgmlType::BF16;
    const uint32_t batch_order = (k_quant && order >= 8) || (float_weights && order >= 2) ? 1u : 0u;
    const uint32_t per_invocation = n_tokens > 1 ? kMatmulTokens : 1;
    const uint32_t token_groups = (n_tokens + per_invocation - 1) / per_invocation;
    if (token_groups > m_ctx.limits().max_group_count[2])
        throw Error("internal error: a matmul's tokens exceed the device's workgroup count");
    // one invocation per row (the exact arithmetic; f32 on CPU-type devices), or eight (f32 on GPUs:
    // one per SIMD lane of the CPU's sum)
    const bool lanes = !exact && m_ctx.matmul_lanes();
    const uint32_t rows_per_group = lanes ? kThreads / 8 : kThreads;
    Pipeline& p = !lanes ? matmul_pipeline(w.type, per_invocation)
                         : m_ctx.pipeline((m_ctx.has_subgroup_shuffle() ? "matmul_lanes_sg_" : "matmul_lanes_") +
                                              lower(ggml_type_name(w.type)),
                                          3, sizeof(MatmulPush), {kThreads, per_invocation});
    for (const auto& part : w.parts) {
        uint32_t gy = 1;
        const uint32_t gx = rec.split_groups((part.rows + rows_per_group - 1) / rows_per_group, &gy);
        const MatmulPush push{w.cols,
                              part.rows,
                              n_tokens,
                              checked_u32(w.row_bytes, "a row's size"),
                              part.row0,
                              out_stride,
                              quantized ? 0u : x_offset,
                              quantized ? act_words : w.cols,
                              y_offset,
                              gx,
                              batch_order};
        rec.dispatch(p, {whole(part.buffer), whole(input), whole(y)}, &push, sizeof(push), gx, gy, token_groups);
    }
}

void Kernels::get_rows(Recorder& rec, const DeviceMatrix& w, const Buffer& ids, uint32_t n_tokens, const Buffer& out,
                       float scale)
{
    Pipeline& p = get_rows_pipeline(w.type);
    for (const auto& part : w.parts) {
        const GetRowsPush push{w.cols, checked_u32(w.row_bytes, "a row's size"), part.row0, part.rows, n_tokens, scale};
        rec.dispatch(p, {whole(part.buffer), whole(ids), whole(out)}, &push, sizeof(push), n_tokens);
    }
}

void Kernels::rmsnorm(Recorder& rec, const Buffer& x, uint32_t x_offset, const Buffer& weight, const Buffer& y,
                      uint32_t y_offset, uint32_t width, uint32_t n_rows, float eps)
{
    uint32_t gy = 1;
    const uint32_t gx = rec.split_groups(n_rows, &gy);
    const RmsnormPush push{width, n_rows, x_offset, y_offset, eps, gx};
    rec.dispatch(pipeline("rmsnorm", 3, sizeof(push), {kThreads}), {whole(x), whole(weight), whole(y)}, &push,
                 sizeof(push), gx, gy);
}

void Kernels::add_rmsnorm(Recorder& rec, const Buffer& x, const Buffer& o, const Buffer& weight, const Buffer& y,
                          uint32_t width, uint32_t n_rows, float eps)
{
    uint32_t gy = 1;
    const uint32_t gx = rec.split_groups(n_rows, &gy);
    const RmsnormPush push{width, n_rows, 0, 0, eps, gx};
    rec.dispatch(pipeline("add_rmsnorm", 4, sizeof(push), {kThreads}), {whole(x), whole(weight), whole(y), whole(o)},
                 &push, sizeof(push), gx, gy);
}

void Kernels::rope(Recorder& rec, const Buffer& x, uint32_t x_offset, const Buffer& cs, uint32_t cs_offset,
                   uint32_t n_tokens, uint32_t n_heads, uint32_t head_dim, uint32_t n_rot, bool neox, float scale,
                   uint32_t temp_offset)
{
    const uint64_t items = uint64_t(n_tokens) * n_heads * (head_dim / 2);
    uint32_t gy = 1;
    const uint32_t gx = rec.split_groups((items + kThreads - 1) / kThreads, &gy);
    const RopePush push{n_tokens, n_heads, head_dim,  n_rot, neox ? 1u : 0u,
                        x_offset, scale,   cs_offset, gx,    temp_offset};
    rec.dispatch(simple("rope", 2, sizeof(push)), {whole(x), whole(cs)}, &push, sizeof(push), gx, gy);
}

void Kernels::kv_store(Recorder& rec, const Buffer& k, const Buffer& v, const Buffer& k_cache, const Buffer& v_cache,
                       uint32_t n_tokens, uint32_t n_kv_heads, uint32_t head_dim, uint32_t pos0, uint32_t n_ctx,
                       const Buffer* step)
{
    if (!m_dummy)
        m_dummy = Buffer(&m_ctx, 16, Memory::Device);
    const uint64_t items = uint64_t(n_tokens) * n_kv_heads * (head_dim / 2);
    uint32_t gy = 1;
    const uint32_t gx = rec.split_groups((items + kThreads - 1) / kThreads, &gy);
    const KvStorePush push{n_tokens, n_kv_heads, head_dim, step ? 0xFFFFFFFFu : pos0, n_ctx, gx};
    rec.dispatch(simple("kv_store", 5, sizeof(push)),
                 {whole(k), whole(v), whole(k_cache), whole(v_cache), whole(step ? *step : m_dummy)}, &push,
                 sizeof(push), gx, gy);
}

void Kernels::attention(Recorder& rec, const AttentionShape& s, const Buffer& q, const Buffer& k_cache,
                        const Buffer& v_cache, const Buffer& out, const Buffer* weights, const Buffer* step)
{
    if (step && weights)
        throw std::logic_error("attention weights are captured from recordings that are not replayed");
    if (s.head_dim > kAttentionMaxHeadDim || s.head_dim % 2 != 0)
        throw UnsupportedError(
            fmt::format("the Vulkan attention shader handles even head dimensions up to {} (the model has {})",
                        kAttentionMaxHeadDim, s.head_dim));
    if (s.n_tokens > m_ctx.limits().max_group_count[0] || s.n_heads > m_ctx.limits().max_group_count[1])
        throw Error("internal error: an attention dispatch exceeds the device's workgroup counts");
    if (!m_dummy)
        m_dummy = Buffer(&m_ctx, 16, Memory::Device);
    const AttentionPush push{s.n_tokens,
                             s.n_heads,
                             s.n_kv_heads,
                             s.head_dim,
                             step ? 0xFFFFFFFFu : s.pos0,
                             s.n_ctx,
                             s.window,
                             s.scale,
                             weights ? 1u : 0u,
                             s.pos0 + s.n_tokens,
                             s.batched ? 1u : 0u,
                             s.softcap,
                             s.softcap != 0.0f ? 1.0f / s.softcap : 0.0f};
    rec.dispatch(pipeline("attention", 6, sizeof(push), {}),
                 {whole(q), whole(k_cache), whole(v_cache), whole(out), whole(weights ? *weights : m_dummy),
                  whole(step ? *step : m_dummy)},
                 &push, sizeof(push), s.n_tokens, s.n_heads);
}

void Kernels::glu(Recorder& rec, const Buffer& gate, const Buffer& up, uint32_t n, uint32_t width, bool gelu)
{
    uint32_t gy = 1;
    const uint32_t gx = rec.split_groups((n + kThreads - 1) / kThreads, &gy);
    const GluPush push{n, gelu ? 1u : 0u, gx, width};
    if (gelu && !m_gelu_table)
        throw Error("internal error: GeGLU before the GELU table was loaded");
    if (!m_dummy)
        m_dummy = Buffer(&m_ctx, 16, Memory::Device);
    rec.dispatch(simple("glu", 3, sizeof(push)), {whole(gate), whole(up), whole(gelu ? m_gelu_table : m_dummy)}, &push,
                 sizeof(push), gx, gy);
}

void Kernels::load_gelu_table(Uploader& up)
{
    const auto& table = cpu::gelu_f16_table();
    m_gelu_table = upload_buffer(m_ctx, up, table.data(), table.size() * sizeof(uint16_t));
}

void Kernels::add(Recorder& rec, const Buffer& a, uint32_t a_offset, const Buffer& b, uint32_t n, uint32_t period)
{
    uint32_t gy = 1;
    const uint32_t gx = rec.split_groups((n + kThreads - 1) / kThreads, &gy);
    const AddPush push{n, period, a_offset, gx};
    rec.dispatch(simple("add", 2, sizeof(push)), {whole(a), whole(b)}, &push, sizeof(push), gx, gy);
}

} // namespace engine::vk

#endif // TOKENSCOPE_HAVE_VULKAN
