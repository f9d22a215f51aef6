// SPDX-License-Identifier: GPL-3.0-or-later
// The panels on the chat model (Qwen2.5-Coder 0.5B Instruct, offscreen): the attention layer grid
// groups its 14 query heads 7 per KV head with each cell equal to an independent capture, and the
// KV panel's gauges and formula follow a stepper run with 24 layers × 2 KV heads × 64 dims.
#include "app_weight_order.h"
#include "backend/backend.h"
#include "bridge/engine_controller.h"
#include "bridge/token_selection.h"
#include "model/model.h"
#include "panels/attention_panel.h"
#include "panels/kv_panel.h"
#include "panels/stepper_panel.h"
#include "session/session.h"
#include "test_paths.h"
#include "widgets/attention_heatmap.h"
#include "widgets/attention_views.h"

#include <QLocale>
#include <QSignalSpy>
#include <QTest>

using namespace tokenscope::ui;

class TestChatModelPanels : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void layerGridGroupsSevenHeadsPerKvHead();
    void kvGaugesFollowTheStepper();

private:
    std::shared_ptr<const engine::Model> m_model;
    std::unique_ptr<EngineController> m_engine;
    std::unique_ptr<TokenSelection> m_selection;
    std::unique_ptr<AttentionPanel> m_attention;
    std::unique_ptr<StepperPanel> m_stepper;
    std::unique_ptr<KvPanel> m_kv;
};

void TestChatModelPanels::initTestCase()
{
    REQUIRE_CHAT_MODEL(path);
    m_model = engine::Model::load(path);
    m_engine = std::make_unique<EngineController>();
    m_selection = std::make_unique<TokenSelection>();
    m_attention = std::make_unique<AttentionPanel>(m_engine.get(), m_selection.get());
    m_stepper = std::make_unique<StepperPanel>(m_engine.get(), m_selection.get());
    m_kv = std::make_unique<KvPanel>(m_engine.get(), m_selection.get());
    for (QWidget* w : std::initializer_list<QWidget*>{m_attention.get(), m_stepper.get(), m_kv.get()}) {
        w->resize(1200, 800);
        w->show();
    }
    QSignalSpy loaded(m_engine.get(), &EngineController::modelLoaded);
    m_engine->loadModel(QString::fromStdString(path), 2, 512);
    QVERIFY(loaded.wait(120000));
}

void TestChatModelPanels::layerGridGroupsSevenHeadsPerKvHead()
{
    const QString prompt = "def add(a, b):\n    return a + b";
    m_attention->showHead(4, 9);
    m_attention->setPrompt(prompt);
    QSignalSpy captured(m_attention.get(), &AttentionPanel::captured);
    m_attention->run();
    QVERIFY(captured.wait(60000));
    m_attention->showTab(1);
    const auto& thumbs = m_attention->grid()->thumbs();
    QCOMPARE(int(thumbs.size()), 14);
    for (int i = 0; i < 14; ++i) {
        QCOMPARE(thumbs[std::size_t(i)].layer, 4);
        QCOMPARE(thumbs[std::size_t(i)].kv_head, i / 7); // 7 query heads per KV head, in head order
        QCOMPARE(thumbs[std::size_t(i)].head, i);
    }
    // The head view's cells are an independent pass's capture of layer 4, head 9 (KV head 1).
    const AttentionHead* h = m_attention->currentHead();
    QVERIFY(h);
    QCOMPARE(h->head, 9);
    QCOMPARE(h->kv_head, 1);
    engine::Session s(m_model, engine::make_cpu_backend(m_model, testsupport::app_cpu_options(2, 512)), 2048);
    engine::CaptureRequest capture;
    capture.heads.emplace_back(4u, 9u);
    s.prefill(m_model->tokenizer().encode_ids(prompt.toStdString()), &capture);
    const engine::AttentionCapture& ref = s.last_captures()->attention.at(0);
    QCOMPARE(ref.kv_head, 1u);
    const int n = int(ref.n_queries);
    QCOMPARE(m_attention->heatmap()->n(), n);
    for (int r = 0; r < n; ++r)
        for (int c = 0; c < n; ++c)
            QCOMPARE(m_attention->heatmap()->value(r, c),
                     ref.weights[std::size_t(r) * std::size_t(n) + std::size_t(c)]);
}

void TestChatModelPanels::kvGaugesFollowTheStepper()
{
    StepperSettings st = m_stepper->settings();
    st.greedy = true;
    st.sampling.max_tokens = 20;
    m_stepper->setSettings(st);
    m_stepper->setPrompt("The capital of France is");
    const auto act = [&](const std::function<void()>& action) {
        QSignalSpy changed(m_stepper.get(), &StepperPanel::stateChanged);
        action();
        return changed.wait(60000) ? m_stepper->state() : nullptr;
    };
    auto state = act([&] { m_stepper->prefill(); });
    QVERIFY(state);
    for (int i = 0; i < 6; ++i) {
        QCOMPARE(state->n_layers, 24);
        QCOMPARE(state->n_kv_heads, 2);
        const int n = state->kv_tokens;
        QCOMPARE(n, int(state->tokens.size())); // the step decodes its token: the cache holds the whole sequence
        QCOMPARE(state->kv_bytes_in_use, quint64(12288) * quint64(n));
        QTRY_VERIFY(m_kv->snapshot() && m_kv->snapshot()->tokens_cached == n);
        QCOMPARE(m_kv->snapshot()->bytes_in_use, quint64(12288) * quint64(n));
        QCOMPARE(int(m_kv->snapshot()->layers.size()), 24);
        const QString formula = m_kv->formulaText();
        QVERIFY2(formula.contains("2 × 24 layers × 2 KV heads × 64 dims"), qPrintable(formula));
        QVERIFY2(formula.contains(QString("× %1 tokens").arg(QLocale().toString(n))), qPrintable(formula));
        state = act([&] { m_stepper->step(); });
        QVERIFY(state && state->action == "step");
    }
}

QTEST_MAIN(TestChatModelPanels)
#include "test_chat_model_panels.moc"
