// SPDX-License-Identifier: GPL-3.0-or-later
// Random-weight test models: reproducible to the byte (a recorded sha256 pins the generator),
// seed-dependent, of sensible magnitude in every tensor type, loadable by the engine's config,
// type check and tokenizer for every --arch, and, with --like, a shape twin of the default model.
#include "file_hash.h"
#include "gguf/gguf_file.h"
#include "gguf_compare.h"
#include "model/model_config.h"
#include "model/test_model.h"
#include "quant/dequant.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

#include <QCryptographicHash>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <set>

using engine::GgmlType;
using engine::gguf::GgufFile;

Q_DECLARE_METATYPE(GgmlType)

namespace {

struct Stats {
    bool finite = true;
    double mean = 0, std = 0, min = 0, max = 0;
};

Stats stats_of(const std::vector<float>& v)
{
    Stats s;
    double sum = 0, sq = 0;
    s.min = s.max = v.empty() ? 0 : v[0];
    for (float x : v) {
        s.finite = s.finite && std::isfinite(x);
        sum += x;
        sq += double(x) * x;
        s.min = std::min<double>(s.min, x);
        s.max = std::max<double>(s.max, x);
    }
    s.mean = sum / double(v.size());
    s.std = std::sqrt(std::max(0.0, sq / double(v.size()) - s.mean * s.mean));
    return s;
}

std::vector<float> dequantized(const GgufFile& f, const engine::gguf::TensorInfo& t)
{
    std::vector<float> out(t.n_elements());
    engine::dequantize_row(t.type.type, f.tensor_data(t).data(), out.data(), static_cast<int64_t>(out.size()), t.name);
    return out;
}

bool is_norm(const std::string& name)
{
    return name.ends_with("norm.weight");
}

// Every tensor decodes to finite values: norms near 1, everything else small and centred.
void check_tensor_values(const GgufFile& f)
{
    for (const auto& t : f.tensors()) {
        const Stats s = stats_of(dequantized(f, t));
        QVERIFY2(s.finite, t.name.c_str());
        if (is_norm(t.name)) {
            QVERIFY2(s.min > 0.9 && s.max < 1.1, t.name.c_str());
        } else {
            QVERIFY2(std::abs(s.mean) < 0.01, qPrintable(QString("%1: mean %2").arg(t.name.c_str()).arg(s.mean)));
            QVERIFY2(s.std > 0.02 && s.std < 0.08, qPrintable(QString("%1: std %2").arg(t.name.c_str()).arg(s.std)));
        }
    }
}

} // namespace

class TestTestModel : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void sameSeedSameBytes();
    void differentSeedDifferentBytes();
    void everyTypeHasSensibleValues_data();
    void everyTypeHasSensibleValues();
    void everyArchLoads_data();
    void everyArchLoads();
    void vocabFromAnotherFile();
    void unknownArchIsRefused();
    void likeDefaultModel();
    void presetsTwinTheRealModels_data();
    void presetsTwinTheRealModels();

private:
    QTemporaryDir m_dir;
    std::string path(const QString& name) const { return m_dir.filePath(name).toStdString(); }
};

void TestTestModel::initTestCase()
{
    QVERIFY(m_dir.isValid());
}

void TestTestModel::sameSeedSameBytes()
{
    engine::make_test_model("llama", 1).write(path("llama-1a.gguf"));
    engine::make_test_model("llama", 1).write(path("llama-1b.gguf"));
    const QByteArray a = testsupport::sha256_of_file(path("llama-1a.gguf"));
    QCOMPARE(a, testsupport::sha256_of_file(path("llama-1b.gguf")));
    // This pins the generator: the PRNG, the value recipes, the built-in vocabulary, the llama
    // configuration and the writer's layout. The same seed must give this file on every machine
    // and compiler. If a deliberate change to any of them alters it, record the new hash here
    // (and know that benchmarks or fixtures made from older test models no longer match).
    QCOMPARE(a, QByteArray("14505a8ab0f048c6b273535ebb2b76b7c1f017dffaf3400b674092d3341ca1c6"));
}

void TestTestModel::differentSeedDifferentBytes()
{
    engine::make_test_model("qwen2", 1).write(path("qwen2-1.gguf"));
    engine::make_test_model("qwen2", 2).write(path("qwen2-2.gguf"));
    QVERIFY(testsupport::sha256_of_file(path("qwen2-1.gguf")) != testsupport::sha256_of_file(path("qwen2-2.gguf")));
    const auto a = GgufFile::open(path("qwen2-1.gguf"));
    const auto b = GgufFile::open(path("qwen2-2.gguf"));
    QCOMPARE(a->tensors().size(), b->tensors().size());
    for (std::size_t i = 0; i < a->tensors().size(); ++i) {
        const auto& ta = a->tensors()[i];
        const auto& tb = b->tensors()[i];
        QCOMPARE(ta.name, tb.name);
        QCOMPARE(ta.ne, tb.ne);
        QCOMPARE(ta.type.type, tb.type.type);
        const auto da = a->tensor_data(ta);
        const auto db = b->tensor_data(tb);
        QVERIFY2(!std::equal(da.begin(), da.end(), db.begin(), db.end()), ta.name.c_str()); // every tensor changes
    }
}

void TestTestModel::everyTypeHasSensibleValues_data()
{
    QTest::addColumn<GgmlType>("type");
    QTest::addColumn<bool>("unit");
    for (GgmlType t :
         {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
          GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K})
        QTest::newRow(engine::ggml_type_name(t).data()) << t << false;
    for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16})
        QTest::newRow(("unit " + std::string(engine::ggml_type_name(t))).c_str()) << t << true;
}

void TestTestModel::everyTypeHasSensibleValues()
{
    QFETCH(GgmlType, type);
    QFETCH(bool, unit);
    constexpr int64_t n = 256 * 64;
    const auto traits = engine::ggml_type_traits(type);
    std::vector<std::byte> bytes(engine::ggml_row_bytes(traits, n));
    engine::fill_random_tensor(bytes, type, unit, 42, 7);
    std::vector<float> values(n);
    engine::dequantize_row(type, bytes.data(), values.data(), n);
    const Stats s = stats_of(values);
    QVERIFY(s.finite);
    if (unit) {
        QVERIFY2(s.min >= 0.96 && s.max <= 1.04, qPrintable(QString("[%1, %2]").arg(s.min).arg(s.max)));
    } else {
        // Target: standard deviation in [1/32, 1/16) per block, centred on zero.
        QVERIFY2(std::abs(s.mean) < 0.005, qPrintable(QString("mean %1").arg(s.mean)));
        QVERIFY2(s.std > 0.025 && s.std < 0.07, qPrintable(QString("std %1").arg(s.std)));
        QVERIFY2(s.max - s.min > 0.05, "values are not spread");
    }
    // Another stream differs; the same stream repeats.
    std::vector<std::byte> again(bytes.size()), other(bytes.size());
    engine::fill_random_tensor(again, type, unit, 42, 7);
    engine::fill_random_tensor(other, type, unit, 42, 8);
    QVERIFY(again == bytes);
    QVERIFY(other != bytes);
}

void TestTestModel::everyArchLoads_data()
{
    QTest::addColumn<QString>("arch");
    for (const auto& a : engine::test_model_architectures())
        QTest::newRow(a.c_str()) << QString::fromStdString(a);
}

void TestTestModel::everyArchLoads()
{
    QFETCH(QString, arch);
    const std::string a = arch.toStdString();
    const std::string file = path(arch + ".gguf");
    engine::make_test_model(a, 1).write(file);
    const auto f = GgufFile::open(file);

    const auto c = engine::ModelConfig::from_gguf(*f);
    engine::require_supported_tensor_types(*f);
    QCOMPARE(c.architecture, a);
    if (a != "llama" && a != "qwen2" && a != "qwen3" && a != "gemma3") {
        // the users' architectures: what sets each apart is checked in test_architectures
        QVERIFY(engine::Model::load(file));
        return;
    }
    QCOMPARE(c.n_embd, 256u);
    QCOMPARE(c.n_ctx_train, 2048u);
    QCOMPARE(c.n_head, std::vector<uint32_t>(c.n_layer, 4));
    QCOMPARE(c.n_head_kv, std::vector<uint32_t>(c.n_layer, 2));
    QCOMPARE(c.n_ff, std::vector<uint32_t>(c.n_layer, 512));
    QCOMPARE(c.n_rot, c.head_dim_k);
    QCOMPARE(c.head_dim_v, c.head_dim_k);
    const auto* embd = f->find_tensor("token_embd.weight");
    QVERIFY(embd);
    QCOMPARE(embd->ne[0], uint64_t(256));
    QCOMPARE(embd->ne[1], uint64_t(c.n_vocab));
    const uint64_t q_dim = 4ull * c.head_dim_k, kv_dim = 2ull * c.head_dim_k;
    QCOMPARE(f->find_tensor("blk.0.attn_q.weight")->ne[1], q_dim);
    QCOMPARE(f->find_tensor("blk.0.attn_k.weight")->ne[1], kv_dim);
    QCOMPARE(f->find_tensor("blk.0.attn_output.weight")->ne[0], q_dim);
    QCOMPARE(f->find_tensor("blk.0.ffn_down.weight")->ne[0], uint64_t(512));

    const bool biases = a == "qwen2", qk_norm = a == "qwen3" || a == "gemma3", gemma = a == "gemma3";
    QCOMPARE(f->find_tensor("blk.0.attn_q.bias") != nullptr, biases);
    QCOMPARE(f->find_tensor("blk.0.attn_k.bias") != nullptr, biases);
    QCOMPARE(f->find_tensor("blk.0.attn_v.bias") != nullptr, biases);
    if (biases)
        QCOMPARE(f->find_tensor("blk.0.attn_k.bias")->ne[0], kv_dim);
    QCOMPARE(f->find_tensor("blk.0.attn_q_norm.weight") != nullptr, qk_norm);
    if (qk_norm)
        QCOMPARE(f->find_tensor("blk.0.attn_k_norm.weight")->ne[0], uint64_t(c.head_dim_k));
    QCOMPARE(f->find_tensor("blk.0.post_attention_norm.weight") != nullptr, gemma);
    QCOMPARE(f->find_tensor("blk.0.post_ffw_norm.weight") != nullptr, gemma);
    QCOMPARE(f->find_tensor("output.weight") != nullptr, a == "llama" || a == "qwen3");
    if (gemma) {
        // Six layers: five sliding-window layers and one global; head_dim ≠ n_embd / n_head.
        QCOMPARE(c.n_layer, 6u);
        QCOMPARE(c.sliding_window, 64u);
        QCOMPARE(c.layer_is_swa, (std::vector<bool>{true, true, true, true, true, false}));
        QCOMPARE(c.head_dim_k, 128u);
    } else {
        QCOMPARE(c.n_layer, 4u);
        QCOMPARE(c.sliding_window, 0u);
        QCOMPARE(c.head_dim_k, 64u);
    }
    // K-quants, legacy quants and float types all appear.
    std::set<GgmlType> types;
    for (const auto& t : f->tensors())
        types.insert(t.type.type);
    for (GgmlType t : {GgmlType::F32, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q5_0})
        QVERIFY2(types.count(t), engine::ggml_type_name(t).data());
    check_tensor_values(*f);

    const engine::Tokenizer tok(engine::Vocab::from_gguf(*f));
    QCOMPARE(tok.vocab().size(), std::size_t(c.n_vocab));
    QCOMPARE(tok.vocab().pre, std::string("gpt-2"));
    const std::string text = "hello world, this is the model's test: 12 + 7 = 19 ünïcödé 日本";
    const auto ids = tok.encode_ids(text);
    QCOMPARE(tok.decode(ids), text);
    QCOMPARE(tok.encode_ids("hello world").size(), std::size_t(2)); // the built-in merges work
    QVERIFY(tok.vocab().eos.has_value());
}

void TestTestModel::vocabFromAnotherFile()
{
    const auto vocab = GgufFile::open(testsupport::data_dir() + "/tokenizer/bpe-qwen2.gguf");
    engine::make_test_model("qwen3", 5, vocab.get()).write(path("qwen3-vocab.gguf"));
    const auto f = GgufFile::open(path("qwen3-vocab.gguf"));
    std::size_t copied = 0;
    for (const auto& e : vocab->metadata()) {
        if (!e.key.starts_with("tokenizer."))
            continue;
        ++copied;
        const auto* got = f->find(e.key);
        QVERIFY2(got && testsupport::same_value(*got, e.value), e.key.c_str());
    }
    QVERIFY(copied >= 5);
    const auto c = engine::ModelConfig::from_gguf(*f);
    QCOMPARE(c.n_vocab, 1536u);
    QCOMPARE(f->find_tensor("token_embd.weight")->ne[1], uint64_t(1536));
    QCOMPARE(f->find_tensor("output.weight")->ne[1], uint64_t(1536));
    const engine::Tokenizer tok(engine::Vocab::from_gguf(*f));
    QCOMPARE(tok.vocab().pre, std::string("qwen2"));
}

void TestTestModel::unknownArchIsRefused()
{
    QVERIFY_THROWS_EXCEPTION(engine::UnsupportedError, engine::make_test_model("gpt2", 1));
    // A --vocab file without a vocabulary is refused with a message, not turned into an empty model.
    engine::gguf::GgufWriter empty;
    empty.set_string("general.architecture", "llama");
    empty.write(path("no-vocab.gguf"));
    const auto no_vocab = GgufFile::open(path("no-vocab.gguf"));
    QVERIFY_THROWS_EXCEPTION(engine::FormatError, engine::make_test_model("llama", 1, no_vocab.get()));
}

void TestTestModel::likeDefaultModel()
{
    REQUIRE_DEFAULT_MODEL(model_path);
    const auto model = GgufFile::open(model_path);
    engine::make_test_model_like(*model, 3).write(path("like.gguf"));
    const auto twin = GgufFile::open(path("like.gguf"));

    QCOMPARE(twin->file_size(), model->file_size());
    QCOMPARE(twin->data_offset(), model->data_offset());
    QCOMPARE(twin->metadata().size(), model->metadata().size());
    for (std::size_t i = 0; i < model->metadata().size(); ++i) {
        const auto& want = model->metadata()[i];
        QCOMPARE(twin->metadata()[i].key, want.key);
        QVERIFY2(testsupport::same_value(twin->metadata()[i].value, want.value), want.key.c_str());
    }
    QCOMPARE(twin->tensors().size(), model->tensors().size());
    for (std::size_t i = 0; i < model->tensors().size(); ++i) {
        const auto& want = model->tensors()[i];
        const auto& got = twin->tensors()[i];
        QCOMPARE(got.name, want.name);
        QCOMPARE(got.n_dims, want.n_dims);
        QCOMPARE(got.ne, want.ne);
        QCOMPARE(got.type.type, want.type.type);
        QCOMPARE(got.offset, want.offset);
    }
    const auto* embd = twin->find_tensor("token_embd.weight");
    const auto original = model->tensor_data(*model->find_tensor("token_embd.weight"));
    const auto random = twin->tensor_data(*embd);
    QVERIFY(!std::equal(original.begin(), original.end(), random.begin(), random.end()));

    engine::require_supported_tensor_types(*twin);
    const auto c = engine::ModelConfig::from_gguf(*twin);
    QCOMPARE(c.n_layer, 18u);
    const engine::Tokenizer tok(engine::Vocab::from_gguf(*twin));
    QCOMPARE(tok.encode_ids("Hello world").size(), std::size_t(3)); // <bos> Hello ▁world
    check_tensor_values(*twin);
}

void TestTestModel::presetsTwinTheRealModels_data()
{
    QTest::addColumn<QString>("preset");
    QTest::addColumn<bool>("chat"); // the installed model it twins: the chat model, else the default one
    QTest::newRow("gemma3-270m") << QString("gemma3-270m") << false;
    QTest::newRow("qwen2.5-0.5b") << QString("qwen2.5-0.5b") << true;
}

// A preset's hyperparameters are the real model's (its shapes: the benchmarks of bench/gpu_check.sh
// stand for it), its file within a quarter of the real one's size (the type mix is Q4_K_M-like, not
// the file's own), every tensor a valid row of its type.
void TestTestModel::presetsTwinTheRealModels()
{
    QFETCH(QString, preset);
    QFETCH(bool, chat);
    std::string real_path;
    if (chat) {
        REQUIRE_CHAT_MODEL(p);
        real_path = p;
    } else {
        REQUIRE_DEFAULT_MODEL(p);
        real_path = p;
    }
    engine::make_test_model_preset(preset.toStdString(), 1).write(path("preset.gguf"));
    const auto twin = GgufFile::open(path("preset.gguf"));
    const auto real = GgufFile::open(real_path);
    engine::require_supported_tensor_types(*twin);
    const auto a = engine::ModelConfig::from_gguf(*twin), b = engine::ModelConfig::from_gguf(*real);
    QCOMPARE(a.architecture, b.architecture);
    QCOMPARE(a.n_layer, b.n_layer);
    QCOMPARE(a.n_embd, b.n_embd);
    QCOMPARE(a.n_head, b.n_head);
    QCOMPARE(a.n_head_kv, b.n_head_kv);
    QCOMPARE(a.head_dim_k, b.head_dim_k);
    QCOMPARE(a.n_ff, b.n_ff);
    QCOMPARE(a.n_vocab, b.n_vocab);
    QCOMPARE(a.n_rot, b.n_rot);
    const double ratio = double(twin->file_size()) / double(real->file_size());
    QVERIFY2(ratio > 0.75 && ratio < 1.25, qPrintable(QString("twin / real file size %1").arg(ratio)));
    QVERIFY_THROWS_EXCEPTION(engine::UnsupportedError, engine::make_test_model_preset("gpt-5", 1));
}

QTEST_GUILESS_MAIN(TestTestModel)
#include "test_test_model.moc"
