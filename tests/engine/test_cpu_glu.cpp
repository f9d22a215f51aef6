// SPDX-License-Identifier: GPL-3.0-or-later
// The gated activations of the CPU backend (GeGLU through ggml's F16 GELU table, SwiGLU through
// its vector exponential): the kernels (AVX2 where the CPU has it) equal the element-by-element
// definition bit for bit, across the table's cut-offs at ±10 and on lengths with a tail.
#include "backend/cpu/attention_kernels.h"
#include "backend/cpu/cpu_kernels.h"
#include "quant/vec_dot.h"
#include "util/fp16.h"

#include <QTest>
#include <bit>
#include <cmath>
#include <random>

using namespace engine;

class TestCpuGlu : public QObject {
    Q_OBJECT
private slots:
    void matchesDefinition_data();
    void matchesDefinition();
};

void TestCpuGlu::matchesDefinition_data()
{
    QTest::addColumn<int>("n");
    QTest::addColumn<bool>("gelu");
    for (const int n : {1, 7, 8, 29, 640, 4864 + 3})
        for (const bool gelu : {true, false})
            QTest::newRow(qPrintable(QString("%1 %2").arg(gelu ? "GeGLU" : "SwiGLU").arg(n))) << n << gelu;
}

void TestCpuGlu::matchesDefinition()
{
    QFETCH(int, n);
    QFETCH(bool, gelu);
    qInfo("kernels: %s", simd_level_name(simd_level()).data());
    std::mt19937 rng(static_cast<uint32_t>(n * 2 + gelu));
    std::uniform_real_distribution<float> dist(-12.0f, 12.0f);
    const auto count = static_cast<std::size_t>(n);
    std::vector<float> gate(count), up(count), got(count), want(count);
    for (std::size_t i = 0; i < count; ++i) {
        gate[i] = dist(rng);
        up[i] = dist(rng) * 0.25f;
    }
    const float edges[] = {-10.0f, 10.0f, 0.0f, -0.0f, std::nextafter(-10.0f, 0.0f), std::nextafter(10.0f, 0.0f),
                           -9.99f, 1e-8f};
    for (std::size_t i = 0; i < count && i < std::size(edges); ++i)
        gate[count - 1 - i] = edges[i];

    const auto& table = cpu::gelu_f16_table();
    const std::size_t vec_end = count & ~std::size_t(7);
    for (std::size_t i = 0; i < count; ++i) {
        const float x = gate[i];
        if (gelu)
            want[i] = x <= -10.0f ? 0.0f : x >= 10.0f ? x * up[i] : fp16_to_f32(table[f32_to_fp16(x)]) * up[i];
        else if (i < vec_end) // whole chunks of eight: ggml's vector exponential; the tail: libm
            want[i] = (x / (1.0f + cpu::softmax_expf(-x))) * up[i];
        else
            want[i] = x / (1.0f + std::exp(-x)) * up[i];
    }
    if (gelu)
        cpu::kernel_geglu(gate.data(), up.data(), got.data(), n);
    else
        cpu::kernel_swiglu(gate.data(), up.data(), got.data(), n);
    for (std::size_t i = 0; i < count; ++i)
        QVERIFY2(std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want[i]),
                 qPrintable(QString("[%1] gate %2: %3, expected %4")
                                .arg(i)
                                .arg(gate[i], 0, 'g', 9)
                                .arg(got[i], 0, 'g', 9)
                                .arg(want[i], 0, 'g', 9)));
    // in place, as the backend calls it
    std::vector<float> in_place = gate;
    if (gelu)
        cpu::kernel_geglu(in_place.data(), up.data(), in_place.data(), n);
    else
        cpu::kernel_swiglu(in_place.data(), up.data(), in_place.data(), n);
    for (std::size_t i = 0; i < count; ++i)
        QCOMPARE(std::bit_cast<uint32_t>(in_place[i]), std::bit_cast<uint32_t>(want[i]));
}

QTEST_APPLESS_MAIN(TestCpuGlu)
#include "test_cpu_glu.moc"
