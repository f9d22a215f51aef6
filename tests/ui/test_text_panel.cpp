// SPDX-License-Identifier: GPL-3.0-or-later
// The text analysis panel driven offscreen on the real default model (a small random-weight twin
// under the sanitizers): every token's probability, surprisal, rank and entropy are exactly what the
// engine's analysis computes on an independent backend; a selection's perplexity is its tokens';
// the model compared with its own file gives KL exactly 0 everywhere and the two distributions of a
// clicked token coincide; a click opens the stepper at that position and the stepper's probability
// of the token that came next equals the panel's (1e-6 relative); Stop says "Stopped"; a text too
// short, a missing file and a model with another vocabulary are refused with their reasons.
#include "analysis/text_analysis.h"
#include "bridge/engine_controller.h"
#include "bridge/token_selection.h"
#include "line_breaks.h"
#include "model/model.h"
#include "panels/stepper_panel.h"
#include "panels/text_panel.h"
#include "signal_wait.h"
#include "test_paths.h"
#include "text_review.h"
#include "tokenizer/tokenizer.h"
#include "widgets/distribution_overlay.h"

#include <QFile>
#include <QPushButton>
#include <QTest>
#include <QTextBlock>
#include <QTextBrowser>
#include <QTextDocument>
#include <QTextLayout>
#include <cmath>

using namespace tokenscope::ui;

namespace {

QString fixture_text()
{
    QFile f(QString::fromStdString(testsupport::data_dir()) + "/analysis/fixture-text.txt");
    return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()) : QString();
}

} // namespace

class TestTextPanel : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void cleanup(); // after every function: the words its state shows, proofread
    void resultIsTheEngines();
    void comparedWithItselfIsExactlyZero();
    void clickOpensTheStepperAtThatPosition();
    void stopSaysStopped();
    void badInputIsRefused();
    void linesBreakBetweenWords();

private:
    std::shared_ptr<const TextAnalysisSnapshot> run(const QString& text, const QString& compare_with = {});

    std::string m_path;
    std::shared_ptr<const engine::Model> m_model;
    std::unique_ptr<EngineController> m_engine;
    std::unique_ptr<TextPanel> m_panel;
};

void TestTextPanel::initTestCase()
{
    REQUIRE_DEFAULT_MODEL(path);
    m_path = path;
    m_model = engine::Model::load(path);
    m_engine = std::make_unique<EngineController>();
    m_panel = std::make_unique<TextPanel>(m_engine.get());
    m_panel->resize(1000, 760);
    m_panel->show();
    QSignalSpy loaded(m_engine.get(), &EngineController::modelLoaded);
    // llama.cpp's plain order: its repacked one (the app's default) sums a batch's whole groups of
    // four tokens otherwise than the rest, so the stepper's 128-token batches and the analysis'
    // windows would give a token other bits there (as llama.cpp's own batches do)
    m_engine->loadModel(QString::fromStdString(path), 2, 512, "cpu-plain");
    QVERIFY(loaded.wait(120000));
}

void TestTextPanel::cleanup()
{
    if (m_panel)
        QVERIFY_WORDING(m_panel.get());
}

std::shared_ptr<const TextAnalysisSnapshot> TestTextPanel::run(const QString& text, const QString& compare_with)
{
    QSignalSpy done(m_panel.get(), &TextPanel::analyzed);
    m_panel->analyze(text, compare_with);
    if (!testsupport::seen(done, 1, 300000))
        return nullptr;
    return m_panel->result();
}

void TestTextPanel::resultIsTheEngines()
{
    const QString text = fixture_text();
    const auto r = run(text);
    QVERIFY(r && r->error.isEmpty());
    const auto ids = m_model->tokenizer().encode_ids(text.toStdString());
    auto backend = engine::make_cpu_backend(m_model, {.threads = 1, .n_ctx = 512, .order = engine::WeightOrder::Plain});
    const engine::TextAnalysis want = engine::analyze_text(*backend, ids);
    QCOMPARE(r->tokens.size(), ids.size());
    QVERIFY(!r->tokens[0].predicted);
    QCOMPARE(want.predictions.size(), ids.size() - 1);
    for (const engine::TokenPrediction& w : want.predictions) {
        const AnalyzedToken& got = r->tokens[w.position];
        QVERIFY(got.predicted);
        QCOMPARE(got.id, int(w.id));
        QCOMPARE(got.p, w.p);
        QCOMPARE(got.surprisal_bits, w.surprisal_bits);
        QCOMPARE(got.rank, int(w.rank));
        QCOMPARE(got.entropy_bits, w.entropy_bits);
        QCOMPARE(got.top.size(), w.top.size());
        for (std::size_t i = 0; i < w.top.size(); ++i)
            QCOMPARE(got.top[i].second, double(w.top[i].second));
    }
    QCOMPARE(r->perplexity, want.perplexity);
    QVERIFY2(m_panel->status().contains(QLocale().toString(want.perplexity, 'f', 3)), qPrintable(m_panel->status()));
    // a selection's perplexity is that of its tokens
    const auto sel = std::span(want.predictions).subspan(40, 30); // tokens 41 … 70
    QCOMPARE(m_panel->selectionPerplexity(41, 71), engine::perplexity_of(sel));
    // the tip names the candidates and the rank
    const QString tip = m_panel->tokenTip(41);
    QVERIFY2(tip.contains(QString("rank %1").arg(want.predictions[40].rank)), qPrintable(tip));
    QVERIFY(m_panel->tokenTip(0).contains("nothing before it"));
}

void TestTextPanel::comparedWithItselfIsExactlyZero()
{
    const QString text = fixture_text().left(400);
    const auto r = run(text, QString::fromStdString(m_path));
    QVERIFY(r && r->error.isEmpty());
    QVERIFY(r->compared);
    QCOMPARE(r->mean_kl, 0.0);
    QCOMPARE(r->same_top, 1.0);
    int predicted = 0;
    for (const AnalyzedToken& t : r->tokens) {
        if (!t.predicted)
            continue;
        ++predicted;
        QCOMPARE(t.kl, 0.0);
        QCOMPARE(t.reverse_kl, 0.0);
        QCOMPARE(t.p_b, t.p);
        QVERIFY(t.same_top);
        QVERIFY(t.candidates.size() >= 5);
    }
    QCOMPARE(predicted, int(r->tokens.size()) - 1);
    QVERIFY(m_panel->overlay()->isVisible());
    m_panel->selectToken(12);
    const auto& rows = m_panel->overlay()->rows();
    QVERIFY(!rows.empty());
    int real = 0;
    for (const auto& row : rows) {
        QCOMPARE(row.p_a, row.p_b);
        real += row.real ? 1 : 0;
    }
    QCOMPARE(real, 1);
    QCOMPARE(rows.front().p_a, r->tokens[12].candidates.front().p_a);
}

void TestTextPanel::clickOpensTheStepperAtThatPosition()
{
    const QString text = fixture_text();
    const auto r = run(text);
    QVERIFY(r && r->error.isEmpty());
    TokenSelection selection;
    StepperPanel stepper(m_engine.get(), &selection);
    stepper.resize(1000, 700);
    stepper.show();
    connect(m_panel.get(), &TextPanel::stepperRequested, &stepper,
            [&stepper](const std::vector<int32_t>& ids, const QString& shown) { stepper.prefillTokens(ids, shown); });
    auto* view = m_panel->findChild<QTextBrowser*>();
    QVERIFY(view);
    int states = 0;
    QSignalSpy changed(&stepper, &StepperPanel::stateChanged);
    for (int k : {5, 130, 261}) {
        QSignalSpy asked(m_panel.get(), &TextPanel::stepperRequested);
        emit view->anchorClicked(QUrl(QString("token:%1").arg(k))); // what a click on the token sends
        QCOMPARE(asked.count(), 1);
        QCOMPARE(m_panel->selectedToken(), k);
        QVERIFY(testsupport::seen(changed, ++states, 120000));
        const auto& s = stepper.state();
        QVERIFY(s && s->error.isEmpty());
        QCOMPARE(s->prompt_length, k);
        for (int i = 0; i < k; ++i)
            QCOMPARE(s->tokens[std::size_t(i)].id, r->tokens[std::size_t(i)].id);
        const std::vector<float>& l = *s->logits;
        const double m = *std::max_element(l.begin(), l.end());
        double z = 0;
        for (float x : l)
            z += std::exp(double(x) - m);
        const AnalyzedToken& t = r->tokens[std::size_t(k)];
        const double p = std::exp(double(l[std::size_t(t.id)]) - m) / z;
        QVERIFY2(std::abs(p - t.p) <= 1e-6 * t.p, qPrintable(QString("position %1: %2 vs %3").arg(k).arg(p).arg(t.p)));
    }
}

void TestTextPanel::stopSaysStopped()
{
    QString text;
    for (int i = 0; i < 6; ++i)
        text += fixture_text(); // ~1,800 tokens: several windows
    QSignalSpy done(m_panel.get(), &TextPanel::analyzed);
    m_panel->analyze(text);
    auto* stop = m_panel->findChild<QPushButton*>("textStop");
    QVERIFY(stop && stop->isEnabled());
    QTest::mouseClick(stop, Qt::LeftButton);
    QVERIFY(testsupport::seen(done, 1, 300000));
    const auto r = m_panel->result();
    QVERIFY(r && r->cancelled);
    QVERIFY2(m_panel->status().startsWith("Stopped"), qPrintable(m_panel->status()));
    int predicted = 0;
    for (const AnalyzedToken& t : r->tokens)
        predicted += t.predicted ? 1 : 0;
    QVERIFY(predicted < int(r->tokens.size()) - 1);
}

void TestTextPanel::badInputIsRefused()
{
    QSignalSpy done(m_panel.get(), &TextPanel::analyzed);
    m_panel->analyze("");
    QVERIFY(testsupport::seen(done, 1));
    QVERIFY2(m_panel->status().contains("too short"), qPrintable(m_panel->status()));
    m_panel->analyze("Some text to compare", "/nonexistent/other.gguf");
    QVERIFY(testsupport::seen(done, 2));
    QVERIFY2(m_panel->status().contains("other.gguf"), qPrintable(m_panel->status()));
    const std::string chat = testsupport::chat_model_path();
    if (chat.empty())
        return; // the sanitizer tree's twins may share a vocabulary
    m_panel->analyze("Some text to compare", QString::fromStdString(chat));
    QVERIFY(testsupport::seen(done, 3));
    QVERIFY2(m_panel->status().contains("vocabular"), qPrintable(m_panel->status()));
}

// A long text in a narrow view: every line break falls between words — the character before it is not a
// letter or digit when the one after it is (the analysis view draws spaces as "·", which Qt does not
// break at: "hap/pened" was cut across lines).
void TestTextPanel::linesBreakBetweenWords()
{
    QString text;
    for (int i = 0; i < 6; ++i)
        text += "Nobody knew what had happened to the old keeper of the lighthouse that winter night. ";
    const auto r = run(text);
    QVERIFY(r && r->error.isEmpty());
    auto* view = m_panel->findChild<QTextBrowser*>();
    QVERIFY(view);
    int breaks = 0;
    const QStringList inside = testsupport::words_broken(view->document(), 360, &breaks); // lines at 360 px
    QVERIFY2(breaks >= 5, qPrintable(QString("only %1 line breaks: the view is not narrow enough").arg(breaks)));
    QVERIFY2(inside.isEmpty(), qPrintable("lines break inside words: " + inside.join(" | ")));
}

QTEST_MAIN(TestTextPanel)
#include "test_text_panel.moc"
