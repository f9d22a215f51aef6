// SPDX-License-Identifier: GPL-3.0-or-later
// Quantized dot products: for every supported weight type, the scalar path and the SIMD path the
// CPU selects (AVX2 here; both run on every x86-64 CI machine) agree with a double-precision
// reference computed from the dequantized weights and the dequantized activation blocks; the
// portable kernels give the AVX2 kernels' bits, and the AVX-512 ones too.
#include "gguf/gguf_file.h"
#include "model/test_model.h"
#include "quant/activation_quant.h"
#include "quant/dequant.h"
#include "quant/simd/vec_dot_simd.h"
#include "quant/tiled_gemm.h"
#include "quant/vec_dot.h"
#include "test_paths.h"
#include "util/fp16.h"

#include <QTest>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <random>

using namespace engine;

namespace {

// f32 values of the quantized activations (what the integer dot product really multiplies).
std::vector<double> dequant_activations(ActivationFormat f, const void* q, const std::vector<float>& x)
{
    std::vector<double> out(x.size());
    if (f == ActivationFormat::F32) {
        for (std::size_t i = 0; i < x.size(); ++i)
            out[i] = x[i];
    } else if (f == ActivationFormat::F16) {
        const auto* h = static_cast<const uint16_t*>(q);
        for (std::size_t i = 0; i < x.size(); ++i)
            out[i] = fp16_to_f32(h[i]);
    } else if (f == ActivationFormat::BF16) {
        const auto* h = static_cast<const uint16_t*>(q);
        for (std::size_t i = 0; i < x.size(); ++i)
            out[i] = bf16_to_f32(h[i]);
    } else if (f == ActivationFormat::Q8_0) {
        const auto* b = static_cast<const BlockQ8_0*>(q);
        for (std::size_t i = 0; i < x.size(); ++i)
            out[i] = double(fp16_to_f32(b[i / 32].d)) * b[i / 32].qs[i % 32];
    } else if (f == ActivationFormat::Q8_1) {
        const auto* b = static_cast<const BlockQ8_1*>(q);
        for (std::size_t i = 0; i < x.size(); ++i)
            out[i] = double(b[i / 32].d) * b[i / 32].qs[i % 32];
    } else {
        const auto* b = static_cast<const BlockQ8_K*>(q);
        for (std::size_t i = 0; i < x.size(); ++i)
            out[i] = double(b[i / 256].d) * b[i / 256].qs[i % 256];
    }
    return out;
}

// A weight row of at least 1024 elements: the ggml-quantized blocks of tests/data/quant/blocks.gguf,
// or for the types gguf-py cannot quantize (IQ4_NL, IQ4_XS) random blocks of sane scales.
struct WeightRow {
    GgmlType type;
    int64_t elements;
    std::vector<uint8_t> bytes;
};
WeightRow weight_row(const QString& name)
{
    const auto type = ggml_type_from_name(name.toStdString());
    if (*type == GgmlType::IQ4_NL || *type == GgmlType::IQ4_XS) {
        const int64_t n = 1024;
        std::vector<uint8_t> bytes(ggml_row_bytes(ggml_type_traits(*type), n));
        fill_random_tensor(std::as_writable_bytes(std::span(bytes)), *type, false, 7, 1);
        return {*type, n, bytes};
    }
    const auto f = gguf::GgufFile::open(testsupport::data_dir() + "/quant/blocks.gguf");
    const auto* t = f->find_tensor((name + ".quant").toStdString());
    const auto data = f->tensor_data(*t);
    const auto* first = reinterpret_cast<const uint8_t*>(data.data());
    return {t->type.type, int64_t(t->ne[0]), std::vector<uint8_t>(first, first + data.size())};
}

// Rows of n normally distributed activations, quantized to the format a weight type takes.
std::vector<std::vector<uint8_t>> random_activation_rows(ActivationFormat format, int64_t n, uint32_t seed,
                                                         std::size_t count = 4)
{
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<std::vector<uint8_t>> rows(count, std::vector<uint8_t>(activation_row_bytes(format, n)));
    for (auto& row : rows) {
        std::vector<float> x(static_cast<std::size_t>(n));
        for (auto& v : x)
            v = dist(rng);
        quantize_activations(format, x.data(), row.data(), n);
    }
    return rows;
}

// Eight quantized rows in the eight-row kernels' packed layout (pack8_activations).
std::vector<uint8_t> packed_rows(ActivationFormat format, const std::vector<std::vector<uint8_t>>& rows, int64_t n)
{
    std::vector<uint8_t> joined, packed(packed8_bytes(format, n));
    for (const auto& row : rows)
        joined.insert(joined.end(), row.begin(), row.end());
    pack8_activations(format, joined.data(), rows[0].size(), n, packed.data());
    return packed;
}

} // namespace

class TestVecDot : public QObject {
    Q_OBJECT
private slots:
    void matchesDequantizedReference_data();
    void matchesDequantizedReference();
    void activationQuantizationMatchesGgml();
    void fourRowKernelsMatchOneRow_data() { matchesDequantizedReference_data(); }
    void fourRowKernelsMatchOneRow();
    void avx2EightRowKernelsMatchOneRow_data() { matchesDequantizedReference_data(); }
    void avx2EightRowKernelsMatchOneRow();
    void plainEightRowKernelsMatchOneRow_data() { matchesDequantizedReference_data(); }
    void plainEightRowKernelsMatchOneRow();
    void tiledOrderSimdMatchesScalar_data() { matchesDequantizedReference_data(); }
    void tiledOrderSimdMatchesScalar();
    void batchedOrderSimdMatchesScalar_data() { matchesDequantizedReference_data(); }
    void batchedOrderSimdMatchesScalar();
    void repackedOrderSimdMatchesScalar_data() { matchesDequantizedReference_data(); }
    void repackedOrderSimdMatchesScalar();
    void avx512KernelsMatchAvx2_data() { matchesDequantizedReference_data(); }
    void avx512KernelsMatchAvx2();
    void bf16PairsKernelKeepsTheBatchedBits();
    void scalarKernelsMatchAvx2_data() { matchesDequantizedReference_data(); }
    void scalarKernelsMatchAvx2();
    void tiledMatmulMatchesTiledOrder_data() { matchesDequantizedReference_data(); }
    void tiledMatmulMatchesTiledOrder();
    void halfActivationsMatchScalarConversion();
    void q8kActivationsMatchGgmlReference();
    void q80AndQ81ActivationsMatchGgmlReference();
};

void TestVecDot::q8kActivationsMatchGgmlReference()
{
    // Q8_K activations (SIMD where the CPU has AVX2) equal ggml's quantize_row_q8_K_ref written out
    // here: the signed value of largest magnitude (its first holder on a tie of magnitudes), iscale =
    // −127/max, each quant round-half-even of iscale · x capped at 127, per-16 sums, d = 1/iscale.
    std::mt19937 rng(23);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    const int blocks = 40;
    std::vector<float> x(256 * blocks);
    for (auto& v : x)
        v = dist(rng);
    std::fill(x.begin() + 256, x.begin() + 512, 0.0f); // an all-zero block
    x[512 + 3] = -4.0f;                                // a tie of magnitudes: the first (negative) one wins
    x[512 + 200] = 4.0f;
    x[768 + 250] = 5.0f; // a positive maximum late in its block
    for (int j = 0; j < 256; ++j)
        x[1024 + j] = 0.5f * float(j % 9) - 2.0f; // values on exact .5 steps of the scale
    std::vector<BlockQ8_K> got(blocks);
    quantize_activations(ActivationFormat::Q8_K, x.data(), got.data(), int64_t(x.size()));
    for (int b = 0; b < blocks; ++b) {
        const float* v = x.data() + 256 * b;
        float max = 0.0f, amax = 0.0f;
        for (int j = 0; j < 256; ++j)
            if (std::fabs(v[j]) > amax) {
                amax = std::fabs(v[j]);
                max = v[j];
            }
        if (amax == 0.0f) {
            QCOMPARE(got[b].d, 0.0f);
            for (int j = 0; j < 256; ++j)
                QCOMPARE(int(got[b].qs[j]), 0);
            continue;
        }
        const float iscale = -127.0f / max;
        int sums[16] = {};
        for (int j = 0; j < 256; ++j) {
            const int q = std::min(127, int(std::nearbyint(iscale * v[j])));
            QCOMPARE(int(got[b].qs[j]), q);
            sums[j / 16] += q;
        }
        for (int g = 0; g < 16; ++g)
            QCOMPARE(int(got[b].bsums[g]), sums[g]);
        QCOMPARE(std::bit_cast<uint32_t>(got[b].d), std::bit_cast<uint32_t>(1.0f / iscale));
    }
}

void TestVecDot::q80AndQ81ActivationsMatchGgmlReference()
{
    // Q8_0 and Q8_1 activations (SIMD where the CPU has AVX2) equal ggml's x86 quantizer written out
    // here: amax over the 32 values, d = amax/127, each quant x · (127/amax) rounded half to even;
    // Q8_1 also s = d · Σ quants, both through f16.
    std::mt19937 rng(29);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    const int blocks = 48;
    std::vector<float> x(32 * blocks);
    for (auto& v : x)
        v = dist(rng);
    std::fill(x.begin() + 32, x.begin() + 64, 0.0f); // an all-zero block
    for (int j = 0; j < 32; ++j) {
        x[64 + j] = j == 0 ? 127.0f : float(j) - 15.5f; // id = 1: every other value an exact tie
        x[96 + j] = float(j) - 15.5f;                   // a ramp with a negative extreme
        x[128 + j] = j == 31 ? 1e-3f : 1e-30f;          // a tiny maximum late in its block
    }
    std::vector<BlockQ8_0> q0(blocks);
    std::vector<BlockQ8_1> q1(blocks);
    quantize_activations(ActivationFormat::Q8_0, x.data(), q0.data(), int64_t(x.size()));
    quantize_activations(ActivationFormat::Q8_1, x.data(), q1.data(), int64_t(x.size()));
    int ties = 0;
    for (int b = 0; b < blocks; ++b) {
        const float* v = x.data() + 32 * b;
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j)
            amax = std::max(amax, std::fabs(v[j]));
        const float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
        int sum = 0;
        for (int j = 0; j < 32; ++j) {
            const float scaled = v[j] * id;
            ties += scaled - std::floor(scaled) == 0.5f;
            const int q = int(std::nearbyint(scaled));
            QCOMPARE(int(q0[b].qs[j]), q);
            QCOMPARE(int(q1[b].qs[j]), q);
            sum += q;
        }
        QCOMPARE(q0[b].d, f32_to_fp16(d));
        QCOMPARE(std::bit_cast<uint32_t>(q1[b].d), std::bit_cast<uint32_t>(fp16_to_f32(f32_to_fp16(d))));
        QCOMPARE(std::bit_cast<uint32_t>(q1[b].s),
                 std::bit_cast<uint32_t>(fp16_to_f32(f32_to_fp16(static_cast<float>(sum) * d))));
    }
    QVERIFY(ties >= 8); // the rounding of exact halves was exercised
}

void TestVecDot::halfActivationsMatchScalarConversion()
{
    // F16 and BF16 activations (SIMD where the CPU has AVX2) give fp16.h's bits for every kind of
    // value: random bit patterns over the whole range (NaNs, infinities, subnormals, overflow), ties,
    // and a tail that is not a whole group of eight.
    std::mt19937 rng(5);
    std::vector<float> x(1003);
    for (auto& v : x)
        v = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    const float specials[] = {
        0.0f,           -0.0f,           65504.0f, 65520.0f,           65519.99f,
        1e-8f,          5.96e-8f,        2.98e-8f, 1.0f + 1.0f / 2048, std::numeric_limits<float>::infinity(),
        std::nanf("1"), -std::nanf("7"), 3.0e38f};
    std::copy(std::begin(specials), std::end(specials), x.begin());
    for (uint32_t i = 0; i < 64; ++i) { // exact ties: F16's (13 bits dropped) and BF16's (16), both signs
        const uint32_t tie = i % 2 == 0 ? 0x3F800000u + (i << 13) + 0x1000u : 0x3F800000u + (i << 16) + 0x8000u;
        x[100 + i] = std::bit_cast<float>(tie | (i % 3 == 0 ? 0x80000000u : 0u));
    }
    const auto n = static_cast<int64_t>(x.size());
    std::vector<uint16_t> f16(x.size()), bf16(x.size());
    quantize_activations(ActivationFormat::F16, x.data(), f16.data(), n);
    quantize_activations(ActivationFormat::BF16, x.data(), bf16.data(), n);
    for (std::size_t i = 0; i < x.size(); ++i) {
        QCOMPARE(f16[i], f32_to_fp16(x[i]));
        QCOMPARE(bf16[i], f32_to_bf16(x[i]));
    }
}

void TestVecDot::tiledMatmulMatchesTiledOrder()
{
    // The tiled matmul (many rows and tokens at once) gives the row kernels' bits for every row and
    // token: the tiled order for k-quants and IQ4_XS, llama.cpp's repacked orders for Q4_K (its gemm's
    // and gemv's), Q4_0 and IQ4_NL, its batched order for F32, F16 and BF16. Random blocks, blocks of random bytes
    // (every code, scale and minimum extreme), 21 rows (not whole groups of eight or sixteen), token counts around the
    // 16-token panels, a row of activations at ±127.
    QFETCH(QString, type);
    const GgmlType gt = *ggml_type_from_name(type.toStdString());
    const int64_t n = 768, rows = 21;
    const VecDotFn tiled = vec_dot_tiled_scalar(gt);
    const bool repacks = llama_cpp_repacks(gt, 8);
    const bool is_float = gt == GgmlType::F32 || gt == GgmlType::F16 || gt == GgmlType::BF16;
    if (!tiled && !repacks && !is_float)
        QSKIP("neither the tiled, the repacked nor the batched float order: the row kernels only");
    // The run-time choice, and the AVX2 kernels too where the CPU would choose AVX-512 (AVX2-only CPUs
    // run them).
    struct GemmPath {
        const char* name;
        TiledGemmFn (*tiled)(GgmlType);
        TiledGemmFn (*repacked)(GgmlType, bool);
        TiledGemmFn (*floats)(GgmlType, int64_t);
    };
    std::vector<GemmPath> paths;
    if (simd_level() != SimdLevel::Scalar)
        paths.push_back({"run-time choice", tiled_gemm_for, repacked_gemm_for, float_gemm_for});
    if (simd_level() == SimdLevel::Avx512)
        paths.push_back({"AVX2", simd::tiled_gemm_avx2, simd::repacked_gemm_avx2,
                         [](GgmlType t, int64_t) { return simd::float_gemm_avx2(t); }});
    if (paths.empty())
        QSKIP("TOKENSCOPE_SIMD=scalar: no tiled matmul on the portable path (the row kernels run instead)");
    for (const GemmPath& path : paths)
        QVERIFY2(tiled ? path.tiled(gt) : repacks ? path.repacked(gt, true) : path.floats(gt, n), path.name);
    const ActivationFormat format = activation_format(gt);
    const std::size_t row_bytes = ggml_row_bytes(ggml_type_traits(gt), n);
    std::vector<uint8_t> w(rows * row_bytes);
    fill_random_tensor(std::as_writable_bytes(std::span(w)), gt, false, 13, 3);
    std::mt19937 rng(17);
    const int64_t block_elements = ggml_type_traits(gt).block_elements;
    const std::size_t block_bytes = row_bytes / (n / block_elements);
    for (int64_t r = is_float ? rows : 11; r < rows; ++r) // random bytes, the block's scale(s) set to finite halves
        for (int64_t b = 0; b < n / block_elements; ++b) {
            uint8_t* block = w.data() + r * row_bytes + b * block_bytes;
            for (std::size_t i = 0; i < block_bytes; ++i)
                block[i] = static_cast<uint8_t>(rng());
            const std::size_t d = gt == GgmlType::Q2_K   ? 80
                                  : gt == GgmlType::Q3_K ? 108
                                  : gt == GgmlType::Q6_K ? 208
                                                         : 0;
            const uint16_t half = static_cast<uint16_t>(0x2000 + rng() % 0x1000);
            std::memcpy(block + d, &half, 2);
            if (gt == GgmlType::Q2_K || gt == GgmlType::Q4_K || gt == GgmlType::Q5_K)
                std::memcpy(block + d + 2, &half, 2);
        }
    int compared = 0;
    for (const int tokens : {16, 17, 40, 48}) {
        auto xq = random_activation_rows(format, n, 90 + uint32_t(tokens), std::size_t(tokens));
        { // one row of ±1: quants at ±127
            std::vector<float> x(static_cast<std::size_t>(n));
            for (auto& v : x)
                v = rng() % 2 ? 1.0f : -1.0f;
            quantize_activations(format, x.data(), xq[1].data(), n);
        }
        const std::size_t a_bytes = xq[0].size(), panel_bytes = tiled_panel_bytes(format, n);
        std::vector<uint8_t> joined;
        for (const auto& a : xq)
            joined.insert(joined.end(), a.begin(), a.end());
        const int panels = (tokens + kTiledPanelTokens - 1) / kTiledPanelTokens;
        std::vector<uint8_t> packed(panels * panel_bytes);
        for (int p = 0; p < panels; ++p)
            pack_tiled_panel(format, joined.data() + std::size_t(p) * kTiledPanelTokens * a_bytes, a_bytes,
                             std::min(kTiledPanelTokens, tokens - p * kTiledPanelTokens), n,
                             packed.data() + p * panel_bytes);
        std::vector<float> y(std::size_t(tokens) * rows, std::nanf(""));
        const auto check = [&](const std::function<VecDotFn(int)>& reference) {
            for (int t = 0; t < tokens; ++t)
                for (int64_t r = 0; r < rows; ++r, ++compared)
                    QCOMPARE(std::bit_cast<uint32_t>(y[std::size_t(t) * rows + r]),
                             std::bit_cast<uint32_t>(reference(t)(w.data() + r * row_bytes, xq[t].data(), n)));
        };
        for (const GemmPath& path : paths) {
            std::fill(y.begin(), y.end(), std::nanf(""));
            if (is_float) { // llama.cpp's batched (llamafile) order
                path.floats(gt, n)(w.data(), row_bytes, rows, packed.data(), 0, tokens, n, y.data(), rows);
                check([&](int) { return vec_dot_batched_scalar(gt, n); });
            }
            if (tiled) {
                path.tiled(gt)(w.data(), row_bytes, rows, packed.data(), 0, tokens, n, y.data(), rows);
                check([&](int) { return tiled; });
            }
            if (repacks) { // the gemm's tokens, then the gemv's from a token inside a panel (only those stored)
                const int split = tokens - tokens % 4 - (tokens > 20 ? 4 : 0);
                std::fill(y.begin(), y.end(), std::nanf(""));
                path.repacked(gt, true)(w.data(), row_bytes, rows, packed.data(), 0, split, n, y.data(), rows);
                path.repacked(gt, false)(w.data(), row_bytes, rows, packed.data(), split, tokens, n, y.data(), rows);
                check([&](int t) { return vec_dot_repacked_scalar(gt, t < split); });
            }
        }
    }
    QVERIFY(compared >= int(paths.size()) * 4 * 21 * 16);
}

void TestVecDot::avx512KernelsMatchAvx2()
{
    // The AVX-512 VNNI kernels (one, four and eight rows; plain and tiled orders) give the AVX2
    // kernels' bits: they are the same arithmetic in fewer instructions.
    QFETCH(QString, type);
    if (!simd::avx512_kernels_usable())
        QSKIP("this CPU has no AVX-512 VNNI (F, BW, VL, VNNI): the AVX-512 kernels are not run here");
    const WeightRow row = weight_row(type);
    const GgmlType gt = row.type;
    if (!simd::vec_dot_avx512(gt) && !simd::vec_dot_x8_avx512(gt) && !simd::vec_dot_tiled_avx512(gt))
        QSKIP("no AVX-512 kernel for this type (its AVX2 or scalar kernel runs)");
    const int64_t n = 1024;
    const auto xq = random_activation_rows(activation_format(gt), n, 23, 8);
    const void* w = row.bytes.data();
    const void* a[8];
    for (int i = 0; i < 8; ++i)
        a[i] = xq[static_cast<std::size_t>(i)].data();
    const auto bits = [](float v) { return std::bit_cast<uint32_t>(v); };
    int compared = 0;
    const auto same_as = [&](VecDotFn reference, VecDotFn one, VecDotX4Fn four, VecDotX8Fn eight) {
        float out4[4] = {}, out8[8] = {};
        if (four)
            four(w, a, n, out4);
        const std::vector<uint8_t> packed = packed_rows(activation_format(gt), xq, n);
        if (eight)
            eight(w, packed.data(), n, out8);
        for (int i = 0; i < 8; ++i) {
            const uint32_t want = bits(reference(w, a[i], n));
            if (one)
                QCOMPARE(bits(one(w, a[i], n)), want);
            if (four && i < 4)
                QCOMPARE(bits(out4[i]), want);
            if (eight)
                QCOMPARE(bits(out8[i]), want);
        }
        compared += (one ? 8 : 0) + (four ? 4 : 0) + (eight ? 8 : 0);
    };
    if (simd::vec_dot_avx2(gt))
        same_as(simd::vec_dot_avx2(gt), simd::vec_dot_avx512(gt), simd::vec_dot_x4_avx512(gt),
                simd::vec_dot_x8_avx512(gt));
    if (simd::vec_dot_tiled_avx2(gt))
        same_as(simd::vec_dot_tiled_avx2(gt), simd::vec_dot_tiled_avx512(gt), simd::vec_dot_tiled_x4_avx512(gt),
                simd::vec_dot_tiled_x8_avx512(gt));
    // the sixteen-token kernel: two packed groups of eight, every result the one-row kernel's
    if (const VecDotX16Fn sixteen = simd::vec_dot_x16_avx512(gt)) {
        const auto rows16 = random_activation_rows(activation_format(gt), n, 29, 16);
        const std::vector<std::vector<uint8_t>> first(rows16.begin(), rows16.begin() + 8),
            second(rows16.begin() + 8, rows16.end());
        std::vector<uint8_t> packed = packed_rows(activation_format(gt), first, n);
        const std::vector<uint8_t> more = packed_rows(activation_format(gt), second, n);
        const std::size_t group = packed.size();
        packed.insert(packed.end(), more.begin(), more.end());
        float out16[16] = {};
        sixteen(w, packed.data(), group, n, out16);
        for (int i = 0; i < 16; ++i)
            QCOMPARE(bits(out16[i]), bits(simd::vec_dot_avx2(gt)(w, rows16[std::size_t(i)].data(), n)));
        compared += 16;
    }
    // an odd count of 32-wide blocks: the one-row kernels that take two blocks at a time end alone
    if (ggml_type_traits(gt).block_elements == 32 && simd::vec_dot_avx512(gt)) {
        const int64_t n_odd = n + 32;
        const auto xo = random_activation_rows(activation_format(gt), n_odd, 31, 2);
        std::vector<uint8_t> odd(ggml_row_bytes(ggml_type_traits(gt), n_odd));
        fill_random_tensor(std::as_writable_bytes(std::span(odd)), gt, false, 17, 2);
        for (const auto& x : xo)
            QCOMPARE(bits(simd::vec_dot_avx512(gt)(odd.data(), x.data(), n_odd)),
                     bits(simd::vec_dot_avx2(gt)(odd.data(), x.data(), n_odd)));
        compared += 2;
    }
    // float rows whose length is not a multiple of 32 (the one-row order's scalar tail), and shorter
    // than one step
    if (ggml_type_traits(gt).block_elements == 1 && simd::vec_dot_avx512(gt))
        for (const int64_t n_tail : {int64_t(1000), int64_t(33), int64_t(7)}) {
            const auto xt = random_activation_rows(activation_format(gt), n_tail, 37, 2);
            std::vector<uint8_t> tail_row(ggml_row_bytes(ggml_type_traits(gt), n_tail));
            fill_random_tensor(std::as_writable_bytes(std::span(tail_row)), gt, false, 19, 2);
            for (const auto& x : xt)
                QCOMPARE(bits(simd::vec_dot_avx512(gt)(tail_row.data(), x.data(), n_tail)),
                         bits(simd::vec_dot_avx2(gt)(tail_row.data(), x.data(), n_tail)));
            compared += 2;
        }
    QVERIFY(compared > 0);
}

void TestVecDot::scalarKernelsMatchAvx2()
{
    // The portable kernels give the AVX2 kernels' bits for every type that has one (same lanes,
    // same fused multiply-adds, same horizontal order), so a CPU without AVX2 computes the reference
    // logits; over several lengths (the F32 kernel's 16-element steps and its tail included).
    QFETCH(QString, type);
    if (simd_level() == SimdLevel::Scalar)
        QSKIP("this CPU (or TOKENSCOPE_SIMD) runs no AVX2 code: nothing to compare the portable kernels with");
    const WeightRow row = weight_row(type);
    const GgmlType gt = row.type;
    const VecDotFn avx2 = simd::vec_dot_avx2(gt);
    if (!avx2)
        QSKIP("no AVX2 kernel for this type: both paths run the portable one");
    const void* w = row.bytes.data();
    int compared = 0;
    for (const int64_t n : {int64_t(256), int64_t(512), int64_t(1024)}) {
        const auto xq = random_activation_rows(activation_format(gt), n, 31 + uint32_t(n), 8);
        for (const auto& a : xq) {
            QCOMPARE(std::bit_cast<uint32_t>(vec_dot_scalar(gt)(w, a.data(), n)),
                     std::bit_cast<uint32_t>(avx2(w, a.data(), n)));
            ++compared;
        }
    }
    if (gt == GgmlType::F32) { // lengths that leave a tail after the 16-element steps
        std::mt19937 rng(3);
        std::normal_distribution<float> dist(0.0f, 1.0f);
        for (const int64_t n : {int64_t(7), int64_t(40), int64_t(1001)}) {
            std::vector<float> x(static_cast<std::size_t>(n)), y(static_cast<std::size_t>(n));
            for (std::size_t i = 0; i < x.size(); ++i) {
                x[i] = dist(rng);
                y[i] = dist(rng);
            }
            QCOMPARE(std::bit_cast<uint32_t>(vec_dot_scalar(gt)(x.data(), y.data(), n)),
                     std::bit_cast<uint32_t>(avx2(x.data(), y.data(), n)));
            ++compared;
        }
    }
    QVERIFY(compared >= 24);
}

void TestVecDot::tiledOrderSimdMatchesScalar()
{
    // Batches of 8+ rows use llama.cpp's tiled order for k-quants: SIMD one-row, four-row and the
    // scalar version give the same bits, and stay close to the dequantized reference.
    QFETCH(QString, type);
    const WeightRow row = weight_row(type);
    const GgmlType gt = row.type;
    const VecDotFn scalar = vec_dot_tiled_scalar(gt);
    if (!scalar)
        QSKIP("only k-quants have a tiled order");
    const int64_t n = 1024;
    const auto xq = random_activation_rows(activation_format(gt), n, 5);
    const void* w = row.bytes.data();
    const void* a[4] = {xq[0].data(), xq[1].data(), xq[2].data(), xq[3].data()};
    const VecDotFn one = vec_dot_for_batch(gt, n, 8);
    float four[4] = {};
    if (const VecDotX4Fn dot4 = vec_dot_x4_for_batch(gt, 8))
        dot4(w, a, n, four);
    for (int i = 0; i < 4; ++i) {
        const float s = scalar(w, a[i], n);
        QCOMPARE(std::bit_cast<uint32_t>(one(w, a[i], n)), std::bit_cast<uint32_t>(s));
        if (vec_dot_x4_for_batch(gt, 8))
            QCOMPARE(std::bit_cast<uint32_t>(four[i]), std::bit_cast<uint32_t>(s));
        const float v = vec_dot_for(gt)(w, a[i], n);
        QVERIFY(std::fabs(v - s) <= 1e-4f * std::max(1.0f, std::fabs(v)));
    }
}

void TestVecDot::batchedOrderSimdMatchesScalar()
{
    // llama.cpp's llamafile order for batches of 2+ rows (float types with rows of a multiple of 8,
    // IQ4_NL): the AVX2 kernel gives the portable kernel's bits; other widths and types have none.
    QFETCH(QString, type);
    const WeightRow row = weight_row(type);
    const GgmlType gt = row.type;
    if (!vec_dot_batched_scalar(gt, 1024))
        QSKIP("no batched order for this type: batches use its one-row or tiled order");
    if (gt != GgmlType::IQ4_NL)
        QVERIFY(!vec_dot_batched_scalar(gt, 1001));
    if (simd_level() == SimdLevel::Scalar)
        QSKIP("this CPU (or TOKENSCOPE_SIMD) runs no AVX2 code");
    const VecDotFn avx2 = simd::vec_dot_batched_avx2(gt, 1024);
    QVERIFY(avx2);
    int compared = 0;
    for (const int64_t n : {int64_t(256), int64_t(1024)}) {
        const auto xq = random_activation_rows(activation_format(gt), n, 61 + uint32_t(n));
        for (const auto& a : xq) {
            const float want = vec_dot_batched_scalar(gt, n)(row.bytes.data(), a.data(), n);
            QCOMPARE(std::bit_cast<uint32_t>(avx2(row.bytes.data(), a.data(), n)), std::bit_cast<uint32_t>(want));
            QCOMPARE(std::bit_cast<uint32_t>(vec_dot_for_batch(gt, n, 2)(row.bytes.data(), a.data(), n)),
                     std::bit_cast<uint32_t>(want));
            ++compared;
        }
    }
    QCOMPARE(compared, 8);
}

void TestVecDot::repackedOrderSimdMatchesScalar()
{
    // llama.cpp's repacked order (Q4_0, IQ4_NL, Q4_K): the AVX2 gemv- and gemm-order kernels and the
    // four-row (gemm-order) kernel give the portable kernels' bits.
    QFETCH(QString, type);
    const WeightRow row = weight_row(type);
    const GgmlType gt = row.type;
    QCOMPARE(llama_cpp_repacks(gt, 64), gt == GgmlType::Q4_0 || gt == GgmlType::IQ4_NL || gt == GgmlType::Q4_K);
    QVERIFY(!llama_cpp_repacks(gt, 67));
    if (!vec_dot_repacked_scalar(gt, false))
        QSKIP("llama.cpp does not repack this type");
    if (simd_level() == SimdLevel::Scalar)
        QSKIP("this CPU (or TOKENSCOPE_SIMD) runs no AVX2 code");
    const int64_t n = 1024;
    const auto xq = random_activation_rows(activation_format(gt), n, 71);
    const void* w = row.bytes.data();
    const void* a[4] = {xq[0].data(), xq[1].data(), xq[2].data(), xq[3].data()};
    float four[4] = {};
    vec_dot_repacked_x4(gt)(w, a, n, four);
    for (int i = 0; i < 4; ++i) {
        for (const bool gemm : {false, true})
            QCOMPARE(std::bit_cast<uint32_t>(vec_dot_repacked(gt, gemm)(w, a[i], n)),
                     std::bit_cast<uint32_t>(vec_dot_repacked_scalar(gt, gemm)(w, a[i], n)));
        QCOMPARE(std::bit_cast<uint32_t>(four[i]),
                 std::bit_cast<uint32_t>(vec_dot_repacked_scalar(gt, true)(w, a[i], n)));
    }
    // eight rows at once, each in its own lane: each row's one-row bits, in both orders
    const std::size_t row_bytes = ggml_row_bytes(ggml_type_traits(gt), n);
    std::vector<uint8_t> rows8(8 * row_bytes);
    fill_random_tensor(std::as_writable_bytes(std::span(rows8)), gt, false, 11, 2);
    std::vector<uint8_t> extreme(xq[0].size()); // quants at ±127 (the lanes kernel's int16 bounds)
    {
        std::mt19937 rng(5);
        std::vector<float> x(static_cast<std::size_t>(n));
        for (auto& v : x)
            v = rng() % 2 ? 1.0f : -1.0f;
        quantize_activations(activation_format(gt), x.data(), extreme.data(), n);
    }
    for (const void* token : {a[0], a[1], a[2], a[3], static_cast<const void*>(extreme.data())})
        for (const bool gemm : {false, true}) {
            float eight[8] = {};
            vec_dot_repacked_rows8(gt, gemm)(rows8.data(), row_bytes, token, n, eight);
            for (int r = 0; r < 8; ++r)
                QCOMPARE(std::bit_cast<uint32_t>(eight[r]), std::bit_cast<uint32_t>(vec_dot_repacked_scalar(gt, gemm)(
                                                                rows8.data() + r * row_bytes, token, n)));
        }
    if (gt != GgmlType::Q4_K) { // an odd count of 32-wide blocks (the 512-bit kernel takes two at a time)
        const int64_t n_odd = n + 32;
        const auto xo = random_activation_rows(activation_format(gt), n_odd, 73);
        const std::size_t odd_bytes = ggml_row_bytes(ggml_type_traits(gt), n_odd);
        std::vector<uint8_t> odd(8 * odd_bytes);
        fill_random_tensor(std::as_writable_bytes(std::span(odd)), gt, false, 13, 2);
        float eight[8] = {};
        vec_dot_repacked_rows8(gt, false)(odd.data(), odd_bytes, xo[0].data(), n_odd, eight);
        for (int r = 0; r < 8; ++r)
            QCOMPARE(std::bit_cast<uint32_t>(eight[r]), std::bit_cast<uint32_t>(vec_dot_repacked_scalar(gt, false)(
                                                            odd.data() + r * odd_bytes, xo[0].data(), n_odd)));
    }
    for (const bool gemm : {true, false}) { // four tokens at once, in each order
        float block[4][8] = {};
        vec_dot_repacked_rows8x4(gt, gemm)(rows8.data(), row_bytes, a, n, block);
        for (int t = 0; t < 4; ++t)
            for (int r = 0; r < 8; ++r)
                QCOMPARE(std::bit_cast<uint32_t>(block[t][r]), std::bit_cast<uint32_t>(vec_dot_repacked_scalar(
                                                                   gt, gemm)(rows8.data() + r * row_bytes, a[t], n)));
    }
}

void TestVecDot::fourRowKernelsMatchOneRow()
{
    QFETCH(QString, type);
    const WeightRow row = weight_row(type);
    const GgmlType gt = row.type;
    const VecDotX4Fn dot4 = vec_dot_x4_for_batch(gt, 4);
    if (!dot4)
        QSKIP("no four-row kernel for this type on this CPU");
    const int64_t n = 1024;
    const auto xq = random_activation_rows(activation_format(gt), n, 11);
    const void* a[4] = {xq[0].data(), xq[1].data(), xq[2].data(), xq[3].data()};
    float out[4];
    dot4(row.bytes.data(), a, n, out);
    // the one-row kernel of the same batch order (IQ4_NL's batches sum otherwise than its one row)
    const VecDotFn one = vec_dot_for_batch(gt, n, 4);
    for (int i = 0; i < 4; ++i)
        QCOMPARE(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(one(row.bytes.data(), a[i], n)));
}

void TestVecDot::avx2EightRowKernelsMatchOneRow()
{
    // The AVX2 eight-row kernels (plain and tiled orders) read the packed layout of
    // pack8_activations and give each token the one-row AVX2 kernel's bits; over several lengths and
    // activation rows with the extreme quants (±127: the packed bytes 1 and 255).
    QFETCH(QString, type);
    if (simd_level() == SimdLevel::Scalar)
        QSKIP("this CPU (or TOKENSCOPE_SIMD) runs no AVX2 code");
    const WeightRow row = weight_row(type);
    const GgmlType gt = row.type;
    const bool plain = simd::vec_dot_x8_avx2(gt) != nullptr, tiled = simd::vec_dot_tiled_x8_avx2(gt) != nullptr;
    if (!plain && !tiled)
        QSKIP("no AVX2 eight-row kernel for this type (the four-row kernel runs)");
    const void* w = row.bytes.data();
    const ActivationFormat format = activation_format(gt);
    int compared = 0;
    for (const int64_t n : {int64_t(256), int64_t(512), int64_t(1024)}) {
        auto xq = random_activation_rows(format, n, 41 + uint32_t(n), 8);
        if (format == ActivationFormat::Q8_0) { // one row at the quant range's ends
            auto* blocks = reinterpret_cast<BlockQ8_0*>(xq[3].data());
            for (int64_t i = 0; i < n; ++i)
                blocks[i / 32].qs[i % 32] = (i % 2) ? 127 : -127;
        }
        const std::vector<uint8_t> packed = packed_rows(format, xq, n);
        const auto check = [&](VecDotX8Fn eight, VecDotFn one) {
            float out[8] = {};
            eight(w, packed.data(), n, out);
            for (int i = 0; i < 8; ++i) {
                QCOMPARE(std::bit_cast<uint32_t>(out[i]),
                         std::bit_cast<uint32_t>(one(w, xq[static_cast<std::size_t>(i)].data(), n)));
                ++compared;
            }
        };
        if (plain) // against the one-row kernel of the batch order (IQ4_NL: the batched one)
            check(simd::vec_dot_x8_avx2(gt),
                  simd::vec_dot_batched_avx2(gt, n) ? simd::vec_dot_batched_avx2(gt, n) : simd::vec_dot_avx2(gt));
        if (tiled)
            check(simd::vec_dot_tiled_x8_avx2(gt), simd::vec_dot_tiled_avx2(gt));
    }
    QVERIFY(compared >= 24);
}

void TestVecDot::plainEightRowKernelsMatchOneRow()
{
    // The plain order's eight-row decode kernels (vec_dot_rows8_of): each row the bits of the one-row
    // kernel they stand for, and so of the portable one, over even and odd counts of 32-wide blocks
    // and activations at the quant range's ends.
    QFETCH(QString, type);
    const GgmlType gt = weight_row(type).type;
    const VecDotFn one = vec_dot_for_batch(gt, 1024, 1);
    const VecDotRows8Fn eight = vec_dot_rows8_of(one);
    const bool expected = simd_level() == SimdLevel::Avx512 && (gt == GgmlType::Q4_0 || gt == GgmlType::IQ4_NL);
    QCOMPARE(eight != nullptr, expected);
    if (!eight)
        QSKIP("no plain-order eight-row kernel for this type on this CPU (rows run one at a time)");
    int compared = 0;
    for (const int64_t n : {int64_t(1024), int64_t(1056), int64_t(32), int64_t(96)}) {
        const std::size_t row_bytes = ggml_row_bytes(ggml_type_traits(gt), n);
        std::vector<uint8_t> rows(8 * row_bytes);
        fill_random_tensor(std::as_writable_bytes(std::span(rows)), gt, false, 17 + uint32_t(n), 2);
        auto xq = random_activation_rows(activation_format(gt), n, 43 + uint32_t(n), 2);
        auto* blocks = reinterpret_cast<BlockQ8_0*>(xq[1].data());
        for (int64_t i = 0; i < n; ++i)
            blocks[i / 32].qs[i % 32] = (i % 3) ? 127 : -127;
        for (const auto& a : xq) {
            float out[8] = {};
            eight(rows.data(), row_bytes, a.data(), n, out);
            for (int r = 0; r < 8; ++r) {
                const void* wr = rows.data() + r * row_bytes;
                QCOMPARE(std::bit_cast<uint32_t>(out[r]), std::bit_cast<uint32_t>(one(wr, a.data(), n)));
                QCOMPARE(std::bit_cast<uint32_t>(out[r]), std::bit_cast<uint32_t>(vec_dot_scalar(gt)(wr, a.data(), n)));
                ++compared;
            }
        }
    }
    QCOMPARE(compared, 4 * 2 * 8);
}

void TestVecDot::matchesDequantizedReference_data()
{
    QTest::addColumn<QString>("type");
    for (const char* t : {"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K",
                          "Q6_K", "IQ4_NL", "IQ4_XS"})
        QTest::newRow(t) << QString(t);
}

void TestVecDot::matchesDequantizedReference()
{
    QFETCH(QString, type);
    const WeightRow row = weight_row(type);
    const int64_t n = 1024; // four k-quant super-blocks, 32 legacy blocks
    QVERIFY(row.elements >= n);
    const GgmlType gt = row.type;
    const void* w = row.bytes.data();
    std::mt19937 rng(7);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    // The BF16 fixture holds arbitrary bit patterns (huge magnitudes): use weights of a sane size.
    std::vector<uint16_t> bf16_row;
    if (gt == GgmlType::BF16) {
        for (int64_t i = 0; i < n; ++i)
            bf16_row.push_back(static_cast<uint16_t>(std::bit_cast<uint32_t>(dist(rng)) >> 16));
        w = bf16_row.data();
    }

    std::vector<float> x(n);
    for (auto& v : x)
        v = dist(rng);
    const ActivationFormat af = activation_format(gt);
    std::vector<uint8_t> xq(activation_row_bytes(af, n));
    quantize_activations(af, x.data(), xq.data(), n);

    std::vector<float> wf(n);
    dequantize_row(gt, w, wf.data(), n);
    const auto xa = dequant_activations(af, xq.data(), x);
    double ref = 0.0, mag = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        if (!std::isfinite(wf[i]))
            QSKIP("non-finite weights in this fixture row");
        ref += double(wf[i]) * xa[i];
        mag += std::fabs(double(wf[i]) * xa[i]);
    }
    const float scalar = vec_dot_scalar(gt)(w, xq.data(), n);
    const float fast = vec_dot_for(gt)(w, xq.data(), n);
    const double tol = 1e-5 * mag + 1e-30;
    QVERIFY2(std::fabs(scalar - ref) <= tol, qPrintable(QString("scalar %1 vs reference %2").arg(scalar).arg(ref)));
    QVERIFY2(std::fabs(fast - ref) <= tol, qPrintable(QString("%1 %2 vs reference %3")
                                                          .arg(QString::fromUtf8(simd_level_name(simd_level()).data()))
                                                          .arg(fast)
                                                          .arg(ref)));
}

void TestVecDot::activationQuantizationMatchesGgml()
{
    // Q8_0 as ggml's x86 quantizer: d = amax/127 stored as f16, q = x · 127/amax rounded half to even.
    std::vector<float> x(32, 0.0f);
    x[0] = 1.27f;
    x[1] = -0.5f;
    x[2] = 0.005f;
    BlockQ8_0 b{};
    quantize_activations(ActivationFormat::Q8_0, x.data(), &b, 32);
    QCOMPARE(b.d, f32_to_fp16(0.01f));
    QCOMPARE(int(b.qs[0]), 127);
    QCOMPARE(int(b.qs[1]), -50);
    QCOMPARE(int(b.qs[2]), 0); // 0.005 · 100 = 0.5 rounds to even
    // Q8_K: scale from the signed maximum, −127/max; block sums per 16.
    std::vector<float> y(256, 0.25f);
    y[5] = -2.0f;
    BlockQ8_K k{};
    quantize_activations(ActivationFormat::Q8_K, y.data(), &k, 256);
    QCOMPARE(int(k.qs[5]), -127); // iscale = −127/max: the signed extreme maps to ∓127
    QCOMPARE(k.d, 1.0f / (-127.0f / -2.0f));
    QCOMPARE(int(k.qs[0]), 16); // nearest integer to 0.25 · 63.5 = 15.875
    int sum0 = 0;
    for (int i = 0; i < 16; ++i)
        sum0 += k.qs[i];
    QCOMPARE(int(k.bsums[0]), sum0);
}

QTEST_GUILESS_MAIN(TestVecDot)
void TestVecDot::bf16PairsKernelKeepsTheBatchedBits()
{
    // BF16 prefill with VDPBF16PS (two steps of each chain in one instruction) gives llama.cpp's
    // batched order's bits: an odd count of steps (the last one alone), rows in two chunks of the
    // kernel (64 and 13) and tokens that are not whole groups, zeros; and where a product or sum could
    // be subnormal (which the instruction would flush to zero), the FMA kernel's bits all the same —
    // the second chunk's weights are subnormal then, so a kernel that did not hand it over would
    // give zeros there, while the first chunk still takes the fast path.
    if (simd_level() != SimdLevel::Avx512 || !__builtin_cpu_supports("avx512bf16"))
        QSKIP("this CPU has no AVX512_BF16 (or TOKENSCOPE_SIMD asks for less): the FMA kernel runs");
    QVERIFY2(simd::bf16_pairs_gemm_avx512bf16(), "VDPBF16PS does not round as two FMAs here");
    QVERIFY(float_gemm_for(GgmlType::BF16, 776) == simd::bf16_pairs_gemm_avx512bf16()); // the run-time choice
    const int64_t n = 776, rows = 77, tokens = 9;                                       // 97 steps of eight
    std::mt19937 rng(41);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (const bool subnormal : {false, true}) {
        std::vector<uint16_t> w(static_cast<std::size_t>(rows * n));
        for (std::size_t i = 0; i < w.size(); ++i)
            w[i] = f32_to_bf16((subnormal && i >= std::size_t(64 * n) ? 0x1p-135f : 0.05f) * dist(rng));
        std::fill(w.begin() + 3 * n, w.begin() + 4 * n, uint16_t(0)); // a row of zeros
        std::vector<uint16_t> a(static_cast<std::size_t>(tokens * n));
        for (auto& v : a)
            v = f32_to_bf16(dist(rng));
        for (int64_t i = 0; i < n; i += 5)
            a[static_cast<std::size_t>(n + i)] = 0;
        const std::size_t a_bytes = 2 * static_cast<std::size_t>(n),
                          panel_bytes = tiled_panel_bytes(ActivationFormat::BF16, n);
        std::vector<uint8_t> panel(panel_bytes);
        pack_tiled_panel(ActivationFormat::BF16, reinterpret_cast<const uint8_t*>(a.data()), a_bytes, int(tokens), n,
                         panel.data());
        std::vector<float> y(static_cast<std::size_t>(tokens * rows), std::nanf(""));
        simd::bf16_pairs_gemm_avx512bf16()(w.data(), 2 * n, rows, panel.data(), 0, tokens, n, y.data(), rows);
        int subnormal_results = 0;
        for (int64_t t = 0; t < tokens; ++t)
            for (int64_t r = 0; r < rows; ++r) {
                const float want = vec_dot_batched_scalar(GgmlType::BF16, n)(w.data() + r * n, a.data() + t * n, n);
                QCOMPARE(std::bit_cast<uint32_t>(y[std::size_t(t * rows + r)]), std::bit_cast<uint32_t>(want));
                subnormal_results += std::fpclassify(want) == FP_SUBNORMAL;
            }
        QCOMPARE(subnormal_results > 0, subnormal); // the case is real: those sums are subnormal
    }
}

#include "test_vec_dot.moc"
