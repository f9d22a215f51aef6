// SPDX-License-Identifier: GPL-3.0-or-later
// Runs as documents, offscreen on the default model (a small random-weight twin under the
// sanitizers): a run made in one window — the stepper (sampled and forced steps, the logit lens),
// its KV accounting and timeline, attention captured for a prompt, a text analysis, and the lab's
// patching grid, attribution, head classes, ablation and steering — is saved, then opened in a
// second window whose engine has no model loaded, and every panel's data there equals the first
// window's: the same snapshots field for field (attention weights as their F16 roundings, q/k/v
// exactly, which were F16 already) and the same texts the panels render (status lines, the
// stepper's sequence, cache sentence, bars and preview, the text panel's tooltips). The size
// announced before saving is the file's. A truncated or edited file is refused with a message and
// the window keeps what it showed. A run written by `tokenscope-cli trace --run` opens in the app
// and holds the tokens and distributions the app's own stepper computes for the same prompt.
#include "bridge/engine_controller.h"
#include "main_window.h"
#include "model/test_model.h"
#include "panels/attention_panel.h"
#include "panels/experts_panel.h"
#include "panels/kv_panel.h"
#include "panels/lab_heads_tab.h"
#include "panels/lab_panel.h"
#include "panels/lab_steering_tab.h"
#include "panels/serving_panel.h"
#include "panels/speculation_panel.h"
#include "panels/stepper_panel.h"
#include "panels/text_panel.h"
#include "panels/timeline_panel.h"
#include "run/run_validate.h"
#include "run_mutator.h"
#include "sanitizers.h"
#include "session/generator.h"
#include "signal_wait.h"
#include "storage/conversation_store.h"
#include "storage/run_document.h"
#include "test_paths.h"
#include "util/fp16.h"
#include "widgets/distribution_view.h"
#include "widgets/expert_views.h"
#include "widgets/model_head_map.h"
#include "widgets/serving_lanes.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QPlainTextEdit>
#include <QProcess>
#include <QPushButton>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QTextBrowser>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>

using namespace tokenscope::ui;

namespace {

bool same_number(double a, double b)
{
    return (std::isnan(a) && std::isnan(b)) || a == b;
}

void compare_samples(const engine::SampleResult& a, const engine::SampleResult& b)
{
    QCOMPARE(b.token, a.token);
    QCOMPARE(b.probability, a.probability);
    QCOMPARE(b.stages.size(), a.stages.size());
    for (std::size_t s = 0; s < a.stages.size(); ++s) {
        QCOMPARE(b.stages[s].name, a.stages[s].name);
        QCOMPARE(b.stages[s].applied, a.stages[s].applied);
        QCOMPARE(b.stages[s].survivors, a.stages[s].survivors);
        QCOMPARE(b.stages[s].top.size(), a.stages[s].top.size());
        for (std::size_t i = 0; i < a.stages[s].top.size(); ++i) {
            QCOMPARE(b.stages[s].top[i].id, a.stages[s].top[i].id);
            QCOMPARE(b.stages[s].top[i].logit, a.stages[s].top[i].logit);
            QCOMPARE(b.stages[s].top[i].probability, a.stages[s].top[i].probability);
        }
    }
}

void compare_tokens(const std::vector<StepperToken>& a, const std::vector<StepperToken>& b)
{
    QCOMPARE(b.size(), a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        QCOMPARE(b[i].id, a[i].id);
        QCOMPARE(b[i].text, a[i].text);
        QCOMPARE(b[i].type, a[i].type);
        QCOMPARE(b[i].prompt, a[i].prompt);
        QCOMPARE(b[i].forced, a[i].forced);
        QCOMPARE(b[i].probability, a[i].probability);
    }
}

void compare_rows(const DistributionView* a, const DistributionView* b)
{
    QCOMPARE(b->rows().size(), a->rows().size());
    for (std::size_t i = 0; i < a->rows().size(); ++i) {
        const auto &x = a->rows()[i], &y = b->rows()[i];
        QCOMPARE(y.id, x.id);
        QCOMPARE(y.text, x.text);
        QCOMPARE(y.before, x.before);
        QCOMPARE(y.after, x.after);
        QCOMPARE(y.logit, x.logit);
        QCOMPARE(y.survives, x.survives);
        QCOMPARE(y.chosen, x.chosen);
    }
}

} // namespace

class TestSavedRuns : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void cleanupTestCase();
    void aRunReopensInEveryPanelWithoutTheModel();
    void damagedFilesAreRefused();
    void hostileRunsAreRefusedAndTheWindowKeepsItsRun();
    void theLargestLegitimateRunsOpen();
    void theRunFuzzersCorpusOpensOrIsRefused();
    void aCliTraceOpensInTheApp();
    void aServedReplysTimelineRoundTrips();
    void anExpertsRoutingRoundTrips();
    void committedRunsOpenUnchanged_data();
    void committedRunsOpenUnchanged();
    void writeAppFixture();

private:
    std::unique_ptr<MainWindow> window(EngineController* engine, const QString& name);
    bool stepperDoes(const std::function<void()>& action);

    QTemporaryDir m_dir;
    std::string m_path;
    std::unique_ptr<ConversationStore> m_store_a, m_store_b;
    std::unique_ptr<EngineController> m_engine_a, m_engine_b; // b never loads a model
    std::unique_ptr<MainWindow> m_a, m_b;
    QString m_saved;
};

std::unique_ptr<MainWindow> TestSavedRuns::window(EngineController* engine, const QString& name)
{
    auto store = std::make_unique<ConversationStore>(m_dir.filePath(name + ".sqlite"), name);
    auto w = std::make_unique<MainWindow>(engine, store.get());
    (name == "a" ? m_store_a : m_store_b) = std::move(store);
    w->setDialogsEnabled(false);
    w->resize(1400, 900);
    w->show();
    return w;
}

void TestSavedRuns::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true);
    REQUIRE_DEFAULT_MODEL(path);
    m_path = path;
    QVERIFY(m_dir.isValid());
    m_engine_a = std::make_unique<EngineController>();
    m_engine_b = std::make_unique<EngineController>();
    m_a = window(m_engine_a.get(), "a");
    m_b = window(m_engine_b.get(), "b");
    QSignalSpy loaded(m_engine_a.get(), &EngineController::modelLoaded);
    m_engine_a->loadModel(QString::fromStdString(path), 2, 1024);
    QVERIFY(loaded.wait(120000));
}

void TestSavedRuns::cleanupTestCase()
{
    m_a.reset();
    m_b.reset();
    m_engine_a.reset();
    m_engine_b.reset();
}

bool TestSavedRuns::stepperDoes(const std::function<void()>& action)
{
    QSignalSpy changed(m_a->stepperPanel(), &StepperPanel::stateChanged);
    action();
    return testsupport::seen(changed, 1, 120000) && m_a->stepperPanel()->lastError().isEmpty();
}

void TestSavedRuns::aRunReopensInEveryPanelWithoutTheModel()
{
    StepperPanel* stepper = m_a->stepperPanel();
    StepperSettings settings = stepper->settings();
    settings.greedy = false;
    settings.sampling.temperature = 0.9f;
    settings.sampling.seed = 42;
    settings.logit_lens = true;
    stepper->setSettings(settings);
    stepper->setPrompt("The old lighthouse keeper climbed");
    QVERIFY(stepperDoes([&] { stepper->prefill(); }));
    QVERIFY(stepperDoes([&] { stepper->step(); }));
    QVERIFY(stepperDoes([&] { stepper->step(); }));
    const int forced = stepper->preview().stages.front().top.at(3).id; // not the likeliest: a forced step
    QVERIFY(stepperDoes([&] { stepper->step(forced); }));
    QVERIFY(stepperDoes([&] { stepper->step(); }));
    QCOMPARE(stepper->state()->steps, 4);
    QVERIFY(stepper->drawnFrom().size() >= 3);

    AttentionPanel* attention = m_a->attentionPanel();
    QSignalSpy captured(attention, &AttentionPanel::captured);
    attention->setPrompt("The cat sat on the mat because it was warm");
    attention->run();
    QVERIFY(testsupport::seen(captured));
    QVERIFY(attention->snapshot() && !attention->snapshot()->heads.empty());

    TextPanel* text = m_a->textPanel();
    QSignalSpy analyzed(text, &TextPanel::analyzed);
    const QString analysed =
        "A saved run keeps every token's surprisal, so a class can look at it later without the model.";
    text->analyze(analysed);
    QVERIFY(testsupport::seen(analyzed, 1, 300000));
    QVERIFY(text->result());

    LabPanel* lab = m_a->labPanel();
    QSignalSpy patched(lab, &LabPanel::patchingFinished);
    PatchingSettings patching;
    patching.clean = "Paris is the capital of";
    patching.corrupted = "Rome is the capital of";
    patching.token_a = " France";
    patching.token_b = " Italy";
    lab->runPatching(patching);
    QVERIFY(testsupport::seen(patched, 1, 300000));
    QVERIFY2(lab->patching(), qPrintable(lab->patchingStatus()));
    QSignalSpy attributed(lab, &LabPanel::attributionFinished);
    lab->attribute("The Eiffel Tower is in the city of");
    QVERIFY(testsupport::seen(attributed, 1, 300000));
    QVERIFY2(lab->attribution(), qPrintable(lab->attributionStatus()));
    LabHeadsTab* heads = lab->headsTab();
    QSignalSpy classified(heads, &LabHeadsTab::classified);
    heads->classify();
    QVERIFY(testsupport::seen(classified, 1, 300000));
    QVERIFY2(heads->classes(), qPrintable(heads->status()));
    QSignalSpy ablated(heads, &LabHeadsTab::ablated);
    heads->toggleHead(1, 0);
    heads->ablateSelected();
    QVERIFY(testsupport::seen(ablated, 1, 300000));
    QVERIFY2(heads->ablation(), qPrintable(heads->status()));
    LabSteeringTab* steering = lab->steeringTab();
    QSignalSpy steered(steering, &LabSteeringTab::finished);
    steering->run({"I love this", "I hate this", "The film was", 1, 4.0, 6});
    QVERIFY(testsupport::seen(steered, 1, 300000));
    QVERIFY2(steering->result(), qPrintable(steering->status()));

    ServingPanel* serving = m_a->servingPanel();
    QSignalSpy served(serving, &ServingPanel::finished);
    ServingSettings workload = serving->settings();
    workload.workload.clients = 3;
    workload.workload.arrival_rate = 0;
    workload.workload.prompt_min = 6;
    workload.workload.prompt_max = 10;
    workload.workload.output_min = 3;
    workload.workload.output_max = 5;
    workload.workload.shared_fraction = 0;
    workload.modes = {engine::BatchingMode::OneAtATime, engine::BatchingMode::Continuous};
    serving->setSettings(workload);
    serving->run();
    QVERIFY(testsupport::seen(served, 1, 300000));
    QVERIFY2(serving->result() && serving->result()->runs.size() == 2, qPrintable(serving->statusText()));

    SpeculationPanel* speculation = m_a->speculationPanel();
    QSignalSpy speculated(speculation, &SpeculationPanel::finished);
    SpeculationSettings spec;
    spec.prompt = "one two three one two three one two";
    spec.draft_max = 3;
    spec.tokens = 12;
    speculation->setSettings(spec);
    speculation->run();
    QVERIFY(testsupport::seen(speculated, 1, 300000));
    QVERIFY2(speculation->result() && speculation->result()->finished, qPrintable(speculation->statusText()));

    // Saved: the size said before saving is the file's.
    const QString summary = m_a->runSummary();
    QVERIFY2(summary.contains("stepper (") && summary.contains("attention (") && summary.contains("text analysis") &&
                 summary.contains("patching") && summary.contains("steering") &&
                 summary.contains("serving lab (2 runs of 3 requests)") &&
                 summary.contains("speculation (prompt lookup, 12 tokens)"),
             qPrintable(summary));
    const quint64 announced = m_a->runFileSize();
    m_saved = m_dir.filePath("lesson.tsrun");
    QSignalSpy saved(m_a.get(), &MainWindow::runSaved);
    m_a->saveRun(m_saved);
    QVERIFY(testsupport::seen(saved, 1, 120000));
    QVERIFY2(saved.at(0).at(1).toString().isEmpty(), qPrintable(saved.at(0).at(1).toString()));
    QCOMPARE(quint64(QFileInfo(m_saved).size()), announced);
    // A copy for the README's pictures of the text and lab panels, when asked for.
    if (const QString keep = qEnvironmentVariable("TOKENSCOPE_TEST_KEEP_RUN"); !keep.isEmpty()) {
        QFile::remove(keep);
        QVERIFY(QFile::copy(m_saved, keep));
    }

    // Opened where no model is loaded.
    QVERIFY(!m_engine_b->model());
    QSignalSpy opened(m_b.get(), &MainWindow::runOpened);
    m_b->openRun(m_saved);
    QVERIFY(testsupport::seen(opened, 1, 120000));
    QVERIFY2(opened.at(0).at(1).toString().isEmpty(), qPrintable(opened.at(0).at(1).toString()));
    QVERIFY(m_b->openedRun() && m_b->openedRun()->model_sha256.size() == 64);
    QVERIFY(!m_engine_b->model());

    // The stepper (which cannot be stepped: no cache is behind a saved run).
    StepperPanel* b_stepper = m_b->stepperPanel();
    const StepperState &sa = *stepper->state(), &sb = *b_stepper->state();
    compare_tokens(sa.tokens, sb.tokens);
    QCOMPARE(sb.prompt_length, sa.prompt_length);
    QCOMPARE(sb.steps, sa.steps);
    QCOMPARE(sb.kv_tokens, sa.kv_tokens);
    QCOMPARE(sb.kv_bytes_in_use, sa.kv_bytes_in_use);
    QCOMPARE(sb.kv_layer_tokens, sa.kv_layer_tokens);
    QCOMPARE(sb.layer_window, sa.layer_window);
    QCOMPARE(sb.history, sa.history);
    QCOMPARE(sb.generated_text, sa.generated_text);
    QCOMPARE(sb.branches, sa.branches);
    QVERIFY(sb.logits && *sb.logits == *sa.logits);
    QCOMPARE(sb.lens.size(), sa.lens.size());
    QVERIFY(!sa.lens.empty());
    for (std::size_t l = 0; l < sa.lens.size(); ++l)
        for (std::size_t i = 0; i < sa.lens[l].size(); ++i) {
            QCOMPARE(sb.lens[l][i].id, sa.lens[l][i].id);
            QCOMPARE(sb.lens[l][i].text, sa.lens[l][i].text);
            QCOMPARE(sb.lens[l][i].probability, sa.lens[l][i].probability);
        }
    QCOMPARE(b_stepper->drawnFrom().size(), stepper->drawnFrom().size());
    for (const auto& [position, r] : stepper->drawnFrom())
        compare_samples(r, b_stepper->drawnFrom().at(position));
    compare_samples(stepper->preview(), b_stepper->preview()); // recomputed from the saved logits
    QVERIFY2(
        b_stepper->statusText().startsWith(
            QString("Saved run · %1 tokens (%2 prompt + 4 generated)").arg(sa.tokens.size()).arg(sa.prompt_length)),
        qPrintable(b_stepper->statusText()));
    QCOMPARE(b_stepper->cacheSentence(), stepper->cacheSentence());
    QCOMPARE(b_stepper->sequenceHtml(), stepper->sequenceHtml());
    compare_rows(stepper->distribution(), b_stepper->distribution());
    b_stepper->step();
    b_stepper->back();
    QVERIFY(!b_stepper->pending());
    QCOMPARE(b_stepper->findChild<QPlainTextEdit*>("stepperPrompt")->toPlainText(),
             QString("The old lighthouse keeper climbed"));
    QVERIFY(!b_stepper->distribution()->rows().empty());

    // KV and the timeline.
    const KvSnapshot &ka = *m_a->kvPanel()->snapshot(), &kb = *m_b->kvPanel()->snapshot();
    QCOMPARE(kb.tokens_cached, ka.tokens_cached);
    QCOMPARE(kb.bytes_in_use, ka.bytes_in_use);
    QCOMPARE(kb.bytes_allocated, ka.bytes_allocated);
    QCOMPARE(kb.layers.size(), ka.layers.size());
    for (std::size_t l = 0; l < ka.layers.size(); ++l) {
        QCOMPARE(kb.layers[l].tokens_in_use, ka.layers[l].tokens_in_use);
        QCOMPARE(kb.layers[l].blocks, ka.layers[l].blocks);
        QCOMPARE(kb.layers[l].bytes_allocated, ka.layers[l].bytes_allocated);
    }
    QCOMPARE(m_b->kvPanel()->summaryText(), m_a->kvPanel()->summaryText());
    QCOMPARE(m_b->kvPanel()->formulaText(), m_a->kvPanel()->formulaText());
    const TimelineSnapshot &ta = *m_a->timelinePanel()->timeline(), &tb = *m_b->timelinePanel()->timeline();
    QCOMPARE(tb.events.size(), ta.events.size());
    for (std::size_t i = 0; i < ta.events.size(); ++i) {
        QCOMPARE(tb.events[i].stage, ta.events[i].stage);
        QCOMPARE(tb.events[i].begin_ns, ta.events[i].begin_ns);
        QCOMPARE(tb.events[i].end_ns, ta.events[i].end_ns);
    }
    QCOMPARE(tb.steps.size(), ta.steps.size());
    QCOMPARE(m_b->timelinePanel()->statsText(), m_a->timelinePanel()->statsText());

    // Attention: weights as their F16 roundings, q/k/v (F16 already) exactly.
    const AttentionSnapshot &aa = *attention->snapshot(), &ab = *m_b->attentionPanel()->snapshot();
    compare_tokens(aa.tokens, ab.tokens);
    QCOMPARE(ab.heads.size(), aa.heads.size());
    for (std::size_t h = 0; h < aa.heads.size(); ++h) {
        const AttentionHead &x = aa.heads[h], &y = ab.heads[h];
        QCOMPARE(y.layer, x.layer);
        QCOMPARE(y.head, x.head);
        QCOMPARE(y.n, x.n);
        QCOMPARE(y.scale, x.scale);
        QCOMPARE(y.weights.size(), x.weights.size());
        for (std::size_t i = 0; i < x.weights.size(); ++i)
            QCOMPARE(y.weights[i], engine::fp16_to_f32(engine::f32_to_fp16(x.weights[i])));
        QVERIFY(y.q == x.q && y.k == x.k && y.v == x.v);
    }
    QCOMPARE(m_b->attentionPanel()->statusText(), attention->statusText());
    QCOMPARE(m_b->attentionPanel()->layer(), attention->layer());

    // The text analysis, with what its tooltips say.
    const TextAnalysisSnapshot &xa = *text->result(), &xb = *m_b->textPanel()->result();
    QCOMPARE(xb.tokens.size(), xa.tokens.size());
    for (std::size_t i = 0; i < xa.tokens.size(); ++i) {
        QCOMPARE(xb.tokens[i].id, xa.tokens[i].id);
        QCOMPARE(xb.tokens[i].p, xa.tokens[i].p);
        QCOMPARE(xb.tokens[i].surprisal_bits, xa.tokens[i].surprisal_bits);
        QCOMPARE(xb.tokens[i].entropy_bits, xa.tokens[i].entropy_bits);
        QCOMPARE(xb.tokens[i].rank, xa.tokens[i].rank);
        QCOMPARE(xb.tokens[i].top, xa.tokens[i].top);
        QCOMPARE(m_b->textPanel()->tokenTip(int(i)), text->tokenTip(int(i)));
    }
    QCOMPARE(xb.perplexity, xa.perplexity);
    QCOMPARE(m_b->textPanel()->status(), text->status());
    QCOMPARE(m_b->textPanel()->findChild<QPlainTextEdit*>()->toPlainText(), analysed); // read back from its tokens

    // The lab.
    const PatchingSnapshot &pa = *lab->patching(), &pb = *m_b->labPanel()->patching();
    QCOMPARE(pb.effect.size(), pa.effect.size());
    for (std::size_t l = 0; l < pa.effect.size(); ++l)
        for (std::size_t c = 0; c < pa.effect[l].size(); ++c) {
            QVERIFY(same_number(pb.effect[l][c], pa.effect[l][c]));
            QVERIFY(same_number(pb.raw[l][c], pa.raw[l][c]));
        }
    QCOMPARE(pb.clean_pieces, pa.clean_pieces);
    QCOMPARE(m_b->labPanel()->patchingStatus(), lab->patchingStatus());
    const AttributionSnapshot &ra = *lab->attribution(), &rb = *m_b->labPanel()->attribution();
    QCOMPARE(rb.logit, ra.logit);
    QCOMPARE(rb.parts.size(), ra.parts.size());
    for (std::size_t i = 0; i < ra.parts.size(); ++i) {
        QCOMPARE(rb.parts[i].name, ra.parts[i].name);
        QCOMPARE(rb.parts[i].value, ra.parts[i].value);
    }
    QCOMPARE(m_b->labPanel()->attributionStatus(), lab->attributionStatus());
    const HeadsSnapshot &ha = *heads->classes(), &hb = *m_b->labPanel()->headsTab()->classes();
    QCOMPARE(hb.heads.size(), ha.heads.size());
    for (std::size_t i = 0; i < ha.heads.size(); ++i) {
        QCOMPARE(hb.heads[i].cls, ha.heads[i].cls);
        QCOMPARE(hb.heads[i].scores, ha.heads[i].scores);
    }
    const AblationSnapshot &ba = *heads->ablation(), &bb = *m_b->labPanel()->headsTab()->ablation();
    QCOMPARE(bb.kl, ba.kl);
    QCOMPARE(bb.heads, ba.heads);
    QCOMPARE(m_b->labPanel()->headsTab()->grid()->selected(), heads->grid()->selected());
    QCOMPARE(bb.after.size(), ba.after.size());
    for (std::size_t i = 0; i < ba.after.size(); ++i)
        QCOMPARE(bb.after[i].p, ba.after[i].p);
    QCOMPARE(m_b->labPanel()->headsTab()->status(), heads->status());
    const SteeringSnapshot &ga = *steering->result(), &gb = *m_b->labPanel()->steeringTab()->result();
    QCOMPARE(gb.default_text, ga.default_text);
    QCOMPARE(gb.steered_text, ga.steered_text);
    QCOMPARE(gb.direction, ga.direction);
    QCOMPARE(m_b->labPanel()->steeringTab()->status(), steering->status());
    const SteeringSettings shown = m_b->labPanel()->steeringTab()->settings(); // the form says what it is of
    QCOMPARE(shown.plus, ga.settings.plus);
    QCOMPARE(shown.prompt, ga.settings.prompt);
    QCOMPARE(shown.layer, ga.settings.layer);
    // the serving lab: every request's tokens and times, every pass, the pool and the table as they were
    const ServingSnapshot &serve_a = *serving->result(), &serve_b = *m_b->servingPanel()->result();
    QCOMPARE(serve_b.runs.size(), serve_a.runs.size());
    for (std::size_t i = 0; i < serve_a.runs.size(); ++i) {
        const engine::ServeRunResult &run_a = serve_a.runs[i], &run_b = serve_b.runs[i];
        QCOMPARE(run_b.options.mode, run_a.options.mode);
        QCOMPARE(run_b.requests.size(), run_a.requests.size());
        for (std::size_t k = 0; k < run_a.requests.size(); ++k) {
            QCOMPARE(run_b.requests[k].request.prompt, run_a.requests[k].request.prompt);
            QCOMPARE(run_b.requests[k].output, run_a.requests[k].output);
            QCOMPARE(run_b.requests[k].token_times, run_a.requests[k].token_times);
            QCOMPARE(run_b.requests[k].first_token_s, run_a.requests[k].first_token_s);
        }
        QCOMPARE(run_b.steps.size(), run_a.steps.size());
        for (std::size_t k = 0; k < run_a.steps.size(); ++k) {
            QCOMPARE(run_b.steps[k].slices.size(), run_a.steps[k].slices.size());
            QCOMPARE(run_b.steps[k].end_s, run_a.steps[k].end_s);
        }
        QCOMPARE(run_b.pool.blocks.size(), run_a.pool.blocks.size());
        QCOMPARE(run_b.ttft.p99, run_a.ttft.p99);
    }
    QTableWidget *table_a = serving->table(), *table_b = m_b->servingPanel()->table();
    QCOMPARE(table_b->rowCount(), table_a->rowCount());
    for (int r = 0; r < table_a->rowCount(); ++r)
        for (int c = 0; c < table_a->columnCount(); ++c)
            QCOMPARE(table_b->item(r, c)->text(), table_a->item(r, c)->text());
    QCOMPARE(m_b->servingPanel()->settings().workload.clients, 3u);
    QCOMPARE(m_b->servingPanel()->lanes()->lanes().size(), std::size_t(3));
    // the speculation view: every step's draft and verdicts, the plain loop, its table and text as they were
    const SpeculationSnapshot &spec_a = *speculation->result(), &spec_b = *m_b->speculationPanel()->result();
    QCOMPARE(spec_b.result.tokens, spec_a.result.tokens);
    QCOMPARE(spec_b.plain_tokens, spec_a.plain_tokens);
    QCOMPARE(spec_b.result.steps.size(), spec_a.result.steps.size());
    for (std::size_t k = 0; k < spec_a.result.steps.size(); ++k) {
        QCOMPARE(spec_b.result.steps[k].drafted, spec_a.result.steps[k].drafted);
        QCOMPARE(spec_b.result.steps[k].acceptance.verdicts.size(), spec_a.result.steps[k].acceptance.verdicts.size());
    }
    QCOMPARE(spec_b.speedup(), spec_a.speedup());
    QTableWidget *spec_table_a = speculation->table(), *spec_table_b = m_b->speculationPanel()->table();
    QCOMPARE(spec_table_b->rowCount(), spec_table_a->rowCount());
    for (int r = 0; r < spec_table_a->rowCount(); ++r)
        for (int c = 0; c < spec_table_a->columnCount(); ++c)
            QCOMPARE(spec_table_b->item(r, c)->text(), spec_table_a->item(r, c)->text());
    QCOMPARE(m_b->speculationPanel()->sequenceView()->toPlainText(), speculation->sequenceView()->toPlainText());
    QCOMPARE(m_b->speculationPanel()->statusText(), speculation->statusText());

    // Saved again from the window that has no model: the same document (the vocabulary comes from
    // the run itself).
    const QString again = m_dir.filePath("again.tsrun");
    QSignalSpy resaved(m_b.get(), &MainWindow::runSaved);
    m_b->saveRun(again);
    QVERIFY(testsupport::seen(resaved, 1, 120000));
    QVERIFY2(resaved.at(0).at(1).toString().isEmpty(), qPrintable(resaved.at(0).at(1).toString()));
    const auto first = engine::run::read_run_file(m_saved.toStdString());
    const auto second = engine::run::read_run_file(again.toStdString());
    QVERIFY(second.tokenizer);
    QCOMPARE(second.contents.model.sha256, first.contents.model.sha256);
    QCOMPARE(second.contents.arrays.size(), first.contents.arrays.size());
    // A run is made to be sent: it names the model's file, not the folders of this machine.
    QVERIFY(!QString::fromStdString(first.contents.document)
                 .contains(QFileInfo(QString::fromStdString(m_path)).absolutePath()));
    QVERIFY(
        QString::fromStdString(first.contents.document).contains(QFileInfo(QString::fromStdString(m_path)).fileName()));
}

void TestSavedRuns::damagedFilesAreRefused()
{
    QVERIFY(!m_saved.isEmpty());
    QFile f(m_saved);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QByteArray good = f.readAll();
    const auto shown = m_b->stepperPanel()->state();
    const QString cut = m_dir.filePath("cut.tsrun"), edited = m_dir.filePath("edited.tsrun");
    {
        QFile out(cut);
        QVERIFY(out.open(QIODevice::WriteOnly));
        out.write(good.left(good.size() / 2));
    }
    QByteArray changed = good;
    const qsizetype at = changed.indexOf("lighthouse");
    QVERIFY(at > 0);
    changed[at] = 'L'; // an edit inside the document
    {
        QFile out(edited);
        QVERIFY(out.open(QIODevice::WriteOnly));
        out.write(changed);
    }
    for (const QString& path : {cut, edited, m_dir.filePath("missing.tsrun")}) {
        QSignalSpy opened(m_b.get(), &MainWindow::runOpened);
        m_b->openRun(path);
        QVERIFY(testsupport::seen(opened, 1, 60000));
        const QString error = opened.at(0).at(1).toString();
        QVERIFY2(error.contains(QFileInfo(path).fileName()), qPrintable(error));
        QVERIFY2(path.contains("missing") || error.contains("damaged"), qPrintable(error));
        QCOMPARE(m_b->stepperPanel()->state(), shown); // what the window showed stays
    }
}

// Documents that disagree with themselves, re-signed after editing as an attacker would: each crashed
// a panel (or ran for minutes) before runs were validated. Now each is refused naming the field, and
// the window keeps the run it showed.
void TestSavedRuns::hostileRunsAreRefusedAndTheWindowKeepsItsRun()
{
    using json = nlohmann::ordered_json;
    QVERIFY(!m_saved.isEmpty());
    const engine::run::OpenedRun good = engine::run::read_run_file(m_saved.toStdString());
    const json doc = json::parse(good.contents.document);
    QVERIFY(doc.contains("attention") && doc["lab"].contains("patching") && doc["lab"].contains("head_classes"));
    const auto shown = m_b->stepperPanel()->state();
    QVERIFY(shown);
    const std::vector<std::pair<const char*, std::function<void(json&)>>> cases = {
        {"attention.heads[0].weights", [](json& d) { d["attention"]["heads"][0].erase("weights"); }},
        {"attention.heads[0].q", [](json& d) { d["attention"]["heads"][0].erase("q"); }},
        {"lab.patching.corrupted_pieces", [](json& d) { d["lab"]["patching"]["corrupted_pieces"].erase(0); }},
        {"lab.patching.effect[0]", [](json& d) { d["lab"]["patching"]["effect"][0].erase(0); }},
        {"lab.patching.n_columns", [](json& d) { d["lab"]["patching"]["n_columns"] = 2147483647; }},
        {"lab.head_classes.heads", [](json& d) { d["lab"]["head_classes"]["heads"].erase(0); }},
        {"stepper.distributions[0].position", [](json& d) { d["stepper"]["distributions"][0]["position"] = -1; }},
        {"stepper.generated_text", [](json& d) { d["stepper"]["generated_text"] = std::string(5000000, 'z'); }},
        {"kv.blocks_per_layer", [](json& d) { d["kv"]["blocks_per_layer"] = 10000000; }},
        {"timeline.events[0][3]", [](json& d) { d["timeline"]["events"][0][3] = 1e15; }},
        {"model.sha256", [](json& d) { d["model"]["sha256"] = "<b>not a hash</b>"; }},
    };
    for (const auto& [field, edit] : cases) {
        json d = doc;
        edit(d);
        engine::run::RunContents c = good.contents;
        c.document = d.dump();
        const QString path = m_dir.filePath("hostile.tsrun");
        engine::run::write_run_file(path.toStdString(), c, good.file.get());
        QSignalSpy opened(m_b.get(), &MainWindow::runOpened);
        m_b->openRun(path);
        QVERIFY(testsupport::seen(opened, 1, 60000));
        const QString error = opened.at(0).at(1).toString();
        QVERIFY2(error.contains("hostile.tsrun") && error.contains(field), qPrintable(field + (": " + error)));
        QCOMPARE(m_b->stepperPanel()->state(), shown); // what the window showed stays
    }
}

// Runs at the limits a legitimate run reaches (README, "Saved runs"): a stepper over a 128K context,
// a text analysis as long as a document holds. Each opens in every panel; how long it takes is printed (no timed
// assertion: bench/open_run.sh reports it).
void TestSavedRuns::theLargestLegitimateRunsOpen()
{
    using json = nlohmann::ordered_json;
    using L = engine::run::RunLimits;
    const engine::run::OpenedRun good = engine::run::read_run_file(m_saved.toStdString());
    const json doc = json::parse(good.contents.document);
    const auto n_vocab = int(good.tokenizer->vocab().size());
    const std::vector<std::pair<const char*, std::function<void(json&)>>> runs = {
        {"a text analysis filling the document",
         [&](json& d) {
             json& t = d["text_analysis"];
             const json first = t["tokens"][1];
             json tokens = json::array();
             // As many as the document holds (its 16 MiB bound before the token limit here).
             const int64_t room = int64_t(engine::run::kMaxDocumentBytes) - int64_t(d.dump().size()) - 4096;
             const int64_t count = std::min<int64_t>(L::kAnalysisTokens, room / int64_t(first.dump().size() + 8));
             for (int64_t i = 0; i < count; ++i) {
                 json k = first;
                 k["id"] = int(i % n_vocab);
                 k["text"] = QString("w%1 ").arg(i % 89).toStdString();
                 tokens.push_back(std::move(k));
             }
             t["tokens"] = tokens;
         }},
        {"a stepper over 131,072 tokens",
         [&](json& d) {
             json& st = d["stepper"];
             const json first = st["tokens"][0];
             json tokens = json::array(), history = json::array();
             for (int64_t i = 0; i < L::kSequenceTokens; ++i) {
                 json t = first;
                 t["id"] = int(i % n_vocab);
                 t["text"] = QString("tok%1").arg(i % 97).toStdString();
                 t["prompt"] = i < L::kSequenceTokens - st["steps"].get<int>();
                 tokens.push_back(std::move(t));
                 history.push_back(int(i % n_vocab));
             }
             json distributions = json::array();
             for (auto& r : st["distributions"]) {
                 r["position"] = L::kSequenceTokens - st["steps"].get<int>() + int(distributions.size());
                 distributions.push_back(r);
             }
             st["tokens"] = tokens;
             st["history"] = history;
             st["prompt_length"] = L::kSequenceTokens - st["steps"].get<int>();
             st["distributions"] = distributions;
             json& kv = d["kv"];
             kv["n_ctx"] = L::kSequenceTokens;
             kv["blocks_per_layer"] = L::kSequenceTokens / kv["block_tokens"].get<int>();
             kv["tokens_cached"] = L::kSequenceTokens - 1;
             d.erase("attention");
         }},
    };
    for (const auto& [name, edit] : runs) {
        json d = doc;
        edit(d);
        engine::run::RunContents c = good.contents;
        c.document = d.dump();
        QVERIFY2(c.document.size() <= engine::run::kMaxDocumentBytes, name);
        const QString path = m_dir.filePath("largest.tsrun");
        engine::run::write_run_file(path.toStdString(), c, good.file.get());
        QSignalSpy opened(m_b.get(), &MainWindow::runOpened);
        QElapsedTimer clock;
        clock.start();
        m_b->openRun(path);
        QVERIFY(testsupport::seen(opened, 1, 300000));
        QVERIFY2(opened.at(0).at(1).toString().isEmpty(), qPrintable(opened.at(0).at(1).toString()));
        m_b->repaint();
        QCoreApplication::processEvents();
        qInfo("opened %s (%.1f MiB document) in %lld ms", name, double(c.document.size()) / 1048576.0,
              qint64(clock.elapsed()));
    }
    const auto shown = m_b->stepperPanel()->state();
    QCOMPARE(shown->tokens.size(), std::size_t(engine::run::RunLimits::kSequenceTokens));

    // Opening shows it is busy and can be cancelled: the window keeps what it showed, and the
    // dropped result does not replace it when the reading ends.
    engine::run::RunContents small = good.contents;
    const QString path = m_dir.filePath("small.tsrun");
    engine::run::write_run_file(path.toStdString(), small, good.file.get());
    QSignalSpy opened(m_b.get(), &MainWindow::runOpened);
    m_b->openRun(m_dir.filePath("largest.tsrun"));
    auto* cancel = m_b->findChild<QPushButton*>("cancel-open-run");
    QCoreApplication::processEvents(); // laid out in the model bar (the reading takes seconds)
    QVERIFY(cancel && cancel->isVisible() && cancel->isEnabled());
    QCOMPARE(opened.size(), 0);
    QTest::mouseClick(cancel, Qt::LeftButton);
    QCOMPARE(opened.size(), 1);
    QCOMPARE(opened.at(0).at(1).toString(), QString("cancelled"));
    QCoreApplication::processEvents();
    QVERIFY(!cancel->isVisible());
    m_b->openRun(path); // a run opened after it is shown, not the cancelled one
    QVERIFY(testsupport::seen(opened, 2, 120000));
    QCOMPARE(opened.at(1).at(0).toString(), path);
    QVERIFY(m_b->stepperPanel()->state() != shown);
    QVERIFY(m_b->stepperPanel()->state()->tokens.size() < 1000);
}

// The run fuzzer's minimized corpus (tests/data/fuzz/run: edit scripts, see tests/support/run_mutator)
// replayed into run files and opened in the app: each opens in every panel or is refused, and the
// window goes on showing what it showed.
void TestSavedRuns::theRunFuzzersCorpusOpensOrIsRefused()
{
    const QDir corpus(QStringLiteral(TOKENSCOPE_TEST_DATA_DIR "/fuzz/run"));
    const QStringList all = corpus.entryList(QDir::Files, QDir::Name);
    QVERIFY2(all.size() >= 20, qPrintable(corpus.path() + " holds too few inputs"));
    // Every input in the Release tree (about 20 s); every 8th under the sanitizers, which run the
    // whole corpus through the reader as the fuzzer's seeds anyway (fuzz_run in CI).
    const int stride = testsupport::kUnderAddressSanitizer ? 8 : 1;
    QStringList inputs;
    for (qsizetype i = 0; i < all.size(); i += stride)
        inputs << all[i];
    int opened_count = 0, refused = 0;
    for (const QString& name : inputs) {
        QFile f(corpus.filePath(name));
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QByteArray input = f.readAll();
        const std::vector<std::byte> run = testsupport::mutated_run(
            std::span(reinterpret_cast<const uint8_t*>(input.constData()), std::size_t(input.size())));
        if (run.empty())
            continue; // the writer refused the edit itself
        const QString path = m_dir.filePath("fuzzed.tsrun");
        QFile out(path);
        QVERIFY(out.open(QIODevice::WriteOnly | QIODevice::Truncate));
        out.write(reinterpret_cast<const char*>(run.data()), qint64(run.size()));
        out.close();
        QSignalSpy opened(m_b.get(), &MainWindow::runOpened);
        m_b->openRun(path);
        QVERIFY2(testsupport::seen(opened, 1, 60000), qPrintable(name));
        const QString error = opened.at(0).at(1).toString();
        if (error.isEmpty()) {
            ++opened_count;
            m_b->repaint(); // every panel paints what it was given
        } else {
            QVERIFY2(error.contains("fuzzed.tsrun"), qPrintable(name + ": " + error));
            ++refused;
        }
    }
    qInfo("%d inputs: %d opened, %d refused", int(inputs.size()), opened_count, refused);
    QVERIFY(opened_count > 0 && refused > 0); // both outcomes are exercised
}

void TestSavedRuns::aCliTraceOpensInTheApp()
{
    const QString trace = m_dir.filePath("trace.tsrun");
    QProcess cli;
    cli.start(TOKENSCOPE_CLI_PATH, {"trace", QString::fromStdString(m_path), "-p", "The river bank was", "-n", "4",
                                    "--temp", "0", "-c", "1024", "--attention", "1:0,1:1", "--run", trace});
    QVERIFY(cli.waitForFinished(300000));
    QVERIFY2(cli.exitCode() == 0, cli.readAllStandardError().constData());

    // The app's own stepper on the same prompt, greedy, from an empty cache as the CLI ran it (the
    // model loaded afresh: the stepper keeps the earlier test's prompt, and a prompt evaluated after a
    // kept prefix sums in its shorter batch's order — llama.cpp's repacked matrices and its flash
    // attention pick their kernels by the batch).
    QSignalSpy loaded(m_engine_a.get(), &EngineController::modelLoaded);
    m_engine_a->loadModel(QString::fromStdString(m_path), 2, 1024);
    QVERIFY(loaded.wait(120000));
    StepperPanel* stepper = m_a->stepperPanel();
    StepperSettings settings = stepper->settings();
    settings.greedy = true;
    settings.logit_lens = false;
    stepper->setSettings(settings);
    stepper->setPrompt("The river bank was");
    QVERIFY(stepperDoes([&] { stepper->prefill(); }));
    for (int i = 0; i < 4; ++i)
        QVERIFY(stepperDoes([&] { stepper->step(); }));

    QSignalSpy opened(m_b.get(), &MainWindow::runOpened);
    m_b->openRun(trace);
    QVERIFY(testsupport::seen(opened, 1, 60000));
    QVERIFY2(opened.at(0).at(1).toString().isEmpty(), qPrintable(opened.at(0).at(1).toString()));
    const StepperState &a = *stepper->state(), &b = *m_b->stepperPanel()->state();
    QCOMPARE(b.steps, 4);
    compare_tokens(a.tokens, b.tokens);
    QCOMPARE(b.generated_text, a.generated_text);
    QCOMPARE(m_b->stepperPanel()->drawnFrom().size(), stepper->drawnFrom().size());
    for (const auto& [position, r] : stepper->drawnFrom()) {
        const engine::SampleResult& c = m_b->stepperPanel()->drawnFrom().at(position);
        QCOMPARE(c.token, r.token);
        QCOMPARE(c.stages.front().top.size(), r.stages.front().top.size());
        for (std::size_t i = 0; i < r.stages.front().top.size(); ++i) {
            QCOMPARE(c.stages.front().top[i].id, r.stages.front().top[i].id);
            const double p = r.stages.front().top[i].probability, q = c.stages.front().top[i].probability;
            QVERIFY2(std::fabs(p - q) <= 1e-6 * std::max(p, 1e-12), qPrintable(QString("%1 vs %2").arg(p).arg(q)));
        }
    }
    QCOMPARE(m_b->stepperPanel()->sequenceHtml(), stepper->sequenceHtml());
    const auto& attention = m_b->attentionPanel()->snapshot();
    QVERIFY(attention && attention->heads.size() == 2);
    QCOMPARE(attention->heads[0].n, int(a.tokens.size()) - 1);
    QCOMPARE(m_b->timelinePanel()->timeline()->steps.size(), std::size_t(4));
    QCOMPARE(m_b->kvPanel()->snapshot()->tokens_cached, m_a->kvPanel()->snapshot()->tokens_cached);

    // A fresh app on a machine with no model installed (empty data folders, no TOKENSCOPE_MODEL)
    // opens it and shows it.
    QTemporaryDir home;
    QVERIFY(home.isValid());
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.remove("TOKENSCOPE_MODEL");
    env.remove("TOKENSCOPE_CHAT_MODEL");
    env.insert("HOME", home.path());
    env.insert("XDG_DATA_HOME", home.filePath("data"));
    env.insert("XDG_CONFIG_HOME", home.filePath("config"));
    env.insert("XDG_CACHE_HOME", home.filePath("cache"));
    QProcess app;
    app.setProcessEnvironment(env);
    const QString picture = home.filePath("stepper.png");
    app.start(TOKENSCOPE_GUI_PATH, {"--verbose", "--screenshot", picture, "--panel", "stepper", trace});
    QVERIFY(app.waitForFinished(120000));
    const QString log = QString::fromUtf8(app.readAllStandardError());
    QVERIFY2(app.exitStatus() == QProcess::NormalExit && app.exitCode() == 0, qPrintable(log));
    QVERIFY2(log.contains("saved " + picture) && QFileInfo(picture).size() > 10000, qPrintable(log));
    QVERIFY2(!log.contains("loaded "), qPrintable(log)); // no model was found, none loaded
}

// A reply from a server keeps its timeline's remote fields (who answered, the server's own prompt and
// generation times, the whole reply's time) through a save and a reopen, bit for bit.
void TestSavedRuns::aServedReplysTimelineRoundTrips()
{
    auto timeline = std::make_shared<TimelineSnapshot>();
    timeline->source = "chat";
    timeline->remote = true;
    timeline->server = "llama.cpp (llama-server) at http://127.0.0.1:8080";
    timeline->server_prompt_ms = 12.375;
    timeline->server_generation_ms = 301.0625;
    timeline->server_generated = 17;
    timeline->total_ms = 345.5;
    timeline->ttft_ms = 40.25;
    timeline->events.push_back({int(engine::TimelineStage::Prefill), -1, 0, 40250000});
    RunDocument doc;
    doc.timeline = timeline;
    const QString path = m_dir.filePath("served.tsrun");
    engine::run::write_run_file(path.toStdString(), to_run_contents(doc), nullptr);
    const RunDocument back = run_document_from(engine::run::read_run_file(path.toStdString()), path);
    QVERIFY(back.timeline);
    const TimelineSnapshot& t = *back.timeline;
    QVERIFY(t.remote);
    QCOMPARE(t.server, timeline->server);
    QCOMPARE(t.server_prompt_ms, timeline->server_prompt_ms);
    QCOMPARE(t.server_generation_ms, timeline->server_generation_ms);
    QCOMPARE(t.server_generated, timeline->server_generated);
    QCOMPARE(t.total_ms, timeline->total_ms);
    QCOMPARE(t.ttft_ms, timeline->ttft_ms);
    QCOMPARE(t.events.size(), std::size_t(1));
}

// A mixture-of-experts routing (a random qwen3moe model's, captured by the engine) through a save and a
// reopen: every expert and weight bit for bit, and the Experts panel shows it with what-if and the scan
// off (they need the model behind the run).
void TestSavedRuns::anExpertsRoutingRoundTrips()
{
    const QString model_path = m_dir.filePath("qwen3moe.gguf");
    engine::make_test_model("qwen3moe", 2).write(model_path.toStdString());
    const auto model = engine::Model::load(model_path.toStdString());
    const std::vector<int32_t> ids = model->tokenizer().encode_ids("saved routes");
    auto backend = engine::make_cpu_backend(model, {.threads = 1, .n_ctx = 64});
    engine::CaptureRequest capture;
    capture.routing = true;
    engine::ForwardRequest request;
    request.tokens = ids;
    request.capture = &capture;
    const engine::ForwardResult r = backend->forward(request);
    auto ex = std::make_shared<ExpertsSnapshot>();
    ex->architecture = "qwen3moe";
    ex->source = "prompt";
    ex->n_expert = 8;
    ex->k = 2;
    ex->normalized = true;
    ex->random_weights = true;
    ex->ids = ids;
    for (const engine::RoutingCapture& rc : r.captures->routing) {
        ex->moe_layers.push_back(int(rc.layer));
        ex->experts.push_back(rc.experts);
        ex->weights.push_back(rc.weights);
    }
    RunDocument doc;
    doc.experts = ex;
    const QString path = m_dir.filePath("experts.tsrun");
    engine::run::write_run_file(path.toStdString(), to_run_contents(doc), nullptr);
    const RunDocument back = run_document_from(engine::run::read_run_file(path.toStdString()), path);
    QVERIFY(back.experts);
    QVERIFY(back.parts().contains("experts"));
    QCOMPARE(back.experts->ids, ids);
    QCOMPARE(back.experts->moe_layers, ex->moe_layers);
    QCOMPARE(back.experts->experts, ex->experts);
    for (std::size_t l = 0; l < ex->weights.size(); ++l)
        for (std::size_t i = 0; i < ex->weights[l].size(); ++i)
            QCOMPARE(std::bit_cast<uint32_t>(back.experts->weights[l][i]), std::bit_cast<uint32_t>(ex->weights[l][i]));
    EngineController engine;
    ExpertsPanel panel(&engine);
    panel.showSaved(back.experts);
    QVERIFY(panel.snapshot() && panel.snapshot()->saved);
    QVERIFY2(panel.statusText().contains("Reopened from a saved run"), qPrintable(panel.statusText()));
    int routed = 0;
    for (const int c : panel.load()->counts())
        routed += c;
    QCOMPARE(routed, int(ids.size()) * 2);
    for (QPushButton* b : panel.findChildren<QPushButton*>())
        if (b->text() == "Show the change" || b->text() == "Scan")
            QVERIFY2(!b->isEnabled(), qPrintable(b->text()));
}

namespace {

// What a reader of the run sees, written out: every part with the numbers that show it read whole.
QString describe(const RunDocument& d)
{
    QStringList out;
    out << "parts: " + d.parts();
    if (d.model)
        out << QString("model: %1 (%2), %3 bytes, %4 layers")
                   .arg(d.model->name, d.model->architecture)
                   .arg(d.model->file_size)
                   .arg(d.model->n_layers);
    out << "sha256: " + d.model_sha256;
    if (d.stepper) {
        QStringList ids;
        for (const auto& t : d.stepper->tokens)
            ids << QString::number(t.id) + (t.forced ? "!" : "");
        out << QString("stepper: prompt %1, steps %2, action %3, tokens %4")
                   .arg(d.stepper->prompt_length)
                   .arg(d.stepper->steps)
                   .arg(d.stepper->action, ids.join(' '));
        out << "generated: " + d.stepper->generated_text;
        out << QString("distributions: %1; logits %2")
                   .arg(d.distributions.size())
                   .arg(d.stepper->logits ? d.stepper->logits->size() : 0);
        out << QString("sampling: T %1, top-k %2, seed %3, greedy %4")
                   .arg(double(d.stepper_settings.sampling.temperature))
                   .arg(d.stepper_settings.sampling.top_k)
                   .arg(d.stepper_settings.sampling.seed)
                   .arg(d.stepper_settings.greedy);
    }
    if (d.kv)
        out << QString("kv: %1 cached of %2, %3 bytes in use, %4 layers")
                   .arg(d.kv->tokens_cached)
                   .arg(d.kv->n_ctx)
                   .arg(d.kv->bytes_in_use)
                   .arg(d.kv->layers.size());
    if (d.timeline)
        out << QString("timeline: %1, %2 events, %3 steps, %4 prompt tokens")
                   .arg(d.timeline->source)
                   .arg(d.timeline->events.size())
                   .arg(d.timeline->steps.size())
                   .arg(d.timeline->prompt_tokens);
    if (d.attention) {
        double sum = 0.0;
        for (const auto& h : d.attention->heads)
            for (float w : h.weights)
                sum += double(w);
        out << QString("attention: %1 heads, %2 tokens, weights sum %3")
                   .arg(d.attention->heads.size())
                   .arg(d.attention->tokens.size())
                   .arg(sum, 0, 'f', 3);
    }
    if (d.text)
        out << QString("text: %1 tokens, perplexity %2").arg(d.text->tokens.size()).arg(d.text->perplexity, 0, 'g', 8);
    if (d.head_classes)
        out << QString("head classes: %1 × %2").arg(d.head_classes->n_layers).arg(d.head_classes->n_heads);
    if (d.steering)
        out << QString("steering: layer %1, default '%2', steered '%3'")
                   .arg(d.steering->settings.layer)
                   .arg(d.steering->default_text, d.steering->steered_text);
    return out.join('\n') + '\n';
}

QString fixtures_dir()
{
    return QStringLiteral(TOKENSCOPE_TEST_DATA_DIR "/runs");
}

} // namespace

void TestSavedRuns::committedRunsOpenUnchanged_data()
{
    QTest::addColumn<QString>("path");
    for (const QString& f : QDir(fixtures_dir()).entryList({"*.tsrun"}, QDir::Files, QDir::Name))
        QTest::newRow(qPrintable(f)) << fixtures_dir() + "/" + f;
}

// Runs written by earlier versions of the app and of `tokenscope-cli trace` (tests/data/runs, made by
// tests/reference/make_run_fixtures.sh) open as they did when they were written: every part, with
// the numbers committed beside each file (<file>.expected).
void TestSavedRuns::committedRunsOpenUnchanged()
{
    QFETCH(QString, path);
    const RunDocument doc = run_document_from(engine::run::read_run_file(path.toStdString()), path);
    const QString seen = describe(doc);
    QFile expected(path + ".expected");
    if (qEnvironmentVariableIsSet("TOKENSCOPE_WRITE_RUN_EXPECTATIONS")) {
        QVERIFY(expected.open(QIODevice::WriteOnly | QIODevice::Truncate));
        expected.write(seen.toUtf8());
        QSKIP("expectation written");
    }
    QVERIFY2(expected.open(QIODevice::ReadOnly), qPrintable(path + ".expected is missing"));
    QCOMPARE(seen, QString::fromUtf8(expected.readAll()));
}

// The app's fixture: a run saved by this app from the model it was given (make_run_fixtures.sh: a
// generated gemma3 with the built-in byte-level vocabulary, so the file stays small). Only when asked.
void TestSavedRuns::writeAppFixture()
{
    const QString out = qEnvironmentVariable("TOKENSCOPE_WRITE_RUN_FIXTURE");
    if (out.isEmpty())
        QSKIP("writes tests/data/runs/app-*.tsrun only when asked (tests/reference/make_run_fixtures.sh)");
    auto engine = std::make_unique<EngineController>();
    ConversationStore store(m_dir.filePath("fixture.sqlite"), "fixture");
    auto window = std::make_unique<MainWindow>(engine.get(), &store);
    window->setDialogsEnabled(false);
    window->resize(1400, 900);
    window->show();
    QSignalSpy loaded(engine.get(), &EngineController::modelLoaded);
    engine->loadModel(QString::fromStdString(m_path), 2, 512);
    QVERIFY(loaded.wait(120000));
    StepperPanel* stepper = window->stepperPanel();
    StepperSettings settings = stepper->settings();
    settings.sampling.temperature = 0.9f;
    settings.sampling.seed = 7;
    stepper->setSettings(settings);
    stepper->setPrompt("The old lighthouse keeper climbed");
    const auto does = [&](const std::function<void()>& action) {
        QSignalSpy changed(stepper, &StepperPanel::stateChanged);
        action();
        return testsupport::seen(changed, 1, 120000) && stepper->lastError().isEmpty();
    };
    QVERIFY(does([&] { stepper->prefill(); }));
    QVERIFY(does([&] { stepper->step(); }));
    QVERIFY(does([&] { stepper->step(stepper->preview().stages.front().top.at(2).id); }));
    QVERIFY(does([&] { stepper->step(); }));
    AttentionPanel* attention = window->attentionPanel();
    QSignalSpy captured(attention, &AttentionPanel::captured);
    attention->setPrompt("The cat sat on the mat");
    attention->run();
    QVERIFY(testsupport::seen(captured));
    QSignalSpy analyzed(window->textPanel(), &TextPanel::analyzed);
    window->textPanel()->analyze("A saved run keeps every token's surprisal.");
    QVERIFY(testsupport::seen(analyzed, 1, 300000));
    LabHeadsTab* heads = window->labPanel()->headsTab();
    QSignalSpy classified(heads, &LabHeadsTab::classified);
    heads->classify();
    QVERIFY(testsupport::seen(classified, 1, 300000));
    LabSteeringTab* steering = window->labPanel()->steeringTab();
    QSignalSpy steered(steering, &LabSteeringTab::finished);
    steering->run({"I love this", "I hate this", "The film was", 1, 4.0, 4});
    QVERIFY(testsupport::seen(steered, 1, 300000));
    QSignalSpy saved(window.get(), &MainWindow::runSaved);
    window->saveRun(out);
    QVERIFY(testsupport::seen(saved, 1, 120000));
    QVERIFY2(saved.at(0).at(1).toString().isEmpty(), qPrintable(saved.at(0).at(1).toString()));
}

QTEST_MAIN(TestSavedRuns)
#include "test_saved_runs.moc"
