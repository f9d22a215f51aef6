// SPDX-License-Identifier: GPL-3.0-or-later
// The attention explorer on the real default model: every cell shown equals the engine's captured
// weight; rows sum to 1 and masked cells are empty; changing layer or head updates the view; the
// Q·K breakdown's softmaxed score equals the weight shown; mean over heads; the "bank" comparison's
// difference map; CSV/JSON exports equal the captured matrix, PNG/SVG are written; a clicked query
// row selects that token in the other panels; the model's current sequence can be explored; an
// over-long sequence is refused clearly.
#include "app_weight_order.h"
#include "backend/backend.h"
#include "bridge/engine_controller.h"
#include "bridge/token_selection.h"
#include "model/model.h"
#include "panels/attention_panel.h"
#include "panels/stepper_panel.h"
#include "session/session.h"
#include "test_paths.h"
#include "text_review.h"
#include "widgets/attention_heatmap.h"
#include "widgets/attention_views.h"

#include <QComboBox>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLocale>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <cmath>

using namespace tokenscope::ui;

class TestAttentionPanel : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void cleanup(); // after every function: the words its state shows, proofread
    void cellsEqualTheEngineCapture();
    void layerAndHeadChangeTheView();
    void qkBreakdownGivesTheWeight();
    void softCappedBreakdown();
    void heatmapHasAColourScale();
    void wholeModelGridScrollsInsteadOfCutting();
    void meanOverHeads();
    void exportsEqualTheMatrix();
    void selectingARowSelectsTheToken();
    void bankComparison();
    void currentSequence();
    void tooLongIsRefused();

private:
    // The same pass in an independent session: the reference for every cell.
    engine::AttentionCapture reference(const QString& text, int layer, int head);
    bool waitCaptured(const std::function<void()>& action);

    std::shared_ptr<const engine::Model> m_model;
    std::unique_ptr<EngineController> m_engine;
    std::unique_ptr<TokenSelection> m_selection;
    std::unique_ptr<AttentionPanel> m_panel;
    const QString m_prompt = "The cat sat on the mat because it was tired.";
};

void TestAttentionPanel::initTestCase()
{
    REQUIRE_DEFAULT_MODEL(path);
    m_model = engine::Model::load(path);
    m_engine = std::make_unique<EngineController>();
    m_selection = std::make_unique<TokenSelection>();
    m_panel = std::make_unique<AttentionPanel>(m_engine.get(), m_selection.get());
    m_panel->resize(1200, 800);
    m_panel->show();
    QSignalSpy loaded(m_engine.get(), &EngineController::modelLoaded);
    m_engine->loadModel(QString::fromStdString(path), 2, 512);
    QVERIFY(loaded.wait(120000));
}

void TestAttentionPanel::cleanup()
{
    if (m_panel)
        QVERIFY_WORDING(m_panel.get());
}

engine::AttentionCapture TestAttentionPanel::reference(const QString& text, int layer, int head)
{
    engine::Session s(m_model, engine::make_cpu_backend(m_model, testsupport::app_cpu_options(2, 2048)), 2048);
    engine::CaptureRequest capture;
    capture.heads.emplace_back(uint32_t(layer), uint32_t(head));
    s.prefill(m_model->tokenizer().encode_ids(text.toStdString()), &capture);
    return s.last_captures()->attention.at(0);
}

bool TestAttentionPanel::waitCaptured(const std::function<void()>& action)
{
    QSignalSpy captured(m_panel.get(), &AttentionPanel::captured);
    action();
    return captured.wait(60000);
}

void TestAttentionPanel::cellsEqualTheEngineCapture()
{
    m_panel->showHead(3, 2);
    m_panel->setPrompt(m_prompt);
    QVERIFY(waitCaptured([&] { m_panel->run(); }));
    const AttentionHead* h = m_panel->currentHead();
    QVERIFY(h);
    QCOMPARE(h->layer, 3);
    QCOMPARE(h->head, 2);
    const engine::AttentionCapture ref = reference(m_prompt, 3, 2);
    const int n = int(ref.n_queries);
    QCOMPARE(m_panel->heatmap()->n(), n);
    for (int r = 0; r < n; ++r) {
        double sum = 0;
        for (int c = 0; c < n; ++c) {
            const float shown = m_panel->heatmap()->value(r, c);
            QCOMPARE(shown, ref.weights[std::size_t(r) * std::size_t(n) + std::size_t(c)]);
            if (c > r) {
                QVERIFY(m_panel->heatmap()->masked(r, c));
                QCOMPARE(shown, 0.0f); // masked: empty, drawn hatched
            } else {
                QVERIFY(!m_panel->heatmap()->masked(r, c));
            }
            sum += double(shown);
        }
        QVERIFY(std::abs(sum - 1.0) < 1e-5);
    }
}

void TestAttentionPanel::layerAndHeadChangeTheView()
{
    QVERIFY(waitCaptured([&] { m_panel->showHead(5, 1); })); // layer 5 is captured on demand
    QCOMPARE(m_panel->layer(), 5);
    QCOMPARE(m_panel->head(), 1);
    const engine::AttentionCapture ref = reference(m_prompt, 5, 1);
    const int n = int(ref.n_queries);
    for (int r = 0; r < n; ++r)
        for (int c = 0; c <= r; ++c)
            QCOMPARE(m_panel->heatmap()->value(r, c), ref.weights[std::size_t(r) * std::size_t(n) + std::size_t(c)]);
    m_panel->showHead(5, 3); // same layer: no new pass
    QCOMPARE(m_panel->currentHead()->head, 3);
    const engine::AttentionCapture ref3 = reference(m_prompt, 5, 3);
    QCOMPARE(m_panel->heatmap()->value(n - 1, 0), ref3.weights[std::size_t(n - 1) * std::size_t(n)]);
}

void TestAttentionPanel::qkBreakdownGivesTheWeight()
{
    const AttentionHead* h = m_panel->currentHead();
    QVERIFY(h);
    for (int r : {3, 7, h->n - 1})
        for (int c : {0, 1, r / 2, r}) {
            m_panel->selectCell(r, c);
            const QkBreakdown& b = m_panel->qkView()->breakdown();
            QVERIFY(!b.masked);
            const double shown = double(m_panel->heatmap()->value(r, c));
            QVERIFY2(std::abs(b.weight - shown) < 1e-5,
                     qPrintable(QString("row %1 col %2: %3 vs %4").arg(r).arg(c).arg(b.weight).arg(shown)));
            QVERIFY(std::abs(b.scaled - b.dot * double(h->scale)) < 1e-9);
        }
    m_panel->selectCell(2, 5); // a future key
    QVERIFY(m_panel->qkView()->breakdown().masked);
    QCOMPARE(m_panel->qkView()->breakdown().weight, 0.0);
}

// gemma2 bends q·k through c·tanh(q·k / c) before the scale: the explanation follows it, and says so.
void TestAttentionPanel::softCappedBreakdown()
{
    AttentionHead h;
    h.n = 3;
    h.head_dim = 2;
    h.scale = 0.5f;
    h.softcap = 50.0f;
    h.q = {1, 0, 1, 0, 1, 0};
    h.k = {0, 0, 80, 0, 60, 0}; // q·k of the last row: 0, 80, 60
    h.weights.assign(9, 0.0f);
    const QkBreakdown b = explain_cell(h, 0, 2, 1);
    const auto cap = [](double x) { return 50.0 * std::tanh(x / 50.0); };
    QCOMPARE(b.dot, 80.0);
    QVERIFY(std::abs(b.capped - cap(80.0)) < 1e-9);
    QVERIFY(std::abs(b.scaled - cap(80.0) * 0.5) < 1e-9);
    const double e0 = std::exp(0.0), e1 = std::exp(cap(80.0) * 0.5), e2 = std::exp(cap(60.0) * 0.5);
    QVERIFY2(std::abs(b.weight - e1 / (e0 + e1 + e2)) < 1e-12, qPrintable(QString::number(b.weight)));
    h.softcap = 0.0f; // without the cap the larger score wins by far more
    QVERIFY(explain_cell(h, 0, 2, 1).weight > b.weight + 1e-3);
}

// The heatmap says what its colours mean: a scale under the plot, inside the widget, with its ends
// labelled — 0 … 1, or the log scale's range — and no cell drawn over it.
void TestAttentionPanel::heatmapHasAColourScale()
{
    AttentionHeatmap* map = m_panel->heatmap();
    QVERIFY(map->n() > 0);
    const QRect legend = map->legendRect();
    QVERIFY(!legend.isEmpty());
    QVERIFY2(map->rect().contains(legend), "the colour scale is outside the heatmap widget");
    QCOMPARE(map->cellAt(QPointF(legend.center())), std::make_pair(-1, -1)); // not over the cells
    QCOMPARE(map->legendLabels().first(), QString("0"));
    QCOMPARE(map->legendLabels().last(), QString("1"));
    map->setLogScale(true);
    QVERIFY2(map->legendLabels().first().contains(QString::fromUtf8("10\u207B\u2074")),
             qPrintable(map->legendLabels().join(" ")));
    map->setLogScale(false);
    QCOMPARE(map->legendLabels().first(), QString("0"));
}

// Every layer × head of the model in a small panel: the thumbnails and their colour scale lie inside
// the grid, which scrolls (it was cut off at the panel's edge).
void TestAttentionPanel::wholeModelGridScrollsInsteadOfCutting()
{
    QVERIFY(waitCaptured([this] { m_panel->captureAllLayers(); }));
    m_panel->showTab(1);
    m_panel->setOverview(true);
    const QSize before = m_panel->size();
    m_panel->resize(600, 420);
    QTest::qWait(20);
    HeadGrid* grid = m_panel->grid();
    const auto& thumbs = grid->thumbs();
    QCOMPARE(int(thumbs.size()), int(m_model->config().n_layer * m_model->config().n_head[0]));
    const QRect last = grid->thumbRect(int(thumbs.size()) - 1);
    QVERIFY2(grid->rect().contains(last), qPrintable(QString("the last head at y %1–%2 is outside the grid's %3 px")
                                                         .arg(last.top())
                                                         .arg(last.bottom())
                                                         .arg(grid->height())));
    QVERIFY(!grid->legendRect().isEmpty());
    QVERIFY(grid->rect().contains(grid->legendRect()));
    m_panel->setOverview(false);
    m_panel->showTab(0);
    m_panel->resize(before);
}

void TestAttentionPanel::meanOverHeads()
{
    m_panel->setMode(AttentionPanel::Mode::Mean);
    const auto& s = *m_panel->snapshot();
    const int n = m_panel->heatmap()->n();
    for (int r = 0; r < n; r += 3)
        for (int c = 0; c <= r; c += 2) {
            double sum = 0;
            int count = 0;
            for (const auto& h : s.heads)
                if (h.layer == 5) {
                    sum += double(h.weights[std::size_t(r) * std::size_t(n) + std::size_t(c)]);
                    ++count;
                }
            QVERIFY(std::abs(double(m_panel->heatmap()->value(r, c)) - sum / count) < 1e-6);
        }
    m_panel->setMode(AttentionPanel::Mode::Head);
    QVERIFY(m_panel->statusText().contains("Attention to the first token"));
}

void TestAttentionPanel::exportsEqualTheMatrix()
{
    QTemporaryDir dir;
    const AttentionHead* h = m_panel->currentHead();
    QVERIFY(m_panel->exportCsv(dir.filePath("a.csv")));
    QFile csv(dir.filePath("a.csv"));
    QVERIFY(csv.open(QIODevice::ReadOnly));
    const QList<QByteArray> lines = csv.readAll().split('\n');
    QCOMPARE(lines.size(), qsizetype(h->n) + 2); // header, rows, and the empty piece after the last CRLF
    for (int r = 0; r < h->n; ++r) {
        const QByteArray line = lines[r + 1].trimmed();
        const QList<QByteArray> fields = line.mid(line.lastIndexOf('"') + 2).split(',');
        QCOMPARE(fields.size(), qsizetype(h->n));
        for (int c = 0; c < h->n; ++c)
            QCOMPARE(fields[c].toFloat(), h->weights[std::size_t(r) * std::size_t(h->n) + std::size_t(c)]);
    }
    QVERIFY(m_panel->exportJson(dir.filePath("a.json")));
    QFile json(dir.filePath("a.json"));
    QVERIFY(json.open(QIODevice::ReadOnly));
    const QJsonObject root = QJsonDocument::fromJson(json.readAll()).object();
    QCOMPARE(root["layer"].toInt(), h->layer);
    QCOMPARE(root["weights"].toArray().size(), qsizetype(h->n));
    QCOMPARE(float(root["weights"].toArray()[h->n - 1].toArray()[0].toDouble()),
             h->weights[std::size_t(h->n - 1) * std::size_t(h->n)]);
    for (const QString name : {"a.png", "a.svg"}) {
        QString error;
        QVERIFY2(m_panel->exportImage(dir.filePath(name), &error), qPrintable(error));
        QFile f(dir.filePath(name));
        QVERIFY(f.open(QIODevice::ReadOnly) && f.size() > 1000);
        if (name.endsWith("svg"))
            QVERIFY(f.readAll().contains("<svg"));
    }
    QString error;
    QVERIFY(!m_panel->exportCsv(dir.filePath("missing/x.csv"), &error));
    QVERIFY2(error.contains("missing/x.csv"), qPrintable(error));
}

void TestAttentionPanel::selectingARowSelectsTheToken()
{
    AttentionHeatmap* map = m_panel->heatmap();
    const QPointF cell = map->cellCentre(6, 2);
    QTest::mouseClick(map, Qt::LeftButton, {}, cell.toPoint());
    QCOMPARE(m_selection->position(), 6); // the query row is selected in every panel
    // …and a selection made elsewhere opens that row here.
    m_selection->select(4);
    QCOMPARE(m_panel->qkView()->breakdown().top_values.empty(), false);
    QVERIFY(m_panel->qkView()->text().contains("(4)"));
}

void TestAttentionPanel::bankComparison()
{
    QSignalSpy compared(m_panel.get(), &AttentionPanel::compared);
    // Layer 9 of the default model's 18 (the last one of a smaller model, as in the sanitizer tree).
    const int layer = std::min(9, int(m_model->config().n_layer) - 1);
    m_panel->showHead(layer, 0);
    QVERIFY(compared.isEmpty());
    m_panel->compareBankExample();
    QVERIFY(compared.wait(60000));
    const auto a = m_panel->compareA(), b = m_panel->compareB();
    QVERIFY(a && b);
    const AttentionHead* ha = a->find(layer, 0);
    const AttentionHead* hb = b->find(layer, 0);
    QVERIFY(ha && hb);
    QCOMPARE(a->tokens.back().id, b->tokens.back().id); // "bank" in both: the same token id
    const int n = std::min(ha->n, hb->n);
    for (int r = 0; r < n; ++r)
        for (int c = 0; c <= r; ++c)
            QCOMPARE(m_panel->difference()[std::size_t(r) * std::size_t(n) + std::size_t(c)],
                     ha->weights[std::size_t(r) * std::size_t(ha->n) + std::size_t(c)] -
                         hb->weights[std::size_t(r) * std::size_t(hb->n) + std::size_t(c)]);
    // Context changes attention: the "bank" rows differ.
    double change = 0;
    for (int c = 0; c < n; ++c)
        change += std::abs(double(m_panel->difference()[std::size_t(n - 1) * std::size_t(n) + std::size_t(c)]));
    QVERIFY(change > 0.01);
}

void TestAttentionPanel::currentSequence()
{
    StepperPanel stepper(m_engine.get(), m_selection.get());
    QSignalSpy state(&stepper, &StepperPanel::stateChanged);
    stepper.setPrompt("Water boils at");
    stepper.prefill();
    QVERIFY(state.wait(60000));
    state.clear();
    stepper.step();
    QVERIFY(state.wait(60000));
    QVERIFY(waitCaptured([&] { m_panel->runSequence(); }));
    const auto& s = *m_panel->snapshot();
    // Shown as computed while the stepper ran: the prompt's prefill rows, then the decode step's row.
    QCOMPARE(s.source, QString("recorded"));
    QCOMPARE(s.tokens.size(), stepper.state()->tokens.size());
    for (std::size_t i = 0; i < s.tokens.size(); ++i)
        QCOMPARE(s.tokens[i].id, stepper.state()->tokens[i].id);
    QVERIFY(!s.tokens.back().prompt); // the generated token is marked
    // The same two passes in an independent session give the same rows, bit for bit.
    engine::Session ref(m_model, engine::make_cpu_backend(m_model, testsupport::app_cpu_options(2, 512)), 128);
    engine::CaptureRequest capture;
    capture.heads.emplace_back(uint32_t(m_panel->layer()), uint32_t(m_panel->head()));
    std::vector<int32_t> ids;
    for (const auto& t : s.tokens)
        ids.push_back(t.id);
    ref.prefill(std::span<const int32_t>(ids).first(ids.size() - 1), &capture);
    const auto prefill_rows = ref.last_captures()->attention.at(0);
    ref.decode(ids.back(), &capture);
    const auto step_row = ref.last_captures()->attention.at(0);
    const AttentionHead* h = m_panel->currentHead();
    QVERIFY(h);
    const int n = h->n;
    for (int r = 0; r + 1 < n; ++r)
        for (int c = 0; c <= r; ++c)
            QCOMPARE(h->weights[std::size_t(r) * std::size_t(n) + std::size_t(c)],
                     prefill_rows.weights[std::size_t(r) * prefill_rows.n_keys + std::size_t(c)]);
    for (int c = 0; c < n; ++c)
        QCOMPARE(h->weights[std::size_t(n - 1) * std::size_t(n) + std::size_t(c)], step_row.weights[std::size_t(c)]);
    QVERIFY(m_panel->statusText().contains("as computed during its prefill and each decode step"));
    QVERIFY2(!m_panel->statusText().contains("forward pass"), qPrintable(m_panel->statusText())); // none of its own

    // Picking the current sequence in the source list (the keyboard, as a user would) shows it at
    // once, without Run: it showed nothing before.
    QComboBox* source = nullptr;
    for (auto* c : m_panel->findChildren<QComboBox*>())
        if (c->count() == 2 && c->itemText(1).contains("current sequence"))
            source = c;
    QVERIFY(source);
    source->setCurrentIndex(0);
    QVERIFY(waitCaptured([&] {
        source->setFocus();
        QTest::keyClick(source, Qt::Key_Down);
    }));
    QCOMPARE(source->currentIndex(), 1);
    QCOMPARE(m_panel->snapshot()->source, QString("recorded"));
}

void TestAttentionPanel::tooLongIsRefused()
{
    QString text;
    while (text.size() < 16000)
        text += "Long context costs memory. ";
    m_panel->setPrompt(text);
    QVERIFY(waitCaptured([&] { m_panel->run(); }));
    QVERIFY2(m_panel->statusText().contains("at most " + QLocale().toString(2048)), qPrintable(m_panel->statusText()));
}

QTEST_MAIN(TestAttentionPanel)
#include "test_attention_panel.moc"
