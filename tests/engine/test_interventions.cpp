// SPDX-License-Identifier: GPL-3.0-or-later
// Interventions on the forward pass (the lab's patching, ablation and steering) and what the lab
// builds on them: properties a fake cannot have — patching a run into itself changes no bit,
// patching every position of a layer from B into A gives B's logits bit for bit at every layer,
// positions before a patch keep their bits, the last layer's residual effect is exactly 1 at the
// last position and 0 elsewhere — on the CPU (real models and random models of every architecture)
// and on Vulkan's exact path (lavapipe in CI). Direct logit attribution: parts add up to the real
// logit, each layer's parts equal the change of the captured residual stream, and on an F32 model
// the quantized-head part vanishes.
#include "backend/backend.h"
#include "gguf/gguf_file.h"
#include "lab/ablation.h"
#include "lab/attribution.h"
#include "lab/patching.h"
#include "lab_test_support.h"
#include "model/model.h"
#include "model/test_model.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "vulkan_test_support.h"

#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <cstring>
#include <random>

using namespace engine;

namespace {

using testsupport::all_logits;
using testsupport::random_tokens;
using testsupport::same_bits;

Intervention replace_rows(Site site, uint32_t layer, uint32_t first, uint32_t count, std::span<const float> rows,
                          uint32_t width)
{
    Intervention iv;
    iv.site = site;
    iv.layer = layer;
    iv.first = first;
    iv.count = count;
    iv.values.assign(rows.begin() + std::ptrdiff_t(std::size_t(first) * width),
                     rows.begin() + std::ptrdiff_t(std::size_t(first + count) * width));
    return iv;
}

// The patching properties on one backend: A into A, B into A at every layer and site, positions
// before a patch, and an addition against the equivalent replacement.
void check_patching_properties(Backend& b, std::span<const TokenId> A, std::span<const TokenId> B)
{
    const ModelConfig& c = b.model().config();
    const auto n = uint32_t(A.size());
    CaptureRequest everything;
    everything.sites = {Site::Embedding,   Site::HeadOut, Site::AttentionOut,
                        Site::ResidualMid, Site::MlpOut,  Site::Residual};
    const std::vector<float> plain = all_logits(b, A);
    std::shared_ptr<ForwardCaptures> cap_a, cap_b;
    // Captures change nothing, and neither does an empty intervention list.
    QVERIFY(same_bits(all_logits(b, A, &everything, {}, &cap_a), plain));
    QVERIFY(same_bits(all_logits(b, B, &everything, {}, &cap_b), all_logits(b, B)));
    QVERIFY(!same_bits(plain, all_logits(b, B)));

    for (Site site :
         {Site::Embedding, Site::HeadOut, Site::AttentionOut, Site::ResidualMid, Site::MlpOut, Site::Residual}) {
        for (uint32_t il = 0; il < (site == Site::Embedding ? 1 : c.n_layer); ++il) {
            const uint32_t width = site_width(c, site, il);
            // A into A: every bit as before.
            const Intervention self = replace_rows(site, il, 0, n, cap_a->at(site, il), width);
            QVERIFY2(same_bits(all_logits(b, A, nullptr, std::span(&self, 1)), plain),
                     qPrintable(QString("%1 of layer %2 patched into itself").arg(site_name(site).data()).arg(il)));
            // Every position of the residual (or the embeddings) from B: B's logits, bit for bit.
            if (site == Site::Residual || site == Site::Embedding || site == Site::ResidualMid) {
                const Intervention all_b = replace_rows(site, il, 0, n, cap_b->at(site, il), width);
                QVERIFY2(same_bits(all_logits(b, A, nullptr, std::span(&all_b, 1)), all_logits(b, B)),
                         qPrintable(QString("%1 of layer %2 from B").arg(site_name(site).data()).arg(il)));
            }
        }
    }

    // Resuming at any layer from the residual after the layer below gives the whole run's bits.
    for (uint32_t il = 1; il <= c.n_layer; ++il) {
        b.kv_cache().clear();
        ForwardRequest r;
        r.tokens = A;
        r.all_logits = true;
        r.start_layer = il;
        r.start_residual = cap_a->residuals[il - 1];
        QVERIFY2(same_bits(b.forward(r).logits, plain), qPrintable(QString("resumed at layer %1").arg(il)));
        b.kv_cache().clear();
    }

    // One position from B: the rows before it keep A's bits, its own row and later ones move.
    const uint32_t p = n / 2, mid = c.n_layer / 2, V = c.n_vocab;
    const Intervention one = replace_rows(Site::Residual, mid, p, 1, cap_b->at(Site::Residual, mid), c.n_embd);
    const std::vector<float> patched = all_logits(b, A, nullptr, std::span(&one, 1));
    QVERIFY(same_bits(std::span(patched).first(std::size_t(p) * V), std::span(plain).first(std::size_t(p) * V)));
    QVERIFY(
        !same_bits(std::span(patched).subspan(std::size_t(p) * V, V), std::span(plain).subspan(std::size_t(p) * V, V)));

    // Adding v to the residual from position p on equals replacing those rows with X + v.
    std::vector<float> v(c.n_embd);
    for (uint32_t i = 0; i < c.n_embd; ++i)
        v[i] = 0.25f * std::sin(float(i));
    Intervention add;
    add.site = Site::Residual;
    add.layer = mid;
    add.op = Intervention::Op::Add;
    add.first = p;
    add.count = UINT32_MAX;
    add.values = v;
    Intervention same = replace_rows(Site::Residual, mid, p, n - p, cap_a->at(Site::Residual, mid), c.n_embd);
    for (std::size_t i = 0; i < same.values.size(); ++i)
        same.values[i] += v[i % c.n_embd];
    const std::vector<float> added = all_logits(b, A, nullptr, std::span(&add, 1));
    QVERIFY(same_bits(added, all_logits(b, A, nullptr, std::span(&same, 1))));
    QVERIFY(!same_bits(added, plain));
    // … and adding zeros changes nothing.
    add.values.assign(c.n_embd, 0.0f);
    QVERIFY(same_bits(all_logits(b, A, nullptr, std::span(&add, 1)), plain));

    // Zero-ablating one head is replacing its columns only: the other heads' outputs stay.
    Intervention zero;
    zero.site = Site::HeadOut;
    zero.layer = mid;
    zero.head = 0;
    zero.first = 0;
    zero.count = n;
    zero.values.assign(c.head_dim_k, 0.0f);
    CaptureRequest heads;
    heads.sites = {Site::HeadOut};
    std::shared_ptr<ForwardCaptures> ablated;
    all_logits(b, A, &heads, std::span(&zero, 1), &ablated);
    const std::vector<float>& ha = ablated->at(Site::HeadOut, mid);
    const std::vector<float>& h0 = cap_a->at(Site::HeadOut, mid);
    const uint32_t HD = site_width(c, Site::HeadOut, mid), D = c.head_dim_k;
    for (uint32_t t = 0; t < n; ++t)
        for (uint32_t i = 0; i < HD; ++i) {
            const float want = i < D ? 0.0f : h0[std::size_t(t) * HD + i];
            if (std::memcmp(&ha[std::size_t(t) * HD + i], &want, sizeof(float)) != 0)
                QFAIL(qPrintable(QString("head output %1 of position %2 after ablating head 0").arg(i).arg(t)));
        }
}

// The residual effect of the last layer: exactly 1 at the last position, 0 elsewhere.
// `every_site`: also each kind of grid's cells against whole runs (random models: fast).
void check_last_layer_effect(Backend& b, std::vector<TokenId> clean, std::vector<TokenId> corrupt,
                             bool every_site = true)
{
    PatchingRequest req;
    req.clean = clean;
    req.corrupted = corrupt;
    const std::vector<float> lc = run_fresh(b, clean).logits;
    // the clean run's top token against the corrupted run's
    const auto top = [](std::span<const float> l) { return TokenId(std::max_element(l.begin(), l.end()) - l.begin()); };
    const std::vector<float> lk = run_fresh(b, corrupt).logits;
    req.metric = {PatchMetric::Kind::LogitDiff, top(lc), top(lk)};
    if (req.metric.a == req.metric.b)
        req.metric.kind = PatchMetric::Kind::KlToClean;
    const PatchingResult r = run_patching(b, req);
    const uint32_t last_layer = b.model().config().n_layer - 1, n = uint32_t(clean.size());
    QCOMPARE(r.runs, b.model().config().n_layer * n);
    QCOMPARE(r.effect[last_layer][n - 1], 1.0);
    for (uint32_t p = 0; p + 1 < n; ++p)
        QCOMPARE(r.effect[last_layer][p], 0.0);
    // Each cell is the metric of the corrupted prompt run whole with that one patch (the grid
    // resumes each run at its layer; the bits must not change).
    CaptureRequest all;
    all.sites = {Site::Residual, Site::AttentionOut, Site::MlpOut, Site::HeadOut};
    const LabRun c_run = run_fresh(b, clean, &all);
    const uint32_t mid = last_layer / 2;
    for (PatchOver over : {PatchOver::Residual, PatchOver::AttentionOut, PatchOver::MlpOut, PatchOver::Heads}) {
        if (!every_site && over != PatchOver::Residual)
            continue;
        PatchingRequest r2 = req;
        r2.over = over;
        const PatchingResult grid = over == PatchOver::Residual ? r : run_patching(b, r2);
        const Site site = patch_site(over);
        const uint32_t width = site_width(b.model().config(), site, mid), col = over == PatchOver::Heads ? 1 : n / 2;
        Intervention iv = replace_rows(site, mid, over == PatchOver::Heads ? 0 : col, over == PatchOver::Heads ? n : 1,
                                       c_run.captures->at(site, mid), width);
        if (over == PatchOver::Heads) {
            const uint32_t D = b.model().config().head_dim_k;
            iv.head = int32_t(col);
            std::vector<float> cols;
            for (uint32_t t = 0; t < n; ++t)
                cols.insert(cols.end(), iv.values.begin() + std::ptrdiff_t(std::size_t(t) * width + col * D),
                            iv.values.begin() + std::ptrdiff_t(std::size_t(t) * width + (col + 1) * D));
            iv.values = cols;
        }
        const LabRun whole = run_fresh(b, corrupt, nullptr, std::span(&iv, 1));
        QCOMPARE(grid.raw[mid][col], patch_metric(req.metric, whole.logits, lc));
    }
    // at the first layer, patching the last position alone is a different run from the corrupted
    // one (its own residual), so the effect is not 0 there
    QVERIFY(r.effect[0][n - 1] != 0.0);
}

void check_attribution(Backend& b, std::span<const TokenId> tokens, TokenId token, double head_bound)
{
    const ModelConfig& c = b.model().config();
    const Attribution a = attribute_logit(b, tokens, token);
    // embedding; per layer its heads, "attention, other" and the MLP (a mixture of experts: each chosen
    // expert too); the output head; a final soft-cap
    QCOMPARE(a.parts.size(),
             std::size_t(1 + c.n_layer * (c.n_head[0] + 2 + c.n_expert_used) + 1 + (c.final_logit_softcap ? 1 : 0)));
    const double sum = sum_of_parts(a);
    QVERIFY2(std::abs(sum - a.logit) <= 1e-4 * std::max(1.0, std::abs(a.logit)),
             qPrintable(QString("parts sum to %1, the logit is %2").arg(sum, 0, 'g', 10).arg(a.logit, 0, 'g', 10)));
    // the logit is the pass's own
    const std::vector<float> logits = run_fresh(b, tokens).logits;
    QCOMPARE(a.logit, double(logits[std::size_t(token)]));

    // Each layer's attention and MLP parts are the change of the captured residual stream.
    CaptureRequest cap;
    cap.sites = {Site::Embedding, Site::Residual};
    const LabRun run = run_fresh(b, tokens, &cap);
    const std::size_t last = tokens.size() - 1, E = c.n_embd;
    const auto along = [&](const float* x, const float* before) {
        double s = 0.0;
        for (std::size_t i = 0; i < E; ++i)
            s += a.direction[i] * (double(x[i]) - (before ? double(before[i]) : 0.0));
        return s;
    };
    const float* prev = run.captures->at(Site::Embedding, 0).data() + last * E;
    for (uint32_t il = 0; il < c.n_layer; ++il) {
        double layer_parts = 0.0;
        for (const AttributionPart& p : a.parts)
            if (p.layer == int32_t(il))
                layer_parts += p.value;
        const float* x = run.captures->at(Site::Residual, il).data() + last * E;
        const double change = along(x, prev);
        // relative to the size of what the layer wrote (its parts' magnitudes)
        double scale = 0.0;
        for (const AttributionPart& p : a.parts)
            if (p.layer == int32_t(il))
                scale += std::abs(p.value);
        QVERIFY2(std::abs(layer_parts - change) <= 1e-5 * std::max(scale, std::abs(along(x, nullptr)) * 1e-2),
                 qPrintable(QString("layer %1: parts %2, residual change %3")
                                .arg(il)
                                .arg(layer_parts, 0, 'g', 12)
                                .arg(change, 0, 'g', 12)));
        prev = x;
    }
    double head_part = 0.0;
    for (const AttributionPart& p : a.parts)
        if (p.kind == AttributionPart::Kind::OutputHead)
            head_part = p.value;
    qInfo("logit %.6f, parts sum %.6f, quantized output head part %.3g", a.logit, sum, head_part);
    if (head_bound > 0)
        QVERIFY2(std::abs(head_part) < head_bound, qPrintable(QString("output head part %1").arg(head_part)));
}

} // namespace

class TestInterventions : public QObject {
    Q_OBJECT
private slots:
    void testModels_data();
    void testModels();
    void defaultModel();
    void chatModel();
    void vulkanPaths_data();
    void vulkanPaths();
    void attributionOnAnF32ModelLeavesNoHeadPart();
    void headAblationModes();
    void badInterventionsAreRefusedByName();
    void patchingRefusesPromptsOfDifferentLengths();
    void singleTokenNamesThePieces();
};

void TestInterventions::testModels_data()
{
    QTest::addColumn<QString>("arch");
    for (const auto& a : test_model_architectures())
        QTest::newRow(a.c_str()) << QString::fromStdString(a);
}

void TestInterventions::testModels()
{
    QFETCH(QString, arch);
    QTemporaryDir dir;
    const QString path = dir.filePath(arch + ".gguf");
    make_test_model(arch.toStdString(), 3).write(path.toStdString());
    const auto model = Model::load(path.toStdString());
    auto cpu = make_cpu_backend(model, {.threads = 0, .n_ctx = 256});
    const auto A = random_tokens(model->config().n_vocab, 12, 1), B = random_tokens(model->config().n_vocab, 12, 2);
    check_patching_properties(*cpu, A, B);
    if (QTest::currentTestFailed())
        return;
    check_last_layer_effect(*cpu, A, B);
    if (QTest::currentTestFailed())
        return;
    check_attribution(*cpu, A, 5, 0.0);
}

void TestInterventions::defaultModel()
{
    REQUIRE_DEFAULT_MODEL(path);
    const auto model = Model::load(path);
    auto cpu = make_cpu_backend(model, {.threads = 0, .n_ctx = 256});
    const auto file = gguf::GgufFile::open(path);
    const Tokenizer tok(Vocab::from_gguf(*file));
    const auto A = tok.encode_ids("The Eiffel Tower is in the city of");
    const auto B = tok.encode_ids("The Colosseum is in the city of");
    QCOMPARE(A.size(), B.size());
    check_patching_properties(*cpu, A, B);
    if (QTest::currentTestFailed())
        return;
    check_last_layer_effect(*cpu, A, B, false);
    if (QTest::currentTestFailed())
        return;
    check_attribution(*cpu, A, single_token(tok, " Paris"), 0.0);
}

void TestInterventions::chatModel()
{
    REQUIRE_CHAT_MODEL(path);
    const auto model = Model::load(path);
    auto cpu = make_cpu_backend(model, {.threads = 0, .n_ctx = 256});
    const auto file = gguf::GgufFile::open(path);
    const Tokenizer tok(Vocab::from_gguf(*file));
    const auto A = tok.encode_ids("total = price +");
    const auto B = tok.encode_ids("total = price -");
    QCOMPARE(A.size(), B.size());
    check_last_layer_effect(*cpu, A, B, false);
    if (QTest::currentTestFailed())
        return;
    check_attribution(*cpu, A, single_token(tok, " tax"), 0.0);
}

void TestInterventions::vulkanPaths_data()
{
    QTest::addColumn<bool>("exact");
    QTest::newRow("f32") << false;
    QTest::newRow("exact") << true;
}

// Both Vulkan arithmetics keep the patching properties on the device's own runs (a capture-everything
// run equals a plain one, which takes the fused residual add and norm; patches with a run's own
// activations keep every bit; resuming at a layer matches). The exact one reproduces the CPU, so
// its patched runs do too.
void TestInterventions::vulkanPaths()
{
    QFETCH(bool, exact);
    REQUIRE_VULKAN();
#ifdef TOKENSCOPE_HAVE_VULKAN
    QTemporaryDir dir;
    const QString path = dir.filePath("gemma3.gguf");
    make_test_model("gemma3", 3).write(path.toStdString());
    const auto model = Model::load(path.toStdString());
    auto vulkan = make_vulkan_backend(model, {.device = -1, .n_ctx = 256, .validation = true, .exact = exact});
    qInfo("%s", vulkan->name().c_str());
    QVERIFY(QString::fromStdString(vulkan->name()).endsWith(exact ? ", exact)" : ", f32)"));
    const auto A = random_tokens(model->config().n_vocab, 8, 1), B = random_tokens(model->config().n_vocab, 8, 2);
    check_patching_properties(*vulkan, A, B);
    if (QTest::currentTestFailed())
        return;
    check_last_layer_effect(*vulkan, A, B);
    if (exact) {
        auto cpu = make_cpu_backend(model, {.threads = 0, .n_ctx = 256});
        CaptureRequest cap;
        cap.sites = {Site::Residual};
        const LabRun b_run = run_fresh(*cpu, B, &cap);
        const Intervention iv =
            replace_rows(Site::Residual, 1, 3, 2, b_run.captures->at(Site::Residual, 1), model->config().n_embd);
        QVERIFY(same_bits(all_logits(*vulkan, A, nullptr, std::span(&iv, 1)),
                          all_logits(*cpu, A, nullptr, std::span(&iv, 1))));
    }
    REQUIRE_NO_VALIDATION_MESSAGES();
#endif
}

void TestInterventions::attributionOnAnF32ModelLeavesNoHeadPart()
{
    QTemporaryDir dir;
    const QString path = dir.filePath("llama-f32.gguf");
    make_test_model("llama", 5, TestModelShape{.n_layer = 3}).write(path.toStdString());
    const auto model = Model::load(path.toStdString());
    QCOMPARE(int(model->weights().output.type()), int(GgmlType::F32));
    auto cpu = make_cpu_backend(model, {.threads = 0, .n_ctx = 64});
    check_attribution(*cpu, random_tokens(model->config().n_vocab, 9, 4), 7, 1e-4);
}

void TestInterventions::headAblationModes()
{
    QTemporaryDir dir;
    const QString path = dir.filePath("qwen3.gguf");
    make_test_model("qwen3", 3).write(path.toStdString());
    const auto model = Model::load(path.toStdString());
    auto cpu = make_cpu_backend(model, {.threads = 0, .n_ctx = 64});
    const ModelConfig& c = model->config();
    const uint32_t D = c.head_dim_k, HD = site_width(c, Site::HeadOut, 1);
    const auto A = random_tokens(c.n_vocab, 6, 1), R = random_tokens(c.n_vocab, 9, 2);
    const std::vector<float> plain = all_logits(*cpu, A);
    CaptureRequest heads;
    heads.sites = {Site::HeadOut};
    std::shared_ptr<ForwardCaptures> ref_cap, got;
    all_logits(*cpu, R, &heads, {}, &ref_cap);
    const std::vector<float>& ref = ref_cap->at(Site::HeadOut, 1);
    const HeadRef h{1, 2};
    // Resampling a prompt from itself changes nothing.
    auto self = head_ablations(*cpu, std::span(&h, 1), AblationMode::Resample, 6, A);
    QVERIFY(same_bits(all_logits(*cpu, A, nullptr, self), plain));
    for (AblationMode mode : {AblationMode::Zero, AblationMode::Mean, AblationMode::Resample}) {
        const auto ivs = head_ablations(*cpu, std::span(&h, 1), mode, 6, R);
        QVERIFY(!same_bits(all_logits(*cpu, A, &heads, ivs, &got), plain));
        const std::vector<float>& out = got->at(Site::HeadOut, 1);
        for (uint32_t t = 0; t < 6; ++t)
            for (uint32_t i = 0; i < D; ++i) {
                double want = 0.0;
                if (mode == AblationMode::Resample)
                    want = ref[std::size_t(t) * HD + 2 * D + i];
                if (mode == AblationMode::Mean) {
                    for (uint32_t r = 0; r < 9; ++r)
                        want += ref[std::size_t(r) * HD + 2 * D + i];
                    want /= 9.0;
                }
                QCOMPARE(out[std::size_t(t) * HD + 2 * D + i], float(want));
            }
    }
    QVERIFY_THROWS_EXCEPTION(Error, head_ablations(*cpu, std::span(&h, 1), AblationMode::Mean, 6));
    QVERIFY_THROWS_EXCEPTION(Error, head_ablations(*cpu, std::span(&h, 1), AblationMode::Resample, 12, R));
    const HeadRef bad{1, c.n_head[1]};
    QVERIFY_THROWS_EXCEPTION(Error, head_ablations(*cpu, std::span(&bad, 1), AblationMode::Zero, 6));
}

void TestInterventions::badInterventionsAreRefusedByName()
{
    QTemporaryDir dir;
    const QString path = dir.filePath("qwen2.gguf");
    make_test_model("qwen2", 3).write(path.toStdString());
    const auto model = Model::load(path.toStdString());
    auto cpu = make_cpu_backend(model, {.threads = 0, .n_ctx = 64});
    const ModelConfig& c = model->config();
    const auto A = random_tokens(c.n_vocab, 6, 1);
    const auto refused = [&](Intervention iv, const char* words) {
        try {
            all_logits(*cpu, A, nullptr, std::span(&iv, 1));
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains(words), e.what());
            QCOMPARE(cpu->kv_cache().n_cached(), 0u); // nothing was evaluated
            return;
        }
        QFAIL(qPrintable(QString("accepted: expected '%1'").arg(words)));
    };
    Intervention iv;
    iv.values.assign(c.n_embd, 0.0f);
    iv.layer = c.n_layer;
    refused(iv, "layers");
    iv.layer = 0;
    iv.values.resize(3);
    refused(iv, "values given");
    iv.values.assign(c.n_embd, 0.0f);
    iv.head = 0;
    refused(iv, "only a head output names a head");
    iv.head = -1;
    iv.values.assign(std::size_t(c.n_embd) * 4, 0.0f);
    iv.first = 4;
    iv.count = 4;
    refused(iv, "outside this pass");
    iv.site = Site::HeadOut;
    iv.head = int32_t(c.n_head[0]);
    iv.count = 1;
    iv.first = 0;
    iv.values.assign(c.head_dim_k, 0.0f);
    refused(iv, "heads");
    iv.head = 0;
    iv.op = Intervention::Op::Add;
    refused(iv, "whole rows");

    // A resumed pass: a layer the model has, the right number of residual values, no captures.
    ForwardRequest r;
    r.tokens = A;
    std::vector<float> rows(std::size_t(A.size()) * c.n_embd, 0.0f);
    r.start_residual = rows;
    r.start_layer = c.n_layer + 1;
    QVERIFY_THROWS_EXCEPTION(Error, cpu->forward(r));
    r.start_layer = 1;
    r.start_residual = std::span(rows).first(5);
    QVERIFY_THROWS_EXCEPTION(Error, cpu->forward(r));
    r.start_residual = rows;
    CaptureRequest cap;
    cap.residuals = true;
    r.capture = &cap;
    QVERIFY_THROWS_EXCEPTION(Error, cpu->forward(r));
    QCOMPARE(cpu->kv_cache().n_cached(), 0u);
}

void TestInterventions::patchingRefusesPromptsOfDifferentLengths()
{
    QTemporaryDir dir;
    const QString path = dir.filePath("llama.gguf");
    make_test_model("llama", 3).write(path.toStdString());
    const auto model = Model::load(path.toStdString());
    auto cpu = make_cpu_backend(model, {.threads = 0, .n_ctx = 64});
    PatchingRequest req;
    req.clean = random_tokens(model->config().n_vocab, 7, 1);
    req.corrupted = random_tokens(model->config().n_vocab, 5, 2);
    try {
        run_patching(*cpu, req);
        QFAIL("prompts of 7 and 5 tokens were accepted");
    } catch (const Error& e) {
        QVERIFY2(QString(e.what()).contains("7 tokens") && QString(e.what()).contains("5"), e.what());
    }
    req.corrupted = req.clean; // the same metric for both: nothing to normalise by
    try {
        run_patching(*cpu, req);
        QFAIL("identical prompts were accepted");
    } catch (const Error& e) {
        QVERIFY2(QString(e.what()).contains("the same for the clean and the corrupted"), e.what());
    }
    // Stop after three runs: those cells are filled, the rest NaN.
    req.corrupted = random_tokens(model->config().n_vocab, 7, 2);
    req.metric = {PatchMetric::Kind::LogProb, 3, 0};
    const PatchingResult r = run_patching(*cpu, req, [](uint32_t done, uint32_t) { return done < 3; });
    QVERIFY(r.cancelled);
    QCOMPARE(r.runs, 3u);
    QVERIFY(!std::isnan(r.effect[0][2]));
    QVERIFY(std::isnan(r.effect[0][3]));
}

void TestInterventions::singleTokenNamesThePieces()
{
    REQUIRE_DEFAULT_MODEL(path);
    const auto file = gguf::GgufFile::open(path);
    const Tokenizer tok(Vocab::from_gguf(*file));
    const TokenId paris = single_token(tok, " Paris");
    QCOMPARE(single_token(tok, QString("#%1").arg(paris).toStdString()), paris);
    try {
        single_token(tok, " Parisiennes extraordinaire");
        QFAIL("several tokens accepted");
    } catch (const Error& e) {
        QVERIFY2(QString(e.what()).contains("tokens") && QString(e.what()).contains("not one"), e.what());
    }
    QVERIFY_THROWS_EXCEPTION(Error, single_token(tok, "#999999999"));
}

QTEST_GUILESS_MAIN(TestInterventions)
#include "test_interventions.moc"
