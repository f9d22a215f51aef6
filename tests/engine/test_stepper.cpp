// SPDX-License-Identifier: GPL-3.0-or-later
// The decode stepper on the real model: temperature 0 is greedy, a forced token enters the sequence
// and changes the next distribution, Back then Step recomputes bit-equal logits and the same KV
// accounting, seeded draws repeat after Back, branches are recorded, the logit lens's last layer is
// the real distribution, and stop reasons end the run.
#include "backend/backend.h"
#include "model/model.h"
#include "session/stepper.h"
#include "test_paths.h"
#include "util/error.h"

#include <QTest>
#include <algorithm>
#include <cmath>
#include <cstring>

using namespace engine;

namespace {

bool bit_equal(std::span<const float> a, std::span<const float> b)
{
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

int32_t argmax(std::span<const float> logits)
{
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

bool same_accounting(const KvAccounting& a, const KvAccounting& b)
{
    if (a.tokens_cached != b.tokens_cached || a.bytes_in_use != b.bytes_in_use ||
        a.bytes_allocated != b.bytes_allocated || a.blocks_allocated != b.blocks_allocated ||
        a.layers.size() != b.layers.size())
        return false;
    for (std::size_t i = 0; i < a.layers.size(); ++i)
        if (a.layers[i].tokens_in_use != b.layers[i].tokens_in_use ||
            a.layers[i].bytes_in_use != b.layers[i].bytes_in_use ||
            a.layers[i].blocks_allocated != b.layers[i].blocks_allocated)
            return false;
    return true;
}

SamplerConfig sampling(float temperature, uint64_t seed = 7)
{
    SamplerConfig c;
    c.temperature = temperature;
    c.seed = seed;
    c.top_k = 40;
    c.top_p = 0.95f;
    c.min_p = 0.0f;
    return c;
}

} // namespace

class TestStepper : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void prefillReportsEveryPromptToken();
    void temperatureZeroIsGreedy();
    void forcedTokenEntersSequenceAndChangesDistribution();
    void backThenStepRecomputesBitEqual();
    void seededDrawRepeatsAfterBack();
    void branchesAreRecorded();
    void logitLensLastLayerIsTheRealDistribution();
    void stopReasons();
    void errorsAreClear();

private:
    std::unique_ptr<Session> session();
    std::vector<TokenId> prompt(const char* text) const { return m_model->tokenizer().encode_ids(text); }

    std::shared_ptr<const Model> m_model;
};

void TestStepper::initTestCase()
{
    REQUIRE_DEFAULT_MODEL(path);
    m_model = Model::load(path);
}

std::unique_ptr<Session> TestStepper::session()
{
    return std::make_unique<Session>(m_model, make_cpu_backend(m_model, {.threads = 0, .n_ctx = 512}));
}

void TestStepper::prefillReportsEveryPromptToken()
{
    auto s = session();
    Stepper stepper(*s);
    const auto ids = prompt("The capital of France is");
    const PrefillReport r = stepper.start(ids, StopCondition({}, 0, {}));
    QCOMPARE(r.computed, uint32_t(ids.size()));
    QCOMPARE(r.reused, 0u);
    QCOMPARE(stepper.prompt_length(), uint32_t(ids.size()));
    const KvAccounting kv = s->backend().kv_cache().accounting();
    QCOMPARE(kv.tokens_cached, uint32_t(ids.size()));
    QCOMPARE(kv.layers.size(), std::size_t(m_model->config().n_layer));
    for (const auto& layer : kv.layers)
        QCOMPARE(layer.tokens_in_use, uint32_t(ids.size())); // K/V written for every token in every layer
}

void TestStepper::temperatureZeroIsGreedy()
{
    auto s = session();
    Stepper stepper(*s);
    stepper.start(prompt("Once upon a time"), StopCondition({}, 0, {}));
    for (int i = 0; i < 4; ++i) {
        SamplerConfig greedy = sampling(1.0f);
        greedy.greedy = true;
        const int32_t expected = argmax(s->logits());
        QCOMPARE(stepper.preview(greedy).token, expected);
        QCOMPARE(stepper.preview(sampling(0.0f)).token, expected);
        const StepRecord& r = stepper.step(sampling(0.0f));
        QCOMPARE(r.token, expected);
        QVERIFY(!r.forced);
        QCOMPARE(r.probability, 1.0f);
    }
}

void TestStepper::forcedTokenEntersSequenceAndChangesDistribution()
{
    auto s = session();
    Stepper stepper(*s);
    stepper.start(prompt("My favourite colour is"), StopCondition({}, 0, {}));
    const SampleResult before = stepper.preview(sampling(0.0f));
    const std::vector<float> natural_next = [&] {
        auto other = session();
        Stepper natural(*other);
        natural.start(prompt("My favourite colour is"), StopCondition({}, 0, {}));
        natural.step(sampling(0.0f));
        return std::vector<float>(other->logits().begin(), other->logits().end());
    }();
    // Force the second candidate of the unsampled logits: not what greedy would take.
    const auto& logits_view = before.stages.front().top;
    QVERIFY(logits_view.size() >= 2);
    const TokenId forced = logits_view[1].id;
    QVERIFY(forced != before.token);
    const StepRecord& r = stepper.step(sampling(0.0f), forced);
    QVERIFY(r.forced);
    QCOMPARE(r.token, forced);
    QCOMPARE(s->tokens().back(), forced);
    QCOMPARE(r.probability, 0.0f); // greedy leaves only the best token reachable
    QVERIFY(!bit_equal(s->logits(), natural_next));
}

void TestStepper::backThenStepRecomputesBitEqual()
{
    auto s = session();
    Stepper stepper(*s);
    stepper.start(prompt("The three primary colours are red, yellow and"), StopCondition({}, 0, {}));
    stepper.step(sampling(0.0f));
    const StepRecord first = stepper.step(sampling(0.0f));
    const std::vector<float> logits_then(s->logits().begin(), s->logits().end());
    const KvAccounting kv_then = s->backend().kv_cache().accounting();
    const auto tokens_then = s->tokens();

    QVERIFY(stepper.back());
    QCOMPARE(s->tokens().size(), tokens_then.size() - 1);
    QCOMPARE(s->backend().kv_cache().n_cached(), uint32_t(tokens_then.size() - 1));

    const StepRecord again = stepper.step(sampling(0.0f), first.token);
    QCOMPARE(again.token, first.token);
    QCOMPARE(again.position, first.position);
    QVERIFY(bit_equal(s->logits(), logits_then));
    QVERIFY(same_accounting(s->backend().kv_cache().accounting(), kv_then));
    QCOMPARE(s->tokens(), tokens_then);
    QVERIFY(stepper.branches().empty()); // the same path walked again
}

void TestStepper::seededDrawRepeatsAfterBack()
{
    auto s = session();
    Stepper stepper(*s);
    stepper.start(prompt("In the morning I like to"), StopCondition({}, 0, {}));
    std::vector<TokenId> drawn;
    for (int i = 0; i < 5; ++i)
        drawn.push_back(stepper.step(sampling(1.2f, 99)).token);
    for (int i = 0; i < 5; ++i)
        QVERIFY(stepper.back());
    QVERIFY(!stepper.back()); // only the prompt left
    for (int i = 0; i < 5; ++i)
        QCOMPARE(stepper.step(sampling(1.2f, 99)).token, drawn[static_cast<std::size_t>(i)]);
}

void TestStepper::branchesAreRecorded()
{
    auto s = session();
    Stepper stepper(*s);
    stepper.start(prompt("Cats and"), StopCondition({}, 0, {}));
    const TokenId a = stepper.step(sampling(0.0f)).token;
    const TokenId b = stepper.step(sampling(0.0f)).token;
    const uint32_t fork = stepper.steps().front().position;
    QVERIFY(stepper.back());
    QVERIFY(stepper.back());
    const SampleResult options = stepper.preview(sampling(0.0f));
    const TokenId other = options.stages.front().top[1].id;
    stepper.step(sampling(0.0f), other);
    QCOMPARE(stepper.branches().size(), std::size_t(1));
    QCOMPARE(stepper.branches()[0].position, fork);
    QCOMPARE(stepper.branches()[0].abandoned, (std::vector<TokenId>{a, b}));
}

void TestStepper::logitLensLastLayerIsTheRealDistribution()
{
    auto s = session();
    Stepper stepper(*s);
    stepper.start(prompt("Water freezes at zero degrees"), StopCondition({}, 0, {}));
    stepper.step(sampling(0.0f));
    const auto check = [&] {
        const std::vector<LensRow> lens = stepper.logit_lens(10);
        QCOMPARE(lens.size(), std::size_t(m_model->config().n_layer));
        // The real distribution: softmax of the session's logits, top 10.
        const auto logits = s->logits();
        float max = *std::max_element(logits.begin(), logits.end());
        double z = 0.0;
        for (float l : logits)
            z += std::exp(double(l - max));
        const LensRow& last = lens.back();
        QCOMPARE(last.layer, m_model->config().n_layer - 1);
        QCOMPARE(last.top.front().id, argmax(logits));
        for (const Candidate& c : last.top) {
            QCOMPARE(c.logit, logits[c.id]); // bit-equal: the same norm and output head
            QVERIFY(std::abs(double(c.probability) - std::exp(double(logits[c.id] - max)) / z) < 1e-7);
        }
        // Early layers predict something else: the lens is not just the output repeated.
        bool differs = false;
        for (const LensRow& row : lens)
            differs |= row.top.front().id != last.top.front().id;
        QVERIFY(differs);
    };
    check();
    QVERIFY(stepper.back()); // residuals come from the recomputed position
    check();
}

void TestStepper::stopReasons()
{
    auto s = session();
    Stepper stepper(*s);
    stepper.start(prompt("Count: one, two,"), StopCondition(m_model->tokenizer().vocab().end_of_generation, 3, {}));
    stepper.step(sampling(0.0f));
    QCOMPARE(stepper.stop_reason(), StopReason::None);
    stepper.step(sampling(0.0f));
    stepper.step(sampling(0.0f));
    QCOMPARE(stepper.stop_reason(), StopReason::MaxTokens);
    QVERIFY(stepper.back());
    QCOMPARE(stepper.stop_reason(), StopReason::None);

    // Forcing an end-of-generation token stops with that reason.
    const TokenId eos = m_model->tokenizer().vocab().end_of_generation.front();
    stepper.step(sampling(0.0f), eos);
    QCOMPARE(stepper.stop_reason(), StopReason::EndOfGeneration);

    // A stop string formed by the generated text.
    auto s2 = session();
    Stepper text_stop(*s2);
    text_stop.start(prompt("Count: one, two,"), StopCondition({}, 0, {","}));
    for (int i = 0; i < 12 && text_stop.stop_reason() == StopReason::None; ++i)
        text_stop.step(sampling(0.0f));
    QCOMPARE(text_stop.stop_reason(), StopReason::StopString);
    QVERIFY(text_stop.generated_text().find(',') != std::string::npos);
}

void TestStepper::errorsAreClear()
{
    auto s = session();
    Stepper stepper(*s);
    try {
        stepper.preview(sampling(0.0f));
        QFAIL("preview before Prefill did not throw");
    } catch (const Error& e) {
        QVERIFY(std::string(e.what()).find("Prefill") != std::string::npos);
    }
    try {
        stepper.start({}, StopCondition({}, 0, {}));
        QFAIL("an empty prompt did not throw");
    } catch (const Error& e) {
        QVERIFY(std::string(e.what()).find("empty") != std::string::npos);
    }
    stepper.start(prompt("Hello"), StopCondition({}, 0, {}));
    try {
        stepper.step(sampling(0.0f), TokenId(1 << 30));
        QFAIL("an out-of-vocabulary forced token did not throw");
    } catch (const Error& e) {
        QVERIFY(std::string(e.what()).find("vocabulary") != std::string::npos);
    }
}

QTEST_GUILESS_MAIN(TestStepper)
#include "test_stepper.moc"
