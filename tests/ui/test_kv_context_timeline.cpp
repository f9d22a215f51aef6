// SPDX-License-Identifier: GPL-3.0-or-later
// The KV-cache, context-window and timeline panels on the real default model: the live gauge equals
// an independent engine session's accounting at every step of a real run (blocks included); the
// contents view shows the cache's vectors; the calculator reproduces the figures; the
// simulator counts turns with the real tokenizer; the timeline shows the engine's durations, TTFT
// and inter-token latencies add up; selection is linked across the timeline, the KV contents view
// and the stepper.
#include "analysis/text_analysis.h"
#include "app_weight_order.h"
#include "backend/backend.h"
#include "backend/vulkan/vulkan_backend.h"
#include "bridge/engine_controller.h"
#include "bridge/token_selection.h"
#include "chat/chat_template.h"
#include "chat/context_simulator.h"
#include "kv/kv_calculator.h"
#include "model/model.h"
#include "panels/chat_panel.h"
#include "panels/context_panel.h"
#include "panels/kv_panel.h"
#include "panels/stepper_panel.h"
#include "panels/timeline_panel.h"
#include "session/generator.h"
#include "session/stepper.h"
#include "storage/conversation_store.h"
#include "test_paths.h"
#include "text_review.h"
#include "widgets/chart_style.h"
#include "widgets/kv_heat_strip.h"
#include "widgets/kv_layer_view.h"
#include "widgets/timeline_view.h"

#include <QChartView>
#include <QLineEdit>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollBar>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <QValueAxis>
#include <cmath>

using namespace tokenscope::ui;

class TestKvContextTimeline : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void cleanup(); // after every function: the words its state shows, proofread
    void liveGaugeEqualsTheEngineAtEveryStep();
    void contentsShowTheCachedVectors();
    void calculatorReproducesTheFigures();
    void simulatorCountsWithTheTokenizer();
    void simulatorShowsItsTextWhole();
    void timelineShowsTheTrace();
    void selectionIsLinked();
    void quantizedCacheShowsItsMemoryAndDamage(); // last: it loads the model again with a Q8_0 cache

private:
    std::shared_ptr<const StepperState> act(const std::function<void()>& action);

    std::string m_path;
    std::shared_ptr<const engine::Model> m_model;
    std::unique_ptr<EngineController> m_engine;
    std::unique_ptr<TokenSelection> m_selection;
    std::unique_ptr<StepperPanel> m_stepper;
    std::unique_ptr<KvPanel> m_kv;
    std::unique_ptr<ContextPanel> m_context;
    std::unique_ptr<TimelinePanel> m_timeline;
    const uint32_t m_n_ctx = 512;
};

void TestKvContextTimeline::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true); // "Use this cache" writes settings
    QSettings().remove("engine");
    REQUIRE_DEFAULT_MODEL(path);
    m_path = path;
    m_model = engine::Model::load(path);
    m_engine = std::make_unique<EngineController>();
    m_selection = std::make_unique<TokenSelection>();
    m_stepper = std::make_unique<StepperPanel>(m_engine.get(), m_selection.get());
    m_kv = std::make_unique<KvPanel>(m_engine.get(), m_selection.get());
    m_context = std::make_unique<ContextPanel>(m_engine.get());
    m_timeline = std::make_unique<TimelinePanel>(m_engine.get(), m_selection.get());
    for (QWidget* w : std::initializer_list<QWidget*>{m_stepper.get(), m_kv.get(), m_context.get(), m_timeline.get()}) {
        w->resize(1100, 800);
        w->show();
    }
    QSignalSpy loaded(m_engine.get(), &EngineController::modelLoaded);
    m_engine->loadModel(QString::fromStdString(path), 2, m_n_ctx);
    QVERIFY(loaded.wait(120000));
}

void TestKvContextTimeline::cleanup()
{
    if (m_stepper)
        QVERIFY_WORDING(m_stepper.get());
    if (m_kv)
        QVERIFY_WORDING(m_kv.get());
    if (m_context)
        QVERIFY_WORDING(m_context.get());
    if (m_timeline)
        QVERIFY_WORDING(m_timeline.get());
}

std::shared_ptr<const StepperState> TestKvContextTimeline::act(const std::function<void()>& action)
{
    QSignalSpy changed(m_stepper.get(), &StepperPanel::stateChanged);
    action();
    if (!changed.wait(60000))
        return nullptr;
    QCoreApplication::processEvents(); // the KV and timeline snapshots follow the stepper's state
    return m_stepper->state();
}

void TestKvContextTimeline::liveGaugeEqualsTheEngineAtEveryStep()
{
    // The same run in an independent session: the gauge must show its accounting at every step.
    engine::Session reference(m_model, engine::make_cpu_backend(m_model, testsupport::app_cpu_options(2, m_n_ctx)),
                              128);
    const QString prompt = "The KV cache stores one key and one value per token, per layer:";
    StepperSettings s = m_stepper->settings();
    s.greedy = true;
    s.sampling.max_tokens = 100;
    m_stepper->setSettings(s);
    m_stepper->setPrompt(prompt);
    auto state = act([&] { m_stepper->prefill(); });
    QVERIFY(state && state->action == "prefill");
    reference.prefill(m_model->tokenizer().encode_ids(prompt.toStdString()));
    const auto check = [&] {
        QTRY_VERIFY(m_kv->snapshot() && m_kv->snapshot()->tokens_cached == int(reference.tokens().size()));
        const KvSnapshot& g = *m_kv->snapshot();
        const engine::KvCache& cache = reference.backend().kv_cache();
        const engine::KvAccounting a = cache.accounting();
        QCOMPARE(g.bytes_in_use, a.bytes_in_use);
        QCOMPARE(g.bytes_allocated, a.bytes_allocated);
        QCOMPARE(int(g.layers.size()), int(a.layers.size()));
        for (std::size_t l = 0; l < a.layers.size(); ++l) {
            QCOMPARE(g.layers[l].tokens_in_use, int(a.layers[l].tokens_in_use));
            QCOMPARE(g.layers[l].blocks, int(a.layers[l].blocks_allocated));
            QCOMPARE(g.layers[l].bytes_allocated, a.layers[l].bytes_allocated);
            // The block map: a block is drawn as held exactly when the cache holds a position in it.
            for (int b = 0; b < g.blocks_per_layer; ++b) {
                bool held = false;
                for (int pos = b * g.block_tokens; pos < std::min((b + 1) * g.block_tokens, g.tokens_cached); ++pos)
                    held |= cache.holds(uint32_t(l), uint32_t(pos));
                QCOMPARE(m_kv->layerView()->blockState(int(l), b) != KvLayerView::BlockState::Free, held);
            }
        }
        QVERIFY2(m_kv->formulaText().contains(QString("× %1 tokens").arg(QLocale().toString(a.tokens_cached))),
                 qPrintable(m_kv->formulaText()));
    };
    check();
    for (int i = 0; i < 24; ++i) {
        state = act([&] { m_stepper->step(); });
        QVERIFY(state && state->action == "step");
        reference.decode(state->tokens.back().id);
        check();
    }
    state = act([&] { m_stepper->back(); });
    QVERIFY(state && state->action == "back");
    reference.truncate(uint32_t(reference.tokens().size()) - 1);
    check();
}

void TestKvContextTimeline::contentsShowTheCachedVectors()
{
    QSignalSpy shown(m_kv.get(), &KvPanel::contentsShown);
    m_kv->showContents(5, 0, false);
    QVERIFY(shown.wait(10000));
    const auto& c = m_kv->contents();
    QVERIFY(c && c->error.isEmpty());
    QCOMPARE(c->n_positions, m_stepper->state()->kv_tokens);
    QCOMPARE(c->head_dim, int(m_model->config().head_dim_k));
    // Values drawn equal the stepper engine's cache, read back independently here.
    engine::Session reference(m_model, engine::make_cpu_backend(m_model, testsupport::app_cpu_options(2, m_n_ctx)),
                              128);
    std::vector<int32_t> ids;
    for (const auto& t : m_stepper->state()->tokens)
        ids.push_back(t.id);
    reference.prefill(ids);
    const engine::KvReadback r = reference.backend().read_kv(5, 0);
    // The prompt's keys were computed in one batch in both sessions: identical.
    const int prompt = m_stepper->state()->prompt_length;
    for (int pos = 0; pos < prompt; ++pos)
        for (int d = 0; d < c->head_dim; ++d)
            QCOMPARE(m_kv->heatStrip()->valueAt(pos, d), r.keys[std::size_t(pos) * r.head_dim + std::size_t(d)]);
    QVERIFY(!c->tokens.empty() && !c->tokens.back().prompt);
}

void TestKvContextTimeline::calculatorReproducesTheFigures()
{
    m_kv->showTab(2);
    m_kv->selectPreset("Llama 3.1 70B");
    m_kv->setCalculator(131072, 1, int(engine::KvDtype::F16), false, true, 0.0, 80.0, 16.0);
    QVERIFY2(m_kv->calculatorText().contains("42,949,672,960") && m_kv->calculatorText().contains("40.00 GiB"),
             qPrintable(m_kv->calculatorText()));
    m_kv->selectPreset("Llama 3 8B");
    m_kv->setCalculator(8192, 1, int(engine::KvDtype::F16), false, true, 0.0, 80.0, 16.0);
    QVERIFY2(m_kv->calculatorText().contains("1,073,741,824") &&
                 m_kv->calculatorText().contains("<b>64</b> such sequences fit"),
             qPrintable(m_kv->calculatorText()));
    // Without GQA (32 KV heads instead of 8) the cache is 4× larger: 16 sequences fit.
    m_kv->setCalculator(8192, 1, int(engine::KvDtype::F16), true, true, 0.0, 80.0, 16.0);
    QVERIFY2(m_kv->calculatorText().contains("<b>16</b> such sequences fit"), qPrintable(m_kv->calculatorText()));

    // The memory planner: the default model at a modest context fits; a huge one is refused clearly.
    QSignalSpy planned(m_kv.get(), &KvPanel::planned);
    m_kv->planFile(QString::fromStdString(m_path));
    QVERIFY(planned.wait(10000));
    QVERIFY2(m_kv->planText().contains("needs"), qPrintable(m_kv->planText()));
    for (const auto& d : engine::list_vulkan_devices()) // each device's free memory is weighed too
        QVERIFY2(m_kv->planText().contains(QString("Vulkan device %1 (").arg(d.index)), qPrintable(m_kv->planText()));
    m_kv->planFile("/nonexistent/model.gguf");
    QVERIFY(planned.wait(10000));
    QVERIFY2(m_kv->planText().contains("/nonexistent/model.gguf"), qPrintable(m_kv->planText()));
}

void TestKvContextTimeline::simulatorCountsWithTheTokenizer()
{
    m_context->clearTurns();
    m_context->setWindow(256);
    m_context->setPolicy(engine::OverflowPolicy::KeepSystemPrompt);
    m_context->setSystemPrompt("You are a helpful assistant.");
    const QString user = "Why is the sky blue?",
                  reply = "Because air scatters short blue wavelengths of sunlight the most.";
    m_context->addTypedTurn(user, reply);
    for (int i = 0; i < 5; ++i)
        m_context->addSyntheticTurn(40, 60);
    QTRY_VERIFY_WITH_TIMEOUT(m_context->counted(), 10000);
    const auto format =
        engine::detect_chat_format(m_model->tokenizer().vocab().chat_template, m_model->config().architecture);
    const auto count = [&](const char* role, const QString& text) {
        return int(engine::count_turn_tokens(m_model->tokenizer(), format, {role, text.toStdString()}));
    };
    const auto& turns = m_context->turns();
    QCOMPARE(turns[0].tokens, count("system", "You are a helpful assistant."));
    QCOMPARE(turns[1].tokens, count("user", user));
    QCOMPARE(turns[2].tokens, count("assistant", reply));
    QCOMPARE(turns[3].tokens, 40);
    const auto& requests = m_context->requests();
    QCOMPARE(requests.size(), std::size_t(6));
    for (const auto& r : requests) {
        QVERIFY(r.input_tokens + r.output_tokens <= 256);
        QCOMPARE(r.kept.front(), 0u); // the system prompt stays
    }
    QVERIFY(requests.back().overflow);
    QVERIFY2(m_context->gaugeText().contains("of 256 tokens used"), qPrintable(m_context->gaugeText()));
}

// A long system prompt and long request lines: the System field shows the prompt's beginning (and the
// whole of it in its tooltip) and the request list wraps its lines instead of cutting them at the right.
void TestKvContextTimeline::simulatorShowsItsTextWhole()
{
    m_context->clearTurns();
    m_context->setWindow(256);
    const QString system = "You are a careful assistant who explains how language models work, step by step, "
                           "with small examples and without jargon.";
    m_context->setSystemPrompt(system);
    for (int i = 0; i < 6; ++i)
        m_context->addSyntheticTurn(40, 60);
    QTRY_VERIFY_WITH_TIMEOUT(m_context->counted(), 10000);
    m_context->resize(900, 700);
    QTest::qWait(20);
    auto* field = m_context->findChild<QLineEdit*>("contextSystem");
    QVERIFY(field);
    QCOMPARE(field->cursorPosition(), 0); // shows its beginning
    QCOMPARE(field->toolTip(), system);
    auto* list = m_context->findChild<QListWidget*>("contextRequests");
    QVERIFY(list && list->count() == 6);
    QCOMPARE(list->horizontalScrollBar()->maximum(), 0);
    for (int i = 0; i < list->count(); ++i) {
        const QRect r = list->visualItemRect(list->item(i));
        QVERIFY2(r.right() <= list->viewport()->width(),
                 qPrintable(QString("request %1 runs to x %2 past the list's %3 px")
                                .arg(i + 1)
                                .arg(r.right())
                                .arg(list->viewport()->width())));
        QVERIFY2(list->fontMetrics().horizontalAdvance(list->item(i)->text()) <= r.width() ||
                     r.height() > list->fontMetrics().height() + 4,
                 qPrintable(QString("request %1 is cut: one line of %2 px in %3")
                                .arg(i + 1)
                                .arg(list->fontMetrics().horizontalAdvance(list->item(i)->text()))
                                .arg(r.width())));
    }
}

void TestKvContextTimeline::timelineShowsTheTrace()
{
    // A real chat reply: its trace is what the timeline draws.
    QTemporaryDir dir;
    ConversationStore store(dir.filePath("c.sqlite"));
    ChatPanel chat(m_engine.get(), &store);
    auto sampling = chat.sampling();
    sampling.temperature = 0.0f;
    sampling.max_tokens = 12;
    chat.setSampling(sampling);
    QSignalSpy finished(&chat, &ChatPanel::replyFinished);
    chat.send("Name three colours.");
    QVERIFY(finished.wait(120000));
    QCoreApplication::processEvents();
    const auto t = m_timeline->timeline();
    QVERIFY(t && t->source == "chat" && !t->live);
    const auto stats = finished.first().first().value<std::shared_ptr<const ReplyStats>>();
    QCOMPARE(int(t->steps.size()), stats->generated_tokens);
    QCOMPARE(t->ttft_ms, stats->ttft_ms);
    // Contiguous events; TTFT = tokenize + prefill + the first token's sample and detokenize.
    QCOMPARE(t->events.front().begin_ns, qint64(0));
    for (std::size_t i = 1; i < t->events.size(); ++i)
        QCOMPARE(t->events[i].begin_ns, t->events[i - 1].end_ns);
    qint64 first_token_ns = 0;
    for (const auto& e : t->events)
        if (e.step <= 0)
            first_token_ns += e.end_ns - e.begin_ns;
    QCOMPARE(t->ttft_ms, double(first_token_ns) / 1e6);
    QCOMPARE(t->events[0].stage, int(engine::TimelineStage::Tokenize));
    QCOMPARE(t->tokenize_ms, double(t->events[0].end_ns - t->events[0].begin_ns) / 1e6);
    QCOMPARE(t->prefill_ms > 0.0, true);
    for (std::size_t i = 1; i < t->steps.size(); ++i) {
        qint64 ns = 0;
        for (const auto& e : t->events)
            if (e.step == int(i))
                ns += e.end_ns - e.begin_ns;
        QCOMPARE(t->steps[i].latency_ms, double(ns) / 1e6);
        QVERIFY(std::abs(t->steps[i].latency_ms -
                         (t->steps[i].forward_ms + t->steps[i].sample_ms + t->steps[i].detokenize_ms)) < 1e-9);
        QVERIFY(t->steps[i].bytes_read > 0 && t->steps[i].flops > 0);
    }
    // The view draws each event with a width proportional to its duration.
    TimelineView* view = m_timeline->view();
    const double px_per_ns =
        (view->eventRect(1).right() - view->eventRect(1).left()) / double(t->events[1].end_ns - t->events[1].begin_ns);
    for (std::size_t i = 0; i < t->events.size(); ++i) {
        const double expected = std::max(1.5, px_per_ns * double(t->events[i].end_ns - t->events[i].begin_ns));
        QVERIFY(std::abs(view->eventRect(i).width() - expected) < 0.01);
    }
    QVERIFY2(m_timeline->statsText().contains(QString("TTFT %1 ms").arg(QLocale().toString(t->ttft_ms, 'f', 1))),
             qPrintable(m_timeline->statsText()));
    // Its axis and token labels stay inside the view, whole, however narrow it is (the last ones were
    // cut at the right edge: "700" of "700 ms", "<|im_e").
    for (const int w : {360, 520, 900}) {
        view->resize(w, view->height());
        const auto labels = view->labels();
        QVERIFY(labels.size() >= 3);
        for (const auto& l : labels) {
            QVERIFY2(QRectF(view->rect()).contains(l.rect), qPrintable(QString("'%1' at x %2–%3 in a %4 px view")
                                                                           .arg(l.text)
                                                                           .arg(l.rect.left())
                                                                           .arg(l.rect.right())
                                                                           .arg(w)));
            QFont f = view->font();
            if (l.token)
                f.setPointSizeF(std::max(6.0, f.pointSizeF() * 0.85));
            QVERIFY(l.rect.width() >= QFontMetrics(f).horizontalAdvance(l.text));
        }
    }
    // The latency chart's axes tick at 1, 2 or 5 × 10^n: whole tokens on the token axis (12 tokens:
    // every 2, not every 2.4 as Qt's five default ticks put them).
    const auto nice = [](double step) {
        const double decade = std::pow(10.0, std::floor(std::log10(step)));
        const double m = step / decade;
        return std::abs(m - 1) < 1e-9 || std::abs(m - 2) < 1e-9 || std::abs(m - 5) < 1e-9;
    };
    auto* chart = m_timeline->findChild<QChartView*>();
    QVERIFY(chart && chart->chart());
    const auto axes = chart->chart()->axes();
    QCOMPARE(axes.size(), 2);
    for (QAbstractAxis* a : axes) {
        auto* v = qobject_cast<QValueAxis*>(a);
        QVERIFY(v && v->tickType() == QValueAxis::TicksDynamic);
        QVERIFY2(nice(v->tickInterval()), qPrintable(QString::number(v->tickInterval())));
        QVERIFY(std::abs(std::remainder(v->max(), v->tickInterval())) < 1e-9 * v->max());
    }
    auto* tokens = qobject_cast<QValueAxis*>(chart->chart()->axes(Qt::Horizontal).first());
    QCOMPARE(tokens->tickInterval(), 2.0);
    QCOMPARE(tokens->max(), 12.0);
    QCOMPARE(nice_step(37, true), 10.0);
    QCOMPARE(nice_step(3, true), 1.0);
    QCOMPARE(nice_step(0.734, false), 0.2);
    QCOMPARE(nice_step(1234567, true), 500000.0);

    // The machine probe answers with positive peaks, shown against the run.
    QSignalSpy peaks(m_timeline.get(), &TimelinePanel::peaksChanged);
    m_engine->probeMachine();
    QVERIFY(peaks.wait(60000));
    QVERIFY(m_timeline->peaks().read_bytes_per_second > 0 && m_timeline->peaks().flops_per_second > 0);
    QVERIFY2(m_timeline->statsText().contains("of this machine's peak"), qPrintable(m_timeline->statsText()));
}

void TestKvContextTimeline::selectionIsLinked()
{
    const auto t = m_timeline->timeline();
    QVERIFY(t);
    // Click the decode event of token 3 in the timeline.
    TimelineView* view = m_timeline->view();
    int event = -1;
    for (std::size_t i = 0; i < t->events.size(); ++i)
        if (t->events[i].step == 3 && t->events[i].stage == int(engine::TimelineStage::Decode))
            event = int(i);
    QVERIFY(event >= 0);
    QTest::mouseClick(view, Qt::LeftButton, {}, view->eventRect(std::size_t(event)).center().toPoint());
    QCOMPARE(m_selection->position(), t->prompt_tokens + 3);
    // The KV contents view: clicking a row selects that position everywhere (the stepper highlights it).
    QSignalSpy shown(m_kv.get(), &KvPanel::contentsShown);
    m_kv->showContents(0, 0, true);
    QVERIFY(shown.wait(10000));
    KvHeatStrip* strip = m_kv->heatStrip();
    int y = 0;
    while (y < strip->height() && strip->rowAt(y) != 2)
        ++y;
    QTest::mouseClick(strip, Qt::LeftButton, {}, QPoint(strip->width() / 2, y + 1));
    QCOMPARE(m_selection->position(), 2);
    QVERIFY(m_stepper->sequenceHtml().contains("href='pos:2'"));
    // its colour scale: above the rows (a click there selects nothing), inside the strip, labelled with
    // the clipping value at both ends
    const QRect legend = strip->legendRect();
    QVERIFY(strip->rect().contains(legend));
    QCOMPARE(strip->rowAt(legend.center().y()), -1);
    const QStringList labels = strip->legendLabels();
    QCOMPARE(labels.size(), 3);
    QCOMPARE(labels[1], QString("0"));
    QVERIFY2(labels[2].endsWith(labels[0].mid(labels[0].indexOf(QChar(0x2212)) + 1)), qPrintable(labels.join(" ")));
}

QTEST_MAIN(TestKvContextTimeline)
#include "test_kv_context_timeline.moc"

// The Quantized cache tab: what Q8_0 saves on this model, the damage per token as an independent
// comparison computes it, and "Use this cache" giving the engine (and so the live gauge) that cache.
void TestKvContextTimeline::quantizedCacheShowsItsMemoryAndDamage()
{
    const engine::KvCacheTypes q8{engine::GgmlType::Q8_0, engine::GgmlType::Q8_0};
    m_kv->showTab(3);
    m_kv->chooseCacheTypes(q8);
    // 34 bytes per 32 values against 64: 46.875% less, whatever the layers keep
    QVERIFY2(m_kv->cacheMemoryText().contains("46.9% less"), qPrintable(m_kv->cacheMemoryText()));
    QVERIFY(m_kv->cacheMemoryText().contains("The engine's cache now: F16"));

    const QString text = "The cache of a long conversation grows by one key and one value per token and per layer, "
                         "so halving its bytes doubles the context that fits.";
    m_kv->findChild<QPlainTextEdit*>("kvQuantText")->setPlainText(text);
    QSignalSpy measured(m_kv.get(), &KvPanel::damageMeasured);
    QTest::mouseClick(m_kv->findChild<QPushButton*>("kvQuantMeasure"), Qt::LeftButton);
    QVERIFY(measured.wait(120000));
    const auto damage = m_kv->damage();
    QVERIFY2(damage && damage->compared, qPrintable(m_kv->damageText()));
    // The same comparison computed here: an F16 cache against a Q8_0 one, position by position.
    const auto ids = m_model->tokenizer().encode_ids(text.toStdString());
    auto f16 = engine::make_cpu_backend(m_model, testsupport::app_cpu_options(2, 512));
    auto quantized = engine::make_cpu_backend(m_model, testsupport::app_cpu_options(2, 512, q8));
    const engine::ModelComparison c = engine::compare_models(*f16, *quantized, ids);
    QCOMPARE(damage->tokens.size(), ids.size());
    QCOMPARE(c.positions.size() + 1, ids.size());
    int moved = 0;
    for (const engine::PositionComparison& p : c.positions) {
        QCOMPARE(damage->tokens[p.position].kl, p.kl);
        moved += p.kl > 0.0;
    }
    QVERIFY2(moved > int(c.positions.size()) / 2, "a Q8_0 cache left most predictions unchanged to the last bit");
    QCOMPARE(damage->mean_kl, c.mean_kl);
    QVERIFY(m_kv->damageText().contains(QString("mean KL %1 nats").arg(c.mean_kl, 0, 'g', 3)));

    // "Use this cache": the engine's next load keeps Q8_0 keys and values; the gauge shows their bytes.
    QSignalSpy applied(m_kv.get(), &KvPanel::cacheTypesApplied);
    QTest::mouseClick(m_kv->findChild<QPushButton*>("kvQuantApply"), Qt::LeftButton);
    QCOMPARE(applied.count(), 1);
    QVERIFY(m_engine->kvCacheTypes() == q8);
    QCOMPARE(QSettings().value("engine/cache_type_k").toString(), QString("Q8_0"));
    QSignalSpy loaded(m_engine.get(), &EngineController::modelLoaded);
    m_engine->loadModel(QString::fromStdString(m_path), 2, m_n_ctx);
    QVERIFY(loaded.wait(120000));
    const auto summary = loaded.first().first().value<std::shared_ptr<const ModelSummary>>();
    QVERIFY2(summary->backend.contains("KV cache K Q8_0, V Q8_0"), qPrintable(summary->backend));
    m_stepper->setPrompt("Quantized keys and values:");
    QVERIFY(act([&] { m_stepper->prefill(); }));
    QTRY_VERIFY(m_kv->snapshot() && m_kv->snapshot()->cache_types == "K Q8_0, V Q8_0" &&
                m_kv->snapshot()->tokens_cached > 0);
    engine::Session reference(m_model, engine::make_cpu_backend(m_model, testsupport::app_cpu_options(2, m_n_ctx, q8)),
                              128);
    reference.prefill(m_model->tokenizer().encode_ids("Quantized keys and values:"));
    QCOMPARE(m_kv->snapshot()->bytes_in_use, reference.backend().kv_cache().accounting().bytes_in_use);
    QVERIFY(m_kv->cacheMemoryText().contains("The engine's cache now: K Q8_0, V Q8_0"));
    QSettings().remove("engine");
}
