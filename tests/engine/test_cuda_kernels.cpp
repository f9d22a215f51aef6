// SPDX-License-Identifier: GPL-3.0-or-later
// The CUDA kernels without a GPU: the per-block arithmetic (kernels/block_math.h) against the CPU
// backend's functions, bit for bit; and every kernel of kernels/kernels.h run over its whole grid by
// the emulated device (the same warp bodies the device runs, lanes as 32-step loops) against the CPU
// backend's operations, on small odd shapes: tails of rows and warps, GQA, sliding windows. The
// kernels follow the CPU's summation orders: most results must be its bits.
// Where an NVIDIA GPU is present, every kernel runs on it too and must give the emulator's bits.
#include "kernel_test_support.h"

#include "backend/cpu/attention_kernels.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_module.h"
#include "backend/cuda/emulated_device.h"
#include "backend/rope_table.h"
#include "quant/activation_quant.h"
#include "util/fp16.h"
#include "util/thread_pool.h"

#include <QTest>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace engine;
using namespace testsupport;

namespace {

const GgmlType kQuantTypes[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,   GgmlType::Q5_1,
                                GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K,   GgmlType::Q4_K,
                                GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS};
const GgmlType kFloatTypes[] = {GgmlType::F32, GgmlType::F16, GgmlType::BF16};

std::string type_name(GgmlType t)
{
    return std::string(ggml_type_name(t));
}

// Device memory holding a copy of host data, read back with `get`.
class Mem {
public:
    Mem(cuda::Device& d, std::size_t bytes) : m_dev(&d), m_bytes(bytes), m_ptr(d.alloc(bytes)) { d.zero(m_ptr, bytes); }
    template <class T> Mem(cuda::Device& d, const std::vector<T>& v) : Mem(d, v.size() * sizeof(T))
    {
        d.copy_to_device(m_ptr, v.data(), m_bytes);
        d.synchronize();
    }
    Mem(const Mem&) = delete;
    ~Mem() { m_dev->release(m_ptr); }
    template <class T = float> T* p() const { return static_cast<T*>(m_ptr); }
    template <class T = float> std::vector<T> get() const
    {
        std::vector<T> out(m_bytes / sizeof(T));
        m_dev->copy_to_host(out.data(), m_ptr, m_bytes);
        m_dev->synchronize();
        return out;
    }

private:
    cuda::Device* m_dev;
    std::size_t m_bytes;
    void* m_ptr;
};

// QVERIFY inside a lambda that returns a device's results.
#define CHECK_IN_RUN(cond)                                                                                             \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            QTest::qFail(#cond, __FILE__, __LINE__);                                                                   \
            return {};                                                                                                 \
        }                                                                                                              \
    } while (false)

bool same_bits(const std::vector<float>& a, const std::vector<float>& b)
{
    return a.size() == b.size() && first_difference(a.data(), b.data(), a.size()) < 0;
}

} // namespace

class TestCudaKernels : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    // per-block arithmetic
    void unpackGroup_data();
    void unpackGroup();
    void lanes();
    // whole grids
    void quantizeAct_data();
    void quantizeAct();
    void getRows_data();
    void getRows();
    void matmul_data();
    void matmul();
    void rmsnorm();
    void rope_data();
    void rope();
    void attention_data();
    void attention();
    void glu();
    void addAndEdit();
    void recording();

private:
    // The emulated device, and a GPU's when there is one: each grid test runs on both, and the GPU's
    // results must equal the emulator's bit for bit.
    std::vector<std::unique_ptr<cuda::Device>> m_devices;
    template <class F> void on_every_device(F&& run);
};

void TestCudaKernels::initTestCase()
{
    m_devices.push_back(cuda::make_emulated_device());
    const CudaDeviceListing listing = list_cuda_devices();
    if (listing.devices.empty()) {
        qInfo("no CUDA device (%s): the kernels run on the emulated device only", listing.why_unavailable.c_str());
    } else {
        m_devices.push_back(cuda::open_device(0));
        qInfo("CUDA device 0: %s — each kernel runs there too and must give the emulator's bits",
              m_devices.back()->info().name);
    }
}

template <class F> void TestCudaKernels::on_every_device(F&& run)
{
    std::vector<float> first;
    for (auto& d : m_devices) {
        const std::vector<float> got = run(*d);
        if (QTest::currentTestFailed())
            return;
        if (&d == &m_devices.front())
            first = got;
        else
            QVERIFY2(same_bits(first, got), qPrintable(QString("%1 differs from the emulator").arg(d->info().name)));
    }
}

// ---- per-block arithmetic ----------------------------------------------------------------------------

void TestCudaKernels::unpackGroup_data()
{
    QTest::addColumn<int>("type");
    for (GgmlType t : kQuantTypes)
        QTest::addRow("%s", type_name(t).c_str()) << int(t);
}

// Every element d·q + m of every group equals the CPU's dequantization bit for bit (−0 included).
void TestCudaKernels::unpackGroup()
{
    QFETCH(int, type);
    const auto t = GgmlType(type);
    const HostMatrix w = random_matrix(t, 512, 9, 100 + uint64_t(type));
    for (uint32_t r = 0; r < w.rows; ++r) {
        const auto* row = reinterpret_cast<const uint8_t*>(w.bytes.data() + r * w.row_bytes);
        for (uint32_t j = 0; j < w.cols / 32; ++j) {
            const cuda::WeightGroup g = cuda::unpack_group(t, row, j);
            for (uint32_t i = 0; i < 32; ++i) {
                const float ref = w.f32[std::size_t(r) * w.cols + 32 * j + i], got = cuda::group_value(g, i);
                if (std::memcmp(&ref, &got, 4) != 0)
                    QFAIL(qPrintable(QString("row %1 element %2: %3, the CPU %4")
                                         .arg(r)
                                         .arg(32 * j + i)
                                         .arg(got, 0, 'g', 9)
                                         .arg(ref, 0, 'g', 9)));
            }
        }
    }
}

// The host's lanes: the butterfly leaves every lane with the same sum, in the xor order.
void TestCudaKernels::lanes()
{
    const auto v = cuda::HostLanes::each([](uint32_t l) { return 1.0f + float(l) * 1e-7f; });
    float expect_pairs[32];
    for (uint32_t l = 0; l < 32; ++l)
        expect_pairs[l] = v[l];
    for (uint32_t off = 16; off > 0; off /= 2) {
        float next[32];
        for (uint32_t l = 0; l < 32; ++l)
            next[l] = expect_pairs[l] + expect_pairs[l ^ off];
        std::memcpy(expect_pairs, next, sizeof next);
    }
    QCOMPARE(cuda::HostLanes::sum(v), expect_pairs[0]);
    QCOMPARE(cuda::HostLanes::max(v), v[31]);
    QCOMPARE(cuda::HostLanes::sum(cuda::HostLanes::each([](uint32_t l) { return int32_t(l); })), 496);
}

// ---- whole grids --------------------------------------------------------------------------------------

void TestCudaKernels::quantizeAct_data()
{
    QTest::addColumn<int>("format");
    QTest::newRow("Q8_0") << int(ActivationFormat::Q8_0);
    QTest::newRow("Q8_1") << int(ActivationFormat::Q8_1);
    QTest::newRow("Q8_K") << int(ActivationFormat::Q8_K);
    QTest::newRow("F16") << int(ActivationFormat::F16);
}

// Each format's rows are the CPU's bytes (scales, sums, integers), including a block of zeros and,
// for Q8_K, a largest magnitude reached three times with both signs (the first one counts).
void TestCudaKernels::quantizeAct()
{
    QFETCH(int, format);
    const auto f = ActivationFormat(format);
    const uint32_t cols = 512, rows = 3;
    auto x = random_floats(cols * rows, 4, 3.0f);
    std::fill(x.begin() + 256, x.begin() + 512, 0.0f);
    x[600] = 9.5f;
    x[601] = -9.5f;
    x[700] = -9.5f;
    if (f == ActivationFormat::Q8_K) // the CPU's scan passes over NaN (its Q8_0/Q8_1 cast it: undefined)
        x[900] = std::numeric_limits<float>::quiet_NaN();
    const std::size_t row_bytes = activation_row_bytes(f, cols);
    std::vector<uint8_t> ref(row_bytes * rows);
    for (uint32_t r = 0; r < rows; ++r)
        quantize_activations(f, x.data() + r * cols, ref.data() + r * row_bytes, cols);
    on_every_device([&](cuda::Device& d) -> std::vector<float> {
        Mem dx(d, x), out(d, ref.size());
        d.launch(cuda::QuantizeAct::Args{dx.p(), cols, rows, f, out.p<uint8_t>()});
        const auto got = out.get<uint8_t>();
        for (std::size_t i = 0; i < ref.size(); ++i)
            if (got[i] != ref[i]) {
                QTest::qFail(qPrintable(QString("byte %1 of %2 differs from the CPU's").arg(i).arg(ref.size())),
                             __FILE__, __LINE__);
                return {};
            }
        return std::vector<float>(got.begin(), got.end());
    });
}

void TestCudaKernels::getRows_data()
{
    QTest::addColumn<int>("type");
    for (GgmlType t : kQuantTypes)
        QTest::addRow("%s", type_name(t).c_str()) << int(t);
    for (GgmlType t : kFloatTypes)
        QTest::addRow("%s", type_name(t).c_str()) << int(t);
}

// Embedding rows × scale: the CPU's values bit for bit (a width with a tail warp for float types).
void TestCudaKernels::getRows()
{
    QFETCH(int, type);
    const auto t = GgmlType(type);
    const uint32_t cols = cuda::is_quantized(t) ? 256 : 200, rows = 50;
    const HostMatrix w = random_matrix(t, cols, rows, 300 + uint64_t(type));
    const std::vector<uint32_t> ids{0, 49, 7, 7, 23};
    const float scale = 25.3f;
    std::vector<float> ref;
    for (uint32_t id : ids)
        for (uint32_t i = 0; i < cols; ++i)
            ref.push_back(w.f32[std::size_t(id) * cols + i] * scale);
    on_every_device([&](cuda::Device& d) -> std::vector<float> {
        Mem table(d, w.bytes), dids(d, ids), out(d, ref.size() * 4);
        d.launch(cuda::GetRows::Args{t, table.p<uint8_t>(), w.row_bytes, dids.p<uint32_t>(), uint32_t(ids.size()), cols,
                                     scale, out.p()});
        const auto got = out.get();
        const long at = first_difference(got.data(), ref.data(), ref.size());
        if (at >= 0)
            QTest::qFail(qPrintable(QString("element %1: %2, the CPU %3").arg(at).arg(got[at]).arg(ref[at])), __FILE__,
                         __LINE__);
        return got;
    });
}

void TestCudaKernels::matmul_data()
{
    QTest::addColumn<int>("type");
    QTest::addColumn<int>("cols");
    QTest::addColumn<int>("tokens");
    QTest::addColumn<int>("order");  // the batch size whose summation order the CPU uses
    QTest::addColumn<bool>("lanes"); // MatmulLanes (eight threads per row) instead of MatmulRows
    for (const bool lanes : {false, true})
        for (GgmlType t : kQuantTypes) {
            const int cols = cuda::is_k_quant(t) ? 512 : 96;
            const char* kernel = lanes ? "lanes" : "rows";
            for (int n : {1, 3, 6}) // 6: a whole tile of 4 tokens and a tail
                if (!lanes || cuda::MatmulLanes::handles(t, uint32_t(n)))
                    QTest::addRow("%s %dx%d, %s", type_name(t).c_str(), cols, n, kernel)
                        << int(t) << cols << n << n << lanes;
            // k-quants: llama.cpp's tiled order from batches of 8
            if (!lanes || cuda::MatmulLanes::handles(t, 16))
                QTest::addRow("%s %dx2 in the order of 16, %s", type_name(t).c_str(), cols, kernel)
                    << int(t) << cols << 2 << 16 << lanes;
        }
    for (const bool lanes : {false, true})
        for (GgmlType t : kFloatTypes)
            for (int n : {1, 5}) // F16: the batched order from 2 rows; rows of 200 (F16's double tail: 8)
                if (!lanes || cuda::MatmulLanes::handles(t, uint32_t(n)))
                    QTest::addRow("%s 200x%d, %s", type_name(t).c_str(), n, lanes ? "lanes" : "rows")
                        << int(t) << 200 << n << n << lanes;
}

// out = W·x: the CPU backend's matmul bit for bit (its activation formats, its summation orders), an
// odd row count (a warp's tail), rows written at an offset of a wider output (the pass's row ranges).
void TestCudaKernels::matmul()
{
    QFETCH(int, type);
    QFETCH(int, cols);
    QFETCH(int, tokens);
    QFETCH(int, order);
    QFETCH(bool, lanes);
    const auto t = GgmlType(type);
    const uint32_t n = uint32_t(tokens), k = uint32_t(cols), rows = 37, stride = 41, row0 = 3;
    const HostMatrix w = random_matrix(t, k, rows, 400 + uint64_t(type));
    const auto x = random_floats(std::size_t(n) * k, 6);
    gguf::TensorInfo info;
    info.name = "w";
    info.type = ggml_type_traits(t);
    info.n_dims = 2;
    info.ne = {k, rows, 1, 1};
    ThreadPool pool(1);
    cpu::MatMul mm;
    std::vector<float> cpu_y(std::size_t(n) * rows);
    mm.run(pool, TensorView{&info, w.bytes.data(), w.row_bytes}, x.data(), n, cpu_y.data(), order);
    const ActivationFormat f = activation_format(t);
    on_every_device([&](cuda::Device& d) -> std::vector<float> {
        Mem dw(d, w.bytes), dx(d, x), out(d, std::size_t(n) * stride * 4), act(d, n * activation_row_bytes(f, k) + 4);
        const uint8_t* in = reinterpret_cast<const uint8_t*>(dx.p());
        if (f != ActivationFormat::F32) {
            d.launch(cuda::QuantizeAct::Args{dx.p(), k, n, f, act.p<uint8_t>()});
            in = act.p<uint8_t>();
        }
        const cuda::MatmulRows::Args args{t,
                                          dw.p<uint8_t>(),
                                          w.row_bytes,
                                          rows,
                                          k,
                                          in,
                                          f == ActivationFormat::F32 ? k * 4 : activation_row_bytes(f, k),
                                          n,
                                          uint32_t(order),
                                          out.p(),
                                          stride,
                                          row0};
        // one thread per row, and (where the order keeps the CPU's lanes) eight: the same bits
        if (lanes)
            d.launch(cuda::MatmulLanes::Args{args});
        else
            d.launch(args);
        const auto y = out.get();
        for (uint32_t tok = 0; tok < n; ++tok)
            for (uint32_t c = 0; c < stride; ++c) {
                const float got = y[tok * stride + c];
                if (c < row0 || c >= row0 + rows) {
                    CHECK_IN_RUN(got == 0.0f); // columns outside the range stay untouched
                    continue;
                }
                const float ref = cpu_y[std::size_t(tok) * rows + c - row0];
                if (std::memcmp(&got, &ref, 4) != 0) {
                    QTest::qFail(qPrintable(QString("token %1 row %2: %3, the CPU %4")
                                                .arg(tok)
                                                .arg(c - row0)
                                                .arg(got, 0, 'g', 9)
                                                .arg(ref, 0, 'g', 9)),
                                 __FILE__, __LINE__);
                    return {};
                }
            }
        return y;
    });
}

// RMSNorm alone and fused with the residual add, rows of a width with a tail (f32 sums against the
// CPU's double ones: within a few ulp).
void TestCudaKernels::rmsnorm()
{
    const uint32_t width = 200, rows = 3;
    const auto x = random_floats(width * rows, 7, 4.0f), o = random_floats(width * rows, 8),
               w = random_floats(width, 9);
    std::vector<float> sum(x.size()), ref(x.size()), ref_fused(x.size());
    for (std::size_t i = 0; i < x.size(); ++i)
        sum[i] = x[i] + o[i];
    for (uint32_t r = 0; r < rows; ++r) {
        cpu::kernel_rmsnorm(x.data() + r * width, w.data(), ref.data() + r * width, width, 1e-6f);
        cpu::kernel_rmsnorm(sum.data() + r * width, w.data(), ref_fused.data() + r * width, width, 1e-6f);
    }
    on_every_device([&](cuda::Device& d) -> std::vector<float> {
        Mem dx(d, x), dx2(d, x), dox(d, o), dw(d, w), out(d, x.size() * 4), out2(d, x.size() * 4);
        d.launch(cuda::RmsNorm::Args{dx.p(), nullptr, dw.p(), out.p(), width, rows, 1e-6f});
        d.launch(cuda::RmsNorm::Args{dx2.p(), dox.p(), dw.p(), out2.p(), width, rows, 1e-6f});
        const auto y = out.get(), y2 = out2.get(), x2 = dx2.get();
        CHECK_IN_RUN(same_bits(x2, sum)); // the fused add wrote x + o back
        for (std::size_t i = 0; i < y.size(); ++i) {
            if (std::fabs(y[i] - ref[i]) > 4e-6f * std::fabs(ref[i]) + 1e-7f ||
                std::fabs(y2[i] - ref_fused[i]) > 4e-6f * std::fabs(ref_fused[i]) + 1e-7f)
                QTest::qFail(qPrintable(QString("element %1: %2 vs %3").arg(i).arg(y[i]).arg(ref[i])), __FILE__,
                             __LINE__);
        }
        std::vector<float> all = y;
        all.insert(all.end(), y2.begin(), y2.end());
        return all;
    });
}

void TestCudaKernels::rope_data()
{
    QTest::addColumn<bool>("neox");
    QTest::addColumn<bool>("factors");
    QTest::addColumn<int>("n_rot");
    QTest::newRow("normal") << false << false << 80;
    QTest::newRow("neox") << true << false << 80;
    QTest::newRow("neox, frequency factors") << true << true << 80;
    QTest::newRow("partial rotation") << false << false << 48; // dimensions past n_rot only scaled
}

// RoPE with the host's angles: the CPU's rotation bit for bit (scale 1), then × scale.
void TestCudaKernels::rope()
{
    QFETCH(bool, neox);
    QFETCH(bool, factors);
    QFETCH(int, n_rot);
    const uint32_t D = 80, heads = 3, n = 4, pos = 37, rot = uint32_t(n_rot);
    const auto x = random_floats(std::size_t(n) * heads * D, 10);
    std::vector<float> ff(rot / 2);
    for (uint32_t i = 0; i < rot / 2; ++i)
        ff[i] = 1.0f + 0.25f * float(i % 5);
    std::vector<float> cs(std::size_t(n) * rot);
    rope_cos_sin(cs.data(), pos, n, rot, 10000.0f, 1.0f, factors ? ff.data() : nullptr);
    std::vector<float> ref = x;
    for (uint32_t t = 0; t < n; ++t)
        for (uint32_t h = 0; h < heads; ++h)
            cpu::kernel_rope(ref.data() + (t * heads + h) * D, int32_t(rot), int32_t(pos + t), 10000.0f, 1.0f, neox,
                             factors ? ff.data() : nullptr);
    on_every_device([&](cuda::Device& d) -> std::vector<float> {
        Mem dx(d, x), dscaled(d, x), dcs(d, cs);
        d.launch(cuda::Rope::Args{dx.p(), dcs.p(), n, heads, D, rot, neox, 1.0f});
        d.launch(cuda::Rope::Args{dscaled.p(), dcs.p(), n, heads, D, rot, neox, 0.125f});
        const auto y = dx.get(), ys = dscaled.get();
        const long at = first_difference(y.data(), ref.data(), ref.size());
        if (at >= 0)
            QTest::qFail(qPrintable(QString("element %1: %2 vs the CPU's %3").arg(at).arg(y[at]).arg(ref[at])),
                         __FILE__, __LINE__);
        for (std::size_t i = 0; i < y.size(); ++i)
            if (ys[i] != y[i] * 0.125f)
                QTest::qFail("the scale is not applied after the rotation", __FILE__, __LINE__);
        return ys;
    });
}

void TestCudaKernels::attention_data()
{
    QTest::addColumn<int>("heads");
    QTest::addColumn<int>("kv_heads");
    QTest::addColumn<int>("head_dim");
    QTest::addColumn<int>("pos0");
    QTest::addColumn<int>("tokens");
    QTest::addColumn<int>("window");
    QTest::addColumn<float>("softcap"); // gemma2's attention soft-cap (0: none)
    QTest::newRow("prefill") << 4 << 4 << 64 << 0 << 7 << 0 << 0.0f;
    QTest::newRow("GQA, decode over 75 keys") << 6 << 2 << 64 << 74 << 1 << 0 << 0.0f;
    QTest::newRow("GQA, chunk after a prefix, head_dim 48") << 4 << 1 << 48 << 33 << 5 << 0 << 0.0f;
    QTest::newRow("sliding window 16") << 2 << 1 << 64 << 40 << 3 << 16 << 0.0f;
    QTest::newRow("head_dim 256") << 2 << 2 << 256 << 10 << 2 << 0 << 0.0f;
    QTest::newRow("decode, head_dim 48 (a double tail)") << 4 << 2 << 48 << 20 << 1 << 0 << 0.0f;
    // small caps put q·k / cap across every branch of the C library's tanhf (util/glibc_tanhf.h)
    QTest::newRow("soft-capped at 0.5, prefill") << 2 << 1 << 64 << 30 << 6 << 0 << 0.5f;
    QTest::newRow("soft-capped at 0.05, decode") << 2 << 2 << 64 << 60 << 1 << 0 << 0.05f;
}

// KV store, scores, softmax and values against the CPU backend's attention row, bit for bit (masked
// weights exactly 0, the cache the CPU's F16 values).
void TestCudaKernels::attention()
{
    QFETCH(int, heads);
    QFETCH(int, kv_heads);
    QFETCH(int, head_dim);
    QFETCH(int, pos0);
    QFETCH(int, tokens);
    QFETCH(int, window);
    QFETCH(float, softcap);
    const uint32_t H = uint32_t(heads), Hkv = uint32_t(kv_heads), D = uint32_t(head_dim), p0 = uint32_t(pos0),
                   n = uint32_t(tokens), win = uint32_t(window), n_ctx = 128, keys = p0 + n;
    const float scale = 1.0f / std::sqrt(float(D));
    // the cache's earlier positions, then the chunk's K/V rows
    const auto prefix_k = random_floats(std::size_t(Hkv) * n_ctx * D, 11),
               prefix_v = random_floats(prefix_k.size(), 12);
    std::vector<uint16_t> k16(prefix_k.size()), v16(prefix_k.size());
    for (std::size_t i = 0; i < k16.size(); ++i) {
        k16[i] = f32_to_fp16(prefix_k[i]);
        v16[i] = f32_to_fp16(prefix_v[i]);
    }
    const auto kb = random_floats(std::size_t(n) * Hkv * D, 13), vb = random_floats(kb.size(), 14),
               q = random_floats(std::size_t(n) * H * D, 15, 2.0f);
    std::vector<uint16_t> ck = k16, cv = v16; // the CPU's view of the cache after the store
    for (uint32_t t = 0; t < n; ++t)
        for (uint32_t h = 0; h < Hkv; ++h)
            for (uint32_t dd = 0; dd < D; ++dd) {
                ck[(std::size_t(h) * n_ctx + p0 + t) * D + dd] = f32_to_fp16(kb[(t * Hkv + h) * D + dd]);
                cv[(std::size_t(h) * n_ctx + p0 + t) * D + dd] = f32_to_fp16(vb[(t * Hkv + h) * D + dd]);
            }
    std::vector<float> ref_out(std::size_t(n) * H * D), ref_w(std::size_t(n) * H * keys, 0.0f);
    cpu::AttentionScratch scratch;
    for (uint32_t t = 0; t < n; ++t)
        for (uint32_t h = 0; h < H; ++h) {
            const uint32_t kv = h / (H / Hkv), pos = p0 + t, lo = win && pos + 1 > win ? pos + 1 - win : 0;
            std::vector<const uint16_t*> kp(pos + 1, nullptr), vp(pos + 1, nullptr);
            for (uint32_t j = lo; j <= pos; ++j) {
                kp[j] = ck.data() + (std::size_t(kv) * n_ctx + j) * D;
                vp[j] = cv.data() + (std::size_t(kv) * n_ctx + j) * D;
            }
            cpu::AttentionRow row{q.data() + (t * H + h) * D, kp.data(), vp.data(), pos + 1, D, scale, n > 1};
            row.softcap = softcap;
            cpu::attention_row(row, ref_out.data() + (t * H + h) * D, ref_w.data() + (t * H + h) * std::size_t(keys),
                               scratch);
        }
    on_every_device([&](cuda::Device& d) -> std::vector<float> {
        Mem dk(d, k16), dv(d, v16), dkb(d, kb), dvb(d, vb), dq(d, q), scores(d, std::size_t(n) * H * keys * 4),
            out(d, ref_out.size() * 4);
        d.launch(
            cuda::KvStore::Args{dkb.p(), dvb.p(), dk.p<uint16_t>(), dv.p<uint16_t>(), n, Hkv, D, p0, n_ctx, nullptr});
        const cuda::AttnShape s{nullptr, n, H, Hkv, D, p0, n_ctx, win, keys, n > 1};
        d.launch(cuda::AttnScores::Args{s, dq.p(), dk.p<uint16_t>(), scale, scores.p(), softcap,
                                        softcap != 0.0f ? 1.0f / softcap : 0.0f});
        d.launch(cuda::AttnSoftmax::Args{s, scores.p()});
        d.launch(cuda::AttnValues::Args{s, scores.p(), dv.p<uint16_t>(), out.p()});
        CHECK_IN_RUN(dk.get<uint16_t>() == ck);
        CHECK_IN_RUN(dv.get<uint16_t>() == cv);
        const auto w = scores.get(), o = out.get();
        // the CPU's bits: its F16 dot orders (single query and batched), its softmax
        const long wat = first_difference(w.data(), ref_w.data(), w.size());
        const long oat = first_difference(o.data(), ref_out.data(), o.size());
        if (wat >= 0 || oat >= 0)
            QTest::qFail(qPrintable(QString("attention differs from the CPU's: weight %1 (%2 vs %3), output %4")
                                        .arg(wat)
                                        .arg(wat >= 0 ? w[std::size_t(wat)] : 0.0f)
                                        .arg(wat >= 0 ? ref_w[std::size_t(wat)] : 0.0f)
                                        .arg(oat)),
                         __FILE__, __LINE__);
        std::vector<float> all = w;
        all.insert(all.end(), o.begin(), o.end());
        return all;
    });
}

// GeGLU through the CPU's table and SwiGLU with ggml's exponential (the C library's for the last
// width mod 8 elements of each row, as the CPU): rows of 111, bit for bit.
void TestCudaKernels::glu()
{
    const uint32_t width = 111, rows = 3;
    auto gate = random_floats(width * rows, 16, 4.0f);
    gate[0] = -12.0f; // past the table's ends
    gate[1] = 11.0f;
    const auto up = random_floats(gate.size(), 17);
    std::vector<float> ref_gelu(gate.size()), ref_silu(gate.size());
    for (uint32_t r = 0; r < rows; ++r) {
        cpu::kernel_geglu(gate.data() + r * width, up.data() + r * width, ref_gelu.data() + r * width, width);
        cpu::kernel_swiglu(gate.data() + r * width, up.data() + r * width, ref_silu.data() + r * width, width);
    }
    const auto& table = cpu::gelu_f16_table();
    const std::vector<uint16_t> table_v(table.begin(), table.end());
    on_every_device([&](cuda::Device& d) -> std::vector<float> {
        Mem g1(d, gate), g2(d, gate), du(d, up), dt(d, table_v);
        d.launch(cuda::Glu::Args{g1.p(), du.p(), gate.size(), width, true, dt.p<uint16_t>()});
        d.launch(cuda::Glu::Args{g2.p(), du.p(), gate.size(), width, false, dt.p<uint16_t>()});
        const auto gelu = g1.get(), silu = g2.get();
        if (!same_bits(gelu, ref_gelu))
            QTest::qFail("GeGLU differs from the CPU's", __FILE__, __LINE__);
        // the device's expf may differ from the C library's in the last bit of the rows' tails
        for (std::size_t i = 0; i < silu.size(); ++i) {
            const bool tail = i % width >= (width & ~7u);
            const bool same = std::memcmp(&silu[i], &ref_silu[i], 4) == 0;
            if (!same && (&d == m_devices.front().get() || !tail ||
                          std::fabs(silu[i] - ref_silu[i]) > 4e-7f * std::fabs(ref_silu[i])))
                QTest::qFail(qPrintable(QString("SwiGLU %1: %2 vs %3").arg(i).arg(silu[i]).arg(ref_silu[i])), __FILE__,
                             __LINE__);
        }
        return gelu; // compared across devices: SwiGLU's tails may differ by the device's expf
    });
}

// The residual add, a bias broadcast over rows, and an intervention's edits (replace columns of some
// rows; add a vector to every row).
void TestCudaKernels::addAndEdit()
{
    const uint32_t width = 70, rows = 4;
    const auto x = random_floats(width * rows, 18), y = random_floats(width * rows, 19),
               bias = random_floats(width, 20);
    const auto values = random_floats(2 * 33, 21), vec = random_floats(width, 22);
    std::vector<float> ref = x;
    for (std::size_t i = 0; i < ref.size(); ++i)
        ref[i] = (ref[i] + y[i]) + bias[i % width];
    for (uint32_t r = 0; r < 2; ++r) // rows 1–2, columns 5 … 37 replaced
        for (uint32_t c = 0; c < 33; ++c)
            ref[(1 + r) * width + 5 + c] = values[r * 33 + c];
    for (uint32_t r = 0; r < rows; ++r)
        for (uint32_t c = 0; c < width; ++c)
            ref[r * width + c] = ref[r * width + c] + vec[c];
    on_every_device([&](cuda::Device& d) -> std::vector<float> {
        Mem dx(d, x), dy(d, y), db(d, bias), dvals(d, values), dvec(d, vec);
        d.launch(cuda::Add::Args{dx.p(), dy.p(), x.size(), x.size()});
        d.launch(cuda::Add::Args{dx.p(), db.p(), x.size(), width});
        d.launch(cuda::EditRows::Args{dx.p(), dvals.p(), width, 1, 2, 5, 33, true, false});
        d.launch(cuda::EditRows::Args{dx.p(), dvec.p(), width, 0, rows, 0, width, false, true});
        const auto got = dx.get();
        if (!same_bits(got, ref))
            QTest::qFail("adds or edits differ", __FILE__, __LINE__);
        return got;
    });
}

// A recording replays with what the host wrote into the buffers it reads since (the decode step's
// token, position and angles), and runs once when it is made.
void TestCudaKernels::recording()
{
    on_every_device([&](cuda::Device& d) -> std::vector<float> {
        const std::vector<float> y{1.0f, 2.0f, 3.0f};
        Mem dx(d, std::vector<float>{0.0f, 0.0f, 0.0f}), dy(d, std::vector<float>{0.0f, 0.0f, 0.0f});
        auto* host = static_cast<float*>(d.alloc_host(12));
        std::memcpy(host, y.data(), 12);
        d.begin_recording();
        d.copy_to_device(dy.p(), host, 12);
        d.launch(cuda::Add::Args{dx.p(), dy.p(), 3, 3});
        d.end_recording();
        d.synchronize();
        const uint64_t replays = d.replays();
        host[0] = 10.0f;
        d.replay();
        d.replay();
        d.synchronize();
        const auto got = dx.get();
        d.release_host(host);
        CHECK_IN_RUN(d.replays() == replays + 2);
        CHECK_IN_RUN(got == (std::vector<float>{21.0f, 6.0f, 9.0f}));
        return got;
    });
}

QTEST_GUILESS_MAIN(TestCudaKernels)
#include "test_cuda_kernels.moc"
