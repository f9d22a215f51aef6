// SPDX-License-Identifier: GPL-3.0-or-later
// Any text through the model: a model compared with itself gives KL exactly 0 and full agreement;
// KL is never negative; each token's probability equals what a session reaching that prefix
// predicts (within 1e-6 relative: batch orders differ); the Q8_0 and Q4_0 quantizers give the
// gguf package's blocks (committed fixture); a Q8_0 copy of the default model loads, generates and
// stays close to the original (mean KLD < 0.01, same top ≥ 97% on a fixture text); different
// vocabularies are refused naming the first difference.
#include "analysis/text_analysis.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "model/requantize.h"
#include "model/test_model.h"
#include "quant/quantize.h"
#include "session/session.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <cstring>

using namespace engine;

namespace {

std::string fixture_text()
{
    QFile f(QString::fromStdString(testsupport::data_dir()) + "/analysis/fixture-text.txt");
    if (!f.open(QIODevice::ReadOnly))
        return {};
    return f.readAll().toStdString();
}

} // namespace

class TestTextAnalysis : public QObject {
    Q_OBJECT
private slots:
    void selfComparisonIsExactlyZero();
    void probabilitiesEqualTheSessions();
    void quantizersEqualTheGgufPackage();
    void q8CopyOfTheDefaultModelStaysClose();
    void differentVocabulariesAreRefused();
};

void TestTextAnalysis::selfComparisonIsExactlyZero()
{
    REQUIRE_DEFAULT_MODEL(path);
    const auto model = Model::load(path);
    auto a = make_cpu_backend(model, {.threads = 0, .n_ctx = 256});
    auto b = make_cpu_backend(model, {.threads = 0, .n_ctx = 256});
    const std::string text = fixture_text();
    QVERIFY(!text.empty());
    auto ids = model->tokenizer().encode_ids(text);
    ids.resize(std::min<std::size_t>(ids.size(), 300)); // two windows of 256
    const ModelComparison c = compare_models(*a, *b, ids);
    QCOMPARE(c.positions.size(), ids.size() - 2); // each window's last token predicts nothing inside it
    for (const PositionComparison& p : c.positions) {
        QCOMPARE(p.kl, 0.0);
        QCOMPARE(p.reverse_kl, 0.0);
        QVERIFY(p.same_top);
        QCOMPARE(p.p_a, p.p_b);
    }
    QCOMPARE(c.mean_kl, 0.0);
    QCOMPARE(c.same_top, 1.0);
}

void TestTextAnalysis::probabilitiesEqualTheSessions()
{
    REQUIRE_DEFAULT_MODEL(path);
    const auto model = Model::load(path);
    auto backend = make_cpu_backend(model, {.threads = 0, .n_ctx = 256});
    const auto ids = model->tokenizer().encode_ids(
        "The river bank was quiet in the morning, and the fishermen sat on the stones waiting for the tide.");
    const TextAnalysis r = analyze_text(*backend, ids);
    QCOMPARE(r.predictions.size(), ids.size() - 1);
    double nats = 0;
    for (const TokenPrediction& t : r.predictions) {
        QVERIFY(t.rank >= 1);
        QVERIFY(t.entropy_bits >= 0);
        nats += t.surprisal_bits * std::log(2.0);
    }
    QVERIFY(std::abs(r.perplexity - std::exp(nats / double(r.predictions.size()))) < 1e-9 * r.perplexity);
    // how much the summation order of the batch alone moves the logits of the same 5 tokens
    for (uint32_t order : {5u, 8u, 64u}) {
        backend->kv_cache().clear();
        ForwardRequest fr;
        fr.tokens = std::span(ids).first(5);
        fr.order_as_batch = order;
        const auto l = backend->forward(fr).logits;
        backend->kv_cache().clear();
        ForwardRequest f5;
        f5.tokens = std::span(ids).first(5);
        const auto l5 = backend->forward(f5).logits;
        backend->kv_cache().clear();
        double m = 0;
        for (std::size_t i = 0; i < l.size(); ++i)
            m = std::max(m, double(std::abs(l[i] - l5[i])));
        qInfo("5 tokens summed in the order of a batch of %u: max |Δ logit| against the batch's own %.4g", order, m);
    }
    for (std::size_t k : {std::size_t(1), std::size_t(5), ids.size() - 1}) {
        Session s(model, make_cpu_backend(model, {.threads = 0, .n_ctx = 256}), 128);
        s.prefill(std::span(ids).first(k));
        const auto l = s.logits();
        double m = *std::max_element(l.begin(), l.end()), z = 0;
        for (float x : l)
            z += std::exp(double(x) - m);
        const double p = std::exp(double(l[std::size_t(ids[k])]) - m) / z;
        const double shown = r.predictions[k - 1].p;
        QVERIFY2(std::abs(shown - p) <= 1e-6 * p,
                 qPrintable(QString("position %1: %2 vs %3").arg(k).arg(shown).arg(p)));
    }
}

// tests/data/quant/quantize-gguf.json (tests/reference/make_quantize_fixtures.py): rows of random
// values and what gguf.quants.quantize makes of them.
void TestTextAnalysis::quantizersEqualTheGgufPackage()
{
    QFile f(QString::fromStdString(testsupport::data_dir()) + "/quant/quantize-gguf.json");
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QJsonObject fx = QJsonDocument::fromJson(f.readAll()).object();
    int cases = 0;
    for (const auto& cv : fx["cases"].toArray()) {
        const QJsonObject c = cv.toObject();
        const GgmlType type = c["type"].toString() == "Q8_0" ? GgmlType::Q8_0 : GgmlType::Q4_0;
        const QByteArray values = QByteArray::fromBase64(c["values_f32"].toString().toLatin1());
        const QByteArray want = QByteArray::fromBase64(c["blocks"].toString().toLatin1());
        const auto n = int64_t(values.size() / 4);
        std::vector<float> x(static_cast<std::size_t>(n));
        std::memcpy(x.data(), values.data(), std::size_t(values.size()));
        std::vector<std::byte> got(std::size_t(want.size()));
        quantize_row(type, x.data(), got.data(), n);
        QVERIFY2(std::memcmp(got.data(), want.data(), got.size()) == 0,
                 qPrintable(QString("case %1 (%2)").arg(cases).arg(c["type"].toString())));
        ++cases;
    }
    QVERIFY(cases >= 4);
    QVERIFY_THROWS_EXCEPTION(Error, quantize_row(GgmlType::Q8_0, nullptr, nullptr, 33));
}

// Measured: our Q8_0 copy of the default model is byte-identical, tensor for tensor (236 of 236), to
// llama.cpp 0c1e57098's `llama-quantize --allow-requantize … Q8_0`; against the Q4_K_M original it
// agrees on the top token at 93.9% of the fixture text's 294 positions (mean KLD 0.0067) — short
// of the 97%. llama.cpp's own Q8_0 file is the same bytes; llama-perplexity's KLD statistics
// on it were not measured yet.
void TestTextAnalysis::q8CopyOfTheDefaultModelStaysClose()
{
    REQUIRE_DEFAULT_MODEL(path);
    QTemporaryDir dir;
    const std::string q8 = dir.filePath("gemma3-q8_0.gguf").toStdString();
    const RequantizeReport rep = requantize_model(path, q8, GgmlType::Q8_0);
    QVERIFY(rep.tensors_requantized > 0);
    const auto original = Model::load(path);
    const auto copy = Model::load(q8);
    QCOMPARE(int(copy->weights().layers[0].ffn_down.type()), int(GgmlType::Q8_0));
    // it generates
    Session s(copy, make_cpu_backend(copy, {.threads = 0, .n_ctx = 64}), 128);
    s.prefill(copy->tokenizer().encode_ids("The capital of France is"));
    for (float l : s.logits())
        QVERIFY(std::isfinite(l));
    auto a = make_cpu_backend(original, {.threads = 0, .n_ctx = 512});
    auto b = make_cpu_backend(copy, {.threads = 0, .n_ctx = 512});
    auto ids = original->tokenizer().encode_ids(fixture_text());
    const ModelComparison c = compare_models(*a, *b, ids);
    qInfo("Q8_0 copy against Q4_K_M on %zu positions: mean KLD %.5f, same top %.2f%%, RMS Δp %.3f%% (%.1f → %.1f MiB)",
          c.positions.size(), c.mean_kl, 100 * c.same_top, 100 * c.rms_dp, double(rep.bytes_before) / 1048576.0,
          double(rep.bytes_after) / 1048576.0);
    for (const PositionComparison& p : c.positions)
        QVERIFY(p.kl >= 0.0);
    QVERIFY(c.mean_kl < 0.01);
    QVERIFY(c.same_top >= 0.97);
    QVERIFY_THROWS_EXCEPTION(Error, requantize_model(path, path, GgmlType::Q8_0));
}

void TestTextAnalysis::differentVocabulariesAreRefused()
{
    QTemporaryDir dir;
    make_test_model("llama", 1).write(dir.filePath("a.gguf").toStdString());
    make_test_model("qwen2", 1).write(dir.filePath("b.gguf").toStdString());
    const auto a = Model::load(dir.filePath("a.gguf").toStdString());
    const auto b = Model::load(dir.filePath("b.gguf").toStdString());
    auto ba = make_cpu_backend(a, {.threads = 0, .n_ctx = 64});
    auto bb = make_cpu_backend(b, {.threads = 0, .n_ctx = 64});
    const std::vector<TokenId> ids = {1, 2, 3, 4};
    try {
        compare_models(*ba, *bb, ids);
        check_same_vocabulary(a->tokenizer(), b->tokenizer());
        QSKIP("the two test models share a vocabulary");
    } catch (const Error& e) {
        QVERIFY2(QString(e.what()).contains("vocabular"), e.what());
    }
}

QTEST_GUILESS_MAIN(TestTextAnalysis)
#include "test_text_analysis.moc"
