// SPDX-License-Identifier: GPL-3.0-or-later
// The decode stepper panel driven like a user would, on the real default model: Prefill reports
// every prompt token in every layer; temperature 0 is greedy; the sampling controls reshape the
// previewed distribution before the step; a clicked candidate is forced into the sequence and
// changes the next distribution; Back then Step with the same token gives bit-equal logits and the
// same KV accounting; the logit lens's last row is the real distribution; Play runs to a stop
// reason; selection is linked with the tokenizer panel.
#include "bridge/chat_client.h"
#include "bridge/engine_controller.h"
#include "bridge/stepper_client.h"
#include "bridge/token_selection.h"
#include "line_breaks.h"
#include "model/model.h"
#include "panels/stepper_panel.h"
#include "panels/tokenizer_panel.h"
#include "test_paths.h"
#include "text_review.h"
#include "widgets/distribution_view.h"

#include <QPushButton>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTest>
#include <QTextBrowser>
#include <cmath>
#include <cstring>

using namespace tokenscope::ui;

namespace {

int argmax(const std::vector<float>& v)
{
    return int(std::max_element(v.begin(), v.end()) - v.begin());
}

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b)
{
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

} // namespace

class TestStepperPanel : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void cleanup(); // after every function: the words its state shows, proofread
    void prefillShowsEveryPromptTokenInEveryLayer();
    void temperatureZeroIsGreedyAndControlsReshapeThePreview();
    void forcedCandidateEntersTheSequence();
    void backThenStepIsBitEqual();
    void logitLensLastRowIsTheRealDistribution();
    void selectionIsLinkedWithTheTokenizer();
    void playRunsToAStopReason();
    void emptyPromptIsRefusedClearly();
    void sequenceSurvivesAChatReply();
    void longPrefillCanBeStopped();
    void oneTokenIsOneToken();
    void sequenceLinesBreakBetweenWords();

private:
    // Runs an action and waits for the state it produces.
    std::shared_ptr<const StepperState> act(const std::function<void()>& action);

    std::string m_path;
    std::shared_ptr<const engine::Model> m_model;
    std::unique_ptr<EngineController> m_engine;
    std::unique_ptr<TokenSelection> m_selection;
    std::unique_ptr<StepperPanel> m_panel;
    std::unique_ptr<TokenizerPanel> m_tokenizer;
    const QString m_prompt = "The capital of France is";
};

void TestStepperPanel::initTestCase()
{
    REQUIRE_DEFAULT_MODEL(path);
    m_path = path;
    m_model = engine::Model::load(path);
    m_engine = std::make_unique<EngineController>();
    m_selection = std::make_unique<TokenSelection>();
    m_panel = std::make_unique<StepperPanel>(m_engine.get(), m_selection.get());
    m_tokenizer = std::make_unique<TokenizerPanel>(m_engine.get(), m_selection.get());
    m_panel->resize(1100, 800);
    m_panel->show();
    QSignalSpy loaded(m_engine.get(), &EngineController::modelLoaded);
    m_engine->loadModel(QString::fromStdString(path), 2, 512);
    QVERIFY(loaded.wait(120000));
}

void TestStepperPanel::cleanup()
{
    if (m_panel)
        QVERIFY_WORDING(m_panel.get());
    if (m_tokenizer)
        QVERIFY_WORDING(m_tokenizer.get());
}

std::shared_ptr<const StepperState> TestStepperPanel::act(const std::function<void()>& action)
{
    QSignalSpy changed(m_panel.get(), &StepperPanel::stateChanged);
    action();
    if (!changed.wait(60000))
        return nullptr;
    return m_panel->state();
}

void TestStepperPanel::prefillShowsEveryPromptTokenInEveryLayer()
{
    m_panel->setPrompt(m_prompt);
    auto state = act([&] { m_panel->prefill(); });
    QVERIFY(state);
    QCOMPARE(state->action, QString("prefill"));
    const auto ids = m_model->tokenizer().encode_ids(m_prompt.toStdString());
    QCOMPARE(state->prompt_length, int(ids.size()));
    QCOMPARE(state->prefill_computed, int(ids.size()));
    QCOMPARE(state->kv_tokens, int(ids.size()));
    QCOMPARE(int(state->kv_layer_tokens.size()), int(m_model->config().n_layer));
    for (int t : state->kv_layer_tokens)
        QCOMPARE(t, int(ids.size()));
    for (std::size_t i = 0; i < ids.size(); ++i)
        QCOMPARE(state->tokens[i].id, ids[i]);
    const QString sentence = m_panel->cacheSentence();
    QVERIFY2(sentence.contains(QString("%1 prompt tokens processed in parallel").arg(ids.size())) &&
                 sentence.contains(QString("%1 layers").arg(m_model->config().n_layer)),
             qPrintable(sentence));
}

void TestStepperPanel::temperatureZeroIsGreedyAndControlsReshapeThePreview()
{
    QVERIFY(m_panel->state());
    const int best = argmax(*m_panel->state()->logits);
    StepperSettings s = m_panel->settings();
    s.greedy = false;
    s.sampling.temperature = 0.0f;
    m_panel->setSettings(s);
    QCOMPARE(m_panel->preview().token, best);
    s.sampling.temperature = 1.0f;
    s.greedy = true;
    m_panel->setSettings(s);
    QCOMPARE(m_panel->preview().token, best);

    // Live: the settings reshape the shown distribution before any step is taken.
    s.greedy = false;
    s.sampling.temperature = 1.0f;
    s.sampling.top_k = 3;
    s.sampling.top_p = 1.0f;
    s.sampling.min_p = 0.0f;
    m_panel->setSettings(s);
    m_panel->showStage(6);
    QCOMPARE(m_panel->preview().stages.back().survivors, std::size_t(3));
    int surviving = 0;
    for (const auto& row : m_panel->distribution()->rows())
        surviving += row.survives;
    QCOMPARE(surviving, 3);
    const float p_top3 = m_panel->distribution()->rows().front().after;
    s.sampling.temperature = 2.0f;
    m_panel->setSettings(s);
    QVERIFY(m_panel->distribution()->rows().front().after < p_top3); // a hotter temperature flattens it
    s.sampling.temperature = 0.0f;
    s.sampling.top_k = 40;
    m_panel->setSettings(s);
}

void TestStepperPanel::forcedCandidateEntersTheSequence()
{
    m_panel->showStage(0); // the raw distribution: every candidate listed
    const auto before = m_panel->state();
    const auto rows = m_panel->distribution()->rows();
    QVERIFY(rows.size() >= 2);
    const int forced = rows[1].id; // the runner-up: greedy would not take it
    QVERIFY(forced != m_panel->preview().token);
    // Click its bar, as a user does.
    DistributionView* view = m_panel->distribution();
    int y = 0;
    while (y < view->height() && view->rowAt(y) != 1)
        ++y;
    QVERIFY(y < view->height());
    auto state = act([&] { QTest::mouseClick(view, Qt::LeftButton, {}, QPoint(view->width() / 2, y + 2)); });
    QVERIFY(state && state->action == "step");
    QCOMPARE(state->tokens.back().id, forced);
    QVERIFY(state->tokens.back().forced);
    QVERIFY(!state->tokens.back().prompt);
    QCOMPARE(int(state->tokens.size()), int(before->tokens.size()) + 1);
    QVERIFY(!bit_equal(*state->logits, *before->logits)); // the next distribution is a new one
    QVERIFY2(m_panel->cacheSentence().contains(
                 QString("reuses %1 cached K/V pairs; computes 1 new one").arg(before->tokens.size())),
             qPrintable(m_panel->cacheSentence()));
}

void TestStepperPanel::backThenStepIsBitEqual()
{
    auto first = act([&] { m_panel->step(); });
    QVERIFY(first && first->action == "step");
    const int token = first->tokens.back().id;
    auto back = act([&] { m_panel->back(); });
    QVERIFY(back && back->action == "back");
    QCOMPARE(back->kv_tokens, first->kv_tokens - 1); // truncated, not cleared
    QCOMPARE(int(back->tokens.size()), int(first->tokens.size()) - 1);
    auto again = act([&] { m_panel->step(token); });
    QVERIFY(again && again->action == "step");
    QCOMPARE(again->tokens.back().id, token);
    QVERIFY(bit_equal(*again->logits, *first->logits));
    QCOMPARE(again->kv_tokens, first->kv_tokens);
    QCOMPARE(again->kv_bytes_in_use, first->kv_bytes_in_use);
    QCOMPARE(again->kv_layer_tokens, first->kv_layer_tokens);
    QVERIFY(again->branches.isEmpty()); // the same token again is the same path

    // A different token after Back is a branch, and it is listed.
    act([&] { m_panel->back(); });
    const auto alternatives = m_panel->preview().stages.front().top;
    const int other = alternatives[0].id == token ? alternatives[1].id : alternatives[0].id;
    auto branched = act([&] { m_panel->step(other); });
    QVERIFY(branched);
    QCOMPARE(branched->branches.size(), 1);
    QCOMPARE(m_panel->branches().size(), 1);
}

void TestStepperPanel::logitLensLastRowIsTheRealDistribution()
{
    StepperSettings s = m_panel->settings();
    s.logit_lens = true;
    m_panel->setSettings(s);
    auto state = act([&] { m_panel->step(); });
    QVERIFY(state);
    QCOMPARE(int(state->lens.size()), int(m_model->config().n_layer));
    const auto& logits = *state->logits;
    const float max = *std::max_element(logits.begin(), logits.end());
    double z = 0.0;
    for (float l : logits)
        z += std::exp(double(l - max));
    const auto& last = state->lens.back();
    QCOMPARE(last.front().id, argmax(logits));
    for (const LensCandidate& c : last)
        QVERIFY(std::abs(double(c.probability) - std::exp(double(logits[std::size_t(c.id)] - max)) / z) < 1e-6);
    QCOMPARE(m_panel->lensTable()->rowCount(), int(m_model->config().n_layer));
    QVERIFY(m_panel->lensTable()->item(int(m_model->config().n_layer) - 1, 0)->text().startsWith(last.front().text));
}

void TestStepperPanel::selectionIsLinkedWithTheTokenizer()
{
    QSignalSpy updated(m_tokenizer.get(), &TokenizerPanel::updated);
    m_tokenizer->setText(m_prompt);
    QVERIFY(updated.wait(10000));
    // The tokenizer selects → the stepper highlights the same position.
    m_tokenizer->selectToken(2);
    QCOMPARE(m_selection->position(), 2);
    const QColor accent = m_panel->palette().color(QPalette::Highlight);
    const QString html = m_panel->sequenceHtml();
    const qsizetype at = html.indexOf("href='pos:2'");
    QVERIFY(at >= 0);
    QVERIFY(html.mid(at, html.indexOf("</a>", at) - at).contains("background-color: " + accent.name()));
    // The stepper selects (a click on a generated token) → the tokenizer shows that token, and the
    // stepper shows the distribution the token was drawn from.
    auto* sequence = m_panel->findChild<QTextBrowser*>("stepperSequence");
    QVERIFY(sequence);
    emit sequence->anchorClicked(QUrl("pos:4"));
    QCOMPARE(m_selection->position(), 4);
    QVERIFY2(m_tokenizer->detailText().startsWith("Token 5 of"), qPrintable(m_tokenizer->detailText()));
    const int last = int(m_panel->state()->tokens.size()) - 1;
    emit sequence->anchorClicked(QUrl(QString("pos:%1").arg(last)));
    bool chosen_shown = false;
    for (const auto& row : m_panel->distribution()->rows())
        chosen_shown |= row.chosen && row.id == m_panel->state()->tokens.back().id;
    QVERIFY(chosen_shown);
    m_selection->clear();
}

void TestStepperPanel::playRunsToAStopReason()
{
    StepperSettings s = m_panel->settings();
    s.sampling.max_tokens = 3;
    s.logit_lens = false;
    m_panel->setSettings(s);
    QVERIFY(act([&] { m_panel->prefill(); }));
    m_panel->setPlaying(true);
    QTRY_VERIFY_WITH_TIMEOUT(m_panel->state() && !m_panel->state()->stop_reason.isEmpty(), 60000);
    QCOMPARE(m_panel->state()->steps, 3);
    QCOMPARE(m_panel->state()->stop_reason, QString("maximum tokens"));
    QVERIFY(!m_panel->playing());
    QVERIFY(!m_panel->state()->generated_text.isEmpty());
}

void TestStepperPanel::emptyPromptIsRefusedClearly()
{
    const auto before = m_panel->state();
    m_panel->setPrompt("   ");
    act([&] { m_panel->prefill(); });
    QVERIFY2(m_panel->lastError().contains("The prompt is empty"), qPrintable(m_panel->lastError()));
    QCOMPARE(m_panel->state(), before); // the run shown stays as it was
}

void TestStepperPanel::sequenceSurvivesAChatReply()
{
    m_panel->setPrompt(m_prompt);
    auto state = act([&] { m_panel->prefill(); });
    QVERIFY(state);
    state = act([&] { m_panel->step(); });
    QVERIFY(state && state->action == "step");
    const auto before = state->history;

    // A chat reply in between runs on the chat's own session.
    QSignalSpy finished(&m_engine->chat(), &ChatClient::replyFinished);
    SamplingSettings s;
    s.temperature = 0.0f;
    s.max_tokens = 6;
    m_engine->chat().sendChat({{"user", "Something else entirely."}}, s);
    QVERIFY(finished.wait(120000));

    state = act([&] { m_panel->step(); });
    QVERIFY2(state && state->action == "step", qPrintable(m_panel->lastError()));
    QCOMPARE(int(state->history.size()), int(before.size()) + 1); // the stepper's sequence, one token longer
    QVERIFY(std::equal(before.begin(), before.end(), state->history.begin()));
    QCOMPARE(state->kv_tokens, int(state->history.size()));
}

void TestStepperPanel::longPrefillCanBeStopped()
{
    // Four batches of 128 (the context is 512): the Stop button appears with the progress and ends
    // this prefill alone.
    QString prompt;
    while (m_model->tokenizer().encode_ids(prompt.toStdString()).size() < 400)
        prompt += "The river bends past the mill and the miller counts the sacks of grain. ";
    m_panel->setPrompt(prompt);
    QSignalSpy progress(&m_engine->stepper(), &StepperClient::prefillProgress);
    QSignalSpy changed(m_panel.get(), &StepperPanel::stateChanged);
    auto* stop = m_panel->findChild<QPushButton*>("stepperStopPrefill");
    QVERIFY(stop);
    QVERIFY(!stop->isVisibleTo(m_panel.get()));
    m_panel->prefill();
    QVERIFY(progress.wait(60000));
    QTRY_VERIFY(stop->isVisibleTo(m_panel.get()));
    QTest::mouseClick(stop, Qt::LeftButton);
    QVERIFY(!changed.isEmpty() || changed.wait(60000));
    QVERIFY2(m_panel->lastError().startsWith("Prefill cancelled after"), qPrintable(m_panel->lastError()));
    QVERIFY(!stop->isVisibleTo(m_panel.get()));
    QVERIFY(!m_panel->pending());
}

// A one-token prompt and a first step speak of one token, not "1 tokens".
void TestStepperPanel::oneTokenIsOneToken()
{
    const auto ids = m_model->tokenizer().encode_ids("Hello");
    auto state = act([&] { m_panel->prefillTokens({ids.front()}, QString()); });
    QVERIFY(state && state->error.isEmpty());
    QCOMPARE(state->prompt_length, 1);
    QVERIFY2(m_panel->statusText().startsWith("Prompt prefilled: 1 token."), qPrintable(m_panel->statusText()));
    QVERIFY2(m_panel->cacheSentence().contains("1 prompt token processed in parallel"),
             qPrintable(m_panel->cacheSentence()));
    state = act([&] { m_panel->step(); });
    QVERIFY(state && state->action == "step");
    QVERIFY2(m_panel->statusText().contains("sequence 2 tokens (1 prompt + 1 generated)"),
             qPrintable(m_panel->statusText()));
    QVERIFY2(m_panel->cacheSentence().contains("reuses 1 cached K/V pair;"), qPrintable(m_panel->cacheSentence()));
    state = act([&] { m_panel->back(); });
    QVERIFY(state && state->action == "back");
    QVERIFY2(m_panel->cacheSentence().contains("truncated to 1 position and"), qPrintable(m_panel->cacheSentence()));
}

// The sequence view shows spaces as "·": its lines still break between words, never inside one.
void TestStepperPanel::sequenceLinesBreakBetweenWords()
{
    QString prompt;
    for (int i = 0; i < 4; ++i)
        prompt += "Nobody knew what had happened to the old keeper of the lighthouse that winter night. ";
    m_panel->setPrompt(prompt);
    QVERIFY(act([&] { m_panel->prefill(); }));
    auto* view = m_panel->findChild<QTextBrowser*>("stepperSequence");
    QVERIFY(view);
    int breaks = 0;
    const QStringList inside = testsupport::words_broken(view->document(), 360, &breaks);
    QVERIFY2(breaks >= 4, qPrintable(QString("only %1 line breaks: the view is not narrow enough").arg(breaks)));
    QVERIFY2(inside.isEmpty(), qPrintable("lines break inside words: " + inside.join(" | ")));
}

QTEST_MAIN(TestStepperPanel)
#include "test_stepper_panel.moc"
