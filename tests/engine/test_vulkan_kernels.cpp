// SPDX-License-Identifier: GPL-3.0-or-later
// Every Vulkan shader against the CPU implementation it replaces, with the validation layer on:
// matmul and get_rows for every weight type the CPU backend reads (weights split into row ranges by a
// tiny binding limit, so the splitting is exercised on any device) in the one-row and both batch
// orders, rmsnorm (alone and fused with the residual add), RoPE in both layouts, the F16 KV store, attention (causal,
// sliding window, grouped-query heads, single-row and batch orders, weights capture), the GeGLU/SwiGLU gates and the
// residual/bias add. Both arithmetics, each against the CPU it mirrors: the exact one (64-bit floats)
// and the f32 one (test_vulkan_kernels_f32: each fused multiply-add rounded once by the device or by
// emulation, two-float sums where the CPU sums in double) must equal the CPU's results bit for bit;
// with lavapipe's own fma forced into the f32 shaders (TOKENSCOPE_VULKAN_FMA=native), within rounding.
#include "kernel_test_support.h"
#include "vulkan_test_support.h"

#ifdef TOKENSCOPE_HAVE_VULKAN
#include "backend/cpu/attention_kernels.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/rope_table.h"
#include "backend/vulkan/vk_context.h"
#include "backend/vulkan/vk_ops.h"
#include "model/model.h"
#include "model/test_model.h"
#include "quant/dequant.h"
#include "quant/vec_dot.h"
#include "util/fp16.h"
#include "util/thread_pool.h"
#endif

#include <QTest>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace engine;
using namespace testsupport;

class TestVulkanKernels : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void cleanup();
    void cleanupTestCase();
    void matmul_data();
    void matmul();
    void getRows_data();
    void getRows();
    void rmsnorm();
    void rope_data();
    void rope();
    void attention_data();
    void attention();
    void glu_data();
    void glu();
    void add();

#ifdef TOKENSCOPE_HAVE_VULKAN
private:
    vk::Buffer device(const std::vector<float>& v);
    vk::Buffer device_zeros(std::size_t floats);
    std::vector<float> host(const vk::Buffer& b, std::size_t floats);
    std::unique_ptr<vk::Context> m_ctx;
    std::unique_ptr<vk::Kernels> m_k;
    std::unique_ptr<vk::Recorder> m_rec;
    std::unique_ptr<vk::Uploader> m_up;
    bool m_bit_exact = false;
#endif
};

#ifdef TOKENSCOPE_HAVE_VULKAN

namespace {

// A binding limit far below any device's, so that every test matrix is split into row ranges.
constexpr uint64_t kTinyBinding = 8192;

const GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                           GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K,
                           GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

} // namespace

vk::Buffer TestVulkanKernels::device(const std::vector<float>& v)
{
    return vk::upload_buffer(*m_ctx, *m_up, v.data(), v.size() * 4);
}

vk::Buffer TestVulkanKernels::device_zeros(std::size_t floats)
{
    return device(std::vector<float>(floats, 0.0f));
}

std::vector<float> TestVulkanKernels::host(const vk::Buffer& b, std::size_t floats)
{
    std::vector<float> out(floats);
    vk::download(*m_ctx, b, 0, out.data(), floats * 4);
    return out;
}

#endif

void TestVulkanKernels::initTestCase()
{
    REQUIRE_VULKAN();
#ifdef TOKENSCOPE_HAVE_VULKAN
    // The exact arithmetic unless TOKENSCOPE_VULKAN_EXACT=0 (test_vulkan_kernels_f32: the f32 path).
    const char* exact_env = std::getenv("TOKENSCOPE_VULKAN_EXACT");
    const bool exact = !(exact_env && std::string(exact_env) == "0");
    m_ctx = std::make_unique<vk::Context>(vk::ContextOptions{-1, true, kTinyBinding, exact});
    QVERIFY2(m_ctx->validation_active(),
             "the validation layer (vulkan-validationlayers) must be installed for the Vulkan tests");
    QCOMPARE(m_ctx->max_binding(), kTinyBinding);
    // The CPU's portable kernels compute its AVX2 kernels' bits, so the exact shaders match either.
    // Both arithmetics round each fused multiply-add once (64-bit floats; the device's fma or its
    // emulation), so both give the CPU's bits; TOKENSCOPE_VULKAN_FMA=native forces lavapipe's own
    // fma (a multiply and an add) into the f32 shaders: within rounding then.
    const char* fma_env = std::getenv("TOKENSCOPE_VULKAN_FMA");
    m_bit_exact = m_ctx->has_float64() || !(fma_env && std::string(fma_env) == "native");
    qInfo("device: %s; CPU kernels %s; results %s", m_ctx->device_name().c_str(), simd_level_name(simd_level()).data(),
          m_bit_exact ? "must equal the CPU's bit for bit" : "compared within rounding (fma rounding twice)");
    m_k = std::make_unique<vk::Kernels>(*m_ctx);
    m_rec = std::make_unique<vk::Recorder>(*m_ctx);
    m_up = std::make_unique<vk::Uploader>(*m_ctx);
    m_k->load_gelu_table(*m_up);
#endif
}

void TestVulkanKernels::cleanup()
{
    REQUIRE_NO_VALIDATION_MESSAGES();
}

void TestVulkanKernels::cleanupTestCase()
{
#ifdef TOKENSCOPE_HAVE_VULKAN
    m_up.reset();
    m_rec.reset();
    m_k.reset();
    m_ctx.reset();
#endif
    REQUIRE_NO_VALIDATION_MESSAGES();
}

// ---- matmul -----------------------------------------------------------------------------------------

void TestVulkanKernels::matmul_data()
{
    QTest::addColumn<int>("type");
    QTest::addColumn<int>("tokens");
    QTest::addColumn<int>("order"); // the batch size whose summation order the CPU uses
#ifdef TOKENSCOPE_HAVE_VULKAN
    for (GgmlType t : kTypes) {
        for (int n : {1, 3, 11, 40}) // 40: two of the f32 path's 32-token tiles
            QTest::addRow("%s x%d", std::string(ggml_type_name(t)).c_str(), n) << int(t) << n << n;
        QTest::addRow("%s x2 in the order of 16", std::string(ggml_type_name(t)).c_str()) << int(t) << 2 << 16;
    }
#endif
}

void TestVulkanKernels::matmul()
{
#ifdef TOKENSCOPE_HAVE_VULKAN
    QFETCH(int, type);
    QFETCH(int, tokens);
    QFETCH(int, order);
    const auto t = GgmlType(type);
    const bool is_float = t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16;
    const uint32_t cols = is_float ? 200 : 512, rows = 67; // a float row with a tail chunk; an odd row count
    const auto n = uint32_t(tokens);
    const HostMatrix w = random_matrix(t, cols, rows, 11 + uint64_t(type));
    const auto x = random_floats(std::size_t(n) * cols, 5);

    const vk::DeviceMatrix dw = vk::upload_matrix(*m_ctx, *m_up, t, w.bytes.data(), cols, rows, w.row_bytes);
    QVERIFY2(dw.parts.size() > 1, "the tiny binding limit must split the matrix");
    const vk::Buffer dx = device(x);
    const vk::Buffer dy = device_zeros(std::size_t(n) * rows + 3), act = device_zeros(std::size_t(n) * cols);
    m_rec->begin();
    m_k->matmul(*m_rec, dw, dx, 0, n, dy, 3, rows, act, uint32_t(order));
    m_rec->submit();
    const auto y = host(dy, std::size_t(n) * rows + 3);

    // the CPU backend's matmul (activations quantized to the weight type's dot-product format)
    gguf::TensorInfo info;
    info.name = "w";
    info.type = ggml_type_traits(t);
    info.n_dims = 2;
    info.ne = {cols, rows, 1, 1};
    TensorView view{&info, w.bytes.data(), w.row_bytes};
    ThreadPool pool(1);
    cpu::MatMul mm;
    std::vector<float> cpu_y(std::size_t(n) * rows);
    mm.run(pool, view, x.data(), n, cpu_y.data(), order);

    double worst = 0, worst_exact = 0;
    for (uint32_t tok = 0; tok < n; ++tok)
        for (uint32_t r = 0; r < rows; ++r) {
            double exact = 0, mag = 0;
            for (uint32_t i = 0; i < cols; ++i) {
                const double p = double(w.f32[std::size_t(r) * cols + i]) * x[std::size_t(tok) * cols + i];
                exact += p;
                mag += std::fabs(p);
            }
            const float g = y[3 + std::size_t(tok) * rows + r];
            worst = std::max(worst, std::fabs(g - cpu_y[std::size_t(tok) * rows + r]) / mag);
            worst_exact = std::max(worst_exact, std::fabs(g - exact) / mag);
        }
    qInfo(
        "%s, %u tokens, %zu row ranges: worst |Δ| / Σ|w·x| = %.3g against the CPU backend, %.3g against the exact dot",
        std::string(ggml_type_name(t)).c_str(), n, dw.parts.size(), worst, worst_exact);
    // Q4_1/Q5_1: the CPU rounds its Q8_1 block sums to F16 as well
    const double tolerance = (t == GgmlType::Q4_1 || t == GgmlType::Q5_1) ? 1e-4 : 1e-5;
    QVERIFY2(worst < tolerance, qPrintable(QString("relative difference %1").arg(worst)));
    if (m_bit_exact) {
        const long at = first_difference(y.data() + 3, cpu_y.data(), cpu_y.size());
        QVERIFY2(at < 0, qPrintable(QString("output %1 differs from the CPU's: %2 vs %3")
                                        .arg(at)
                                        .arg(y[3 + std::size_t(std::max(at, 0L))], 0, 'g', 9)
                                        .arg(cpu_y[std::size_t(std::max(at, 0L))], 0, 'g', 9)));
    }
    QVERIFY2(worst_exact < 2e-2, qPrintable(QString("relative error %1").arg(worst_exact)));
#endif
}

// ---- get_rows ---------------------------------------------------------------------------------------

void TestVulkanKernels::getRows_data()
{
    QTest::addColumn<int>("type");
#ifdef TOKENSCOPE_HAVE_VULKAN
    for (GgmlType t : kTypes)
        QTest::addRow("%s", std::string(ggml_type_name(t)).c_str()) << int(t);
#endif
}

void TestVulkanKernels::getRows()
{
#ifdef TOKENSCOPE_HAVE_VULKAN
    QFETCH(int, type);
    const auto t = GgmlType(type);
    const uint32_t cols = 256, rows = 100;
    const HostMatrix w = random_matrix(t, cols, rows, 21 + uint64_t(type));
    const vk::DeviceMatrix dw = vk::upload_matrix(*m_ctx, *m_up, t, w.bytes.data(), cols, rows, w.row_bytes);
    QVERIFY(dw.parts.size() > 1);
    // ids on both sides of every range boundary, and the last row
    std::vector<uint32_t> ids;
    for (const auto& part : dw.parts) {
        ids.push_back(part.row0);
        ids.push_back(part.row0 + part.rows - 1);
    }
    ids.push_back(rows - 1);
    const auto n = uint32_t(ids.size());
    const vk::Buffer dids = vk::upload_buffer(*m_ctx, *m_up, ids.data(), ids.size() * 4);
    const vk::Buffer out = device_zeros(std::size_t(n) * cols);
    const float scale = 16.0f;
    m_rec->begin();
    m_k->get_rows(*m_rec, dw, dids, n, out, scale);
    m_rec->submit();
    const auto got = host(out, std::size_t(n) * cols);
    for (uint32_t i = 0; i < n; ++i)
        for (uint32_t e = 0; e < cols; ++e) {
            const float ref = w.f32[std::size_t(ids[i]) * cols + e] * scale;
            const float g = got[std::size_t(i) * cols + e];
            if (m_bit_exact ? std::memcmp(&g, &ref, sizeof g) != 0
                            : std::fabs(g - ref) > 1e-6f * std::fabs(ref) + 1e-30f)
                QFAIL(qPrintable(QString("row %1 element %2: %3 vs %4").arg(ids[i]).arg(e).arg(g).arg(ref)));
        }
#endif
}

// ---- rmsnorm ---------------------------------------------------------------------------------------

void TestVulkanKernels::rmsnorm()
{
#ifdef TOKENSCOPE_HAVE_VULKAN
    for (uint32_t width : {64u, 640u, 1000u}) {
        const uint32_t rows = 5;
        const auto x = random_floats(std::size_t(rows) * width, width, 3.0f);
        auto w = random_floats(width, width + 1, 0.2f);
        for (float& v : w)
            v += 1.0f;
        const vk::Buffer dx = device(x), dw = device(w), dy = device_zeros(std::size_t(rows) * width);
        m_rec->begin();
        m_k->rmsnorm(*m_rec, dx, 0, dw, dy, 0, width, rows, 1e-6f);
        m_k->rmsnorm(*m_rec, dx, 0, dw, dx, 0, width, rows, 1e-6f); // in place
        m_rec->submit();
        const auto y = host(dy, x.size()), y2 = host(dx, x.size());
        std::vector<float> ref(width);
        for (uint32_t r = 0; r < rows; ++r) {
            cpu::kernel_rmsnorm(x.data() + std::size_t(r) * width, w.data(), ref.data(), width, 1e-6f);
            for (uint32_t i = 0; i < width; ++i) {
                QVERIFY(std::fabs(y[std::size_t(r) * width + i] - ref[i]) <= 2e-6f * (std::fabs(ref[i]) + 1e-3f));
                if (m_bit_exact)
                    QCOMPARE(y[std::size_t(r) * width + i], ref[i]);
                QCOMPARE(y2[std::size_t(r) * width + i], y[std::size_t(r) * width + i]);
            }
        }
        // the fused residual add and norm: x += o, then the norm of the sum, as the two kernels give
        const auto o = random_floats(x.size(), width + 2, 3.0f);
        const vk::Buffer fx = device(x), fo = device(o), fy = device_zeros(x.size());
        m_rec->begin();
        m_k->add_rmsnorm(*m_rec, fx, fo, dw, fy, width, rows, 1e-6f);
        m_rec->submit();
        const auto sum = host(fx, x.size()), normed = host(fy, x.size());
        for (uint32_t r = 0; r < rows; ++r) {
            std::vector<float> added(width);
            for (uint32_t i = 0; i < width; ++i) {
                added[i] = x[std::size_t(r) * width + i] + o[std::size_t(r) * width + i];
                QCOMPARE(sum[std::size_t(r) * width + i], added[i]);
            }
            cpu::kernel_rmsnorm(added.data(), w.data(), ref.data(), width, 1e-6f);
            for (uint32_t i = 0; i < width; ++i) {
                QVERIFY(std::fabs(normed[std::size_t(r) * width + i] - ref[i]) <= 2e-6f * (std::fabs(ref[i]) + 1e-3f));
                if (m_bit_exact)
                    QCOMPARE(normed[std::size_t(r) * width + i], ref[i]);
            }
        }
    }
#endif
}

// ---- rope ------------------------------------------------------------------------------------------

void TestVulkanKernels::rope_data()
{
    QTest::addColumn<bool>("neox");
    QTest::addColumn<int>("n_rot");
    QTest::addColumn<bool>("factors");
    QTest::newRow("normal") << false << 64 << false;
    QTest::newRow("neox") << true << 64 << false;
    QTest::newRow("neox partial") << true << 32 << false;
    QTest::newRow("normal, freq factors") << false << 64 << true;
}

void TestVulkanKernels::rope()
{
#ifdef TOKENSCOPE_HAVE_VULKAN
    QFETCH(bool, neox);
    QFETCH(int, n_rot);
    QFETCH(bool, factors);
    const uint32_t n = 4, heads = 3, D = 64, pos = 1000;
    const float base = 10000.0f, freq_scale = 0.5f, scale = 0.125f;
    const auto x = random_floats(std::size_t(n) * heads * D, 9);
    std::vector<float> ff;
    if (factors)
        for (int i = 0; i < n_rot / 2; ++i)
            ff.push_back(1.0f + 0.25f * float(i % 5));
    std::vector<float> cs(std::size_t(n) * uint32_t(n_rot));
    rope_cos_sin(cs.data(), pos, n, uint32_t(n_rot), base, freq_scale, factors ? ff.data() : nullptr);
    const vk::Buffer dx = device(x), dcs = device(cs);
    m_rec->begin();
    m_k->rope(*m_rec, dx, 0, dcs, 0, n, heads, D, uint32_t(n_rot), neox, scale);
    m_rec->submit();
    const auto y = host(dx, x.size());
    for (uint32_t t = 0; t < n; ++t)
        for (uint32_t h = 0; h < heads; ++h) {
            std::vector<float> ref(x.begin() + std::ptrdiff_t((t * heads + h) * D),
                                   x.begin() + std::ptrdiff_t((t * heads + h + 1) * D));
            cpu::kernel_rope(ref.data(), n_rot, int32_t(pos + t), base, freq_scale, neox,
                             factors ? ff.data() : nullptr);
            for (uint32_t i = 0; i < D; ++i)
                // the same angles and fused multiply-adds; the compiler may still round one product differently
                // (inputs are N(0, 1): an absolute bound relative to them)
                QVERIFY(std::fabs(y[(t * heads + h) * D + i] - ref[i] * scale) <= 1e-6f * scale);
            if (m_bit_exact)
                for (uint32_t i = 0; i < D; ++i)
                    QCOMPARE(y[(t * heads + h) * D + i], ref[i] * scale);
        }
#endif
}

// ---- kv_store + attention ------------------------------------------------------------------------

void TestVulkanKernels::attention_data()
{
    QTest::addColumn<int>("n_heads");
    QTest::addColumn<int>("n_kv_heads");
    QTest::addColumn<int>("head_dim");
    QTest::addColumn<int>("pos0");
    QTest::addColumn<int>("n_tokens");
    QTest::addColumn<int>("window");
    QTest::addColumn<bool>("batched");  // the CPU's order for a request of 2+ tokens
    QTest::addColumn<float>("softcap"); // gemma2's attention soft-cap (0: none)
    QTest::newRow("causal prefill") << 2 << 2 << 64 << 0 << 9 << 0 << true << 0.0f;
    QTest::newRow("causal decode, GQA 4:1") << 4 << 1 << 128 << 70 << 1 << 0 << false << 0.0f;
    QTest::newRow("decode past 256 slots, head_dim 80 (a tail)") << 2 << 1 << 80 << 300 << 1 << 0 << false << 0.0f;
    QTest::newRow("GQA 4:2, batch after a prefix") << 4 << 2 << 64 << 40 << 7 << 0 << true << 0.0f;
    QTest::newRow("sliding window 16, batch") << 2 << 1 << 256 << 30 << 6 << 16 << true << 0.0f;
    QTest::newRow("sliding window 64, decode") << 4 << 2 << 64 << 150 << 1 << 64 << false << 0.0f;
    QTest::newRow("one token in a batch's order") << 2 << 2 << 64 << 20 << 1 << 0 << true << 0.0f;
    // small caps put q·k / cap across tanh's branches (below 1, up to 22, beyond): every step of the
    // C library's tanhf in the shader
    QTest::newRow("soft-capped at 0.5, batch") << 2 << 1 << 64 << 40 << 8 << 0 << true << 0.5f;
    QTest::newRow("soft-capped at 0.05, decode") << 2 << 2 << 64 << 120 << 1 << 0 << false << 0.05f;
}

void TestVulkanKernels::attention()
{
#ifdef TOKENSCOPE_HAVE_VULKAN
    QFETCH(int, n_heads);
    QFETCH(int, n_kv_heads);
    QFETCH(int, head_dim);
    QFETCH(int, pos0);
    QFETCH(int, n_tokens);
    QFETCH(int, window);
    QFETCH(bool, batched);
    QFETCH(float, softcap);
    const auto H = uint32_t(n_heads), Hkv = uint32_t(n_kv_heads), D = uint32_t(head_dim), n = uint32_t(n_tokens);
    const uint32_t n_keys = uint32_t(pos0) + n, n_ctx = n_keys + 5;
    const auto keys = random_floats(std::size_t(n_keys) * Hkv * D, 1),
               values = random_floats(std::size_t(n_keys) * Hkv * D, 2);
    const auto q = random_floats(std::size_t(n) * H * D, 3, 0.5f);
    const float scale = 1.0f / std::sqrt(float(D));

    // every position's K/V through kv_store, in two batches: the prefix, then this pass's tokens
    const uint64_t cache_bytes = uint64_t(Hkv) * n_ctx * D * 2;
    vk::Buffer kc(m_ctx.get(), cache_bytes, vk::Memory::Device), vc(m_ctx.get(), cache_bytes, vk::Memory::Device);
    const vk::Buffer dk = device(keys), dv = device(values), dq = device(q);
    const vk::Buffer out = device_zeros(std::size_t(n) * H * D), weights = device_zeros(std::size_t(n) * H * n_keys);
    m_rec->begin();
    m_rec->fill(kc.handle(), 0, kc.size(), 0);
    m_rec->fill(vc.handle(), 0, vc.size(), 0);
    m_k->kv_store(*m_rec, dk, dv, kc, vc, n_keys, Hkv, D, 0, n_ctx);
    vk::Kernels::AttentionShape s{n, H, Hkv, D, uint32_t(pos0), n_ctx, uint32_t(window), scale, batched, softcap};
    m_k->attention(*m_rec, s, dq, kc, vc, out, &weights);
    m_rec->submit();

    // the cache holds the F16 roundings, in [kv_head][n_ctx][D]
    std::vector<uint16_t> k16(cache_bytes / 2), v16(cache_bytes / 2);
    vk::download(*m_ctx, kc, 0, k16.data(), cache_bytes);
    vk::download(*m_ctx, vc, 0, v16.data(), cache_bytes);
    for (uint32_t j = 0; j < n_keys; ++j)
        for (uint32_t h = 0; h < Hkv; ++h)
            for (uint32_t i = 0; i < D; ++i) {
                QCOMPARE(k16[(std::size_t(h) * n_ctx + j) * D + i],
                         f32_to_fp16(keys[(std::size_t(j) * Hkv + h) * D + i]));
                QCOMPARE(v16[(std::size_t(h) * n_ctx + j) * D + i],
                         f32_to_fp16(values[(std::size_t(j) * Hkv + h) * D + i]));
            }

    const auto got = host(out, std::size_t(n) * H * D), got_w = host(weights, std::size_t(n) * H * n_keys);
    double worst_out = 0, worst_w = 0;
    for (uint32_t t = 0; t < n; ++t)
        for (uint32_t h = 0; h < H; ++h) {
            const uint32_t kvh = h / (H / Hkv), pos = uint32_t(pos0) + t;
            const uint32_t lo = (window && pos + 1 > uint32_t(window)) ? pos + 1 - uint32_t(window) : 0;
            std::vector<const uint16_t*> kr(pos + 1, nullptr), vr(pos + 1, nullptr);
            for (uint32_t j = lo; j <= pos; ++j) {
                kr[j] = &k16[(std::size_t(kvh) * n_ctx + j) * D];
                vr[j] = &v16[(std::size_t(kvh) * n_ctx + j) * D];
            }
            cpu::AttentionRow row;
            row.q = q.data() + (std::size_t(t) * H + h) * D;
            row.keys = kr.data();
            row.values = vr.data();
            row.n_slots = pos + 1;
            row.head_dim = D;
            row.scale = scale;
            row.batched = batched;
            row.softcap = softcap;
            std::vector<float> ref(D), ref_w(pos + 1);
            cpu::AttentionScratch scratch;
            cpu::attention_row_scalar(row, ref.data(), ref_w.data(), scratch);
            for (uint32_t i = 0; i < D; ++i)
                worst_out = std::max(worst_out, double(std::fabs(got[(std::size_t(t) * H + h) * D + i] - ref[i])));
            if (m_bit_exact) {
                QCOMPARE(first_difference(got.data() + (std::size_t(t) * H + h) * D, ref.data(), D), -1L);
                QCOMPARE(first_difference(got_w.data() + (std::size_t(t) * H + h) * n_keys, ref_w.data(), pos + 1),
                         -1L);
            }
            for (uint32_t j = 0; j < n_keys; ++j) {
                const float g = got_w[(std::size_t(t) * H + h) * n_keys + j];
                if (j < lo || j > pos)
                    QCOMPARE(g, 0.0f); // masked: exactly 0
                else
                    worst_w = std::max(worst_w, double(std::fabs(g - ref_w[j])));
            }
        }
    qInfo("max |Δ| output %.3g, weights %.3g", worst_out, worst_w);
    QVERIFY(worst_out < 1e-3);
    QVERIFY(worst_w < 1e-5);
#endif
}

// ---- glu, add --------------------------------------------------------------------------------------

void TestVulkanKernels::glu_data()
{
    QTest::addColumn<bool>("gelu");
    QTest::newRow("SwiGLU") << false;
    QTest::newRow("GeGLU") << true;
}

void TestVulkanKernels::glu()
{
#ifdef TOKENSCOPE_HAVE_VULKAN
    QFETCH(bool, gelu);
    const std::size_t n = 1003;
    auto g = random_floats(n, 4, 4.0f);
    g[0] = -12.0f;
    g[1] = 11.0f;
    const auto u = random_floats(n, 6);
    const vk::Buffer dg = device(g), du = device(u);
    m_rec->begin();
    m_k->glu(*m_rec, dg, du, uint32_t(n), uint32_t(n), gelu);
    m_rec->submit();
    const auto got = host(dg, n);
    std::vector<float> ref(n);
    if (gelu)
        cpu::kernel_geglu(g.data(), u.data(), ref.data(), int64_t(n));
    else
        cpu::kernel_swiglu(g.data(), u.data(), ref.data(), int64_t(n));
    double worst = 0;
    for (std::size_t i = 0; i < n; ++i)
        worst = std::max(worst, double(std::fabs(got[i] - ref[i]) / (std::fabs(ref[i]) + 1e-3f)));
    qInfo("worst relative difference %.3g", worst);
    // GELU: the same F16 table lookup on both sides; SiLU: ggml's expf on both sides except for the
    // row's last n % 8 elements (libm's expf on the CPU, GLSL's exp here)
    if (gelu || m_bit_exact)
        for (std::size_t i = 0; i < (gelu ? n : n & ~std::size_t(7)); ++i)
            QCOMPARE(got[i], ref[i]);
    QVERIFY(worst < 1e-5);
#endif
}

void TestVulkanKernels::add()
{
#ifdef TOKENSCOPE_HAVE_VULKAN
    const auto a = random_floats(60, 1), b = random_floats(60, 2), bias = random_floats(12, 3);
    const vk::Buffer da = device(a), db = device(b), dbias = device(bias);
    m_rec->begin();
    m_k->add(*m_rec, da, 0, db, 60, 60);
    m_k->add(*m_rec, da, 12, dbias, 48, 12);
    m_rec->submit();
    const auto got = host(da, 60);
    for (std::size_t i = 0; i < 60; ++i)
        QCOMPARE(got[i], i < 12 ? a[i] + b[i] : (a[i] + b[i]) + bias[(i - 12) % 12]);
#endif
}

QTEST_GUILESS_MAIN(TestVulkanKernels)
#include "test_vulkan_kernels.moc"
