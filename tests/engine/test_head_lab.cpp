// SPDX-License-Identifier: GPL-3.0-or-later
// The lab's head tools (interpretability part 2) by properties a fake cannot have: an empty
// ablation set changes no bit; ablating every head of a layer equals a model (written here) whose
// output projection of that layer is zero; ablating all query heads of a KV group equals a model
// whose values of that group are zero; layers below an ablated head keep their bits; classification
// scores on synthetic attention patterns (a shifted identity scores previous-token exactly 1); on
// the default model, ablating its two top induction heads hurts the repeated copy more than
// ablating the two lowest-scoring ones; steering with strength 0 or from identical prompts changes
// no bit, and the exported control vector is the direction llama.cpp would add.
#include "backend/backend.h"
#include "gguf/gguf_file.h"
#include "lab/ablation_scan.h"
#include "lab/head_classes.h"
#include "lab/steering.h"
#include "lab_test_support.h"
#include "model/model.h"
#include "model/test_model.h"
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
#include <fstream>
#include <random>

using namespace engine;

namespace {

using testsupport::random_tokens;
using testsupport::same_bits;

// The logits of every position with `ivs` (the argument order these tests read best in).
std::vector<float> logits_of(Backend& b, std::span<const TokenId> tokens, std::span<const Intervention> ivs = {},
                             const CaptureRequest* capture = nullptr, std::shared_ptr<ForwardCaptures>* out = nullptr)
{
    return testsupport::all_logits(b, tokens, capture, ivs, out);
}

// Zeroes rows [row0, row0 + n_rows) of a tensor in a GGUF file on disk (every type's all-zero
// block decodes to zeros: its scales are 0).
void zero_rows(const QString& path, const std::string& tensor, uint64_t row0, uint64_t n_rows)
{
    uint64_t offset = 0, row_bytes = 0;
    {
        const auto file = gguf::GgufFile::open(path.toStdString());
        const gguf::TensorInfo* t = file->find_tensor(tensor);
        QVERIFY2(t, tensor.c_str());
        row_bytes = t->n_bytes / t->n_rows();
        offset = file->data_offset() + t->offset;
    }
    std::fstream f(path.toStdString(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(offset + row0 * row_bytes));
    const std::vector<char> zeros(row_bytes * n_rows, 0);
    f.write(zeros.data(), std::streamsize(zeros.size()));
    QVERIFY(f.good());
}

} // namespace

class TestHeadLab : public QObject {
    Q_OBJECT
private slots:
    void emptyAblationChangesNoBit();
    void layerAblationEqualsZeroOutputProjection_data();
    void layerAblationEqualsZeroOutputProjection();
    void groupAblationEqualsZeroValues_data();
    void groupAblationEqualsZeroValues();
    void layersBelowAnAblatedHeadKeepTheirBits();
    void syntheticPatternsScoreExactly();
    void scanRanksEveryHead();
    void inductionHeadsCarryTheRepeatedCopy();
    void steeringWithNothingChangesNoBit();
    void steeringDirectionAndControlVector();
    void sessionSteeringAppliesToEveryPass();
    void steeringMovesLogitsAsLlamaCppsControlVector();
};

void TestHeadLab::emptyAblationChangesNoBit()
{
    QTemporaryDir dir;
    const QString path = dir.filePath("qwen2.gguf");
    make_test_model("qwen2", 4).write(path.toStdString());
    const auto model = Model::load(path.toStdString());
    auto cpu = make_cpu_backend(model, {.threads = 0, .n_ctx = 64});
    const auto A = random_tokens(model->config().n_vocab, 9, 1);
    const auto none = head_ablations(*cpu, {}, AblationMode::Zero, 9);
    QVERIFY(none.empty());
    QVERIFY(same_bits(logits_of(*cpu, A, none), logits_of(*cpu, A)));
}

void TestHeadLab::layerAblationEqualsZeroOutputProjection_data()
{
    QTest::addColumn<QString>("arch");
    for (const char* a : {"llama", "qwen3", "gemma3"})
        QTest::newRow(a) << QString(a);
}

void TestHeadLab::layerAblationEqualsZeroOutputProjection()
{
    QFETCH(QString, arch);
    QTemporaryDir dir;
    const QString path = dir.filePath("a.gguf"), zeroed = dir.filePath("b.gguf");
    make_test_model(arch.toStdString(), 4).write(path.toStdString());
    QVERIFY(QFile::copy(path, zeroed));
    const uint32_t layer = 1;
    const auto model = Model::load(path.toStdString());
    const ModelConfig& c = model->config();
    zero_rows(zeroed, "blk.1.attn_output.weight", 0, c.n_embd);
    const auto model_b = Model::load(zeroed.toStdString());
    auto a = make_cpu_backend(model, {.threads = 0, .n_ctx = 64});
    auto b = make_cpu_backend(model_b, {.threads = 0, .n_ctx = 64});
    std::vector<HeadRef> heads;
    for (uint32_t h = 0; h < c.n_head[layer]; ++h)
        heads.push_back({layer, h});
    const auto A = random_tokens(c.n_vocab, 10, 2);
    const auto ivs = head_ablations(*a, heads, AblationMode::Zero, 10);
    const auto ablated = logits_of(*a, A, ivs);
    QVERIFY(same_bits(ablated, logits_of(*b, A)));
    QVERIFY(!same_bits(ablated, logits_of(*a, A)));
}

void TestHeadLab::groupAblationEqualsZeroValues_data()
{
    QTest::addColumn<QString>("arch");
    for (const char* a : {"llama", "gemma3"})
        QTest::newRow(a) << QString(a);
}

void TestHeadLab::groupAblationEqualsZeroValues()
{
    QFETCH(QString, arch);
    QTemporaryDir dir;
    const QString path = dir.filePath("a.gguf"), zeroed = dir.filePath("b.gguf");
    make_test_model(arch.toStdString(), 5).write(path.toStdString());
    QVERIFY(QFile::copy(path, zeroed));
    const auto model = Model::load(path.toStdString());
    const ModelConfig& c = model->config();
    const uint32_t layer = 0, group = c.n_head_kv[layer] - 1, D = c.head_dim_k;
    const uint32_t per_group = c.n_head[layer] / c.n_head_kv[layer];
    QVERIFY2(per_group >= 2, "the test model's layer should group query heads");
    zero_rows(zeroed, "blk.0.attn_v.weight", uint64_t(group) * D, D);
    const auto model_b = Model::load(zeroed.toStdString());
    auto a = make_cpu_backend(model, {.threads = 0, .n_ctx = 64});
    auto b = make_cpu_backend(model_b, {.threads = 0, .n_ctx = 64});
    std::vector<HeadRef> heads;
    for (uint32_t h = group * per_group; h < (group + 1) * per_group; ++h)
        heads.push_back({layer, h});
    const auto A = random_tokens(c.n_vocab, 10, 3);
    QVERIFY(same_bits(logits_of(*a, A, head_ablations(*a, heads, AblationMode::Zero, 10)), logits_of(*b, A)));
}

void TestHeadLab::layersBelowAnAblatedHeadKeepTheirBits()
{
    QTemporaryDir dir;
    const QString path = dir.filePath("gemma3.gguf");
    make_test_model("gemma3", 4).write(path.toStdString());
    const auto model = Model::load(path.toStdString());
    auto cpu = make_cpu_backend(model, {.threads = 0, .n_ctx = 64});
    const ModelConfig& c = model->config();
    const auto A = random_tokens(c.n_vocab, 12, 4), R = random_tokens(c.n_vocab, 12, 5);
    CaptureRequest cap;
    cap.residuals = true;
    std::shared_ptr<ForwardCaptures> plain, ablated;
    logits_of(*cpu, A, {}, &cap, &plain);
    const uint32_t layer = 2;
    const HeadRef h{layer, 1};
    for (AblationMode mode : {AblationMode::Zero, AblationMode::Mean, AblationMode::Resample}) {
        logits_of(*cpu, A, head_ablations(*cpu, std::span(&h, 1), mode, 12, R), &cap, &ablated);
        for (uint32_t il = 0; il < layer; ++il)
            QVERIFY(same_bits(plain->residuals[il], ablated->residuals[il]));
        QVERIFY(!same_bits(plain->residuals[layer], ablated->residuals[layer]));
    }
}

void TestHeadLab::syntheticPatternsScoreExactly()
{
    HeadProbe probe;
    probe.repeat = 5;
    probe.offset = 1;
    const uint32_t n = 11; // BOS + 2 × 5
    const auto pattern = [&](auto key_of) {
        std::vector<float> w(std::size_t(n) * n, 0.0f);
        for (uint32_t i = 0; i < n; ++i)
            w[std::size_t(i) * n + key_of(i)] = 1.0f;
        return w;
    };
    // a shifted identity: every query looks at the token before it (row 0 at itself)
    const HeadScores prev = score_head(pattern([](uint32_t i) { return i ? i - 1 : 0; }), n, probe);
    QCOMPARE(prev.score[std::size_t(HeadClass::PreviousToken)], 1.0);
    QCOMPARE(prev.score[std::size_t(HeadClass::Self)], 0.0);
    QCOMPARE(prev.entropy, 0.0);
    QCOMPARE(int(prev.cls), int(HeadClass::PreviousToken));
    const HeadScores self = score_head(pattern([](uint32_t i) { return i; }), n, probe);
    QCOMPARE(self.score[std::size_t(HeadClass::Self)], 1.0);
    QCOMPARE(int(self.cls), int(HeadClass::Self));
    const HeadScores sink = score_head(pattern([](uint32_t) { return 0u; }), n, probe);
    QCOMPARE(sink.score[std::size_t(HeadClass::FirstToken)], 1.0);
    // induction: second-copy queries look at the token after their earlier occurrence
    const HeadScores ind = score_head(pattern([&](uint32_t i) { return i >= 6 ? i - 5 + 1 : 0; }), n, probe);
    QCOMPARE(ind.score[std::size_t(HeadClass::Induction)], 1.0);
    QCOMPARE(int(ind.cls), int(HeadClass::Induction));
    const HeadScores dup = score_head(pattern([&](uint32_t i) { return i >= 6 ? i - 5 : 0; }), n, probe);
    QCOMPARE(dup.score[std::size_t(HeadClass::DuplicateToken)], 1.0);
    // uniform rows: entropy exactly… 1 within rounding, every score small → mixed
    std::vector<float> uniform(std::size_t(n) * n, 0.0f);
    for (uint32_t i = 0; i < n; ++i)
        for (uint32_t j = 0; j <= i; ++j)
            uniform[std::size_t(i) * n + j] = 1.0f / float(i + 1);
    const HeadScores u = score_head(uniform, n, probe);
    QVERIFY(std::abs(u.entropy - 1.0) < 1e-6);
    QCOMPARE(int(u.cls), int(HeadClass::Mixed));
}

void TestHeadLab::scanRanksEveryHead()
{
    QTemporaryDir dir;
    const QString path = dir.filePath("llama.gguf");
    make_test_model("llama", 4).write(path.toStdString());
    const auto model = Model::load(path.toStdString());
    auto cpu = make_cpu_backend(model, {.threads = 0, .n_ctx = 64});
    const ModelConfig& c = model->config();
    const auto A = random_tokens(c.n_vocab, 8, 6);
    const AblationScan scan = scan_head_ablations(*cpu, A, AblationMode::Zero);
    QCOMPARE(scan.heads.size(), std::size_t(c.n_layer * c.n_head[0]));
    const std::vector<float> base = run_fresh(*cpu, A).logits;
    for (const HeadEffect& e : scan.heads) {
        QVERIFY(e.kl >= 0.0);
        // each entry is that head's own ablation
        const HeadRef h{e.layer, e.head};
        const auto ivs = head_ablations(*cpu, std::span(&h, 1), AblationMode::Zero, 8);
        const std::vector<float> ablated = run_fresh(*cpu, A, nullptr, ivs).logits;
        QCOMPARE(e.kl, kl_divergence(base, ablated));
        QCOMPARE(e.logit_change, double(ablated[std::size_t(scan.token)]) - scan.base_logit);
    }
    const AblationScan stopped =
        scan_head_ablations(*cpu, A, AblationMode::Zero, {}, {}, [](uint32_t done, uint32_t) { return done < 2; });
    QVERIFY(stopped.cancelled);
    QCOMPARE(stopped.heads.size(), std::size_t(2));
}

void TestHeadLab::inductionHeadsCarryTheRepeatedCopy()
{
    REQUIRE_DEFAULT_MODEL(path);
    const auto model = Model::load(path);
    auto cpu = make_cpu_backend(model, {.threads = 0, .n_ctx = 128});
    const HeadProbe probe = make_head_probe(model->tokenizer(), 24, 1);
    QCOMPARE(probe.tokens.size(), std::size_t(49)); // BOS + 2 × 24
    std::vector<HeadScores> scores = classify_heads(*cpu, probe);
    QCOMPARE(scores.size(), std::size_t(model->config().n_layer * model->config().n_head[0]));
    std::sort(scores.begin(), scores.end(), [](const HeadScores& a, const HeadScores& b) {
        return a.score[std::size_t(HeadClass::Induction)] > b.score[std::size_t(HeadClass::Induction)];
    });
    const auto ablate = [&](std::vector<HeadRef> heads) {
        return second_copy_loss(*cpu, probe,
                                head_ablations(*cpu, heads, AblationMode::Zero, uint32_t(probe.tokens.size())));
    };
    const double base = second_copy_loss(*cpu, probe);
    const double top = ablate({{scores[0].layer, scores[0].head}, {scores[1].layer, scores[1].head}});
    const std::size_t n = scores.size();
    const double bottom =
        ablate({{scores[n - 1].layer, scores[n - 1].head}, {scores[n - 2].layer, scores[n - 2].head}});
    qInfo("second-copy loss: %.4f nats; top induction heads L%u H%u (%.3f), L%u H%u (%.3f) ablated: %.4f; lowest two "
          "ablated: %.4f",
          base, scores[0].layer, scores[0].head, scores[0].score[1], scores[1].layer, scores[1].head,
          scores[1].score[1], top, bottom);
    QVERIFY2(top - base > bottom - base, "ablating the top induction heads should hurt the repeated copy more");
    QVERIFY(top > base);
}

void TestHeadLab::steeringWithNothingChangesNoBit()
{
    QTemporaryDir dir;
    const QString path = dir.filePath("qwen3.gguf");
    make_test_model("qwen3", 4).write(path.toStdString());
    const auto model = Model::load(path.toStdString());
    auto cpu = make_cpu_backend(model, {.threads = 0, .n_ctx = 64});
    const ModelConfig& c = model->config();
    const auto A = random_tokens(c.n_vocab, 9, 7), P = random_tokens(c.n_vocab, 5, 8),
               M = random_tokens(c.n_vocab, 6, 9);
    const std::vector<float> plain = logits_of(*cpu, A);
    const SteeringVector v = steering_vector(*cpu, P, M, 1);
    const Intervention zero = steering_intervention(v, 0.0f);
    QVERIFY(same_bits(logits_of(*cpu, A, std::span(&zero, 1)), plain));
    const SteeringVector same = steering_vector(*cpu, P, P, 1);
    for (float x : same.direction)
        QCOMPARE(x, 0.0f);
    const Intervention none = steering_intervention(same, 8.0f);
    QVERIFY(same_bits(logits_of(*cpu, A, std::span(&none, 1)), plain));
    const Intervention some = steering_intervention(v, 4.0f);
    QVERIFY(!same_bits(logits_of(*cpu, A, std::span(&some, 1)), plain));
    QVERIFY_THROWS_EXCEPTION(Error, steering_vector(*cpu, P, M, 0)); // llama.cpp never steers layer 0
    QVERIFY_THROWS_EXCEPTION(Error, steering_vector(*cpu, P, M, c.n_layer));
}

void TestHeadLab::steeringDirectionAndControlVector()
{
    QTemporaryDir dir;
    const QString path = dir.filePath("gemma3.gguf"), cvec = dir.filePath("cvec.gguf");
    make_test_model("gemma3", 4).write(path.toStdString());
    const auto model = Model::load(path.toStdString());
    auto cpu = make_cpu_backend(model, {.threads = 0, .n_ctx = 64});
    const ModelConfig& c = model->config();
    const auto P = random_tokens(c.n_vocab, 5, 8), M = random_tokens(c.n_vocab, 7, 9);
    const SteeringVector v = steering_vector(*cpu, P, M, 2);
    // the direction is the difference of the two prompts' last residuals after layer 2
    CaptureRequest cap;
    cap.residuals = true;
    const auto rp = run_fresh(*cpu, P, &cap).captures->residuals[2];
    const auto rm = run_fresh(*cpu, M, &cap).captures->residuals[2];
    for (uint32_t i = 0; i < c.n_embd; ++i)
        QCOMPARE(v.direction[i], rp[rp.size() - c.n_embd + i] - rm[rm.size() - c.n_embd + i]);
    // the control vector: llama.cpp's layout (one F32 direction.2 of n_embd)
    write_control_vector(cvec.toStdString(), v, c.architecture, c.n_layer);
    const auto file = gguf::GgufFile::open(cvec.toStdString());
    QCOMPARE(file->tensors().size(), std::size_t(1));
    const gguf::TensorInfo& t = file->tensors()[0];
    QCOMPARE(QString::fromStdString(t.name), QString("direction.2"));
    QCOMPARE(int(t.type.type), int(GgmlType::F32));
    QCOMPARE(t.n_dims, 1u);
    QCOMPARE(t.ne[0], uint64_t(c.n_embd));
    const auto data = file->tensor_data(t);
    QVERIFY(std::memcmp(data.data(), v.direction.data(), data.size()) == 0);
    // applying it adds strength × v at every position after layer 2: equal to replacing with X + s·v
    const auto A = random_tokens(c.n_vocab, 6, 10);
    std::shared_ptr<ForwardCaptures> plain;
    logits_of(*cpu, A, {}, &cap, &plain);
    Intervention replace;
    replace.site = Site::Residual;
    replace.layer = 2;
    replace.count = 6;
    replace.values = plain->residuals[2];
    for (std::size_t i = 0; i < replace.values.size(); ++i)
        replace.values[i] += v.direction[i % c.n_embd] * 3.0f;
    const Intervention steer = steering_intervention(v, 3.0f);
    QVERIFY(same_bits(logits_of(*cpu, A, std::span(&steer, 1)), logits_of(*cpu, A, std::span(&replace, 1))));
}

void TestHeadLab::sessionSteeringAppliesToEveryPass()
{
    QTemporaryDir dir;
    const QString path = dir.filePath("llama.gguf");
    make_test_model("llama", 4).write(path.toStdString());
    const auto model = Model::load(path.toStdString());
    const ModelConfig& c = model->config();
    const auto P = random_tokens(c.n_vocab, 5, 8), M = random_tokens(c.n_vocab, 7, 9),
               A = random_tokens(c.n_vocab, 10, 11);
    auto lab = make_cpu_backend(model, {.threads = 0, .n_ctx = 64});
    const Intervention steer = steering_intervention(steering_vector(*lab, P, M, 1), 2.0f);
    // A steered session's prefill and decode step are the backend's passes with the steering on
    // both; without it on the decode step, the step's logits differ.
    Session session(model, make_cpu_backend(model, {.threads = 0, .n_ctx = 64}), 512);
    session.set_interventions({steer});
    session.prefill(std::span(A).first(7));
    session.decode(A[7]);
    const std::vector<float> stepped(session.logits().begin(), session.logits().end());
    auto manual = make_cpu_backend(model, {.threads = 0, .n_ctx = 64});
    const auto two_passes = [&](bool steer_decode) {
        manual->kv_cache().clear();
        manual->forward({.tokens = std::span(A).first(7), .interventions = std::span(&steer, 1)});
        ForwardRequest step;
        const TokenId next[1] = {A[7]};
        step.tokens = next;
        if (steer_decode)
            step.interventions = std::span(&steer, 1);
        return manual->forward(step).logits;
    };
    QVERIFY(same_bits(stepped, two_passes(true)));
    QVERIFY(!same_bits(stepped, two_passes(false)));
    // clearing the interventions drops the sequence: the next prefill evaluates everything
    session.set_interventions({});
    QCOMPARE(session.tokens().size(), std::size_t(0));
    // a per-position replacement cannot be a session's
    Intervention rows = steer;
    rows.op = Intervention::Op::Replace;
    rows.values.resize(rows.values.size() * 2);
    QVERIFY_THROWS_EXCEPTION(Error, session.set_interventions({rows}));
}

// tests/data/steering (tests/reference/make_steering_fixtures.py): llama.cpp 0c1e57098 (AVX2)
// evaluated three prompts with and without the control vector Tokenscope exported; Tokenscope's
// own steering must move its logits by the same amounts.
void TestHeadLab::steeringMovesLogitsAsLlamaCppsControlVector()
{
    REQUIRE_DEFAULT_MODEL(path);
    const QString dir = QString::fromStdString(testsupport::data_dir()) + "/steering/";
    QFile f(dir + "gemma3-270m.json");
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QJsonObject fx = QJsonDocument::fromJson(f.readAll()).object();
    const auto model = Model::load(path);
    auto cpu = make_cpu_backend(model, {.threads = 0, .n_ctx = 128});
    const Tokenizer& tok = model->tokenizer();
    const SteeringVector v =
        steering_vector(*cpu, tok.encode_ids(fx["plus"].toString().toStdString()),
                        tok.encode_ids(fx["minus"].toString().toStdString()), uint32_t(fx["layer"].toInt()));
    // the direction is still the one llama.cpp was given, bit for bit
    const auto cvec = gguf::GgufFile::open((dir + fx["control_vector"].toString()).toStdString());
    const auto data = cvec->tensor_data(cvec->tensors().at(0));
    QCOMPARE(QString::fromStdString(cvec->tensors()[0].name), QString("direction.%1").arg(fx["layer"].toInt()));
    QCOMPARE(data.size(), v.direction.size() * sizeof(float));
    QVERIFY2(std::memcmp(data.data(), v.direction.data(), data.size()) == 0,
             "the steering direction changed: remake tests/data/steering with make_steering_fixtures.py");
    const Intervention steer = steering_intervention(v, float(fx["strength"].toDouble()));
    for (const auto& pv : fx["prompts"].toArray()) {
        const QJsonObject p = pv.toObject();
        std::vector<TokenId> tokens;
        for (const auto& t : p["tokens"].toArray())
            tokens.push_back(t.toInt());
        QCOMPARE(tok.encode_ids(p["text"].toString().toStdString()), tokens);
        const std::vector<float> plain = run_fresh(*cpu, tokens).logits;
        const std::vector<float> steered = run_fresh(*cpu, tokens, nullptr, std::span(&steer, 1)).logits;
        const double scale = p["max_abs_delta"].toDouble();
        double worst = 0.0;
        const QJsonArray ids = p["ids"].toArray(), delta = p["delta"].toArray();
        for (qsizetype i = 0; i < ids.size(); ++i) {
            const auto id = std::size_t(ids[i].toInt());
            const float ours = steered[id] - plain[id];
            worst = std::max(worst, std::abs(double(ours) - delta[i].toDouble()));
        }
        qInfo("'%s': %lld tokens compared, max |Δ Tokenscope − Δ llama.cpp| = %.3g (largest Δ %.3f)",
              qPrintable(p["text"].toString()), ids.size(), worst, scale);
        QVERIFY2(worst <= 1e-3 * scale, qPrintable(QString("%1 > 1e-3 × %2").arg(worst).arg(scale)));
    }
}

QTEST_GUILESS_MAIN(TestHeadLab)
#include "test_head_lab.moc"
