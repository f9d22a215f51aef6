// SPDX-License-Identifier: GPL-3.0-or-later
// The KV-cache calculator: the exact figures (Llama 3.1 70B at 131,072 tokens, Llama 3 8B
// at 8,192, sequences fitting an 80 GiB / 80 GB GPU), Gemma 3's sliding-window layers
// (shared/reference/kv-cache.md §3), GQA against full multi-head attention, offloading, cache
// types, the chart curve, formatting, and the loaded model's shape against its preset.
#include "gguf/gguf_file.h"
#include "kv/kv_calculator.h"
#include "model/model_config.h"
#include "test_paths.h"

#include <QTest>
#include <limits>

using namespace engine;

namespace {

const KvModelShape& preset(const std::string& name)
{
    for (const auto& p : kv_presets())
        if (p.name == name)
            return p;
    qFatal("no preset %s", name.c_str());
}

KvCalcInput input_for(const std::string& name, uint64_t context, KvDtype dtype = KvDtype::F16)
{
    KvCalcInput in;
    in.shape = preset(name);
    in.context = context;
    in.dtype = dtype;
    return in;
}

constexpr uint64_t GiB = 1ull << 30;

} // namespace

class TestKvCalculator : public QObject {
    Q_OBJECT
private slots:
    void presetsInOrderWithSources();
    void llama31_70bAt128k();
    void llama3_8bAt8k();
    void sequencesFitOnTheGpu();
    void gemma3SlidingWindow();
    void fullMultiHeadAttention();
    void offloadSplit();
    void cacheTypes();
    void severalSequences();
    void curveForTheChart();
    void formatting();
    void loadedModelMatchesItsPreset();
};

void TestKvCalculator::presetsInOrderWithSources()
{
    const std::vector<std::string> names = {"Llama 3.1 8B",    "Llama 3.1 70B", "Llama 3.1 405B", "Llama 3 8B",
                                            "Mistral 7B v0.3", "Qwen 2.5 7B",   "Qwen 2.5 72B",   "Gemma 3 270M",
                                            "Gemma 3 1B",      "Gemma 3 4B",    "Gemma 3 27B",    "GPT-2"};
    const auto& presets = kv_presets();
    QCOMPARE(presets.size(), names.size());
    for (std::size_t i = 0; i < names.size(); ++i) {
        const KvModelShape& p = presets[i];
        QCOMPARE(p.name, names[i]);
        QVERIFY2(p.source.find("config.json") != std::string::npos, p.name.c_str());
        QVERIFY(p.n_layer > 0 && p.head_dim > 0 && p.n_head_kv > 0 && p.context_length > 0 && p.parameters > 0);
        QCOMPARE(p.n_head % p.n_head_kv, 0u);
        QVERIFY(p.n_sliding_layers < p.n_layer);
        QCOMPARE(p.sliding_window == 0, p.n_sliding_layers == 0);
    }
    // Gemma 3: layer il is local iff il % 6 < 5.
    for (const char* name : {"Gemma 3 270M", "Gemma 3 1B", "Gemma 3 4B", "Gemma 3 27B"}) {
        const KvModelShape& p = preset(name);
        uint32_t sliding = 0;
        for (uint32_t il = 0; il < p.n_layer; ++il)
            sliding += il % 6 < 5 ? 1 : 0;
        QCOMPARE(p.n_sliding_layers, sliding);
    }
}

void TestKvCalculator::llama31_70bAt128k()
{
    const KvCalcResult r = calculate_kv(input_for("Llama 3.1 70B", 131072));
    QCOMPARE(r.bytes_per_token, uint64_t(327680)); // 320 KiB
    QCOMPARE(r.bytes_per_token_exact, 327680.0);
    QCOMPARE(r.bytes_per_sequence, uint64_t(42'949'672'960));
    QCOMPARE(r.total_bytes, uint64_t(42'949'672'960));
    QCOMPARE(r.formula, std::string("2 × 80 layers × 8 KV heads × 128 dims × 131,072 tokens × 2 B = 42,949,672,960 B"));
    QCOMPARE(format_binary_bytes(double(r.bytes_per_sequence)), std::string("40.00 GiB"));
    QCOMPARE(format_decimal_bytes(double(r.bytes_per_sequence)), std::string("42.95 GB"));
    // At 128,000 tokens: 41.94 GB (39.06 GiB).
    const KvCalcResult r128k = calculate_kv(input_for("Llama 3.1 70B", 128000));
    QCOMPARE(format_decimal_bytes(double(r128k.bytes_per_sequence)), std::string("41.94 GB"));
    QCOMPARE(format_binary_bytes(double(r128k.bytes_per_sequence)), std::string("39.06 GiB"));
}

void TestKvCalculator::llama3_8bAt8k()
{
    const KvCalcResult r = calculate_kv(input_for("Llama 3 8B", 8192));
    QCOMPARE(r.bytes_per_token, uint64_t(131072)); // 128 KiB
    QCOMPARE(r.bytes_per_sequence, uint64_t(1'073'741'824));
    QCOMPARE(format_binary_bytes(double(r.bytes_per_sequence)), std::string("1.00 GiB"));
    QCOMPARE(preset("Llama 3 8B").context_length, 8192u);
}

void TestKvCalculator::sequencesFitOnTheGpu()
{
    KvCalcInput in = input_for("Llama 3 8B", 8192);
    QCOMPARE(calculate_kv(in).sequences_fit, uint64_t(0)); // no GPU figure
    in.gpu_bytes = 80 * GiB;
    in.weight_bytes = 16 * GiB;
    QCOMPARE(calculate_kv(in).sequences_fit, uint64_t(64));
    in.gpu_bytes = 80'000'000'000;
    in.weight_bytes = 16'000'000'000;
    QCOMPARE(calculate_kv(in).sequences_fit, uint64_t(59));
    in.weight_bytes = 80'000'000'000; // no room left
    QCOMPARE(calculate_kv(in).sequences_fit, uint64_t(0));
    in.gpu_bytes = GiB - 1; // not even one sequence
    in.weight_bytes = 0;
    QCOMPARE(calculate_kv(in).sequences_fit, uint64_t(0));
}

void TestKvCalculator::gemma3SlidingWindow()
{
    // Per layer per token 2 × 1 × 256 × 2 = 1,024 B; 3 global layers × 32,768 + 15 sliding × 512 cells.
    KvCalcInput in = input_for("Gemma 3 270M", 32768);
    KvCalcResult r = calculate_kv(in);
    QCOMPARE(r.bytes_per_token, uint64_t(18 * 1024));
    QCOMPARE(r.bytes_per_sequence, uint64_t(3 * 32768 + 15 * 512) * 1024);
    QCOMPARE(r.bytes_per_sequence, uint64_t(108'527'616)); // 96 MiB + 7.5 MiB
    QVERIFY2(r.formula.find("15 sliding layers × 512 tokens") != std::string::npos, r.formula.c_str());
    QVERIFY2(r.formula.find("3 global layers × 32,768 tokens") != std::string::npos, r.formula.c_str());
    QVERIFY2(r.formula.find("= 108,527,616 B") != std::string::npos, r.formula.c_str());
    // Windows off: every layer holds the full context, 576 MiB.
    in.sliding_window = false;
    r = calculate_kv(in);
    QCOMPARE(r.bytes_per_sequence, uint64_t(576) << 20);
    // Below the window the cap changes nothing.
    in.sliding_window = true;
    in.context = 300;
    QCOMPARE(calculate_kv(in).bytes_per_sequence, uint64_t(18 * 300 * 1024));
    // Gemma 3 27B at 131,072: 10 global × 131,072 + 52 sliding × 1,024 cells of 2 × 16 × 128 × 2 B.
    const KvCalcResult big = calculate_kv(input_for("Gemma 3 27B", 131072));
    QCOMPARE(big.bytes_per_sequence, uint64_t(10 * 131072 + 52 * 1024) * 8192);
}

void TestKvCalculator::fullMultiHeadAttention()
{
    for (const char* name : {"Llama 3.1 70B", "Llama 3 8B", "Gemma 3 270M", "Qwen 2.5 7B", "GPT-2"}) {
        KvCalcInput in = input_for(name, 4096);
        const KvCalcResult gqa = calculate_kv(in);
        in.full_mha = true;
        const KvCalcResult mha = calculate_kv(in);
        const uint64_t factor = in.shape.n_head / in.shape.n_head_kv;
        QCOMPARE(mha.bytes_per_token, gqa.bytes_per_token * factor);
        QCOMPARE(mha.bytes_per_sequence, gqa.bytes_per_sequence * factor);
    }
    KvCalcInput in = input_for("Llama 3.1 70B", 131072);
    in.full_mha = true;
    const KvCalcResult r = calculate_kv(in);
    QCOMPARE(r.bytes_per_sequence, 320 * GiB);
    QVERIFY2(r.formula.find("64 KV heads") != std::string::npos, r.formula.c_str());
    QCOMPARE(calculate_kv([] {
                 KvCalcInput i = input_for("Llama 3 8B", 8192);
                 i.full_mha = true;
                 return i;
             }())
                 .bytes_per_sequence,
             4 * GiB);
}

void TestKvCalculator::offloadSplit()
{
    KvCalcInput in = input_for("Llama 3 8B", 8192);
    in.offload_fraction = 0.25;
    KvCalcResult r = calculate_kv(in);
    QCOMPARE(r.total_bytes, GiB);
    QCOMPARE(r.gpu_cache_bytes, 3 * GiB / 4);
    QCOMPARE(r.cpu_cache_bytes, GiB / 4);
    QCOMPARE(r.gpu_cache_bytes + r.cpu_cache_bytes, r.total_bytes);
    // Half of each sequence on the GPU: twice as many fit.
    in.offload_fraction = 0.5;
    in.gpu_bytes = 80 * GiB;
    in.weight_bytes = 16 * GiB;
    QCOMPARE(calculate_kv(in).sequences_fit, uint64_t(128));
    in.offload_fraction = 0.0;
    r = calculate_kv(in);
    QCOMPARE(r.cpu_cache_bytes, uint64_t(0));
    QCOMPARE(r.gpu_cache_bytes, GiB);
    // Everything offloaded: the GPU sets no limit.
    in.offload_fraction = 1.0;
    r = calculate_kv(in);
    QCOMPARE(r.gpu_cache_bytes, uint64_t(0));
    QCOMPARE(r.cpu_cache_bytes, GiB);
    QCOMPARE(r.sequences_fit, std::numeric_limits<uint64_t>::max());
}

void TestKvCalculator::cacheTypes()
{
    QCOMPARE(kv_dtype_bytes(KvDtype::F32), 4.0);
    QCOMPARE(kv_dtype_bytes(KvDtype::F16), 2.0);
    QCOMPARE(kv_dtype_bytes(KvDtype::BF16), 2.0);
    QCOMPARE(kv_dtype_bytes(KvDtype::FP8), 1.0);
    QCOMPARE(kv_dtype_bytes(KvDtype::INT8), 1.0);
    QCOMPARE(kv_dtype_bytes(KvDtype::INT4), 0.5);
    QCOMPARE(kv_dtype_name(KvDtype::F32), std::string_view("FP32"));
    QCOMPARE(kv_dtype_name(KvDtype::BF16), std::string_view("BF16"));
    QCOMPARE(kv_dtype_name(KvDtype::INT4), std::string_view("INT4"));

    const uint64_t f16 = calculate_kv(input_for("Llama 3.1 70B", 131072)).bytes_per_sequence;
    QCOMPARE(calculate_kv(input_for("Llama 3.1 70B", 131072, KvDtype::F32)).bytes_per_sequence, 2 * f16);
    QCOMPARE(calculate_kv(input_for("Llama 3.1 70B", 131072, KvDtype::BF16)).bytes_per_sequence, f16);
    QCOMPARE(calculate_kv(input_for("Llama 3.1 70B", 131072, KvDtype::FP8)).bytes_per_sequence, f16 / 2);
    QCOMPARE(calculate_kv(input_for("Llama 3.1 70B", 131072, KvDtype::INT8)).bytes_per_sequence, f16 / 2);
    const KvCalcResult int4 = calculate_kv(input_for("Llama 3.1 70B", 131072, KvDtype::INT4));
    QCOMPARE(int4.bytes_per_sequence, f16 / 4);
    QCOMPARE(int4.bytes_per_sequence, 10 * GiB);
    QCOMPARE(int4.bytes_per_token, uint64_t(81920));
    QCOMPARE(int4.bytes_per_token_exact, 81920.0);
    QVERIFY2(int4.formula.find("× 0.5 B") != std::string::npos, int4.formula.c_str());
    // INT4 halves INT8 for the sliding-window model too, GPT-2 (odd numbers of tokens) as well.
    QCOMPARE(calculate_kv(input_for("Gemma 3 270M", 32768, KvDtype::INT4)).bytes_per_sequence,
             calculate_kv(input_for("Gemma 3 270M", 32768, KvDtype::INT8)).bytes_per_sequence / 2);
    QCOMPARE(calculate_kv(input_for("GPT-2", 1023, KvDtype::INT4)).bytes_per_sequence, uint64_t(12 * 12 * 64) * 1023);
}

void TestKvCalculator::severalSequences()
{
    KvCalcInput in = input_for("Llama 3 8B", 8192);
    in.sequences = 4;
    const KvCalcResult r = calculate_kv(in);
    QCOMPARE(r.bytes_per_sequence, GiB);
    QCOMPARE(r.total_bytes, 4 * GiB);
    QVERIFY2(r.formula.find("× 4 sequences = 4,294,967,296 B") != std::string::npos, r.formula.c_str());
}

void TestKvCalculator::curveForTheChart()
{
    KvCalcInput in = input_for("Llama 3.1 70B", 131072);
    in.sequences = 2;
    auto curve = kv_curve(in, 131072, 5);
    QCOMPARE(curve.size(), std::size_t(5));
    QCOMPARE(curve.front(), std::make_pair(uint64_t(0), uint64_t(0)));
    QCOMPARE(curve.back(), std::make_pair(uint64_t(131072), 80 * GiB));
    for (std::size_t i = 0; i < curve.size(); ++i) {
        QCOMPARE(curve[i].first, uint64_t(131072) * i / 4);
        QCOMPARE(curve[i].second, curve[i].first * 327680 * 2); // linear without windows
    }
    // Gemma 3 270M: steep up to the window, then only the global layers grow.
    in = input_for("Gemma 3 270M", 32768);
    curve = kv_curve(in, 1024, 3); // 0, 512, 1024
    QCOMPARE(curve[1].second, uint64_t(18 * 512 * 1024));
    QCOMPARE(curve[2].second - curve[1].second, uint64_t(3 * 512 * 1024));
    QVERIFY(kv_curve(in, 1024, 0).empty());
    QCOMPARE(kv_curve(in, 1024, 1).size(), std::size_t(1));
    QCOMPARE(kv_curve(in, 1024, 1)[0].first, uint64_t(1024));
}

void TestKvCalculator::formatting()
{
    QCOMPARE(format_binary_bytes(0), std::string("0 B"));
    QCOMPARE(format_binary_bytes(1023), std::string("1023 B"));
    QCOMPARE(format_binary_bytes(1536), std::string("1.50 KiB"));
    QCOMPARE(format_binary_bytes(double(GiB) - 1), std::string("1.00 GiB")); // not "1024.00 MiB"
    QCOMPARE(format_binary_bytes(320.0 * double(GiB)), std::string("320.00 GiB"));
    QCOMPARE(format_binary_bytes(2.5 * 1024 * double(GiB)), std::string("2.50 TiB"));
    QCOMPARE(format_decimal_bytes(999), std::string("999 B"));
    QCOMPARE(format_decimal_bytes(1'073'741'824), std::string("1.07 GB"));
    QCOMPARE(format_decimal_bytes(80e9), std::string("80.00 GB"));
    QCOMPARE(format_grouped(0), std::string("0"));
    QCOMPARE(format_grouped(999), std::string("999"));
    QCOMPARE(format_grouped(1000), std::string("1,000"));
    QCOMPARE(format_grouped(42'949'672'960), std::string("42,949,672,960"));
}

void TestKvCalculator::loadedModelMatchesItsPreset()
{
    REQUIRE_DEFAULT_MODEL(path);
    const auto file = gguf::GgufFile::open(path);
    const ModelConfig config = ModelConfig::from_gguf(*file);
    const KvModelShape s = kv_shape_of(config, "Gemma 3 270M (loaded)", 268'098'176);
    const KvModelShape& p = preset("Gemma 3 270M");
    QCOMPARE(s.name, std::string("Gemma 3 270M (loaded)"));
    QCOMPARE(s.n_layer, p.n_layer);
    QCOMPARE(s.n_head, p.n_head);
    QCOMPARE(s.n_head_kv, p.n_head_kv);
    QCOMPARE(s.head_dim, p.head_dim);
    QCOMPARE(s.sliding_window, p.sliding_window);
    QCOMPARE(s.n_sliding_layers, p.n_sliding_layers);
    QCOMPARE(s.context_length, p.context_length);
    QCOMPARE(s.parameters, uint64_t(268'098'176));
    QVERIFY(!s.source.empty());
    // The same figure from either shape.
    KvCalcInput a, b;
    a.shape = s;
    b.shape = p;
    a.context = b.context = 32768;
    QCOMPARE(calculate_kv(a).bytes_per_sequence, calculate_kv(b).bytes_per_sequence);
}

QTEST_GUILESS_MAIN(TestKvCalculator)
#include "test_kv_calculator.moc"
