// SPDX-License-Identifier: GPL-3.0-or-later
// Mixture-of-experts models end to end (issue 46): the three architectures' random-weight models
// (`make-test-model --arch qwen3moe|olmoe|granitemoe`, regenerated here byte for byte) against
// llama.cpp's AVX2 build, in its plain order (tests/data/logits/archs/A.gguf) and in its default,
// repacked one (A-repack.gguf: its Q4_0 and Q4_K experts through the repacked gemv); then the router
// as the lab sees it: the captures against an independent recomputation from the captured residuals,
// and the interventions' promises (forcing the chosen experts or removing an unchosen one changes no
// bit; a removed expert is never chosen).
#include "backend/backend.h"
#include "backend/backend_factory.h"
#include "fixture_agreement.h"
#include "lab/attribution.h"
#include "lab/patching.h"
#include "model/memory_plan.h"
#include "model/test_model.h"
#include "moe/expert_scan.h"
#include "moe/routing.h"
#include "quant/dequant.h"
#include "session/session.h"
#include "test_paths.h"
#include "util/error.h"

#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <set>

using namespace engine;
using namespace testsupport;

class TestMoe : public QObject {
    Q_OBJECT
private slots:
    void matchesLlamaCppBitForBit_data();
    void matchesLlamaCppBitForBit();
    void routingCaptureIsTheRoutersDecision_data();
    void routingCaptureIsTheRoutersDecision();
    void forcingTheChosenExpertsChangesNoBit();
    void removingAnUnchosenExpertChangesNoBit();
    void removedExpertIsNeverChosen();
    void zeroingAnExpertsOutputKeepsItsRoute();
    void deterministicModeIsBatchInvariant();
    void expertScanIsEachRemovalsOwnPass();
    void attributionSplitsEachLayerByExpert();
    void patchingRoutesPerExpert();
    void publishedShapeAgreesWhenAsked();
    void softmaxIsGgmls();
    void badInterventionsAreRefusedByName();
    void hostileExpertMetadataIsRefusedByName();
    void modelFiguresCountActiveExperts();
    void gpuBackendsRefuseByName();
};

namespace {

const char* const kMoeArchitectures[] = {"qwen3moe", "olmoe", "granitemoe"};

std::shared_ptr<const Model> moe_model(const QTemporaryDir& dir, const std::string& arch)
{
    const auto fixture = gguf::GgufFile::open(data_dir() + "/logits/archs/" + arch + ".gguf");
    return fixture_model(dir, QString::fromStdString(arch), make_test_model(arch, 1), *fixture);
}

std::vector<TokenId> prompt(uint32_t n, uint32_t salt = 0)
{
    std::vector<TokenId> t(n);
    for (uint32_t i = 0; i < n; ++i)
        t[i] = TokenId(3 + (i * 37 + salt * 11 + 5) % 250);
    return t;
}

struct Run {
    ForwardResult result;
};

ForwardResult run(const std::shared_ptr<const Model>& model, std::span<const TokenId> tokens,
                  std::span<const ExpertIntervention> interventions = {}, bool capture_routing = true,
                  bool residual_mid = false)
{
    auto backend = make_cpu_backend(model, {.threads = 2, .n_ctx = 1024});
    CaptureRequest capture;
    capture.routing = capture_routing;
    if (residual_mid)
        capture.sites = {Site::ResidualMid};
    ForwardRequest request;
    request.tokens = tokens;
    request.all_logits = true;
    request.capture = capture.empty() ? nullptr : &capture;
    request.expert_interventions = interventions;
    return backend->forward(request);
}

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b)
{
    if (a.size() != b.size())
        return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i]))
            return false;
    return true;
}

const RoutingCapture& routing_of(const ForwardResult& r, uint32_t layer)
{
    for (const RoutingCapture& rc : r.captures->routing)
        if (rc.layer == layer)
            return rc;
    throw std::logic_error("no routing captured for that layer");
}

} // namespace

void TestMoe::matchesLlamaCppBitForBit_data()
{
    QTest::addColumn<QString>("arch");
    QTest::addColumn<bool>("repacked");
    for (const char* a : kMoeArchitectures) {
        QTest::newRow(a) << QString(a) << false;
        QTest::newRow(qPrintable(QString(a) + "-repack")) << QString(a) << true;
    }
}

void TestMoe::matchesLlamaCppBitForBit()
{
    QFETCH(QString, arch);
    QFETCH(bool, repacked);
    const std::string name = arch.toStdString() + (repacked ? "-repack" : "");
    const auto fixture = gguf::GgufFile::open(data_dir() + "/logits/archs/" + name + ".gguf");
    QTemporaryDir dir;
    const auto model = moe_model(dir, arch.toStdString());
    QVERIFY2(model, "the generated model is not the one llama.cpp ran");
    QVERIFY(model->config().is_moe());
    if (!repacked) {
        require_llama_cpp_agreement(model, *fixture, arch);
        return;
    }
    // llama.cpp's default build repacks the Q4_0 and Q4_K experts (and matrices) where the CPU has AVX2
    QVERIFY(fixture->get_bool("tokenscope.use_extra_bufts").value_or(false));
    Session session(model, make_cpu_backend(model, {.threads = 0, .n_ctx = 2048, .order = WeightOrder::Repacked}),
                    2048);
    const Agreement a = agreement(session, *fixture);
    qInfo("%s, repacked order: last logits bit-equal on %d of %d prompts, greedy identical on %d", qPrintable(arch),
          a.bit_equal, a.prompts, a.identical);
    QVERIFY2(a.bit_equal == a.prompts && a.identical == a.prompts, qPrintable(arch + ": " + a.first_difference));
}

void TestMoe::routingCaptureIsTheRoutersDecision_data()
{
    QTest::addColumn<QString>("arch");
    for (const char* a : kMoeArchitectures)
        QTest::newRow(a) << QString(a);
}

// From the captured residual between attention and experts: the norm, the router (in double), the
// softmax, the top k and the weights, written here from the definitions, against the capture.
void TestMoe::routingCaptureIsTheRoutersDecision()
{
    QFETCH(QString, arch);
    QTemporaryDir dir;
    const auto model = moe_model(dir, arch.toStdString());
    QVERIFY(model);
    const ModelConfig& c = model->config();
    const auto tokens = prompt(24);
    const ForwardResult r = run(model, tokens, {}, true, true);
    QVERIFY(r.captures);
    QCOMPARE(r.captures->routing.size(), std::size_t(c.n_layer));
    const uint32_t E = c.n_embd, NE = c.n_expert, k = c.n_expert_used;
    int checked = 0;
    double worst_weight = 0.0;
    for (uint32_t il = 0; il < c.n_layer; ++il) {
        const RoutingCapture& rc = routing_of(r, il);
        QCOMPARE(rc.n_tokens, uint32_t(tokens.size()));
        QCOMPARE(rc.k, k);
        const auto& mid = r.captures->at(Site::ResidualMid, il);
        const LayerWeights& L = model->weights().layers[il];
        const std::vector<float> norm = tensor_to_f32(L.ffn_norm);
        std::vector<float> router(std::size_t(NE) * E);
        for (uint32_t e = 0; e < NE; ++e)
            dequantize_row(L.ffn_gate_inp.type(), L.ffn_gate_inp.row(e), router.data() + std::size_t(e) * E, E);
        for (uint32_t t = 0; t < tokens.size(); ++t) {
            const float* x = mid.data() + std::size_t(t) * E;
            double ss = 0;
            for (uint32_t i = 0; i < E; ++i)
                ss += double(x[i]) * x[i];
            const double scale = 1.0 / std::sqrt(ss / E + double(c.norm_eps));
            std::vector<double> logit(NE), p(NE);
            for (uint32_t e = 0; e < NE; ++e) {
                double acc = 0;
                for (uint32_t i = 0; i < E; ++i)
                    acc += double(router[std::size_t(e) * E + i]) * (double(x[i]) * scale * norm[i]);
                logit[e] = acc;
            }
            const double mx = *std::max_element(logit.begin(), logit.end());
            double sum = 0;
            for (uint32_t e = 0; e < NE; ++e)
                sum += p[e] = std::exp(logit[e] - mx);
            for (double& v : p)
                v /= sum;
            std::vector<int> order(NE);
            std::iota(order.begin(), order.end(), 0);
            std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
            // a near tie at the k-th place could fall either way in float: not a disagreement
            if (p[order[k - 1]] - p[order[k]] < 1e-5)
                continue;
            double chosen_sum = 0;
            for (uint32_t s = 0; s < k; ++s)
                chosen_sum += p[order[s]];
            for (uint32_t s = 0; s < k; ++s) {
                QCOMPARE(rc.experts[std::size_t(t) * k + s], order[s]);
                const double w = model->traits().moe_normalize_weights ? p[order[s]] / chosen_sum : p[order[s]];
                worst_weight = std::max(worst_weight, std::abs(w - rc.weights[std::size_t(t) * k + s]));
            }
            for (uint32_t e = 0; e < NE; ++e)
                QVERIFY(std::abs(p[e] - rc.probs[std::size_t(t) * NE + e]) < 1e-5);
            ++checked;
        }
    }
    qInfo("%s: %d token-layers checked, largest weight difference %.2g", qPrintable(arch), checked, worst_weight);
    QVERIFY(checked >= int(tokens.size() * c.n_layer) * 3 / 4);
    QVERIFY(worst_weight < 1e-5);
}

void TestMoe::forcingTheChosenExpertsChangesNoBit()
{
    for (const char* arch : kMoeArchitectures) {
        QTemporaryDir dir;
        const auto model = moe_model(dir, arch);
        QVERIFY(model);
        const auto tokens = prompt(12);
        const ForwardResult base = run(model, tokens);
        // every position of layer 1 forced to what the router chose there
        const RoutingCapture& rc = routing_of(base, 1);
        std::vector<ExpertIntervention> force;
        for (uint32_t t = 0; t < tokens.size(); ++t) {
            ExpertIntervention iv;
            iv.kind = ExpertIntervention::Kind::Force;
            iv.layer = 1;
            iv.first = t;
            iv.count = 1;
            for (uint32_t s = 0; s < rc.k; ++s) // given in reverse: the slot order is the router's, not ours
                iv.experts.push_back(uint32_t(rc.experts[std::size_t(t) * rc.k + (rc.k - 1 - s)]));
            force.push_back(iv);
        }
        const ForwardResult forced = run(model, tokens, force);
        QVERIFY2(bit_equal(base.logits, forced.logits), arch);
        // forcing others moves the prediction
        force[tokens.size() - 1].experts = {};
        for (uint32_t e = 0; force[tokens.size() - 1].experts.size() < rc.k; ++e)
            if (std::find(rc.experts.end() - rc.k, rc.experts.end(), int32_t(e)) == rc.experts.end())
                force[tokens.size() - 1].experts.push_back(e);
        const ForwardResult other = run(model, tokens, force);
        QVERIFY2(!bit_equal(base.logits, other.logits), arch);
        std::set<int32_t> got(routing_of(other, 1).experts.end() - rc.k, routing_of(other, 1).experts.end());
        QCOMPARE(got,
                 std::set<int32_t>(force[tokens.size() - 1].experts.begin(), force[tokens.size() - 1].experts.end()));
    }
}

void TestMoe::removingAnUnchosenExpertChangesNoBit()
{
    int cases = 0;
    for (const char* arch : kMoeArchitectures) {
        QTemporaryDir dir;
        const auto model = moe_model(dir, arch);
        QVERIFY(model);
        const ModelConfig& c = model->config();
        const auto tokens = prompt(5, 1);
        const ForwardResult base = run(model, tokens);
        for (uint32_t il = 0; il < c.n_layer; ++il) {
            const RoutingCapture& rc = routing_of(base, il);
            for (uint32_t e = 0; e < c.n_expert; ++e) {
                if (std::find(rc.experts.begin(), rc.experts.end(), int32_t(e)) != rc.experts.end())
                    continue;
                ExpertIntervention iv;
                iv.kind = ExpertIntervention::Kind::Remove;
                iv.layer = int32_t(il);
                iv.experts = {e};
                const ForwardResult removed = run(model, tokens, std::span(&iv, 1));
                QVERIFY2(bit_equal(base.logits, removed.logits),
                         qPrintable(QString("%1 layer %2 expert %3").arg(arch).arg(il).arg(e)));
                ++cases;
                break; // one per layer
            }
        }
    }
    QVERIFY(cases >= 6);
}

void TestMoe::removedExpertIsNeverChosen()
{
    for (const char* arch : kMoeArchitectures) {
        QTemporaryDir dir;
        const auto model = moe_model(dir, arch);
        QVERIFY(model);
        const ModelConfig& c = model->config();
        const auto tokens = prompt(16, 2);
        const ForwardResult base = run(model, tokens);
        // the expert layer 0 chose most often, removed from every layer
        std::vector<int> count(c.n_expert, 0);
        for (const int32_t e : routing_of(base, 0).experts)
            ++count[std::size_t(e)];
        const auto busiest = uint32_t(std::max_element(count.begin(), count.end()) - count.begin());
        ExpertIntervention iv;
        iv.kind = ExpertIntervention::Kind::Remove;
        iv.experts = {busiest};
        const ForwardResult removed = run(model, tokens, std::span(&iv, 1));
        for (const RoutingCapture& rc : removed.captures->routing) {
            QVERIFY2(std::find(rc.experts.begin(), rc.experts.end(), int32_t(busiest)) == rc.experts.end(), arch);
            // the others' probabilities do not move: removal acts on the selection only
            QVERIFY(bit_equal(rc.probs, routing_of(base, rc.layer).probs) || rc.layer > 0);
        }
        QVERIFY(!bit_equal(base.logits, removed.logits));
    }
}

void TestMoe::zeroingAnExpertsOutputKeepsItsRoute()
{
    QTemporaryDir dir;
    const auto model = moe_model(dir, "olmoe");
    QVERIFY(model);
    const auto tokens = prompt(8, 3);
    const ForwardResult base = run(model, tokens);
    const RoutingCapture& rc0 = routing_of(base, 0);
    const auto e = uint32_t(rc0.experts[0]);
    ExpertIntervention iv;
    iv.kind = ExpertIntervention::Kind::ZeroOutput;
    iv.layer = 0;
    iv.experts = {e};
    const ForwardResult zeroed = run(model, tokens, std::span(&iv, 1));
    const RoutingCapture& rz = routing_of(zeroed, 0);
    QCOMPARE(rz.experts, rc0.experts); // chosen as before …
    int zero_weights = 0;
    for (std::size_t i = 0; i < rz.experts.size(); ++i)
        if (rz.experts[i] == int32_t(e)) {
            QCOMPARE(rz.weights[i], 0.0f); // … but counting nothing
            ++zero_weights;
        } else {
            QCOMPARE(rz.weights[i], rc0.weights[i]);
        }
    QVERIFY(zero_weights > 0);
    QVERIFY(!bit_equal(base.logits, zeroed.logits));
}

// Deterministic mode: a token's logits the same bits whether it is evaluated in a prompt of 24 or
// alone after the rest (an expert's row count changes with the batch; the tiled order must not).
void TestMoe::deterministicModeIsBatchInvariant()
{
    for (const char* arch : kMoeArchitectures) {
        QTemporaryDir dir;
        const auto model = moe_model(dir, arch);
        QVERIFY(model);
        const auto tokens = prompt(24, 4);
        auto whole = make_cpu_backend(model, {.threads = 2, .n_ctx = 256});
        ForwardRequest all;
        all.tokens = tokens;
        all.batch_invariant = true;
        const ForwardResult a = whole->forward(all);
        auto split = make_cpu_backend(model, {.threads = 2, .n_ctx = 256});
        ForwardRequest head;
        const std::vector<TokenId> first(tokens.begin(), tokens.end() - 1);
        head.tokens = first;
        head.batch_invariant = true;
        split->forward(head);
        ForwardRequest last;
        last.tokens = std::span(tokens).subspan(tokens.size() - 1);
        last.batch_invariant = true;
        const ForwardResult b = split->forward(last);
        QVERIFY2(bit_equal(a.logits, b.logits), arch);
    }
}

// The scan's effect of an expert equals a whole pass with that expert removed (each resumes at its layer
// from the base residuals: the same bits); experts no token chose cost no pass; Stop keeps what ran.
void TestMoe::expertScanIsEachRemovalsOwnPass()
{
    QTemporaryDir dir;
    const auto model = moe_model(dir, "granitemoe");
    QVERIFY(model);
    const ModelConfig& c = model->config();
    const auto tokens = prompt(6, 5);
    auto backend = make_cpu_backend(model, {.threads = 2, .n_ctx = 64});
    uint32_t planned = 0;
    double estimate = -1;
    const ExpertScan scan =
        scan_experts(*backend, tokens, ExpertIntervention::Kind::Remove, [&](uint32_t passes, double ms) {
            planned = passes;
            estimate = ms;
        });
    QCOMPARE(scan.effects.size(), std::size_t(c.n_layer) * c.n_expert);
    QCOMPARE(scan.planned, planned);
    QVERIFY(estimate > 0);
    QCOMPARE(scan.runs, planned);
    const ForwardResult base = run(model, tokens, {}, false);
    const std::vector<float> base_last(base.logits.end() - c.n_vocab, base.logits.end());
    int compared = 0, unchosen = 0;
    for (const ExpertEffect& e : scan.effects) {
        if (!e.tokens) {
            QVERIFY(!e.ran && e.kl == 0.0);
            ++unchosen;
            continue;
        }
        QVERIFY(e.ran);
        if (compared >= 3)
            continue;
        ExpertIntervention iv;
        iv.layer = int32_t(e.layer);
        iv.experts = {e.expert};
        const ForwardResult changed = run(model, tokens, std::span(&iv, 1), false);
        const std::vector<float> last(changed.logits.end() - c.n_vocab, changed.logits.end());
        QCOMPARE(e.kl, kl_divergence(base_last, last));
        ++compared;
    }
    QVERIFY(compared == 3 && unchosen > 0);
    // Stop after two passes
    const ExpertScan stopped = scan_experts(*backend, tokens, ExpertIntervention::Kind::ZeroOutput, {},
                                            [](uint32_t done, uint32_t) { return done < 2; });
    QVERIFY(stopped.cancelled);
    QCOMPARE(stopped.runs, 2u);
    // a dense model has nothing to scan
    auto dense = make_test_model("llama", 1);
    const QString path = dir.filePath("llama.gguf");
    dense.write(path.toStdString());
    auto llama = make_cpu_backend(Model::load(path.toStdString()), {.threads = 1, .n_ctx = 64});
    QVERIFY_THROWS_EXCEPTION(Error, scan_experts(*llama, tokens, ExpertIntervention::Kind::Remove));
}

// Direct logit attribution per expert: every MoE layer's block split into its k chosen experts' shares
// (the last position's experts, as routed) and the rest (granitemoe's shared expert, the rounding); the
// parts still add up to the real logit, and the last layer's top expert's share is what zeroing its output
// there takes from the logit, to first order.
void TestMoe::attributionSplitsEachLayerByExpert()
{
    for (const char* arch : kMoeArchitectures) {
        QTemporaryDir dir;
        const auto model = moe_model(dir, arch);
        QVERIFY(model);
        const ModelConfig& c = model->config();
        const auto tokens = prompt(9, 6);
        auto backend = make_cpu_backend(model, {.threads = 2, .n_ctx = 64});
        const ForwardResult base = run(model, tokens);
        const std::vector<float> last(base.logits.end() - c.n_vocab, base.logits.end());
        const auto top = TokenId(std::max_element(last.begin(), last.end()) - last.begin());
        const Attribution a = attribute_logit(*backend, tokens, top);
        int experts = 0;
        for (const AttributionPart& p : a.parts)
            if (p.kind == AttributionPart::Kind::Expert) {
                const RoutingCapture& rc = routing_of(base, uint32_t(p.layer));
                const auto* chosen = rc.experts.data() + std::size_t(tokens.size() - 1) * rc.k;
                QVERIFY2(std::find(chosen, chosen + rc.k, p.head) != chosen + rc.k,
                         qPrintable(QString::fromStdString(p.name)));
                ++experts;
            }
        QCOMPARE(experts, int(c.n_layer * c.n_expert_used));
        QVERIFY2(std::abs(sum_of_parts(a) - a.logit) < 1e-3 * std::max(1.0, std::abs(a.logit)),
                 qPrintable(QString("%1: parts %2, logit %3").arg(arch).arg(sum_of_parts(a)).arg(a.logit)));
        // zero the last layer's top expert at the last position: the final residual moves by its weighted
        // output (× a residual multiplier), and that move through the frozen final norm is its share
        const RoutingCapture& rc = routing_of(base, c.n_layer - 1);
        const int32_t e = rc.experts[std::size_t(tokens.size() - 1) * rc.k];
        double share = 0.0;
        for (const AttributionPart& p : a.parts)
            if (p.kind == AttributionPart::Kind::Expert && p.layer == int32_t(c.n_layer - 1) && p.head == e)
                share = p.value;
        ExpertIntervention iv;
        iv.kind = ExpertIntervention::Kind::ZeroOutput;
        iv.layer = int32_t(c.n_layer - 1);
        iv.first = uint32_t(tokens.size() - 1);
        iv.count = 1;
        iv.experts = {uint32_t(e)};
        const auto final_residual = [&](std::span<const ExpertIntervention> ivs) {
            auto b = make_cpu_backend(model, {.threads = 2, .n_ctx = 64});
            CaptureRequest capture;
            capture.residuals = true;
            ForwardRequest request;
            request.tokens = tokens;
            request.capture = &capture;
            request.expert_interventions = ivs;
            const ForwardResult r = b->forward(request);
            const auto& x = r.captures->residuals[c.n_layer - 1];
            return std::vector<float>(x.end() - c.n_embd, x.end());
        };
        const std::vector<float> with = final_residual({}), without = final_residual(std::span(&iv, 1));
        double moved = 0.0;
        for (uint32_t i = 0; i < c.n_embd; ++i)
            moved += a.direction[i] * (double(with[i]) - double(without[i]));
        qInfo("%s: last layer's expert %d: share %.6f; through the frozen norm, zeroing it moves the logit %.6f", arch,
              e, share, moved);
        QVERIFY(share != 0.0);
        QVERIFY2(std::abs(moved - share) < 1e-3 * std::abs(share) + 1e-5,
                 qPrintable(QString("%1: share %2 vs moved %3").arg(arch).arg(share).arg(moved)));
    }
}

// The lab's patching over routes: each (layer, position) of the corrupted run sent to the clean run's
// experts there; where both runs chose the same experts the effect is exactly 0 (no pass), and patching
// the routes of every layer at every position at once gives the clean run's logits back only where the
// rest agrees (here: a changed token, so the effect stays partial) — every cell is finite.
void TestMoe::patchingRoutesPerExpert()
{
    QTemporaryDir dir;
    const auto model = moe_model(dir, "olmoe");
    QVERIFY(model);
    auto backend = make_cpu_backend(model, {.threads = 2, .n_ctx = 64});
    PatchingRequest req;
    req.clean = prompt(6, 7);
    req.corrupted = req.clean;
    req.corrupted[2] = TokenId((req.corrupted[2] + 17) % 200 + 3);
    req.metric.kind = PatchMetric::Kind::KlToClean;
    req.over = PatchOver::Routes;
    const PatchingResult r = run_patching(*backend, req);
    QCOMPARE(r.n_layers, model->config().n_layer);
    QCOMPARE(r.n_columns, uint32_t(req.clean.size()));
    // the runs' routes, to know where they agree
    const ForwardResult clean = run(model, req.clean), corrupted = run(model, req.corrupted);
    int agree = 0, differ = 0, moved = 0;
    for (uint32_t il = 0; il < r.n_layers; ++il)
        for (uint32_t t = 0; t < r.n_columns; ++t) {
            QVERIFY(std::isfinite(r.effect[il][t]));
            const RoutingCapture& a = routing_of(clean, il);
            const RoutingCapture& b = routing_of(corrupted, il);
            std::set<int32_t> sa(a.experts.begin() + t * a.k, a.experts.begin() + (t + 1) * a.k);
            std::set<int32_t> sb(b.experts.begin() + t * b.k, b.experts.begin() + (t + 1) * b.k);
            if (sa == sb) {
                QCOMPARE(r.effect[il][t], 0.0);
                ++agree;
            } else {
                ++differ;
                moved += r.effect[il][t] != 0.0;
            }
        }
    qInfo("route patching: %d cells where the runs agree (effect 0), %d where they differ (%d moved)", agree, differ,
          moved);
    QVERIFY(agree > 0 && differ > 0 && moved > 0);
    QCOMPARE(r.runs, r.n_layers * r.n_columns);
    // a dense model has no routes to patch
    auto dense = make_test_model("llama", 1);
    const QString path = dir.filePath("llama.gguf");
    dense.write(path.toStdString());
    auto llama = make_cpu_backend(Model::load(path.toStdString()), {.threads = 1, .n_ctx = 64});
    QVERIFY_THROWS_EXCEPTION(Error, run_patching(*llama, req));
}

// A full-size MoE twin against its llama.cpp fixture, run by bench/moe_parity_twins.sh (too large for
// CI): TOKENSCOPE_MOE_TWIN names the model, TOKENSCOPE_MOE_TWIN_FIXTURE the fixture of llama.cpp's
// AVX2 build, TOKENSCOPE_MOE_TWIN_REPACK=1 the repacked order.
void TestMoe::publishedShapeAgreesWhenAsked()
{
    const QByteArray model_path = qgetenv("TOKENSCOPE_MOE_TWIN"), fixture_path = qgetenv("TOKENSCOPE_MOE_TWIN_FIXTURE");
    if (model_path.isEmpty() || fixture_path.isEmpty())
        QSKIP("bench/moe_parity_twins.sh runs this on full-size twins (TOKENSCOPE_MOE_TWIN, _FIXTURE)");
    const auto model = Model::load(model_path.toStdString());
    const auto fixture = gguf::GgufFile::open(fixture_path.toStdString());
    const bool repacked = qgetenv("TOKENSCOPE_MOE_TWIN_REPACK") == "1";
    Session session(
        model,
        make_cpu_backend(model,
                         {.threads = 0, .n_ctx = 2048, .order = repacked ? WeightOrder::Repacked : WeightOrder::Plain}),
        2048);
    const Agreement a = agreement(session, *fixture);
    qInfo("%s (%s order): last logits bit-equal on %d of %d prompts, greedy identical on %d (min Pearson %.7f)",
          model_path.constData(), repacked ? "repacked" : "plain", a.bit_equal, a.prompts, a.identical, a.min_pearson);
    QVERIFY2(a.bit_equal == a.prompts && a.identical == a.prompts, qPrintable(a.first_difference));
}

// The router's softmax against ggml's definition on a row with a tail (n = 13: one chunk of 8, 5 by expf).
void TestMoe::softmaxIsGgmls()
{
    const float x[13] = {0.5f, -1.25f, 2.0f, 0.0f, 3.5f, -0.75f, 1.0f, 0.25f, -2.0f, 4.0f, 0.125f, -3.0f, 1.5f};
    float p[13];
    router_softmax(x, p, 13);
    double sum = 0;
    for (float v : p) {
        QVERIFY(v > 0.0f && v < 1.0f);
        sum += v;
    }
    QVERIFY(std::abs(sum - 1.0) < 1e-6);
    QVERIFY(p[9] > p[4] && p[4] > p[2]); // the order of the logits
    // a removed expert's −∞ score would give exp(−∞) = 0 in a softmax; the router never feeds it one
    const float y[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    float q[8];
    router_softmax(y, q, 8);
    for (float v : q)
        QCOMPARE(v, 0.125f);
}

void TestMoe::badInterventionsAreRefusedByName()
{
    QTemporaryDir dir;
    const auto model = moe_model(dir, "qwen3moe");
    QVERIFY(model);
    const auto tokens = prompt(4);
    const auto refused = [&](ExpertIntervention iv, const char* words) {
        try {
            run(model, tokens, std::span(&iv, 1));
        } catch (const Error& e) {
            if (QString(e.what()).contains(words))
                return true;
            qWarning("%s", e.what());
        }
        return false;
    };
    ExpertIntervention iv;
    iv.experts = {8};
    QVERIFY(refused(iv, "expert 8 does not exist (the model has 8"));
    iv.experts = {1};
    iv.layer = 9;
    QVERIFY(refused(iv, "layer 9 does not exist"));
    iv.layer = 0;
    iv.kind = ExpertIntervention::Kind::Force;
    QVERIFY(refused(iv, "exactly 2 distinct experts"));
    iv.experts = {1, 1};
    QVERIFY(refused(iv, "expert 1 is named twice"));
    iv.kind = ExpertIntervention::Kind::Remove;
    iv.experts = {0, 1, 2, 3, 4, 5, 6};
    QVERIFY(refused(iv, "leaves fewer than the 2 each token needs"));
    // a dense model has no router
    auto dense = make_test_model("llama", 1);
    const QString path = dir.filePath("llama.gguf");
    dense.write(path.toStdString());
    const auto llama = Model::load(path.toStdString());
    auto backend = make_cpu_backend(llama, {.threads = 1, .n_ctx = 64});
    ExpertIntervention remove;
    remove.experts = {0};
    ForwardRequest request;
    request.tokens = tokens;
    request.expert_interventions = std::span(&remove, 1);
    QVERIFY_THROWS_EXCEPTION(Error, backend->forward(request));
    try {
        backend->forward(request);
    } catch (const Error& e) {
        QVERIFY(QString(e.what()).contains("has no experts"));
    }
}

// A MoE file whose expert metadata lies is refused at load, naming the key, never run: more experts per
// token than there are, none, no experts, or an expert width or count the stacked tensors do not have.
// (An expert width of 0 is llama.cpp's "feed_forward_length / experts used", not an error.)
void TestMoe::hostileExpertMetadataIsRefusedByName()
{
    QTemporaryDir dir;
    struct Case {
        const char* what;
        const char* key;
        uint32_t value;
        const char* words;
    };
    const Case cases[] = {
        {"more used than there are", "qwen3moe.expert_used_count", 9, "expert_used_count"},
        {"no experts", "qwen3moe.expert_count", 0, "expert_count"},
        {"no expert used", "qwen3moe.expert_used_count", 0, "expert_used_count"},
        {"a width the tensors do not have", "qwen3moe.expert_feed_forward_length", 512, "ffn_gate_exps.weight"},
        {"more experts than the tensors stack", "qwen3moe.expert_count", 16, "ffn_gate_inp.weight"},
    };
    for (const Case& c : cases) {
        auto w = make_test_model("qwen3moe", 1);
        w.set_u32(c.key, c.value);
        const QString path = dir.filePath(QString("%1.gguf").arg(c.what));
        w.write(path.toStdString());
        try {
            Model::load(path.toStdString());
            QFAIL(qPrintable(QString("%1: loaded").arg(c.what)));
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains(c.words), qPrintable(QString("%1: %2").arg(c.what, e.what())));
        }
    }
}

void TestMoe::modelFiguresCountActiveExperts()
{
    QTemporaryDir dir;
    const auto model = moe_model(dir, "olmoe");
    QVERIFY(model);
    const ModelConfig& c = model->config();
    QCOMPARE(c.n_expert, 8u);
    QCOMPARE(c.n_expert_used, 3u);
    QCOMPARE(c.n_ff_exp, 512u);
    const uint64_t per_expert = 3ull * c.n_embd * c.n_ff_exp; // gate, up, down
    QCOMPARE(model->parameter_count() - model->active_parameter_count(),
             per_expert * (c.n_expert - c.n_expert_used) * c.n_layer);
    QVERIFY(model->expert_bytes_per_layer() > 0);
    const auto q = moe_model(dir, "qwen3moe");
    QCOMPARE(q->config().n_ff_exp, 256u); // expert_feed_forward_length, not feed_forward_length
    const auto g = moe_model(dir, "granitemoe");
    QCOMPARE(g->config().n_ff_shexp, 256u);
    QVERIFY(g->weights().layers[0].ffn_gate_shexp);
    QCOMPARE(g->config().logit_scale.value_or(0), 6.0f); // granite's multipliers are read for granitemoe too
    // the memory planner bounds what a batch's expert buffers take (each expert gets at most the batch's rows)
    auto backend = make_cpu_backend(g, {.threads = 1, .n_ctx = 64});
    const std::vector<TokenId> tokens = prompt(16);
    ForwardRequest request;
    request.tokens = tokens;
    const uint64_t before = backend->memory().scratch_bytes;
    backend->forward(request);
    const uint64_t after = backend->memory().scratch_bytes;
    const MemoryPlan plan = plan_memory(dir.filePath("granitemoe.gguf").toStdString(), 64, 16);
    QVERIFY2(
        after > before && after <= plan.scratch_bytes,
        qPrintable(QString("backend %1 bytes after a batch of 16, planned %2").arg(after).arg(plan.scratch_bytes)));
}

void TestMoe::gpuBackendsRefuseByName()
{
    QTemporaryDir dir;
    const auto model = moe_model(dir, "qwen3moe");
    QVERIFY(model);
    // asked for Vulkan or CUDA, the factory runs the CPU and says why (the backend's refusal, or no such
    // device on this machine: then the refusal is not reached, and the note names the missing device)
    for (const BackendKind kind : {BackendKind::Vulkan, BackendKind::Cuda, BackendKind::Auto}) {
        std::string note;
        const auto backend = make_backend(kind, model, 256, 1, &note);
        QVERIFY(backend);
        QCOMPARE(backend->kind(), std::string_view("cpu"));
        if (kind != BackendKind::Auto)
            QVERIFY2(!note.empty(), "a fallback without a note");
        qInfo("%s: %s", backend_kind_name(kind).data(), note.c_str());
    }
}

QTEST_GUILESS_MAIN(TestMoe)
#include "test_moe.moc"
