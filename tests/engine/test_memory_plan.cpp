// SPDX-License-Identifier: GPL-3.0-or-later
// The memory planner: on the real default model its weights are the file's tensor bytes, its KV
// cache and working buffers are what the CPU backend really allocates after a full prefill, the
// sliding-window high-water mark matches the real KvCache driven through every possible schedule,
// the context is capped like the backend caps it, a context that cannot fit says so with sizes,
// and bad files raise errors that name them.
#include "backend/backend.h"
#include "gguf/gguf_file.h"
#include "gguf_builder.h"
#include "kv/kv_calculator.h"
#include "kv/kv_sizing.h"
#include "model/memory_plan.h"
#include "model/model.h"
#include "model/test_model.h"
#include "quant/activation_quant.h"
#include "quant/tiled_gemm.h"
#include "test_paths.h"
#include "util/error.h"

#include <QTemporaryDir>
#include <QTest>
#include <cctype>
#include <filesystem>
#include <fstream>

using namespace engine;

namespace {

void write_file(const std::string& path, const std::vector<uint8_t>& bytes)
{
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// The most bytes a real KvCache holds at any moment while positions arrive one at a time or in
// batches of up to max_batch: from every committed end e0, the next batch is reserved, measured,
// then dropped again (truncate keeps [0, e0)).
uint64_t simulated_peak(const KvCacheConfig& config, uint32_t max_batch)
{
    KvCache kv(config);
    uint64_t peak = 0;
    for (uint32_t e0 = 0; e0 < config.n_ctx; ++e0) {
        kv.reserve_until(std::min(e0 + max_batch, config.n_ctx));
        peak = std::max(peak, kv.accounting().bytes_allocated);
        const KvTruncation t = kv.truncate(e0);
        if (t.recompute || kv.n_cached() != e0)
            qFatal("unexpected truncation at %u", e0);
        kv.reserve_until(e0 + 1);
        kv.commit(e0 + 1);
    }
    return std::max(peak, kv.accounting().bytes_allocated);
}

} // namespace

class TestMemoryPlan : public QObject {
    Q_OBJECT
private slots:
    void systemMemoryIsRead();
    void peakMatchesTheRealCache_data();
    void peakMatchesTheRealCache();
    void realModelMatchesTheBackend();
    void slidingWindowPeakOnTheRealConfig();
    void contextCappedAtTraining();
    void hugeContextDoesNotFit();
    void badFilesNameThemselves();
    void f32ActivationsNeedNoPanels();
};

void TestMemoryPlan::systemMemoryIsRead()
{
    const SystemMemory m = system_memory();
    QVERIFY(m.total > 0);
    QVERIFY(m.available > 0);
    QVERIFY(m.available <= m.total);
}

void TestMemoryPlan::peakMatchesTheRealCache_data()
{
    QTest::addColumn<uint32_t>("window");
    QTest::addColumn<uint32_t>("reserve");
    QTest::addColumn<uint32_t>("n_ctx");
    QTest::addColumn<uint32_t>("batch");
    for (uint32_t window : {0u, 20u, 64u, 100u})
        for (uint32_t reserve : {0u, 2u})
            for (uint32_t n_ctx : {50u, 300u, 1000u})
                for (uint32_t batch : {1u, 7u, 128u})
                    QTest::addRow("w%u r%u ctx%u b%u", window, reserve, n_ctx, batch)
                        << window << reserve << n_ctx << batch;
}

void TestMemoryPlan::peakMatchesTheRealCache()
{
    QFETCH(uint32_t, window);
    QFETCH(uint32_t, reserve);
    QFETCH(uint32_t, n_ctx);
    QFETCH(uint32_t, batch);
    KvCacheConfig c;
    c.n_layer = 2;
    c.n_kv_heads = {2, 1};
    c.head_dim = 8;
    c.window = {0, window};
    c.n_ctx = n_ctx;
    c.reserve_blocks = reserve;
    QCOMPARE(kv_cache_peak_bytes(c, batch), simulated_peak(c, batch));
}

void TestMemoryPlan::realModelMatchesTheBackend()
{
    REQUIRE_DEFAULT_MODEL(path);
    constexpr uint32_t n_ctx = 64;
    const MemoryPlan plan = plan_memory(path, n_ctx, n_ctx);
    const auto model = Model::load(path);
    const ModelConfig& c = model->config();

    // Weights: every tensor's bytes, summed here from the file's records.
    const auto file = gguf::GgufFile::open(path);
    uint64_t tensor_bytes = 0;
    for (const auto& t : file->tensors())
        tensor_bytes += t.n_bytes;
    QCOMPARE(plan.weight_bytes, tensor_bytes);
    QCOMPARE(plan.weight_bytes, model->weight_bytes());
    QCOMPARE(plan.name, c.name.empty() ? std::filesystem::path(path).stem().string() : c.name);
    QCOMPARE(plan.architecture, std::string("gemma3"));
    QCOMPARE(plan.n_ctx, n_ctx);

    // Fill the cache with one 64-token prefill and read what the backend allocated.
    auto backend = make_cpu_backend(model, {.threads = 0, .n_ctx = n_ctx});
    std::vector<TokenId> tokens(n_ctx);
    for (uint32_t i = 0; i < n_ctx; ++i)
        tokens[i] = static_cast<TokenId>(1000 + 37 * i);
    backend->forward({.tokens = tokens});
    const BackendMemory m = backend->memory();
    QCOMPARE(plan.kv_bytes, m.kv_bytes_allocated);
    // 18 layers × 2 blocks × 2 (K, V) × 1 KV head × 32 tokens × 256 dims × 2 B.
    QCOMPARE(plan.kv_bytes, uint64_t(18 * 2 * 2 * 32 * 256 * 2));

    // Working buffers: the nine float vectors the backend reports after a 64-token batch ...
    const uint64_t E = c.n_embd, D = c.head_dim_k, H = c.n_head[0], Hkv = c.n_head_kv[0], F = c.n_ff[0];
    const uint64_t vectors = uint64_t(n_ctx) * (3 * E + 2 * H * D + 2 * Hkv * D + 2 * F) * sizeof(float);
    QCOMPARE(m.scratch_bytes, vectors);
    // ... plus the quantized activations of the batch (Q8_K rows of the widest input: n_ff for
    // ffn_down; the planner takes the widest layer matrix input) and their sixteen-token panels for
    // the tiled matmul (four of them for 64 tokens), one row of logits and the attention's
    // row-pointer tables.
    uint64_t widest_row = 0, widest_panel = 0;
    for (const auto& t : file->tensors())
        if (t.n_dims >= 2 && t.name.starts_with("blk.")) {
            const ActivationFormat format = activation_format(t.type.type);
            widest_row = std::max<uint64_t>(widest_row, activation_row_bytes(format, int64_t(t.ne[0])));
            if (format != ActivationFormat::F32) // F32 activations are used as the panels, uncopied
                widest_panel = std::max<uint64_t>(widest_panel, tiled_panel_bytes(format, int64_t(t.ne[0])));
        }
    QVERIFY(widest_panel > 0); // the default model's Q4_K/Q6_K matrices have panels
    const uint64_t extras =
        n_ctx * widest_row + 4 * widest_panel + uint64_t(c.n_vocab) * 4 + 2 * Hkv * n_ctx * sizeof(void*);
    QCOMPARE(plan.scratch_bytes, vectors + extras);
    QCOMPARE(plan.total_bytes, plan.weight_bytes + plan.kv_bytes + plan.scratch_bytes);
    QVERIFY(plan.fits);
    qInfo("%s", plan.message.c_str());
    QVERIFY2(plan.message.find("is available") != std::string::npos, plan.message.c_str());
    QVERIFY2(plan.message.find(format_binary_bytes(double(plan.weight_bytes))) != std::string::npos,
             plan.message.c_str());
    QVERIFY2(plan.message.find(format_binary_bytes(double(plan.kv_bytes))) != std::string::npos, plan.message.c_str());
}

void TestMemoryPlan::slidingWindowPeakOnTheRealConfig()
{
    REQUIRE_DEFAULT_MODEL(path);
    const auto file = gguf::GgufFile::open(path);
    const ModelConfig c = ModelConfig::from_gguf(*file);
    const KvCacheConfig kv = kv_cache_config_for(c, 1500);
    QCOMPARE(kv.n_ctx, 1500u);
    QCOMPARE(kv_cache_peak_bytes(kv, 128), simulated_peak(kv, 128));
    // Sliding layers: window 512 = 16 blocks, the worst batch start adds ceil((128 + 31) / 32) = 5 and
    // the reserve 2: 16 + 5 + 2 = 23 of 47 blocks; global layers: all 47.
    QCOMPARE(kv_layer_peak_blocks(kv, 0, 128), 23u);
    QCOMPARE(kv_layer_peak_blocks(kv, 5, 128), 47u);
    QCOMPARE(plan_memory(path, 1500, 128).kv_bytes, uint64_t(15 * 23 + 3 * 47) * 32768);
}

void TestMemoryPlan::contextCappedAtTraining()
{
    REQUIRE_DEFAULT_MODEL(path);
    const MemoryPlan plan = plan_memory(path, 1'000'000'000);
    QCOMPARE(plan.n_ctx_requested, 1'000'000'000u);
    QCOMPARE(plan.n_ctx, 32768u); // gemma3.context_length, as make_cpu_backend caps it
    QCOMPARE(plan.kv_bytes, plan_memory(path, 32768).kv_bytes);
    QVERIFY2(plan.message.find("capped at the training context") != std::string::npos, plan.message.c_str());
}

void TestMemoryPlan::hugeContextDoesNotFit()
{
    // A Llama-3-8B-shaped header (no tensors) that claims a 4-billion-token context.
    testsupport::GgufBuilder b;
    b.add_string("general.architecture", "llama");
    b.add_string("general.name", "Huge context");
    b.add_u32("llama.block_count", 32);
    b.add_u32("llama.embedding_length", 4096);
    b.add_u32("llama.context_length", 4'000'000'000u);
    b.add_u32("llama.feed_forward_length", 14336);
    b.add_u32("llama.attention.head_count", 32);
    b.add_u32("llama.attention.head_count_kv", 8);
    QTemporaryDir dir;
    const std::string path = dir.filePath("huge.gguf").toStdString();
    write_file(path, b.build());
    const MemoryPlan plan = plan_memory(path, 1'000'000'000);
    if (plan.memory.available == 0)
        QSKIP("/proc/meminfo is not readable here");
    QCOMPARE(plan.n_ctx, 1'000'000'000u);
    // 128 KiB per token.
    QCOMPARE(plan.kv_bytes, uint64_t(1'000'000'000) * 131072);
    QVERIFY(!plan.fits);
    qInfo("%s", plan.message.c_str());
    QVERIFY2(plan.message.find("will not fit") != std::string::npos, plan.message.c_str());
    QVERIFY2(plan.message.find(format_binary_bytes(double(plan.total_bytes))) != std::string::npos,
             plan.message.c_str());
    QVERIFY2(plan.message.find(format_binary_bytes(double(plan.kv_bytes))) != std::string::npos, plan.message.c_str());
    QVERIFY2(plan.message.find(format_binary_bytes(double(plan.memory.available))) != std::string::npos,
             plan.message.c_str());
    QVERIFY2(plan.message.find("smaller context") != std::string::npos, plan.message.c_str());
    // The context it suggests fits; one more token does not.
    const auto at = plan.message.find("at most about ");
    QVERIFY2(at != std::string::npos, plan.message.c_str());
    std::string digits;
    for (std::size_t i = at + 14; i < plan.message.size() &&
                                  (std::isdigit(static_cast<unsigned char>(plan.message[i])) || plan.message[i] == ',');
         ++i)
        if (plan.message[i] != ',')
            digits += plan.message[i];
    const auto suggested = static_cast<uint32_t>(std::stoul(digits));
    const MemoryPlan ok = plan_memory(path, suggested);
    QVERIFY2(ok.total_bytes <= plan.memory.available, ok.message.c_str());
    QVERIFY(plan_memory(path, suggested + 1).total_bytes > plan.memory.available);
}

void TestMemoryPlan::badFilesNameThemselves()
{
    QTemporaryDir dir;
    const std::string corrupt = dir.filePath("corrupt-model.gguf").toStdString();
    std::vector<uint8_t> bytes = {'G', 'G', 'U', 'F', 3, 0, 0, 0};
    for (int i = 0; i < 64; ++i)
        bytes.push_back(0xFF);
    write_file(corrupt, bytes);
    try {
        plan_memory(corrupt, 4096);
        QFAIL("a corrupt file was planned");
    } catch (const Error& e) {
        QVERIFY2(std::string(e.what()).find("corrupt-model.gguf") != std::string::npos, e.what());
    }
    const std::string missing = dir.filePath("absent.gguf").toStdString();
    try {
        plan_memory(missing, 4096);
        QFAIL("a missing file was planned");
    } catch (const Error& e) {
        QVERIFY2(std::string(e.what()).find("absent.gguf") != std::string::npos, e.what());
    }
    // Well-formed GGUF without the architecture's keys.
    testsupport::GgufBuilder b;
    b.add_string("general.architecture", "llama");
    const std::string incomplete = dir.filePath("incomplete.gguf").toStdString();
    write_file(incomplete, b.build());
    QVERIFY_THROWS_EXCEPTION(FormatError, plan_memory(incomplete, 4096));
}

QTEST_GUILESS_MAIN(TestMemoryPlan)
void TestMemoryPlan::f32ActivationsNeedNoPanels()
{
    // A batch's activations are packed into panels of sixteen tokens for the tiled matmul; F32
    // activations are the float matmul's panels as they are, so an F32 model's scratch grows by the
    // same step from 32 to 33 tokens (a third panel) as from 33 to 34, while a Q8_0 model's jumps.
    QTemporaryDir dir;
    const auto scratch_steps = [&](GgmlType type) {
        TestModelShape shape;
        shape.matrix_type = type;
        const std::string path = dir.filePath(type == GgmlType::F32 ? "f32.gguf" : "q8_0.gguf").toStdString();
        make_test_model("llama", 3, shape).write(path);
        const auto at = [&](uint32_t n_batch) { return plan_memory(path, 64, n_batch).scratch_bytes; };
        return std::pair{at(34) - at(33), at(33) - at(32)};
    };
    const auto [f32_step, f32_at_panel] = scratch_steps(GgmlType::F32);
    QCOMPARE(f32_at_panel, f32_step);
    const auto [q8_step, q8_at_panel] = scratch_steps(GgmlType::Q8_0);
    QVERIFY2(q8_at_panel > q8_step, "a Q8_0 model's third panel should be counted at 33 tokens");
}

#include "test_memory_plan.moc"
