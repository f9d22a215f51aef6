// SPDX-License-Identifier: GPL-3.0-or-later
// The serving lab's panel driven offscreen on the real default model (a small random-weight twin under
// the sanitizers): a run of the three batching modes shows one lane per request, the pool's blocks and
// one table row per mode, and its continuous run is the engine's own (the same replies, token for
// token, as run_serving on an independent backend); a common system prompt is taken from the prefix
// cache; a pool too small preempts and still finishes every request; Stop keeps what finished; bad
// settings are refused with their reasons; every state's words are proofread.
#include "app_weight_order.h"
#include "bridge/engine_controller.h"
#include "model/model.h"
#include "panels/serving_panel.h"
#include "serve/serve_run.h"
#include "serve/workload.h"
#include "signal_wait.h"
#include "test_paths.h"
#include "text_review.h"
#include "widgets/serving_lanes.h"
#include "widgets/serving_pool_map.h"

#include <QPushButton>
#include <QTableWidget>
#include <QTest>

using namespace tokenscope::ui;

class TestServingPanel : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void cleanup(); // after every function: the words its state shows, proofread
    void aRunShowsTheEnginesRuns();
    void aSharedSystemPromptIsReused();
    void aSmallPoolPreemptsAndFinishesEveryone();
    void repliesToOnePromptCopyOnWrite();
    void stopKeepsWhatFinished();
    void badSettingsAreRefused();

private:
    std::shared_ptr<const ServingSnapshot> run(const ServingSettings& s);
    ServingSettings small() const;

    std::string m_path;
    std::shared_ptr<const engine::Model> m_model;
    std::unique_ptr<EngineController> m_engine;
    std::unique_ptr<ServingPanel> m_panel;
};

void TestServingPanel::initTestCase()
{
    REQUIRE_DEFAULT_MODEL(path);
    m_path = path;
    m_model = engine::Model::load(path);
    m_engine = std::make_unique<EngineController>();
    m_panel = std::make_unique<ServingPanel>(m_engine.get());
    m_panel->resize(1100, 900);
    m_panel->show();
    QSignalSpy loaded(m_engine.get(), &EngineController::modelLoaded);
    m_engine->loadModel(QString::fromStdString(path), 2, 512, "cpu");
    QVERIFY(loaded.wait(120000));
}

void TestServingPanel::cleanup()
{
    if (m_panel)
        QVERIFY_WORDING(m_panel.get());
}

ServingSettings TestServingPanel::small() const
{
    ServingSettings s;
    s.workload.clients = 6;
    s.workload.arrival_rate = 0;
    s.workload.prompt_min = 8;
    s.workload.prompt_max = 24;
    s.workload.output_min = 4;
    s.workload.output_max = 8;
    s.workload.shared_fraction = 0;
    s.options.max_running = 4;
    s.modes = {engine::BatchingMode::OneAtATime, engine::BatchingMode::Static, engine::BatchingMode::Continuous};
    return s;
}

std::shared_ptr<const ServingSnapshot> TestServingPanel::run(const ServingSettings& s)
{
    QSignalSpy done(m_panel.get(), &ServingPanel::finished);
    m_panel->setSettings(s);
    m_panel->run();
    if (!testsupport::seen(done, 1, 600000))
        return nullptr;
    return m_panel->result();
}

void TestServingPanel::aRunShowsTheEnginesRuns()
{
    const ServingSettings s = small();
    const auto r = run(s);
    QVERIFY2(r && r->error.isEmpty(), qPrintable(m_panel->statusText()));
    QCOMPARE(r->runs.size(), std::size_t(3));
    QCOMPARE(m_panel->table()->rowCount(), 3);
    QCOMPARE(m_panel->table()->item(0, 0)->text(), QString("One at a time"));
    QCOMPARE(m_panel->table()->item(2, 0)->text(), QString("Continuous batching"));
    // the lanes and pool show the last run: a lane per request, each with its decode steps
    const auto& lanes = m_panel->lanes()->lanes();
    QCOMPARE(lanes.size(), std::size_t(6));
    for (const ServingLanes::Lane& lane : lanes) {
        QVERIFY(lane.finish > 0);
        QVERIFY(std::any_of(lane.segments.begin(), lane.segments.end(),
                            [](const auto& seg) { return seg.kind == ServingLanes::Kind::Decode; }));
    }
    QCOMPARE(m_panel->poolMap()->pool().blocks.size(), std::size_t(r->runs.back().options.pool_blocks));
    for (const engine::ServeRunResult& run : r->runs) {
        QCOMPARE(run.requests.size(), std::size_t(6));
        for (const engine::RequestState& q : run.requests)
            QCOMPARE(q.output.size(), std::size_t(q.request.max_new_tokens));
    }
    QCOMPARE(r->runs[0].max_batch_sequences, 1u);
    QVERIFY(r->runs[2].max_batch_sequences > 1);

    // the continuous run is the engine's: the same workload on an independent backend (all arrive at
    // once, so the schedule does not depend on timing) gives every request the same tokens
    const auto requests = engine::make_workload(s.workload, m_model->tokenizer());
    auto backend = engine::make_cpu_backend(m_model, testsupport::app_cpu_options(2, 512));
    engine::ServingOptions options = r->runs[2].options;
    const engine::ServeRunResult want = engine::run_serving(*backend, options, requests);
    QCOMPARE(want.requests.size(), r->runs[2].requests.size());
    for (std::size_t i = 0; i < want.requests.size(); ++i)
        QCOMPARE(r->runs[2].requests[i].output, want.requests[i].output);
    QVERIFY2(m_panel->statusText().contains("Served 6 requests in 3 ways"), qPrintable(m_panel->statusText()));

    // another run chosen under Show: the lanes follow it
    m_panel->showRun(0);
    QCOMPARE(m_panel->lanes()->run()->mode, engine::BatchingMode::OneAtATime);
}

void TestServingPanel::aSharedSystemPromptIsReused()
{
    ServingSettings s = small();
    s.workload.shared_fraction = 1.0;
    s.workload.shared_tokens = 48; // a whole block of 32 after the BOS
    s.workload.arrival_rate = 0.5; // far apart on the run's clock: the first has computed it by then
    s.modes = {engine::BatchingMode::Continuous};
    const auto r = run(s);
    QVERIFY2(r && r->error.isEmpty(), qPrintable(m_panel->statusText()));
    QVERIFY2(r->runs[0].reused_tokens >= 5 * 32,
             qPrintable(QString("reused %1 prompt tokens").arg(r->runs[0].reused_tokens)));
    QVERIFY(r->runs[0].pool.counters.prefix_hits >= 5);
    QCOMPARE(m_panel->table()->item(0, 9)->text(), QLocale().toString(qulonglong(r->runs[0].reused_tokens)));
}

void TestServingPanel::aSmallPoolPreemptsAndFinishesEveryone()
{
    for (const engine::PreemptionPolicy policy :
         {engine::PreemptionPolicy::Recompute, engine::PreemptionPolicy::Swap}) {
        ServingSettings s = small();
        s.workload.output_min = 24;
        s.workload.output_max = 40;
        s.options.pool_blocks = 4;
        s.options.preemption = policy;
        s.modes = {engine::BatchingMode::Continuous};
        const auto r = run(s);
        QVERIFY2(r && r->error.isEmpty(), qPrintable(m_panel->statusText()));
        QVERIFY2(r->runs[0].preemptions > 0, "a pool of 4 blocks should preempt");
        for (const engine::RequestState& q : r->runs[0].requests)
            QCOMPARE(q.finish_reason, std::string("length"));
        const auto& lanes = m_panel->lanes()->lanes();
        const auto kind =
            policy == engine::PreemptionPolicy::Swap ? ServingLanes::Kind::Swapped : ServingLanes::Kind::Preempted;
        QVERIFY(std::any_of(lanes.begin(), lanes.end(), [&](const auto& lane) {
            return std::any_of(lane.segments.begin(), lane.segments.end(),
                               [&](const auto& seg) { return seg.kind == kind; });
        }));
    }
}

// Three sampled replies to each prompt: the replies share the prompt's blocks, the pool counts the
// copies on write and the lanes mark them; every reply has its asked length.
void TestServingPanel::repliesToOnePromptCopyOnWrite()
{
    ServingSettings s = small();
    s.workload.clients = 3;
    s.workload.samples = 3;
    s.workload.temperature = 1.0f;
    s.modes = {engine::BatchingMode::Continuous};
    const auto r = run(s);
    QVERIFY2(r && r->error.isEmpty(), qPrintable(m_panel->statusText()));
    const engine::ServeRunResult& run = r->runs[0];
    QCOMPARE(run.requests.size(), std::size_t(9));
    int forked = 0;
    for (const engine::RequestState& q : run.requests) {
        QCOMPARE(q.output.size(), std::size_t(q.request.max_new_tokens));
        forked += q.parent.has_value();
    }
    QCOMPARE(forked, 6);
    // a prompt of 8 to 24 tokens leaves its last block partly full: two of each three replies copy it
    QCOMPARE(run.pool.counters.cow_copies, uint64_t(6));
    const auto& lanes = m_panel->lanes()->lanes();
    int ticks = 0;
    for (const ServingLanes::Lane& lane : lanes)
        ticks += int(lane.copies.size());
    QCOMPARE(ticks, 6);
    QCOMPARE(m_panel->settings().workload.samples, 3u);
}

void TestServingPanel::stopKeepsWhatFinished()
{
    ServingSettings s = small();
    s.workload.clients = 40;
    s.workload.output_min = 40;
    s.workload.output_max = 60;
    QSignalSpy done(m_panel.get(), &ServingPanel::finished);
    QSignalSpy progressed(m_panel.get(), &ServingPanel::progressed);
    m_panel->setSettings(s);
    // the buttons as a user presses them
    QTest::mouseClick(m_panel->findChild<QPushButton*>("servingRun"), Qt::LeftButton);
    QVERIFY(m_panel->running());
    QVERIFY(testsupport::seen(progressed, 1, 120000));
    QTest::mouseClick(m_panel->findChild<QPushButton*>("servingStop"), Qt::LeftButton);
    QVERIFY(testsupport::seen(done, 1, 120000));
    QVERIFY(!m_panel->running());
    QVERIFY(m_panel->result() && m_panel->result()->cancelled);
    QVERIFY2(m_panel->statusText().startsWith("Stopped"), qPrintable(m_panel->statusText()));
    QVERIFY(m_panel->findChild<QPushButton*>("servingRun")->isEnabled());
}

void TestServingPanel::badSettingsAreRefused()
{
    ServingSettings s = small();
    s.workload.prompt_min = 30;
    s.workload.prompt_max = 10;
    m_panel->setSettings(s);
    QTest::mouseClick(m_panel->findChild<QPushButton*>("servingRun"), Qt::LeftButton);
    QVERIFY(!m_panel->running());
    QVERIFY2(m_panel->statusText().contains("prompt lengths 30"), qPrintable(m_panel->statusText()));
    s = small();
    s.modes.clear();
    m_panel->setSettings(s);
    m_panel->run();
    QVERIFY(!m_panel->running());
    QVERIFY2(m_panel->statusText().contains("at least one way of batching"), qPrintable(m_panel->statusText()));
}

QTEST_MAIN(TestServingPanel)
#include "test_serving_panel.moc"
