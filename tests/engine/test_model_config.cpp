// SPDX-License-Identifier: GPL-3.0-or-later
// Hyperparameters from metadata: the default model's Gemma 3 values, per-layer arrays, and clear
// errors for missing or inconsistent keys.
#include "gguf/gguf_file.h"
#include "gguf_builder.h"
#include "model/model_config.h"
#include "test_paths.h"
#include "util/error.h"

#include <QTest>

using engine::ModelConfig;
using engine::gguf::GgufFile;
using testsupport::GgufBuilder;

namespace {

ModelConfig config_of(const GgufBuilder& b)
{
    static std::vector<uint8_t> keep; // the parsed file views these bytes
    keep = b.build();
    const auto f = GgufFile::parse({reinterpret_cast<const std::byte*>(keep.data()), keep.size()}, "cfg.gguf");
    return ModelConfig::from_gguf(*f);
}

GgufBuilder llama_like()
{
    GgufBuilder b;
    b.add_string("general.architecture", "llama");
    b.add_u32("llama.block_count", 3);
    b.add_u32("llama.embedding_length", 64);
    b.add_u32("llama.context_length", 2048);
    b.add_u32("llama.feed_forward_length", 128);
    b.add_u32("llama.attention.head_count", 8);
    b.add_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    return b;
}

} // namespace

class TestModelConfig : public QObject {
    Q_OBJECT
private slots:
    void defaultModelIsGemma3();
    void defaultsFollowLlamaCpp();
    void perLayerArrays();
    void errorsNameTheKey_data();
    void errorsNameTheKey();
};

void TestModelConfig::defaultModelIsGemma3()
{
    REQUIRE_DEFAULT_MODEL(path);
    const auto f = GgufFile::open(path);
    const auto c = ModelConfig::from_gguf(*f);
    QCOMPARE(c.architecture, std::string("gemma3"));
    QCOMPARE(c.n_layer, 18u);
    QCOMPARE(c.n_embd, 640u);
    QCOMPARE(c.n_head, std::vector<uint32_t>(18, 4));
    QCOMPARE(c.n_head_kv, std::vector<uint32_t>(18, 1));
    QCOMPARE(c.head_dim_k, 256u);
    QCOMPARE(c.head_dim_v, 256u);
    QCOMPARE(c.n_ff, std::vector<uint32_t>(18, 2048));
    QCOMPARE(c.n_ctx_train, 32768u);
    QCOMPARE(c.n_vocab, 262144u);
    QCOMPARE(c.sliding_window, 512u);
    QCOMPARE(c.rope_freq_base, 1000000.0f);
    QCOMPARE(*c.rope_freq_base_swa, 10000.0f);
    QCOMPARE(c.norm_eps, 1e-6f);
    for (uint32_t il = 0; il < 18; ++il)
        QCOMPARE(bool(c.layer_is_swa[il]), il % 6 != 5); // global layers 5, 11, 17
    engine::require_supported_tensor_types(*f);          // every tensor of the default model is decodable
}

void TestModelConfig::defaultsFollowLlamaCpp()
{
    const auto c = config_of(llama_like());
    QCOMPARE(c.n_head_kv, std::vector<uint32_t>(3, 8)); // head_count_kv defaults to head_count
    QCOMPARE(c.head_dim_k, 8u);                         // n_embd / n_head
    QCOMPARE(c.n_rot, 8u);
    QCOMPARE(c.rope_freq_base, 10000.0f);
    QCOMPARE(c.sliding_window, 0u);
    QVERIFY(!c.rope_freq_base_swa);
    QCOMPARE(c.layer_is_swa, std::vector<bool>(3, false));
}

void TestModelConfig::perLayerArrays()
{
    GgufBuilder b = llama_like();
    b.add_i32_array("llama.attention.head_count_kv", {8, 4, 2});
    const auto c = config_of(b);
    QCOMPARE(c.n_head_kv, (std::vector<uint32_t>{8, 4, 2}));
}

void TestModelConfig::errorsNameTheKey_data()
{
    QTest::addColumn<int>("variant");
    QTest::addColumn<QString>("expected");
    QTest::newRow("no architecture") << 0 << "general.architecture";
    QTest::newRow("no block count") << 1 << "llama.block_count";
    QTest::newRow("kv heads do not divide heads") << 2 << "does not divide";
    QTest::newRow("per-layer array of the wrong length") << 3 << "has 2 entries for 3 layers";
    QTest::newRow("block count as a string") << 4 << "llama.block_count";
}

void TestModelConfig::errorsNameTheKey()
{
    QFETCH(int, variant);
    QFETCH(QString, expected);
    GgufBuilder b;
    switch (variant) {
    case 0:
        b.add_u32("llama.block_count", 1);
        break;
    case 1:
        b.add_string("general.architecture", "llama");
        b.add_u32("llama.embedding_length", 64);
        break;
    case 2:
        b = llama_like();
        b.add_u32("llama.attention.head_count_kv", 3);
        break;
    case 3:
        b = llama_like();
        b.add_i32_array("llama.attention.head_count_kv", {8, 4});
        break;
    case 4:
        b.add_string("general.architecture", "llama");
        b.add_string("llama.block_count", "three");
        break;
    }
    try {
        config_of(b);
        QFAIL("accepted");
    } catch (const engine::FormatError& e) {
        QVERIFY2(QString(e.what()).contains(expected), e.what());
    }
}

QTEST_GUILESS_MAIN(TestModelConfig)
#include "test_model_config.moc"
