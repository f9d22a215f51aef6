// SPDX-License-Identifier: GPL-3.0-or-later
// The Speculation panel driven offscreen on the real default model (a small random-weight twin under
// the sanitizers): a prompt-lookup run shows the engine's own speculative run (the same tokens, drafts
// and verdicts as generate_speculative on an independent backend), one table row per examined draft
// token, one verify lane per target pass and the plain loop's tokens beside it; changing k while it
// runs cancels it and runs again with the new k; an empty prompt, a missing draft model and a chat
// with no reply are refused with their reasons; every state's words are proofread.
#include "backend/backend.h"
#include "bridge/engine_controller.h"
#include "bridge/inspection_client.h"
#include "model/model.h"
#include "panels/speculation_panel.h"
#include "session/generator.h"
#include "session/session.h"
#include "signal_wait.h"
#include "speculative/speculative.h"
#include "test_paths.h"
#include "text_review.h"
#include "widgets/speculation_lanes.h"

#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QTest>
#include <QTextBrowser>

using namespace tokenscope::ui;

class TestSpeculationPanel : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void cleanup();
    void lookupRunIsTheEnginesRun();
    void changingKRunsAgain();
    void badInputIsRefused();

private:
    std::shared_ptr<const SpeculationSnapshot> runToEnd(const SpeculationSettings& s);

    std::shared_ptr<const engine::Model> m_model;
    std::unique_ptr<EngineController> m_engine;
    std::unique_ptr<SpeculationPanel> m_panel;
};

namespace {

SpeculationSettings repetitive(int k, int tokens)
{
    SpeculationSettings s;
    s.prompt = "Monday: bread, milk, eggs. Tuesday: bread, milk, apples. Wednesday: bread, milk, eggs. Thursday:";
    s.source = "lookup";
    s.draft_max = k;
    s.tokens = tokens;
    s.sampling.temperature = 0.0f;
    return s;
}

} // namespace

void TestSpeculationPanel::initTestCase()
{
    REQUIRE_DEFAULT_MODEL(path);
    m_model = engine::Model::load(path);
    m_engine = std::make_unique<EngineController>();
    m_panel = std::make_unique<SpeculationPanel>(m_engine.get());
    m_panel->resize(1200, 900);
    m_panel->show();
    QSignalSpy loaded(m_engine.get(), &EngineController::modelLoaded);
    m_engine->loadModel(QString::fromStdString(path), 2, 512, "cpu");
    QVERIFY(loaded.wait(120000));
}

void TestSpeculationPanel::cleanup()
{
    if (m_panel)
        QVERIFY_WORDING(m_panel.get());
}

std::shared_ptr<const SpeculationSnapshot> TestSpeculationPanel::runToEnd(const SpeculationSettings& s)
{
    QSignalSpy finished(m_panel.get(), &SpeculationPanel::finished);
    m_panel->setSettings(s);
    m_panel->run();
    if (!testsupport::seen(finished))
        return nullptr;
    return m_panel->result();
}

void TestSpeculationPanel::lookupRunIsTheEnginesRun()
{
    std::shared_ptr<const TimelineSnapshot> timeline;
    const auto connection = connect(&m_engine->inspection(), &InspectionClient::timelineChanged, this,
                                    [&](std::shared_ptr<const TimelineSnapshot> t) { timeline = std::move(t); });
    const auto s = runToEnd(repetitive(4, 24));
    QVERIFY(QTest::qWaitFor([&] { return timeline != nullptr; }, 10000));
    disconnect(connection);
    QVERIFY(s);
    QVERIFY2(s->error.isEmpty(), qPrintable(s->error));
    QVERIFY(s->finished);
    const engine::SpeculativeResult& r = s->result;
    QCOMPARE(r.tokens.size(), std::size_t(24));
    QCOMPARE(s->plain_tokens.size(), std::size_t(24));
    QVERIFY(r.drafted > 0);
    QVERIFY(s->speedup() > 0);
    // the engine's own run: the same tokens, drafts and verdicts on an independent backend
    engine::Session target(m_model, engine::make_cpu_backend(m_model, {.threads = 2, .n_ctx = 512}));
    target.prefill(m_model->tokenizer().encode_ids(s->settings.prompt.toStdString()));
    engine::LookupDrafter lookup;
    engine::SamplerConfig greedy;
    greedy.greedy = true;
    greedy.stage_view_size = 0;
    engine::Sampler sampler(greedy);
    const engine::SpeculativeResult want = engine::generate_speculative(target, 24, lookup, sampler, {.draft_max = 4});
    QCOMPARE(r.tokens, want.tokens);
    QCOMPARE(r.steps.size(), want.steps.size());
    for (std::size_t i = 0; i < want.steps.size(); ++i) {
        QCOMPARE(r.steps[i].drafted, want.steps[i].drafted);
        QCOMPARE(r.steps[i].acceptance.accepted, want.steps[i].acceptance.accepted);
    }
    // the views: a row per examined draft token, its verdict; a verify lane per pass; the plain loop
    int examined = 0, rejected = 0;
    for (const auto& st : r.steps) {
        examined += int(st.acceptance.verdicts.size());
        rejected += int(st.acceptance.corrected);
    }
    QTableWidget* table = m_panel->table();
    QCOMPARE(table->rowCount(), examined);
    int shown_rejected = 0;
    for (int row = 0; row < table->rowCount(); ++row)
        shown_rejected += table->item(row, 7)->text().startsWith("rejected");
    QCOMPARE(shown_rejected, rejected);
    QCOMPARE(int(m_panel->lanes()->lane(1).size()), int(r.passes));
    // the Timeline panel's lanes: a verify event per pass, a draft event per step that drafted, every
    // generated token arriving at the end of the pass that kept it
    QCOMPARE(timeline->source, QString("speculation"));
    QCOMPARE(timeline->steps.size(), r.tokens.size());
    int verifies = 0, drafts = 0;
    for (const TimelineEventUi& e : timeline->events) {
        verifies += e.stage == int(engine::TimelineStage::Verify);
        drafts += e.stage == int(engine::TimelineStage::Draft);
    }
    QCOMPARE(verifies, int(r.passes));
    QVERIFY(drafts <= verifies);
    for (std::size_t i = 0; i < r.tokens.size(); ++i)
        QCOMPARE(timeline->steps[i].token, r.tokens[i]);
    QCOMPARE(m_panel->lanes()->lane(2).size(), std::size_t(23)); // the last plain token needs no pass
    QVERIFY(m_panel->statusText().contains(QString("%1 drafted, %2 accepted").arg(r.drafted).arg(r.accepted)));
    QVERIFY(m_panel->statusText().contains("plain decode"));
    // greedy in the default mode: identical to the plain loop, or the parting token is named
    const bool same = r.tokens == s->plain_tokens;
    QCOMPARE(s->parted < 0, same);
    QVERIFY(m_panel->statusText().contains(same ? "identical to the plain loop" : "parts from the plain loop"));
}

void TestSpeculationPanel::changingKRunsAgain()
{
    QSignalSpy progressed(m_panel.get(), &SpeculationPanel::progressed);
    QSignalSpy finished(m_panel.get(), &SpeculationPanel::finished);
    m_panel->setSettings(repetitive(2, 200));
    // as a user does it: a click on Run, then the k box's arrow key pressed four times while it runs
    auto* run = m_panel->findChild<QPushButton*>("speculationRun");
    QVERIFY(run);
    QTest::mouseClick(run, Qt::LeftButton);
    QVERIFY(testsupport::seen(progressed));
    // a new k while it runs: the running comparison is cancelled, the new one runs to its end
    auto* k = m_panel->findChild<QSpinBox*>("speculationK");
    k->setFocus();
    for (int i = 0; i < 4; ++i)
        QTest::keyClick(k, Qt::Key_Up);
    QCOMPARE(k->value(), 6);
    QVERIFY(QTest::qWaitFor([&] { return m_panel->result() && m_panel->result()->finished; }, 240000));
    QCOMPARE(m_panel->result()->settings.draft_max, 6);
    QCOMPARE(m_panel->result()->result.tokens.size(), std::size_t(200));
    for (const auto& st : m_panel->result()->result.steps)
        QVERIFY(st.drafted.size() <= 6);
}

void TestSpeculationPanel::badInputIsRefused()
{
    SpeculationSettings empty = repetitive(4, 8);
    empty.prompt.clear();
    auto s = runToEnd(empty);
    QVERIFY(s);
    QVERIFY2(s->error.contains("The prompt is empty"), qPrintable(s->error));
    QVERIFY(m_panel->statusText().contains("The prompt is empty"));

    SpeculationSettings missing = repetitive(4, 8);
    missing.source = "draft:/nonexistent/draft.gguf";
    s = runToEnd(missing);
    QVERIFY(s);
    QVERIFY2(s->error.contains("draft.gguf"), qPrintable(s->error));

    QSignalSpy finished(m_panel.get(), &SpeculationPanel::finished);
    m_panel->runOnChat(); // nothing was said in the chat
    QVERIFY(testsupport::seen(finished));
    QVERIFY2(m_panel->result()->error.contains("No chat reply yet"), qPrintable(m_panel->result()->error));
    m_panel->stop();
}

QTEST_MAIN(TestSpeculationPanel)
#include "test_speculation_panel.moc"
