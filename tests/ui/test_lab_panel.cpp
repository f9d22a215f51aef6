// SPDX-License-Identifier: GPL-3.0-or-later
// The lab panel driven offscreen on the real models (small random-weight twins under the
// sanitizers): its patching grid and its attribution waterfall hold exactly what the engine's lab
// computes for the same input on an independent backend; Stop leaves the cells not run empty and
// says so; prompts of different lengths are refused with both counts; every export format is
// written and reads back; the stepper's Attribute sends its sequence and the token Step would take.
#include "bridge/engine_controller.h"
#include "bridge/lab_client.h"
#include "bridge/token_selection.h"
#include "lab/ablation_scan.h"
#include "lab/attribution.h"
#include "lab/head_classes.h"
#include "lab/patching.h"
#include "lab/steering.h"
#include "model/model.h"
#include "model/test_model.h"
#include "panels/lab_heads_tab.h"
#include "panels/lab_panel.h"
#include "panels/lab_steering_tab.h"
#include "panels/stepper_panel.h"
#include "session/generator.h"
#include "session/session.h"
#include "signal_wait.h"
#include "test_paths.h"
#include "text_review.h"
#include "widgets/attribution_waterfall.h"
#include "widgets/effect_grid.h"
#include "widgets/model_head_map.h"

#include <QFile>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLineEdit>
#include <QPushButton>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <cmath>

using namespace tokenscope::ui;

// The order the suite loads the model in (below) and holds the app's numbers to.
constexpr engine::WeightOrder kLabOrder = engine::WeightOrder::Plain;

namespace {

const QString kClean = "The Eiffel Tower is in the city of";
const QString kCorrupt = "The Colosseum is in the city of";

// The engine's own patching of the same settings, on a backend of its own.
engine::PatchingResult engine_patching(const std::shared_ptr<const engine::Model>& model, const PatchingSettings& s)
{
    auto backend = engine::make_cpu_backend(model, {.threads = 0, .n_ctx = 257, .order = kLabOrder});
    engine::PatchingRequest req;
    req.clean = model->tokenizer().encode_ids(s.clean.toStdString());
    req.corrupted = model->tokenizer().encode_ids(s.corrupted.toStdString());
    req.metric = {engine::PatchMetric::Kind(s.metric),
                  engine::single_token(model->tokenizer(), s.token_a.toStdString()),
                  engine::single_token(model->tokenizer(), s.token_b.toStdString())};
    req.over = engine::PatchOver(s.over);
    return engine::run_patching(*backend, req);
}

bool same(double a, double b)
{
    return (std::isnan(a) && std::isnan(b)) || a == b;
}

} // namespace

class TestLabPanel : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void cleanup(); // after every function: the words its state shows, proofread
    void patchingGridIsTheEngines_data();
    void patchingGridIsTheEngines();
    void stopLeavesTheCellsNotRunEmpty();
    void promptsOfDifferentLengthsAreRefused();
    void everyExportFormatReadsBack();
    void attributionWaterfallIsTheEngines();
    void stepperAttributeSendsItsSequence();
    void headClassesAreTheEngines();
    void ablationScanAndSelectionAreTheEngines();
    void steeringSideBySideAndExport();
    void steeringAppliesToTheStepper();
    void chatModel();
    void softCappedAttributionSaysSo();

private:
    std::shared_ptr<const PatchingSnapshot> patch(LabPanel& lab, const PatchingSettings& s);
    PatchingSettings settings(int over) const;

    std::shared_ptr<const engine::Model> m_model;
    std::unique_ptr<EngineController> m_engine;
    std::unique_ptr<LabPanel> m_lab;
};

void TestLabPanel::initTestCase()
{
    REQUIRE_DEFAULT_MODEL(path);
    m_model = engine::Model::load(path);
    m_engine = std::make_unique<EngineController>();
    m_lab = std::make_unique<LabPanel>(m_engine.get());
    m_lab->resize(1000, 760);
    m_lab->show();
    QSignalSpy loaded(m_engine.get(), &EngineController::modelLoaded);
    // llama.cpp's plain order: in its repacked one (the app's default) a batch's whole groups of four
    // tokens sum otherwise than the rest, so a stepper prefill that reuses part of its cache would not
    // give a full prefill's bits, which steeringAppliesToTheStepper compares (its lab sessions follow)
    m_engine->loadModel(QString::fromStdString(path), 2, 512, "cpu-plain");
    QVERIFY(loaded.wait(120000));
    const auto a = m_model->tokenizer().encode_ids(kClean.toStdString());
    const auto b = m_model->tokenizer().encode_ids(kCorrupt.toStdString());
    QCOMPARE(a.size(), b.size()); // the test's prompts pair up on this tokenizer
}

void TestLabPanel::cleanup()
{
    if (m_lab)
        QVERIFY_WORDING(m_lab.get());
}

PatchingSettings TestLabPanel::settings(int over) const
{
    PatchingSettings s;
    s.clean = kClean;
    s.corrupted = kCorrupt;
    s.metric = 0;
    s.token_a = " Paris";
    s.token_b = " Rome";
    s.over = over;
    return s;
}

std::shared_ptr<const PatchingSnapshot> TestLabPanel::patch(LabPanel& lab, const PatchingSettings& s)
{
    QSignalSpy done(&lab, &LabPanel::patchingFinished);
    lab.runPatching(s);
    if (!testsupport::seen(done, 1, 300000))
        return nullptr;
    return lab.patching();
}

void TestLabPanel::patchingGridIsTheEngines_data()
{
    QTest::addColumn<int>("over");
    QTest::newRow("residual") << 0;
    QTest::newRow("heads") << 3;
}

void TestLabPanel::patchingGridIsTheEngines()
{
    QFETCH(int, over);
    const PatchingSettings s = settings(over);
    const auto snap = patch(*m_lab, s);
    QVERIFY(snap);
    QVERIFY2(snap->error.isEmpty(), qPrintable(snap->error));
    const engine::PatchingResult want = engine_patching(m_model, s);
    QCOMPARE(snap->n_layers, int(want.n_layers));
    QCOMPARE(snap->n_columns, int(want.n_columns));
    QCOMPARE(snap->runs, int(want.runs));
    QCOMPARE(snap->clean_metric, want.clean_metric);
    QCOMPARE(snap->corrupted_metric, want.corrupted_metric);
    for (uint32_t l = 0; l < want.n_layers; ++l)
        for (uint32_t c = 0; c < want.n_columns; ++c)
            QVERIFY2(same(snap->effect[l][c], want.effect[l][c]),
                     qPrintable(
                         QString("cell %1,%2: %3 vs %4").arg(l).arg(c).arg(snap->effect[l][c]).arg(want.effect[l][c])));
    QVERIFY(!m_lab->grid()->empty());
    if (over == 0) {
        // the last layer's residual at the last position is the clean run: exactly 1
        const QString last = m_lab->grid()->cellText(snap->n_layers - 1, snap->n_columns - 1);
        QVERIFY2(last.contains("effect 1.0000"), qPrintable(last));
        QCOMPARE(snap->corrupted_pieces.size(), snap->n_columns);
    } else {
        QCOMPARE(snap->n_columns, int(m_model->config().n_head[0]));
    }
    QVERIFY2(m_lab->patchingStatus().contains(QString("%1 runs").arg(snap->runs)), qPrintable(m_lab->patchingStatus()));
}

void TestLabPanel::stopLeavesTheCellsNotRunEmpty()
{
    QSignalSpy done(m_lab.get(), &LabPanel::patchingFinished);
    auto* stop = m_lab->findChild<QPushButton*>("labStopPatching");
    QVERIFY(stop);
    auto clicked = std::make_shared<bool>(false);
    const auto c = connect(&m_engine->lab(), &LabClient::labProgress, this, [&, clicked](quint64, int d, int) {
        if (d >= 3 && !*clicked) {
            *clicked = true;
            QVERIFY(stop->isEnabled());
            QTest::mouseClick(stop, Qt::LeftButton);
        }
    });
    m_lab->runPatching(settings(0));
    QVERIFY(testsupport::seen(done, 1, 300000));
    disconnect(c);
    const auto snap = m_lab->patching();
    QVERIFY(snap);
    QVERIFY(snap->cancelled);
    const int total = snap->n_layers * snap->n_columns;
    QVERIFY2(snap->runs >= 3 && snap->runs < total, qPrintable(QString("%1 of %2").arg(snap->runs).arg(total)));
    int nan = 0;
    for (const auto& row : snap->effect)
        for (double v : row)
            nan += std::isnan(v) ? 1 : 0;
    QCOMPARE(nan, total - snap->runs);
    QVERIFY(m_lab->patchingStatus().startsWith("Stopped"));
    QVERIFY(!m_lab->patchingRunning());
    QVERIFY(!stop->isEnabled());
}

void TestLabPanel::promptsOfDifferentLengthsAreRefused()
{
    PatchingSettings s = settings(0);
    s.corrupted = "Rome";
    QSignalSpy done(m_lab.get(), &LabPanel::patchingFinished);
    m_lab->runPatching(s);
    QVERIFY(testsupport::seen(done));
    const auto clean = m_model->tokenizer().encode_ids(s.clean.toStdString());
    const auto corrupt = m_model->tokenizer().encode_ids(s.corrupted.toStdString());
    const QString status = m_lab->patchingStatus();
    QVERIFY2(status.contains(QString("%1 tokens").arg(clean.size())) &&
                 status.contains(QString::number(corrupt.size())) && status.contains("same number of tokens"),
             qPrintable(status));
    QVERIFY(!m_lab->grid()->empty()); // the last good result stays on screen
}

void TestLabPanel::everyExportFormatReadsBack()
{
    const auto snap = patch(*m_lab, settings(3));
    QVERIFY(snap && snap->error.isEmpty());
    QTemporaryDir dir;
    QString error;
    const QString csv = dir.filePath("p.csv"), json = dir.filePath("p.json"), png = dir.filePath("p.png"),
                  svg = dir.filePath("p.svg");
    QVERIFY2(m_lab->exportCsv(csv, &error), qPrintable(error));
    QVERIFY2(m_lab->exportJson(json, &error), qPrintable(error));
    QVERIFY2(m_lab->exportImage(png, &error), qPrintable(error));
    QVERIFY2(m_lab->exportImage(svg, &error), qPrintable(error));
    QFile f(csv);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QList<QByteArray> lines = f.readAll().trimmed().split('\n');
    QCOMPARE(lines.size(), snap->n_layers + 1);
    QCOMPARE(lines[1].trimmed().split(',').size(), snap->n_columns + 1);
    QCOMPARE(lines[1].split(',')[1].toDouble(), snap->effect[0][0]);
    QFile j(json);
    QVERIFY(j.open(QIODevice::ReadOnly));
    const auto doc = QJsonDocument::fromJson(j.readAll()).object();
    QCOMPARE(doc["layers"].toInt(), snap->n_layers);
    QCOMPARE(doc["heads"].toInt(), snap->n_columns);
    QCOMPARE(doc["effect"].toArray()[2].toArray()[1].toDouble(), snap->effect[2][1]);
    QImage image(png);
    QVERIFY(!image.isNull());
    QVERIFY(image.width() >= 1440);
    QFile s(svg);
    QVERIFY(s.open(QIODevice::ReadOnly));
    const QByteArray svg_text = s.readAll();
    QVERIFY(svg_text.contains("<svg"));
    // empty: nothing to export yet on a new panel
    LabPanel fresh(m_engine.get());
    QVERIFY(!fresh.exportCsv(dir.filePath("none.csv"), &error));
    QVERIFY(error.contains("Nothing to export"));
}

void TestLabPanel::attributionWaterfallIsTheEngines()
{
    QSignalSpy done(m_lab.get(), &LabPanel::attributionFinished);
    m_lab->attribute(kClean);
    QVERIFY(testsupport::seen(done, 1, 120000));
    const auto snap = m_lab->attribution();
    QVERIFY(snap);
    QVERIFY2(snap->error.isEmpty(), qPrintable(snap->error));
    auto backend = engine::make_cpu_backend(m_model, {.threads = 0, .n_ctx = 257, .order = kLabOrder});
    const auto ids = m_model->tokenizer().encode_ids(kClean.toStdString());
    const auto logits = engine::run_fresh(*backend, ids).logits;
    const int best = int(std::max_element(logits.begin(), logits.end()) - logits.begin());
    QCOMPARE(snap->token_id, best);
    const engine::Attribution want = engine::attribute_logit(*backend, ids, best);
    QCOMPARE(snap->logit, want.logit);
    QCOMPARE(snap->parts.size(), want.parts.size());
    for (std::size_t i = 0; i < want.parts.size(); ++i) {
        QCOMPARE(snap->parts[i].value, want.parts[i].value);
        QCOMPARE(snap->parts[i].name, QString::fromStdString(want.parts[i].name));
    }
    // the waterfall's bars add up to its last bar, the logit
    const auto& bars = m_lab->waterfall()->bars();
    QVERIFY(bars.size() >= 3);
    double sum = 0.0;
    for (std::size_t i = 0; i + 1 < bars.size(); ++i)
        sum += bars[i].value;
    QCOMPARE(bars.back().value, snap->logit);
    QVERIFY2(std::abs(sum - snap->logit) <= 1e-4 * std::max(1.0, std::abs(snap->logit)),
             qPrintable(QString("%1 vs %2").arg(sum).arg(snap->logit)));
    QVERIFY(m_lab->attributionStatus().contains(QString("sum of %1 parts").arg(snap->parts.size())));
}

void TestLabPanel::stepperAttributeSendsItsSequence()
{
    TokenSelection selection;
    StepperPanel stepper(m_engine.get(), &selection);
    stepper.resize(1000, 700);
    stepper.show();
    connect(&stepper, &StepperPanel::attributeRequested, m_lab.get(),
            [this](const std::vector<int32_t>& ids, int token) { m_lab->attribute(QString(), ids, token); });
    QSignalSpy state(&stepper, &StepperPanel::stateChanged);
    stepper.setPrompt("The capital of France is");
    stepper.prefill();
    QVERIFY(testsupport::seen(state, 1, 120000));
    auto* button = stepper.findChild<QPushButton*>("stepperAttribute");
    QVERIFY(button && button->isEnabled());
    QSignalSpy done(m_lab.get(), &LabPanel::attributionFinished);
    QTest::mouseClick(button, Qt::LeftButton);
    QVERIFY(testsupport::seen(done, 1, 120000));
    const auto snap = m_lab->attribution();
    QVERIFY(snap && snap->error.isEmpty());
    QCOMPARE(snap->token_id, stepper.preview().token);
    QCOMPARE(snap->position, stepper.state()->prompt_length - 1);
    QVERIFY2(m_lab->attributionStatus().startsWith("The stepper's sequence"), qPrintable(m_lab->attributionStatus()));
    // the prompt field is still the user's: Attribute runs it, not a description of the sequence
    auto* prompt = m_lab->findChild<QLineEdit*>("labPrompt");
    QVERIFY(prompt);
    QCOMPARE(prompt->text(), kClean);
}

void TestLabPanel::headClassesAreTheEngines()
{
    LabHeadsTab* tab = m_lab->headsTab();
    QSignalSpy done(tab, &LabHeadsTab::classified);
    tab->classify(24, 1);
    QVERIFY(testsupport::seen(done, 1, 120000));
    const auto snap = tab->classes();
    QVERIFY(snap && snap->error.isEmpty());
    auto backend = engine::make_cpu_backend(m_model, {.threads = 0, .n_ctx = 257, .order = kLabOrder});
    const auto want = engine::classify_heads(*backend, engine::make_head_probe(m_model->tokenizer(), 24, 1));
    QCOMPARE(snap->heads.size(), want.size());
    for (const auto& w : want) {
        const HeadInfo& got = snap->heads[std::size_t(w.layer) * std::size_t(snap->n_heads) + w.head];
        QCOMPARE(got.cls, int(w.cls));
        for (std::size_t k = 0; k < engine::kHeadScoreCount; ++k)
            QCOMPARE(got.scores[k], w.score[k]);
        QCOMPARE(got.entropy, w.entropy);
    }
    QCOMPARE(tab->table()->rowCount(), int(want.size()));
    // the table shows every column whole in the panel (it was cut, scrolled sideways)
    m_lab->showTab(2);
    QTest::qWait(20);
    QCOMPARE(tab->table()->horizontalScrollBar()->maximum(), 0);
    QVERIFY2(tab->status().contains(QString("%1 heads classified").arg(want.size())), qPrintable(tab->status()));
    const QString tip = tab->grid()->headText(int(want[0].layer), int(want[0].head));
    QVERIFY2(tip.contains("class:"), qPrintable(tip));
}

void TestLabPanel::ablationScanAndSelectionAreTheEngines()
{
    LabHeadsTab* tab = m_lab->headsTab();
    AblationSettings s;
    s.prompt = kClean;
    QSignalSpy scanned(tab, &LabHeadsTab::scanFinished);
    tab->scan(s);
    QVERIFY(testsupport::seen(scanned, 1, 300000));
    const auto snap = tab->scanned();
    QVERIFY(snap && snap->error.isEmpty());
    auto backend = engine::make_cpu_backend(m_model, {.threads = 0, .n_ctx = 257, .order = kLabOrder});
    const auto ids = m_model->tokenizer().encode_ids(kClean.toStdString());
    const engine::AblationScan want = engine::scan_head_ablations(*backend, ids, engine::AblationMode::Zero);
    QCOMPARE(snap->runs, int(want.runs));
    for (const auto& e : want.heads) {
        const HeadInfo& got = snap->heads[std::size_t(e.layer) * std::size_t(snap->n_heads) + e.head];
        QCOMPARE(got.kl, e.kl);
        QCOMPARE(got.logit_change, e.logit_change);
    }
    // two heads clicked in the grid, ablated together
    ModelHeadMap* grid = tab->grid();
    grid->setSelected({});
    const QRectF area(40, 22, grid->width() - 190, grid->height() - 30);
    const int heads = int(m_model->config().n_head[0]), layers = int(m_model->config().n_layer);
    const auto centre = [&](int l, int h) {
        return QPoint(int(area.left() + (h + 0.5) * area.width() / heads),
                      int(area.top() + (l + 0.5) * area.height() / layers));
    };
    QTest::mouseClick(grid, Qt::LeftButton, {}, centre(1, 0));
    QTest::mouseClick(grid, Qt::LeftButton, {}, centre(layers - 2, heads - 1));
    QCOMPARE(grid->selected(), (std::set<std::pair<int, int>>{{1, 0}, {layers - 2, heads - 1}}));
    QSignalSpy ablated(tab, &LabHeadsTab::ablated);
    auto* button = tab->findChild<QPushButton*>("labAblate");
    QVERIFY(button && button->isEnabled());
    QTest::mouseClick(button, Qt::LeftButton);
    QVERIFY(testsupport::seen(ablated, 1, 120000));
    const auto a = tab->ablation();
    QVERIFY(a && a->error.isEmpty());
    const std::vector<engine::HeadRef> refs = {{1, 0}, {uint32_t(layers - 2), uint32_t(heads - 1)}};
    const auto ivs = engine::head_ablations(*backend, refs, engine::AblationMode::Zero, uint32_t(ids.size()));
    const auto base = engine::run_fresh(*backend, ids).logits;
    const auto off = engine::run_fresh(*backend, ids, nullptr, ivs).logits;
    QCOMPARE(a->kl, engine::kl_divergence(base, off));
    QCOMPARE(int(a->before.size()), 10);
    QCOMPARE(a->logit, double(base[std::size_t(a->before[0].id)]));
    QCOMPARE(a->ablated_logit, double(off[std::size_t(a->before[0].id)]));
    // the CSV holds every head
    QTemporaryDir dir;
    QString error;
    QVERIFY2(tab->exportCsv(dir.filePath("h.csv"), &error), qPrintable(error));
    QFile f(dir.filePath("h.csv"));
    QVERIFY(f.open(QIODevice::ReadOnly));
    QCOMPARE(f.readAll().trimmed().split('\n').size(), layers * heads + 1);
}

void TestLabPanel::steeringSideBySideAndExport()
{
    LabSteeringTab* tab = m_lab->steeringTab();
    SteeringSettings s = tab->settings();
    s.layer = std::min(6, int(m_model->config().n_layer) - 1); // the small models under the sanitizers have fewer
    s.strength = 2.0;
    s.tokens = 12;
    QSignalSpy done(tab, &LabSteeringTab::finished);
    tab->run(s);
    QVERIFY(testsupport::seen(done, 1, 120000));
    const auto r = tab->result();
    QVERIFY(r);
    QVERIFY2(r->error.isEmpty(), qPrintable(r->error));
    // the engine's own greedy continuations with and without the same steering
    auto lab = engine::make_cpu_backend(m_model, {.threads = 0, .n_ctx = 257, .order = kLabOrder});
    const engine::Tokenizer& tok = m_model->tokenizer();
    const engine::SteeringVector v = engine::steering_vector(*lab, tok.encode_ids(s.plus.toStdString()),
                                                             tok.encode_ids(s.minus.toStdString()), uint32_t(s.layer));
    QCOMPARE(r->direction, v.direction);
    const auto continuation = [&](bool steered) {
        engine::Session session(m_model,
                                engine::make_cpu_backend(m_model, {.threads = 0, .n_ctx = 64, .order = kLabOrder}));
        if (steered)
            session.set_interventions({engine::steering_intervention(v, 2.0f)});
        engine::SamplerConfig greedy;
        greedy.temperature = 0.0f;
        engine::Sampler sampler(greedy);
        engine::GenerationOptions o;
        o.max_tokens = 12;
        return QString::fromStdString(engine::generate(session, sampler, s.prompt.toStdString(), o).text);
    };
    QCOMPARE(r->default_text, continuation(false));
    QCOMPARE(r->steered_text, continuation(true));
    QVERIFY(r->kl > 0.0);
    QTemporaryDir dir;
    QString error;
    QVERIFY2(tab->exportControlVector(dir.filePath("cv.gguf"), &error), qPrintable(error));
    const auto file = engine::gguf::GgufFile::open(dir.filePath("cv.gguf").toStdString());
    QCOMPARE(QString::fromStdString(file->tensors().at(0).name), QString("direction.%1").arg(s.layer));
    const auto bytes = file->tensor_data(file->tensors()[0]);
    QVERIFY(std::memcmp(bytes.data(), v.direction.data(), bytes.size()) == 0);
}

void TestLabPanel::steeringAppliesToTheStepper()
{
    LabSteeringTab* tab = m_lab->steeringTab();
    TokenSelection selection;
    StepperPanel stepper(m_engine.get(), &selection);
    const auto prefill = [&] {
        QSignalSpy state(&stepper, &StepperPanel::stateChanged);
        stepper.setPrompt("The weather today is");
        stepper.prefill();
        if (!testsupport::seen(state, 1, 120000))
            return std::vector<float>{};
        return *stepper.state()->logits;
    };
    const std::vector<float> plain = prefill();
    QVERIFY(!plain.empty());
    QSignalSpy applied(tab, &LabSteeringTab::appliedChanged);
    SteeringSettings s = tab->settings();
    tab->applyToSessions(true);
    QVERIFY(testsupport::seen(applied, 1, 60000));
    QVERIFY(tab->applied());
    const std::vector<float> steered = prefill();
    QVERIFY(!steered.empty());
    // the stepper's prefill is the engine's steered prefill (batches of 128, as the app's sessions)
    auto lab = engine::make_cpu_backend(m_model, {.threads = 0, .n_ctx = 257, .order = kLabOrder});
    const engine::Tokenizer& tok = m_model->tokenizer();
    const engine::SteeringVector v = engine::steering_vector(*lab, tok.encode_ids(s.plus.toStdString()),
                                                             tok.encode_ids(s.minus.toStdString()), uint32_t(s.layer));
    engine::Session session(m_model,
                            engine::make_cpu_backend(m_model, {.threads = 0, .n_ctx = 512, .order = kLabOrder}), 128);
    session.set_interventions({engine::steering_intervention(v, float(s.strength))});
    session.prefill(tok.encode_ids("The weather today is"));
    QVERIFY(std::equal(steered.begin(), steered.end(), session.logits().begin(), session.logits().end()));
    QVERIFY(steered != plain);
    tab->applyToSessions(false);
    QVERIFY(testsupport::seen(applied, 2, 60000));
    QVERIFY(!tab->applied());
    QCOMPARE(prefill(), plain); // off again: the unsteered bits
}

// gemma2's final soft-cap bends the logit through tanh after the head: the waterfall shows that bend as
// its own part and the status says the other parts add up to the uncapped logit.
void TestLabPanel::softCappedAttributionSaysSo()
{
    QTemporaryDir dir;
    const QString path = dir.filePath("gemma2.gguf");
    engine::make_test_model("gemma2", 1).write(path.toStdString());
    EngineController engine;
    LabPanel lab(&engine);
    lab.resize(1000, 760);
    lab.show();
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    engine.loadModel(path, 1, 256, "cpu-plain");
    QVERIFY(loaded.wait(120000));
    QSignalSpy attributed(&lab, &LabPanel::attributionFinished);
    lab.attribute("hello world");
    QVERIFY(testsupport::seen(attributed, 1, 120000));
    const auto snap = lab.attribution();
    QVERIFY(snap && snap->error.isEmpty());
    const auto cap = std::find_if(snap->parts.begin(), snap->parts.end(), [](const AttributionPartUi& p) {
        return p.kind == int(engine::AttributionPart::Kind::SoftCap);
    });
    QVERIFY(cap != snap->parts.end());
    QVERIFY(cap->value != 0.0);
    const QString status = lab.attributionStatus();
    QVERIFY2(status.contains(QString("the final soft-cap bends it by %1").arg(cap->value, 0, 'f', 4)),
             qPrintable(status));
    QVERIFY2(status.contains(QString("the uncapped %1").arg(snap->logit - cap->value, 0, 'f', 4)), qPrintable(status));
}

void TestLabPanel::chatModel()
{
    REQUIRE_CHAT_MODEL(path);
    const auto model = engine::Model::load(path);
    EngineController engine;
    LabPanel lab(&engine);
    lab.resize(1000, 760);
    lab.show();
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    engine.loadModel(QString::fromStdString(path), 2, 512, "cpu-plain");
    QVERIFY(loaded.wait(120000));
    PatchingSettings s;
    s.clean = "total = price +";
    s.corrupted = "total = price -";
    s.token_a = " tax";
    s.token_b = " discount";
    QCOMPARE(model->tokenizer().encode_ids(s.clean.toStdString()).size(),
             model->tokenizer().encode_ids(s.corrupted.toStdString()).size());
    const auto snap = patch(lab, s);
    QVERIFY(snap);
    QVERIFY2(snap->error.isEmpty(), qPrintable(snap->error));
    const engine::PatchingResult want = engine_patching(model, s);
    QCOMPARE(snap->n_layers, int(model->config().n_layer));
    for (uint32_t l = 0; l < want.n_layers; ++l)
        for (uint32_t c = 0; c < want.n_columns; ++c)
            QVERIFY(same(snap->effect[l][c], want.effect[l][c]));
    QCOMPARE(snap->effect[want.n_layers - 1][want.n_columns - 1], 1.0);
    QSignalSpy attributed(&lab, &LabPanel::attributionFinished);
    lab.attribute("def add(a, b):\n    return a +");
    QVERIFY(testsupport::seen(attributed, 1, 120000));
    QVERIFY(lab.attribution() && lab.attribution()->error.isEmpty());
    QCOMPARE(int(lab.attribution()->parts.size()),
             int(1 + model->config().n_layer * (model->config().n_head[0] + 2) + 1));
    // the heads tab on 24 layers of 14 heads, and steering
    QSignalSpy classified(lab.headsTab(), &LabHeadsTab::classified);
    lab.headsTab()->classify(24, 1);
    QVERIFY(testsupport::seen(classified, 1, 120000));
    const auto classes = lab.headsTab()->classes();
    QVERIFY(classes && classes->error.isEmpty());
    QCOMPARE(classes->n_heads, int(model->config().n_head[0]));
    auto backend = engine::make_cpu_backend(model, {.threads = 0, .n_ctx = 257, .order = kLabOrder});
    const auto scores = engine::classify_heads(*backend, engine::make_head_probe(model->tokenizer(), 24, 1));
    for (const auto& w : scores)
        QCOMPARE(classes->heads[std::size_t(w.layer) * std::size_t(classes->n_heads) + w.head].scores[1], w.score[1]);
    QSignalSpy steered(lab.steeringTab(), &LabSteeringTab::finished);
    SteeringSettings st = lab.steeringTab()->settings();
    st.tokens = 8;
    lab.steeringTab()->run(st);
    QVERIFY(testsupport::seen(steered, 1, 120000));
    QVERIFY(lab.steeringTab()->result() && lab.steeringTab()->result()->error.isEmpty());
    QCOMPARE(lab.steeringTab()->result()->settings.layer, int(model->config().n_layer) / 3);
}

QTEST_MAIN(TestLabPanel)
#include "test_lab_panel.moc"
