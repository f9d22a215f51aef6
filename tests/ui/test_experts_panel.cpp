// SPDX-License-Identifier: GPL-3.0-or-later
// The Experts panel driven offscreen on a random qwen3moe model (make-test-model --arch qwen3moe):
// routing a typed text shows the engine's own routing (every token's experts and weights equal to a
// capture on an independent backend), a click on the map selects that token and layer, the load is
// the count of each expert's tokens, the vocabulary lists the tokens the selected expert takes, and a
// "what if" that removes a token's top expert moves the next token's distribution and never chooses it
// again; on a dense model the panel says there is no router. Every state's words are proofread.
#include "app_weight_order.h"
#include "backend/backend.h"
#include "bridge/engine_controller.h"
#include "model/model.h"
#include "model/test_model.h"
#include "panels/experts_panel.h"
#include "signal_wait.h"
#include "text_review.h"
#include "widgets/distribution_overlay.h"
#include "widgets/effect_grid.h"
#include "widgets/expert_views.h"

#include <QLineEdit>
#include <QPushButton>
#include <QTemporaryDir>
#include <QTest>
#include <cmath>

using namespace tokenscope::ui;

class TestExpertsPanel : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void cleanup();
    void routingIsTheEnginesRouting();
    void clickSelectsTokenAndLayer();
    void removingTheTopExpertMovesTheNextToken();
    void scanCoversEveryExpert();
    void aSmallerRoutingReplacesTheSelection();
    void denseModelHasNoRouter();

private:
    void load(const QString& path);
    QTemporaryDir m_dir;
    QString m_moe, m_dense;
    std::unique_ptr<EngineController> m_engine;
    std::unique_ptr<ExpertsPanel> m_panel;
};

void TestExpertsPanel::initTestCase()
{
    m_moe = m_dir.filePath("qwen3moe.gguf");
    m_dense = m_dir.filePath("llama.gguf");
    engine::make_test_model("qwen3moe", 5).write(m_moe.toStdString());
    engine::make_test_model("llama", 5).write(m_dense.toStdString());
    m_engine = std::make_unique<EngineController>();
    m_panel = std::make_unique<ExpertsPanel>(m_engine.get());
    m_panel->resize(1200, 900);
    m_panel->show();
    load(m_moe);
}

void TestExpertsPanel::load(const QString& path)
{
    QSignalSpy loaded(m_engine.get(), &EngineController::modelLoaded);
    m_engine->loadModel(path, 2, 512, "cpu");
    QVERIFY(loaded.wait(60000));
}

void TestExpertsPanel::cleanup()
{
    if (m_panel)
        QVERIFY_WORDING(m_panel.get());
}

void TestExpertsPanel::routingIsTheEnginesRouting()
{
    const QString text = "Where does each of these words go?";
    m_panel->findChild<QLineEdit*>()->setText(text);
    QSignalSpy routed(m_panel.get(), &ExpertsPanel::routed);
    QPushButton* route = nullptr;
    for (QPushButton* b : m_panel->findChildren<QPushButton*>())
        if (b->text() == "Route")
            route = b;
    QVERIFY(route);
    QTest::mouseClick(route, Qt::LeftButton);
    QVERIFY(routed.wait(60000));
    const auto s = m_panel->snapshot();
    QVERIFY2(s && s->error.isEmpty(), qPrintable(m_panel->statusText()));
    QVERIFY(!s->dense);
    QVERIFY(s->random_weights);
    QVERIFY(m_panel->statusText().contains("Random routing"));
    // an independent capture of the same text
    const auto model = engine::Model::load(m_moe.toStdString());
    const std::vector<int32_t> ids = model->tokenizer().encode_ids(text.toStdString());
    QCOMPARE(s->ids, ids);
    auto backend = engine::make_cpu_backend(model, testsupport::app_cpu_options(1, 256));
    engine::CaptureRequest capture;
    capture.routing = true;
    engine::ForwardRequest request;
    request.tokens = ids;
    request.capture = &capture;
    const engine::ForwardResult r = backend->forward(request);
    QCOMPARE(int(r.captures->routing.size()), int(s->moe_layers.size()));
    for (std::size_t li = 0; li < s->moe_layers.size(); ++li) {
        QCOMPARE(s->experts[li], r.captures->routing[li].experts);
        QCOMPARE(s->weights[li], r.captures->routing[li].weights);
    }
    // the load chart counts each expert's tokens at the selected layer
    const std::vector<int> counts = m_panel->load()->counts();
    int total = 0;
    for (int c : counts)
        total += c;
    QCOMPARE(total, s->n() * s->k);
}

void TestExpertsPanel::clickSelectsTokenAndLayer()
{
    const auto s = m_panel->snapshot();
    QVERIFY(s && !s->dense);
    ExpertMap* map = m_panel->map();
    const int token = std::min(3, s->n() - 1), layer = 2;
    const QRect cell = map->cellRect(token, layer);
    QTest::mouseClick(map, Qt::LeftButton, {}, cell.center());
    QCOMPARE(map->selectedToken(), token);
    QCOMPARE(map->selectedLayer(), layer);
    // the hover names the token's experts and weights there
    const QString hover = map->cellText(token, layer);
    for (int slot = 0; slot < s->k; ++slot)
        QVERIFY2(hover.contains(QString("expert %1").arg(s->expert(layer, token, slot))), qPrintable(hover));
    // the vocabulary of an expert: the tokens routed to it at that layer
    const int e = s->expert(layer, token, 0);
    m_panel->select(token, layer, e);
    int taken = 0;
    for (int t = 0; t < s->n(); ++t)
        for (int slot = 0; slot < s->k; ++slot)
            taken += s->expert(layer, t, slot) == e;
    QVERIFY2(m_panel->vocabularyText().contains(QString("takes %1 of %2 tokens").arg(taken).arg(s->n())),
             qPrintable(m_panel->vocabularyText()));
}

void TestExpertsPanel::removingTheTopExpertMovesTheNextToken()
{
    const auto s = m_panel->snapshot();
    QVERIFY(s && !s->dense);
    const int layer = 1, token = s->n() - 1;
    const int top = s->expert(layer, token, 0);
    m_panel->select(token, layer, top);
    QSignalSpy done(m_panel.get(), &ExpertsPanel::whatIfFinished);
    m_panel->runWhatIf(ExpertWhatIf::Kind::Remove, s->moe_layers[std::size_t(layer)], top);
    QVERIFY(done.wait(60000));
    const auto w = m_panel->whatIf();
    QVERIFY(w && w->error.isEmpty());
    QVERIFY(w->rerouted > 0); // at least the last token's route at that layer
    QVERIFY(w->kl > 0.0);
    QVERIFY(!m_panel->overlay()->rows().empty());
    // forcing an expert the router chose for that token changes nothing, and says so
    m_panel->runWhatIf(ExpertWhatIf::Kind::Force, s->moe_layers[std::size_t(layer)], s->expert(layer, token, 1));
    QVERIFY(done.wait(60000));
    QCOMPARE(m_panel->whatIf()->rerouted, 0);
    QCOMPARE(m_panel->whatIf()->kl, 0.0);
    QVERIFY(m_panel->whatIf()->description.contains("nothing changes"));
}

// The scan button: a pass per expert some token chose, a cell per (layer, expert), the experts no token
// chose at 0 without a pass; the grid shows it.
void TestExpertsPanel::scanCoversEveryExpert()
{
    const auto s = m_panel->snapshot();
    QVERIFY(s && !s->dense);
    QSignalSpy finished(m_panel.get(), &ExpertsPanel::scanFinished);
    QPushButton* scan = nullptr;
    for (QPushButton* b : m_panel->findChildren<QPushButton*>())
        if (b->text() == "Scan")
            scan = b;
    QVERIFY(scan && scan->isEnabled());
    QTest::mouseClick(scan, Qt::LeftButton);
    QVERIFY(finished.wait(60000));
    const auto r = m_panel->scanResult();
    QVERIFY2(r && r->error.isEmpty() && r->finished, qPrintable(m_panel->scanStatusText()));
    QCOMPARE(int(r->kl.size()), int(s->moe_layers.size()));
    int chosen = 0;
    for (std::size_t li = 0; li < r->kl.size(); ++li)
        for (int e = 0; e < s->n_expert; ++e) {
            bool used = false;
            for (int t = 0; t < s->n(); ++t)
                for (int slot = 0; slot < s->k; ++slot)
                    used |= s->expert(int(li), t, slot) == e;
            const double v = r->kl[li][std::size_t(e)];
            QVERIFY(std::isfinite(v) && v >= 0.0);
            if (!used)
                QCOMPARE(v, 0.0);
            chosen += used;
        }
    QCOMPARE(r->done, chosen);
    QVERIFY(!m_panel->scanGrid()->empty());
    QVERIFY2(m_panel->scanStatusText().contains(QString("%1 passes").arg(chosen)),
             qPrintable(m_panel->scanStatusText()));
}

// A routing with fewer layers and experts (a saved run's) after a selection past them: the selection
// is clamped before any view draws it, and the scan stays off (no model behind a saved run).
void TestExpertsPanel::aSmallerRoutingReplacesTheSelection()
{
    const auto s = m_panel->snapshot();
    QVERIFY(s && !s->dense);
    m_panel->select(s->n() - 1, int(s->moe_layers.size()) - 1, s->n_expert - 1);
    auto small = std::make_shared<ExpertsSnapshot>();
    small->source = "prompt";
    small->architecture = "qwen3moe";
    small->n_expert = 4;
    small->k = 1;
    small->n_layers = 1;
    small->moe_layers = {0};
    small->ids = {5, 6};
    small->tokens.resize(2);
    small->experts = {{2, 3}};
    small->weights = {{1.0f, 1.0f}};
    small->saved = true;
    m_panel->showSaved(small);
    QCOMPARE(m_panel->map()->selectedLayer(), 0);
    QVERIFY(m_panel->map()->selectedToken() <= 1);
    QCOMPARE(m_panel->load()->counts(), (std::vector<int>{0, 0, 1, 1}));
    for (QPushButton* b : m_panel->findChildren<QPushButton*>())
        if (b->text() == "Scan" || b->text() == "Show the change")
            QVERIFY2(!b->isEnabled(), qPrintable(b->text()));
    m_panel->grab(); // every view paints the smaller routing
}

void TestExpertsPanel::denseModelHasNoRouter()
{
    load(m_dense);
    QSignalSpy routed(m_panel.get(), &ExpertsPanel::routed);
    m_panel->setText("A dense model");
    m_panel->route();
    QVERIFY(routed.wait(60000));
    QVERIFY(m_panel->snapshot() && m_panel->snapshot()->dense);
    QVERIFY2(m_panel->statusText().contains("is dense: it has no router"), qPrintable(m_panel->statusText()));
    // an empty text is refused with the reason
    m_panel->setText("   ");
    m_panel->route();
    QVERIFY(routed.wait(60000));
    QVERIFY2(m_panel->statusText().contains("The text is empty"), qPrintable(m_panel->statusText()));
}

QTEST_MAIN(TestExpertsPanel)
#include "test_experts_panel.moc"
