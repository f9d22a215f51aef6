// SPDX-License-Identifier: GPL-3.0-or-later
// Dequantization against the gguf package's reference, float-exact for every element: random
// blocks of every supported type (tests/data/quant/blocks.gguf) and real rows of the default model
// (tests/data/quant/model-expected.gguf); both written by tests/reference/make_quant_fixtures.py.
#include "gguf/gguf_file.h"
#include "gguf_builder.h"
#include "model/model_config.h"
#include "quant/dequant.h"
#include "test_paths.h"
#include "util/error.h"

#include <QTest>
#include <bit>
#include <cmath>
#include <set>

using engine::GgmlType;
using engine::gguf::GgufFile;
using engine::gguf::TensorInfo;

namespace {

std::vector<float> dequantize_rows(const GgufFile& f, const TensorInfo& t, uint64_t rows)
{
    std::vector<float> out(rows * t.ne[0]);
    const uint64_t row_bytes = engine::ggml_row_bytes(t.type, t.ne[0]);
    const auto data = f.tensor_data(t);
    for (uint64_t r = 0; r < rows; ++r)
        engine::dequantize_row(t.type.type, data.data() + r * row_bytes, out.data() + r * t.ne[0],
                               static_cast<int64_t>(t.ne[0]), t.name);
    return out;
}

std::vector<float> read_f32(const GgufFile& f, const TensorInfo& t)
{
    std::vector<float> v(t.n_elements());
    std::memcpy(v.data(), f.tensor_data(t).data(), v.size() * 4);
    return v;
}

// Bit-for-bit equality (NaN payloads aside); returns the index of the first difference or -1.
int64_t first_difference(const std::vector<float>& a, const std::vector<float>& b)
{
    if (a.size() != b.size())
        return 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (std::isnan(a[i]) && std::isnan(b[i]))
            continue;
        if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i]))
            return static_cast<int64_t>(i);
    }
    return -1;
}

} // namespace

class TestDequant : public QObject {
    Q_OBJECT
private slots:
    void randomBlocksMatchGgufPy_data();
    void randomBlocksMatchGgufPy();
    void defaultModelRowsMatchGgufPy();
    void unsupportedTypesAreNamed();
};

void TestDequant::randomBlocksMatchGgufPy_data()
{
    QTest::addColumn<QString>("type");
    for (const char* t :
         {"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"})
        QTest::newRow(t) << QString(t);
}

void TestDequant::randomBlocksMatchGgufPy()
{
    QFETCH(QString, type);
    const auto f = GgufFile::open(testsupport::data_dir() + "/quant/blocks.gguf");
    const TensorInfo* quant = f->find_tensor((type + ".quant").toStdString());
    const TensorInfo* expected = f->find_tensor((type + ".expected").toStdString());
    QVERIFY(quant && expected);
    QCOMPARE(QString::fromUtf8(quant->type.name.data(), static_cast<qsizetype>(quant->type.name.size())), type);
    QVERIFY(quant->n_elements() >= 2048);
    const auto ours = dequantize_rows(*f, *quant, quant->n_rows());
    const auto reference = read_f32(*f, *expected);
    const int64_t diff = first_difference(ours, reference);
    QVERIFY2(diff < 0, qPrintable(QString("element %1: ours %2, gguf-py %3")
                                      .arg(diff)
                                      .arg(double(ours[std::size_t(std::max<int64_t>(diff, 0))]), 0, 'g', 9)
                                      .arg(double(reference[std::size_t(std::max<int64_t>(diff, 0))]), 0, 'g', 9)));
}

void TestDequant::defaultModelRowsMatchGgufPy()
{
    REQUIRE_DEFAULT_MODEL(path);
    const auto model = GgufFile::open(path);
    const auto expected = GgufFile::open(testsupport::data_dir() + "/quant/model-expected.gguf");
    QCOMPARE(uint64_t(*expected->get_int("tokenscope.model_size")), model->file_size());
    std::set<std::string> types_seen;
    for (const auto& e : expected->tensors()) {
        const TensorInfo* t = model->find_tensor(e.name);
        QVERIFY2(t, e.name.c_str());
        QCOMPARE(t->ne[0], e.ne[0]);
        types_seen.insert(std::string(t->type.name));
        const auto ours = dequantize_rows(*model, *t, e.n_rows());
        const auto reference = read_f32(*expected, e);
        QVERIFY2(first_difference(ours, reference) < 0, e.name.c_str());
    }
    // The default model's Q4_K_M mix: F32 norms, Q8_0 embeddings, Q5_0, Q4_K, Q6_K.
    QCOMPARE(types_seen, (std::set<std::string>{"F32", "Q4_K", "Q5_0", "Q6_K", "Q8_0"}));
}

void TestDequant::unsupportedTypesAreNamed()
{
    std::vector<float> out(256);
    std::vector<uint8_t> block(66);
    try {
        engine::dequantize_row(GgmlType::IQ2_XXS, block.data(), out.data(), 256, "blk.3.ffn_up.weight");
        QFAIL("IQ2_XXS was decoded");
    } catch (const engine::UnsupportedError& e) {
        QVERIFY(QString(e.what()).contains("IQ2_XXS"));
        QVERIFY(QString(e.what()).contains("blk.3.ffn_up.weight"));
    }
    // A file holding IQ and TQ tensors is refused by name before any weight is used.
    testsupport::GgufBuilder b;
    b.add_string("general.architecture", "llama");
    b.add_tensor({"blk.0.attn_norm.weight", 0, {256}, std::vector<uint8_t>(1024)});
    b.add_tensor({"blk.0.attn_q.weight", 34, {256}, std::vector<uint8_t>(54)}); // TQ1_0
    b.add_tensor({"blk.0.attn_k.weight", 16, {256}, std::vector<uint8_t>(66)}); // IQ2_XXS
    const auto bytes = b.build();
    const auto f = GgufFile::parse({reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()}, "iq.gguf");
    try {
        engine::require_supported_tensor_types(*f);
        QFAIL("a file with TQ1_0 tensors was accepted");
    } catch (const engine::UnsupportedError& e) {
        const QString m(e.what());
        QVERIFY2(m.contains("blk.0.attn_q.weight") && m.contains("TQ1_0") && m.contains("2 tensors"), qPrintable(m));
    }
}

QTEST_GUILESS_MAIN(TestDequant)
#include "test_dequant.moc"
