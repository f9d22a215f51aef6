// SPDX-License-Identifier: GPL-3.0-or-later
// The sampler and the stop condition against hand-computed expectations: each stage of the chain
// (repetition penalty, top-k, top-p, min-p, temperature) on small distributions whose survivors
// and probabilities can be worked out on paper, the seeded draw, and stop strings that span tokens.
#include "sampling/sampler.h"
#include "sampling/stop_condition.h"
#include "util/error.h"

#include <QTest>
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>

using engine::Candidate;
using engine::Sampler;
using engine::SamplerConfig;
using engine::SampleResult;
using engine::StageView;
using engine::StopCondition;
using engine::StopReason;

namespace {

// Every filter off, temperature 1: the final distribution is the plain softmax of the logits.
SamplerConfig plain_config()
{
    SamplerConfig c;
    c.temperature = 1.0f;
    c.top_k = 0;
    c.top_p = 1.0f;
    c.min_p = 0.0f;
    c.repeat_penalty = 1.0f;
    c.stage_view_size = 64;
    return c;
}

// Logits whose softmax is exactly the given distribution (which sums to 1).
std::vector<float> logits_of(const std::vector<double>& probabilities)
{
    std::vector<float> l;
    for (double p : probabilities)
        l.push_back(static_cast<float>(std::log(p)));
    return l;
}

std::vector<float> random_logits(std::size_t n, uint32_t seed)
{
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> l(n);
    for (auto& x : l)
        x = normal(rng);
    return l;
}

const StageView& stage(const SampleResult& r, const char* name)
{
    for (const auto& s : r.stages)
        if (s.name == name)
            return s;
    static const StageView none;
    return none;
}

std::vector<int32_t> ids_of(const StageView& s)
{
    std::vector<int32_t> ids;
    for (const auto& c : s.top)
        ids.push_back(c.id);
    return ids;
}

} // namespace

class TestSampler : public QObject {
    Q_OBJECT
private slots:
    void invalidSettingsAreRefusedWithTheirRange_data();
    void invalidSettingsAreRefusedWithTheirRange();
    void boundaryValuesAreAccepted();
    void greedyPicksArgmax_data();
    void greedyPicksArgmax();
    void temperatureScalesTheSoftmax_data();
    void temperatureScalesTheSoftmax();
    void topKKeepsExactlyK_data();
    void topKKeepsExactlyK();
    void topPKeepsTheSmallestSetReachingP_data();
    void topPKeepsTheSmallestSetReachingP();
    void minPThresholdIsRelativeToTheMax_data();
    void minPThresholdIsRelativeToTheMax();
    void repetitionPenalty_data();
    void repetitionPenalty();
    void penaltyViewProbabilities_data();
    void penaltyViewProbabilities();
    void penaltyPushesTokensOutOfTopK();
    void penaltyCanChangeTheGreedyChoice();
    void topPWideNucleus();
    void sameSeedSameSequence();
    void firstDrawMatchesTheStandardGenerator();
    void empiricalFrequencies();
    void stageViewsAreDistributions();
    void stopConditionReasons();
    void stopStringAcrossTokens();
    void safePrefixLength_data();
    void safePrefixLength();
};

void TestSampler::greedyPicksArgmax_data()
{
    QTest::addColumn<std::vector<float>>("logits");
    QTest::addColumn<bool>("flag"); // greedy through the flag, else through temperature 0
    QTest::addColumn<int>("expected");
    QTest::newRow("flag") << std::vector<float>{1.0f, 3.0f, 2.0f} << true << 1;
    QTest::newRow("temperature 0") << std::vector<float>{1.0f, 3.0f, 2.0f} << false << 1;
    QTest::newRow("all negative") << std::vector<float>{-3.0f, -1.0f, -2.0f} << true << 1;
    QTest::newRow("tie to lowest id") << std::vector<float>{0.0f, 5.0f, 1.0f, 5.0f} << true << 1;
    QTest::newRow("last") << std::vector<float>{0.0f, 0.5f, 0.25f, 7.0f} << false << 3;
    QTest::newRow("NaN ignored") << std::vector<float>{1.0f, std::nanf(""), 0.5f} << true << 0;
}

void TestSampler::greedyPicksArgmax()
{
    QFETCH(std::vector<float>, logits);
    QFETCH(bool, flag);
    QFETCH(int, expected);
    SamplerConfig c; // default filters on: greedy must not depend on them
    c.greedy = flag;
    c.temperature = flag ? 0.8f : 0.0f;
    Sampler s(c);
    for (int i = 0; i < 5; ++i) {
        const auto r = s.sample(logits, {});
        QCOMPARE(r.token, expected);
        QCOMPARE(r.probability, 1.0f);
        QCOMPARE(r.stages.size(), std::size_t(7));
        QCOMPARE(r.stages.back().survivors, std::size_t(1));
        QCOMPARE(r.stages.back().top.front().id, expected);
    }
}

void TestSampler::temperatureScalesTheSoftmax_data()
{
    // softmax([1, 2, 3] / T), worked out by hand (python math.exp).
    QTest::addColumn<float>("temperature");
    QTest::addColumn<std::vector<double>>("expected"); // for ids 0, 1, 2
    QTest::newRow("T=1") << 1.0f << std::vector<double>{0.0900306, 0.2447285, 0.6652410};
    QTest::newRow("T=0.5") << 0.5f << std::vector<double>{0.0158762, 0.1173104, 0.8668133};
    QTest::newRow("T=2") << 2.0f << std::vector<double>{0.1863237, 0.3071959, 0.5064804};
}

void TestSampler::temperatureScalesTheSoftmax()
{
    QFETCH(float, temperature);
    QFETCH(std::vector<double>, expected);
    SamplerConfig c = plain_config();
    c.temperature = temperature;
    Sampler s(c);
    const auto r = s.sample(std::vector<float>{1.0f, 2.0f, 3.0f}, {});
    const StageView& final_view = stage(r, "final");
    QCOMPARE(final_view.survivors, std::size_t(3));
    QCOMPARE(ids_of(final_view), (std::vector<int32_t>{2, 1, 0}));
    for (const auto& cand : final_view.top) {
        QVERIFY(std::abs(cand.probability - expected[static_cast<std::size_t>(cand.id)]) < 1e-6);
        QCOMPARE(cand.logit, static_cast<float>(cand.id + 1) / temperature);
    }
    QVERIFY(std::abs(r.probability - expected[static_cast<std::size_t>(r.token)]) < 1e-6);
    // Temperature comes last: the earlier stages still show the untempered distribution.
    QVERIFY(std::abs(stage(r, "min-p").top.front().probability - 0.6652410) < 1e-6);
}

void TestSampler::topKKeepsExactlyK_data()
{
    QTest::addColumn<int>("k");
    QTest::newRow("1 (heap)") << 1;
    QTest::newRow("5 (heap)") << 5;
    QTest::newRow("40 (selection)") << 40;
    QTest::newRow("60 (selection)") << 60;
}

void TestSampler::topKKeepsExactlyK()
{
    QFETCH(int, k);
    // A permutation of 0 … 99 as logits (scaled small so that top-k alone decides): the k best
    // are the ids holding 99 … 100-k.
    std::vector<float> logits(100);
    std::vector<int32_t> order(100);
    for (int i = 0; i < 100; ++i)
        order[static_cast<std::size_t>(i)] = (i * 37) % 100;
    for (int i = 0; i < 100; ++i)
        logits[static_cast<std::size_t>(i)] = static_cast<float>(order[static_cast<std::size_t>(i)]) * 0.01f;
    std::set<int32_t> best;
    for (int i = 0; i < 100; ++i)
        if (order[static_cast<std::size_t>(i)] >= 100 - k)
            best.insert(i);

    SamplerConfig c = plain_config();
    c.top_k = k;
    c.stage_view_size = 100;
    Sampler s(c);
    const auto r = s.sample(logits, {});
    const StageView& v = stage(r, "top-k");
    QVERIFY(v.applied);
    QCOMPARE(v.survivors, static_cast<std::size_t>(k));
    QCOMPARE(v.top.size(), static_cast<std::size_t>(k));
    const auto ids = ids_of(v);
    QCOMPARE(std::set<int32_t>(ids.begin(), ids.end()), best);
    for (int i = 0; i < 300; ++i)
        QVERIFY(best.count(s.sample(logits, {}).token));
}

void TestSampler::topPKeepsTheSmallestSetReachingP_data()
{
    // Probabilities 0.5, 0.25, 0.15, 0.07, 0.03 placed at scrambled ids; cumulative best first:
    // 0.5, 0.75, 0.9, 0.97, 1.0.
    QTest::addColumn<float>("p");
    QTest::addColumn<int>("kept");
    QTest::newRow("0.3") << 0.3f << 1;
    QTest::newRow("0.7") << 0.7f << 2;
    QTest::newRow("0.8") << 0.8f << 3;
    QTest::newRow("0.95") << 0.95f << 4;
    QTest::newRow("0.99") << 0.99f << 5;
}

void TestSampler::topPKeepsTheSmallestSetReachingP()
{
    QFETCH(float, p);
    QFETCH(int, kept);
    const std::vector<double> probabilities = {0.07, 0.25, 0.03, 0.5, 0.15}; // ids 3, 1, 4, 0, 2 best first
    const std::vector<int32_t> best_first = {3, 1, 4, 0, 2};
    SamplerConfig c = plain_config();
    c.top_p = p;
    Sampler s(c);
    const auto r = s.sample(logits_of(probabilities), {});
    const StageView& v = stage(r, "top-p");
    QCOMPARE(v.survivors, static_cast<std::size_t>(kept));
    QCOMPARE(ids_of(v), std::vector<int32_t>(best_first.begin(), best_first.begin() + kept));
    // Renormalised over the survivors.
    double mass = 0.0;
    for (int i = 0; i < kept; ++i)
        mass += probabilities[static_cast<std::size_t>(best_first[static_cast<std::size_t>(i)])];
    for (const auto& cand : v.top)
        QVERIFY(std::abs(cand.probability - probabilities[static_cast<std::size_t>(cand.id)] / mass) < 1e-6);
}

void TestSampler::minPThresholdIsRelativeToTheMax_data()
{
    // Same distribution, max 0.5: min_p keeps the tokens with p >= min_p * 0.5.
    QTest::addColumn<float>("min_p");
    QTest::addColumn<int>("kept");
    QTest::newRow("0.05 → p >= 0.025") << 0.05f << 5;
    QTest::newRow("0.1 → p >= 0.05") << 0.1f << 4;
    QTest::newRow("0.2 → p >= 0.1") << 0.2f << 3;
    QTest::newRow("0.4 → p >= 0.2") << 0.4f << 2;
    QTest::newRow("0.6 → p >= 0.3") << 0.6f << 1;
    QTest::newRow("1 keeps the best") << 1.0f << 1;
}

void TestSampler::minPThresholdIsRelativeToTheMax()
{
    QFETCH(float, min_p);
    QFETCH(int, kept);
    const std::vector<double> probabilities = {0.07, 0.25, 0.03, 0.5, 0.15};
    const std::vector<int32_t> best_first = {3, 1, 4, 0, 2};
    SamplerConfig c = plain_config();
    c.min_p = min_p;
    Sampler s(c);
    const auto r = s.sample(logits_of(probabilities), {});
    const StageView& v = stage(r, "min-p");
    QCOMPARE(v.survivors, static_cast<std::size_t>(kept));
    QCOMPARE(ids_of(v), std::vector<int32_t>(best_first.begin(), best_first.begin() + kept));
}

void TestSampler::repetitionPenalty_data()
{
    QTest::addColumn<std::vector<int32_t>>("history");
    QTest::addColumn<int>("last_n");
    QTest::addColumn<std::vector<float>>("expected"); // logits after the penalty, by id
    // logits {2, -1, 0.5, 3}, penalty 2: positive ones are divided, negative ones multiplied.
    QTest::newRow("positive and negative")
        << std::vector<int32_t>{0, 1} << 64 << std::vector<float>{1.0f, -2.0f, 0.5f, 3.0f};
    QTest::newRow("window of 1") << std::vector<int32_t>{0, 1} << 1 << std::vector<float>{2.0f, -2.0f, 0.5f, 3.0f};
    QTest::newRow("repeats count once") << std::vector<int32_t>{0, 0, 0} << 64
                                        << std::vector<float>{1.0f, -1.0f, 0.5f, 3.0f};
    QTest::newRow("whole history") << std::vector<int32_t>{3, 2, 1} << -1
                                   << std::vector<float>{2.0f, -2.0f, 0.25f, 1.5f};
    QTest::newRow("off (last_n 0)") << std::vector<int32_t>{0, 1} << 0 << std::vector<float>{2.0f, -1.0f, 0.5f, 3.0f};
    QTest::newRow("out-of-range ids ignored")
        << std::vector<int32_t>{-1, 99} << 64 << std::vector<float>{2.0f, -1.0f, 0.5f, 3.0f};
}

void TestSampler::repetitionPenalty()
{
    QFETCH(std::vector<int32_t>, history);
    QFETCH(int, last_n);
    QFETCH(std::vector<float>, expected);
    SamplerConfig c = plain_config();
    c.repeat_penalty = 2.0f;
    c.repeat_last_n = last_n;
    Sampler s(c);
    const auto r = s.sample(std::vector<float>{2.0f, -1.0f, 0.5f, 3.0f}, history);
    const StageView& v = stage(r, "repetition penalty");
    QCOMPARE(v.survivors, std::size_t(4));
    QCOMPARE(v.applied, last_n != 0);
    for (const auto& cand : v.top)
        QCOMPARE(cand.logit, expected[static_cast<std::size_t>(cand.id)]);
    // The raw logits stage is untouched.
    for (const auto& cand : stage(r, "logits").top)
        QCOMPARE(cand.logit, (std::vector<float>{2.0f, -1.0f, 0.5f, 3.0f})[static_cast<std::size_t>(cand.id)]);
}

void TestSampler::penaltyViewProbabilities_data()
{
    // Softmax of the penalised logits, by hand (python math.exp). The second row puts nearly all
    // the raw mass on the penalised token, which the view must not lose to cancellation.
    QTest::addColumn<std::vector<float>>("logits");
    QTest::addColumn<std::vector<int32_t>>("history");
    QTest::addColumn<float>("penalty");
    QTest::addColumn<std::vector<double>>("expected"); // by id
    QTest::newRow("{1, -2, 0.5, 3}") << std::vector<float>{2.0f, -1.0f, 0.5f, 3.0f} << std::vector<int32_t>{0, 1}
                                     << 2.0f << std::vector<double>{0.1105538, 0.0055041, 0.0670542, 0.8168879};
    QTest::newRow("{0.5, 0, 0, 0} from {20, 0, 0, 0}")
        << std::vector<float>{20.0f, 0.0f, 0.0f, 0.0f} << std::vector<int32_t>{0} << 40.0f
        << std::vector<double>{0.3546612, 0.2151129, 0.2151129, 0.2151129};
}

void TestSampler::penaltyViewProbabilities()
{
    QFETCH(std::vector<float>, logits);
    QFETCH(std::vector<int32_t>, history);
    QFETCH(float, penalty);
    QFETCH(std::vector<double>, expected);
    SamplerConfig c = plain_config();
    c.repeat_penalty = penalty;
    Sampler s(c);
    const auto r = s.sample(logits, history);
    const StageView& v = stage(r, "repetition penalty");
    QCOMPARE(v.top.size(), expected.size());
    for (const auto& cand : v.top)
        QVERIFY2(std::abs(cand.probability - expected[static_cast<std::size_t>(cand.id)]) < 1e-6,
                 qPrintable(QString("id %1: %2").arg(cand.id).arg(cand.probability)));
    // With no filter after it, the final distribution is the same.
    for (const auto& cand : stage(r, "final").top)
        QVERIFY(std::abs(cand.probability - expected[static_cast<std::size_t>(cand.id)]) < 1e-6);
}

void TestSampler::penaltyPushesTokensOutOfTopK()
{
    // Logits 0, 0.01, …, 0.99 by id. The three best (ids 99, 98, 97) were just generated; a
    // penalty of 100 sinks them below 0.01, so top-5 keeps ids 96 … 92, and the penalty view
    // shows them first.
    std::vector<float> logits(100);
    for (std::size_t i = 0; i < logits.size(); ++i)
        logits[i] = static_cast<float>(i) * 0.01f;
    SamplerConfig c = plain_config();
    c.top_k = 5;
    c.repeat_penalty = 100.0f;
    for (const std::size_t view_size : {std::size_t(3), std::size_t(20), std::size_t(0)}) {
        c.stage_view_size = view_size;
        Sampler s(c);
        const auto r = s.sample(logits, std::vector<int32_t>{99, 98, 97});
        QVERIFY(r.token >= 92 && r.token <= 96);
        if (view_size == 0)
            continue;
        const std::vector<int32_t> all = {96, 95, 94, 93, 92};
        const std::vector<int32_t> expected(
            all.begin(), all.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(view_size, 5)));
        QCOMPARE(stage(r, "top-k").survivors, std::size_t(5));
        QCOMPARE(ids_of(stage(r, "top-k")), expected);
        const auto penalised = ids_of(stage(r, "repetition penalty"));
        QCOMPARE(penalised.size(), view_size);
        QCOMPARE(
            std::vector<int32_t>(penalised.begin(), penalised.begin() + static_cast<std::ptrdiff_t>(expected.size())),
            expected);
        QCOMPARE(ids_of(stage(r, "logits")).front(), 99);
    }
}

void TestSampler::penaltyCanChangeTheGreedyChoice()
{
    for (const std::size_t view_size : {std::size_t(20), std::size_t(0)}) {
        SamplerConfig c;
        c.greedy = true;
        c.repeat_penalty = 2.0f;
        c.stage_view_size = view_size;
        Sampler s(c);
        const std::vector<float> logits = {3.0f, 2.0f};
        QCOMPARE(s.sample(logits, {}).token, 0);
        QCOMPARE(s.sample(logits, std::vector<int32_t>{0}).token, 1); // 3 / 2 = 1.5 < 2
    }
}

void TestSampler::topPWideNucleus()
{
    // Without top-k, over a nearly flat vocabulary of 20,000 the nucleus holds thousands of
    // tokens, past the first 256 that are sorted: the set must still be the smallest best-first
    // prefix reaching p. Expected count from sorting the probabilities here.
    const std::size_t n = 20000;
    std::vector<float> logits(n);
    for (std::size_t i = 0; i < n; ++i)
        logits[i] = static_cast<float>((i * 7919) % n) * 1e-4f;
    std::vector<double> p(n);
    double sum = 0.0;
    for (std::size_t i = 0; i < n; ++i)
        sum += p[i] = std::exp(static_cast<double>(logits[i]) - 1.9999);
    std::sort(p.begin(), p.end(), std::greater<>());
    for (const float top_p : {0.3f, 0.5f, 0.9f}) {
        std::size_t expected = 0;
        for (double cumulative = 0.0; cumulative < top_p * sum; ++expected)
            cumulative += p[expected];
        QVERIFY(expected > 256);
        SamplerConfig c = plain_config();
        c.top_p = top_p;
        Sampler s(c);
        const auto r = s.sample(logits, {});
        const StageView& v = stage(r, "top-p");
        QCOMPARE(v.survivors, expected);
        // The best are the ids whose (i * 7919) % n is largest: n - 1 first.
        QCOMPARE(v.top.front().logit, logits[static_cast<std::size_t>(v.top.front().id)]);
        QCOMPARE(static_cast<std::size_t>(v.top.front().id) * 7919 % n, n - 1);
        double mass = 0.0;
        for (const auto& cand : v.top)
            mass += cand.probability;
        QVERIFY(mass > 0.0 && mass < 1.0);
    }
}

void TestSampler::sameSeedSameSequence()
{
    const auto logits = random_logits(1000, 7);
    SamplerConfig c; // the default chain: penalty, top-k 40, top-p 0.95, min-p 0.05, T 0.8
    c.repeat_penalty = 1.1f;
    auto run = [&](uint64_t seed) {
        c.seed = seed;
        Sampler s(c);
        std::vector<int32_t> tokens;
        for (int i = 0; i < 500; ++i)
            tokens.push_back(s.sample(logits, tokens).token);
        return tokens;
    };
    const auto a = run(42);
    QCOMPARE(run(42), a);
    const auto b = run(43);
    int differ = 0;
    for (std::size_t i = 0; i < a.size(); ++i)
        differ += a[i] != b[i];
    QVERIFY2(differ > 250, qPrintable(QString("only %1 of 500 tokens differ").arg(differ)));

    // reseed restarts the sequence.
    c.seed = 42;
    Sampler s(c);
    std::vector<int32_t> tokens;
    for (int i = 0; i < 100; ++i)
        tokens.push_back(s.sample(logits, tokens).token);
    s.reseed(42);
    std::vector<int32_t> again;
    for (int i = 0; i < 100; ++i)
        again.push_back(s.sample(logits, again).token);
    QCOMPARE(again, tokens);
}

void TestSampler::firstDrawMatchesTheStandardGenerator()
{
    // The standard fixes mt19937_64's output: the 10000th value of the default seed (5489) is
    // 9981545732273789042, and its first is 14514284786278117030, which our conversion maps to
    // 14514284786278117030 / 2^64 ≈ 0.78682. Against the cumulative 0.5, 0.8, 1.0 of
    // {0.5, 0.3, 0.2} that draws token 1 on every platform.
    std::mt19937_64 check;
    check.discard(9999);
    QCOMPARE(check(), uint64_t(9981545732273789042ull));
    std::mt19937_64 rng(5489);
    QVERIFY(std::abs(engine::uniform_unit(rng) - 0.786820954867802) < 1e-15);

    SamplerConfig c = plain_config();
    c.seed = 5489;
    Sampler s(c);
    QCOMPARE(s.sample(logits_of({0.5, 0.3, 0.2}), {}).token, 1);
}

void TestSampler::empiricalFrequencies()
{
    const std::vector<double> p = {0.5, 0.3, 0.2};
    SamplerConfig c = plain_config();
    c.seed = 2024;
    c.stage_view_size = 0; // no views: the plain sampling path
    Sampler s(c);
    const auto logits = logits_of(p);
    std::map<int32_t, int> counts;
    const int n = 20000;
    for (int i = 0; i < n; ++i) {
        const auto r = s.sample(logits, {});
        QVERIFY(r.stages.empty());
        ++counts[r.token];
        QVERIFY(std::abs(r.probability - p[static_cast<std::size_t>(r.token)]) < 1e-6);
    }
    QCOMPARE(counts.size(), std::size_t(3));
    for (const auto& [token, count] : counts) {
        const double freq = static_cast<double>(count) / n;
        QVERIFY2(
            std::abs(freq - p[static_cast<std::size_t>(token)]) < 0.02,
            qPrintable(QString("token %1: %2 vs %3").arg(token).arg(freq).arg(p[static_cast<std::size_t>(token)])));
    }
}

void TestSampler::stageViewsAreDistributions()
{
    // Small vocabulary, views big enough to hold every survivor: each stage's probabilities must
    // sum to 1 over its survivors, best first, and the survivors only shrink along the chain.
    SamplerConfig c;
    c.repeat_penalty = 1.3f;
    c.top_k = 30;
    c.top_p = 0.9f;
    c.min_p = 0.05f;
    c.stage_view_size = 64;
    Sampler s(c);
    const auto logits = random_logits(50, 11);
    const std::vector<int32_t> history = {1, 2, 3, 5, 8, 13};
    for (int round = 0; round < 20; ++round) {
        const auto r = s.sample(logits, history);
        const std::vector<std::string> names = {"logits", "repetition penalty", "top-k", "top-p",
                                                "min-p",  "temperature",        "final"};
        QCOMPARE(r.stages.size(), names.size());
        std::size_t previous = 50;
        for (std::size_t i = 0; i < names.size(); ++i) {
            const StageView& v = r.stages[i];
            QCOMPARE(v.name, names[i]);
            QVERIFY(v.applied);
            QCOMPARE(v.top.size(), v.survivors);
            QVERIFY(v.survivors <= previous);
            previous = v.survivors;
            double sum = 0.0;
            for (std::size_t j = 0; j < v.top.size(); ++j) {
                sum += v.top[j].probability;
                if (j > 0)
                    QVERIFY(v.top[j - 1].probability >= v.top[j].probability);
            }
            QVERIFY2(std::abs(sum - 1.0) < 1e-5, qPrintable(QString("%1 sums to %2").arg(v.name.c_str()).arg(sum)));
        }
        QCOMPARE(stage(r, "top-k").survivors, std::size_t(30));
        QVERIFY(stage(r, "final").survivors >= 1);
        bool found = false;
        for (const auto& cand : stage(r, "final").top)
            if (cand.id == r.token) {
                found = true;
                QCOMPARE(cand.probability, r.probability);
            }
        QVERIFY(found);
    }
    // Switched-off stages still appear, marked, and repeat the stage before them.
    SamplerConfig off = plain_config();
    Sampler plain(off);
    const auto r = plain.sample(logits, history);
    QCOMPARE(r.stages.size(), std::size_t(7));
    QVERIFY(!stage(r, "repetition penalty").applied);
    QVERIFY(!stage(r, "top-k").applied && !stage(r, "top-p").applied && !stage(r, "min-p").applied);
    QCOMPARE(ids_of(stage(r, "top-p")), ids_of(stage(r, "logits")));
    QCOMPARE(stage(r, "final").survivors, std::size_t(50));
    // The view size bounds each view, not the survivors.
    SamplerConfig narrow = plain_config();
    narrow.stage_view_size = 5;
    Sampler n(narrow);
    const auto rn = n.sample(logits, {});
    QCOMPARE(stage(rn, "logits").top.size(), std::size_t(5));
    QCOMPARE(stage(rn, "logits").survivors, std::size_t(50));
    const auto all_ids = ids_of(stage(r, "logits"));
    QCOMPARE(ids_of(stage(rn, "logits")), std::vector<int32_t>(all_ids.begin(), all_ids.begin() + 5));
}

void TestSampler::stopConditionReasons()
{
    const StopCondition stop({1, 106}, 4, {"###"});
    QCOMPARE(stop.check(7, "a", 1), StopReason::None);
    QCOMPARE(stop.check(106, "ab", 2), StopReason::EndOfGeneration);
    QCOMPARE(stop.check(1, "ab", 2), StopReason::EndOfGeneration);
    QCOMPARE(stop.check(7, "abcd", 4), StopReason::MaxTokens);
    QCOMPARE(stop.check(7, "ab###", 3), StopReason::StopString);
    // End of generation wins over a stop string, which wins over the budget.
    QCOMPARE(stop.check(1, "ab###", 4), StopReason::EndOfGeneration);
    QCOMPARE(stop.check(7, "ab###", 4), StopReason::StopString);
    // No budget, no stop strings.
    const StopCondition unlimited({2}, 0, {""});
    QCOMPARE(unlimited.check(7, "anything ###", 100000), StopReason::None);
    QCOMPARE(unlimited.safe_prefix_length("abc"), std::size_t(3));
}

void TestSampler::stopStringAcrossTokens()
{
    // "</s>" arrives as "</", "s", ">" after "Hello"; nothing of it may be shown, and the stop is
    // seen on the token that completes it.
    const StopCondition stop({}, 100, {"</s>", "\n\nUser:"});
    const std::vector<std::string> pieces = {"Hello", " wor", "ld", "</", "s", ">", " tail"};
    const std::vector<StopReason> reasons = {StopReason::None,      StopReason::None, StopReason::None,
                                             StopReason::None,      StopReason::None, StopReason::StopString,
                                             StopReason::StopString};
    const std::vector<std::size_t> safe = {5, 9, 11, 11, 11, 11, 11};
    std::string text;
    for (std::size_t i = 0; i < pieces.size(); ++i) {
        text += pieces[i];
        QCOMPARE(stop.check(1000, text, i + 1), reasons[i]);
        QCOMPARE(stop.safe_prefix_length(text), safe[i]);
    }
    QCOMPARE(stop.stop_string_position(text), std::optional<std::size_t>(11));
    // The earliest of several stop strings.
    QCOMPARE(stop.stop_string_position("a\n\nUser: b</s>"), std::optional<std::size_t>(1));
    QCOMPARE(stop.stop_string_position("a\n\nUser b"), std::nullopt);
}

void TestSampler::safePrefixLength_data()
{
    QTest::addColumn<QStringList>("stops");
    QTest::addColumn<QString>("text");
    QTest::addColumn<int>("expected");
    const QStringList eos = {"</s>"};
    QTest::newRow("no match") << eos << "Hello" << 5;
    QTest::newRow("one char held") << eos << "Hello <" << 6;
    QTest::newRow("two chars held") << eos << "Hello </" << 6;
    QTest::newRow("three chars held") << eos << "Hello </s" << 6;
    QTest::newRow("complete: cut before it") << eos << "Hello </s>" << 6;
    QTest::newRow("complete, text after") << eos << "Hello </s> more" << 6;
    QTest::newRow("not a prefix") << eos << "a<b" << 3;
    QTest::newRow("empty text") << eos << "" << 0;
    QTest::newRow("text shorter than the hold") << eos << "</" << 0;
    QTest::newRow("overlapping prefix") << QStringList{"aab"} << "xaaa" << 2;
    QTest::newRow("longest of several") << QStringList{"###", "User:"} << "ok Us" << 3;
    QTest::newRow("other string's prefix") << QStringList{"###", "User:"} << "ok U#" << 4;
    QTest::newRow("no stop strings") << QStringList{} << "abc </" << 6;
    QTest::newRow("UTF-8 stop string") << QStringList{"→end"} << "x →" << 2;
}

void TestSampler::safePrefixLength()
{
    QFETCH(QStringList, stops);
    QFETCH(QString, text);
    QFETCH(int, expected);
    std::vector<std::string> strings;
    for (const auto& s : stops)
        strings.push_back(s.toStdString());
    const StopCondition stop({}, 0, strings);
    QCOMPARE(stop.safe_prefix_length(text.toStdString()), static_cast<std::size_t>(expected));
}

// Settings enter from the CLI, the GUI and scripts: each out-of-range value is refused when the
// sampler is made, naming the setting and its valid range (before: --temp 1e-45 divided the logits
// into infinities and sampled uniformly, like --temp inf).
void TestSampler::invalidSettingsAreRefusedWithTheirRange_data()
{
    QTest::addColumn<QString>("setting");
    QTest::addColumn<float>("value");
    QTest::addColumn<QString>("named");
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    for (float t : {1e-45f, 1e-4f, -1.0f, 101.0f, inf, nan})
        QTest::newRow(qPrintable(QString("temperature %1").arg(double(t))))
            << "temperature" << t << "use 0 for greedy, or 0.001 to 100";
    for (float p : {-0.1f, 1.5f, nan})
        QTest::newRow(qPrintable(QString("top-p %1").arg(double(p)))) << "top_p" << p << "use 0 to 1";
    for (float p : {-0.5f, 1.5f, inf})
        QTest::newRow(qPrintable(QString("min-p %1").arg(double(p)))) << "min_p" << p << "use 0 to 1";
    QTest::newRow("top-k -1") << "top_k" << -1.0f << "use 0 for off";
    for (float r : {0.0f, -1.0f, 101.0f, nan})
        QTest::newRow(qPrintable(QString("penalty %1").arg(double(r)))) << "repeat_penalty" << r << "up to 100";
    QTest::newRow("window -2") << "repeat_last_n" << -2.0f << "-1 for the whole history";
}

void TestSampler::invalidSettingsAreRefusedWithTheirRange()
{
    QFETCH(QString, setting);
    QFETCH(float, value);
    QFETCH(QString, named);
    SamplerConfig c;
    if (setting == "temperature")
        c.temperature = value;
    else if (setting == "top_p")
        c.top_p = value;
    else if (setting == "min_p")
        c.min_p = value;
    else if (setting == "top_k")
        c.top_k = int32_t(value);
    else if (setting == "repeat_penalty")
        c.repeat_penalty = value;
    else
        c.repeat_last_n = int32_t(value);
    try {
        Sampler s(c);
        QFAIL("accepted");
    } catch (const engine::Error& e) {
        QVERIFY2(QString(e.what()).contains(named), e.what());
        QVERIFY2(QString(e.what()).startsWith("invalid sampling setting"), e.what());
    }
}

void TestSampler::boundaryValuesAreAccepted()
{
    for (float t : {0.0f, 0.001f, 1.0f, 100.0f}) {
        SamplerConfig c;
        c.temperature = t;
        c.top_p = t > 1.0f ? 1.0f : 0.0f;
        c.min_p = 1.0f;
        c.top_k = 0;
        c.repeat_penalty = 100.0f;
        c.repeat_last_n = -1;
        Sampler s(c);
        const auto r = s.sample(std::vector<float>{1.0f, 2.0f, 3.0f}, {});
        QCOMPARE(r.token, 2); // min-p 1 keeps only the best at any temperature
    }
}

QTEST_GUILESS_MAIN(TestSampler)
#include "test_sampler.moc"
