// SPDX-License-Identifier: GPL-3.0-or-later
// Every weight type the engine reads, end to end against llama.cpp: for each type a random-weight
// llama model whose every matrix (embeddings and output head included) has that type
// (`make-test-model --arch llama --type T`, regenerated here byte for byte: its sha256 must be the one
// llama.cpp ran, recorded in tests/data/logits/types/llama-T.gguf). Prompts of 1, 3, 4, 5, 7, 8, 64 and
// 600 tokens, so that every batch path runs (one row, llama.cpp's batched float order from 2 rows, the
// four- and eight-row kernels, the tiled order from 8). Against the AVX2 build's fixtures the claim is
// its bits: the last position's logits equal llama.cpp's bit for bit and every 16-token greedy
// continuation is identical, on the path this CPU chooses (ctest also runs the scalar and AVX2 paths
// over the same cases: test_weight_types_scalar, test_weight_types_avx2).
#include "backend/backend.h"
#include "fixture_agreement.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "model/test_model.h"
#include "quant/vec_dot.h"
#include "session/session.h"
#include "test_paths.h"

#include <QTemporaryDir>
#include <QTest>

using namespace engine;
using namespace testsupport;

class TestWeightTypes : public QObject {
    Q_OBJECT
private slots:
    void matchesLlamaCppBitForBit_data();
    void matchesLlamaCppBitForBit();
    void repackedOrderMatchesLlamaCppDefault_data();
    void repackedOrderMatchesLlamaCppDefault();
    void backendNamesItsOrder();
};

namespace {

// The random model of one weight type (every matrix), checked to be the file llama.cpp ran. The
// repacked order's models have 768 tokens, a multiple of 8 as real vocabularies are, so that llama.cpp
// repacks the head: llama's is its own matrix, qwen2's is tied to the embedding table.
std::shared_ptr<const Model> type_model(const QTemporaryDir& dir, const QString& type, const gguf::GgufFile& fixture,
                                        const char* arch = "llama", std::optional<uint32_t> n_vocab = std::nullopt)
{
    TestModelShape shape;
    shape.matrix_type = ggml_type_from_name(type.toStdString());
    shape.n_vocab = n_vocab;
    return fixture_model(dir, type, make_test_model(arch, 1, shape), fixture);
}

} // namespace

void TestWeightTypes::repackedOrderMatchesLlamaCppDefault_data()
{
    QTest::addColumn<QString>("arch");
    QTest::addColumn<QString>("type");
    for (const char* arch : {"llama", "qwen2"}) // qwen2: the head tied to the embedding table
        for (const char* t : {"Q4_0", "Q4_K", "IQ4_NL"})
            QTest::addRow("%s %s", arch, t) << QString(arch) << QString(t);
}

// llama.cpp's default (repacking) build on the types it repacks: the repacked order gives its bits on
// every path (the portable kernels included); the plain order does not on every prompt, so the
// fixture tells the orders apart.
void TestWeightTypes::repackedOrderMatchesLlamaCppDefault()
{
    QFETCH(QString, arch);
    QFETCH(QString, type);
    const auto fixture = gguf::GgufFile::open(data_dir() + "/logits/types/" + arch.toStdString() + "-" +
                                              type.toStdString() + "-repack.gguf");
    QVERIFY(*fixture->get_bool("tokenscope.use_extra_bufts"));
    QTemporaryDir dir;
    const auto model = type_model(dir, type, *fixture, qPrintable(arch), 768);
    QCOMPARE(model->config().n_vocab, 768u);
    QVERIFY2(model, "the generated model is not the one llama.cpp ran");
    Session repacked(model, make_cpu_backend(model, {.threads = 0, .n_ctx = 2048, .order = WeightOrder::Repacked}),
                     2048);
    const Agreement r = agreement(repacked, *fixture);
    qInfo("%s, repacked order on the %s path: bit-equal on %d of %d prompts, greedy identical on %d", qPrintable(type),
          simd_level_name(simd_level()).data(), r.bit_equal, r.prompts, r.identical);
    QVERIFY2(r.bit_equal == r.prompts && r.identical == r.prompts, qPrintable(r.first_difference));
    Session plain(model, make_cpu_backend(model, {.threads = 0, .n_ctx = 2048, .order = WeightOrder::Plain}), 2048);
    const Agreement p = agreement(plain, *fixture);
    QVERIFY2(p.bit_equal < p.prompts, "the plain order gave the repacked fixture's bits: the fixture does not test it");
}

void TestWeightTypes::backendNamesItsOrder()
{
    QTemporaryDir dir;
    const QString path = dir.filePath("llama.gguf");
    make_test_model("llama", 1).write(path.toStdString());
    const auto model = Model::load(path.toStdString());
    const auto name = [&](WeightOrder o) {
        return make_cpu_backend(model, {.threads = 1, .n_ctx = 64, .order = o})->name();
    };
    QCOMPARE(QString::fromStdString(name(WeightOrder::Plain)), QString("CPU (1 thread, llama.cpp order: plain)"));
    QCOMPARE(QString::fromStdString(name(WeightOrder::Repacked)), QString("CPU (1 thread, llama.cpp order: repacked)"));
    // llama.cpp's default: repacked where it repacks (x86 with AVX2), plain on the portable path
    const bool avx2 = simd_level() != SimdLevel::Scalar;
    QCOMPARE(QString::fromStdString(name(WeightOrder::LlamaCppDefault)),
             QString("CPU (1 thread, llama.cpp order: %1)").arg(avx2 ? "repacked" : "plain"));
}

void TestWeightTypes::matchesLlamaCppBitForBit_data()
{
    QTest::addColumn<QString>("type");
    for (const char* t : {"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K",
                          "Q6_K", "IQ4_NL", "IQ4_XS"})
        QTest::newRow(t) << QString(t);
}

void TestWeightTypes::matchesLlamaCppBitForBit()
{
    QFETCH(QString, type);
    const auto fixture = gguf::GgufFile::open(data_dir() + "/logits/types/llama-" + type.toStdString() + ".gguf");
    const auto wtype = ggml_type_from_name(type.toStdString());
    QVERIFY(wtype);
    QTemporaryDir dir;
    const auto model = type_model(dir, type, *fixture);
    QVERIFY2(model, "the generated model is not the one llama.cpp ran");
    for (const char* name : {"token_embd.weight", "output.weight", "blk.0.attn_q.weight", "blk.3.ffn_down.weight"})
        QCOMPARE(model->file().find_tensor(name)->type.type, *wtype);
    require_llama_cpp_agreement(model, *fixture, type);
}

QTEST_GUILESS_MAIN(TestWeightTypes)
#include "test_weight_types.moc"
