// SPDX-License-Identifier: GPL-3.0-or-later
#include "tour/guided_tour.h"

#include "bridge/engine_controller.h"
#include "main_window.h"
#include "model/model_locator.h"
#include "panels/context_panel.h"
#include "panels/stepper_panel.h"
#include "panels/tokenizer_panel.h"

#include <QDockWidget>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>

namespace tokenscope::ui {

GuidedTour::GuidedTour(MainWindow* window, EngineController* engine)
    : QFrame(window, Qt::Tool), m_window(window), m_engine(engine)
{
    setObjectName("guided-tour");
    setWindowTitle(tr("Tour: how a model writes"));
    setFrameStyle(QFrame::StyledPanel);
    auto* v = new QVBoxLayout(this);
    m_title = new QLabel;
    m_title->setTextFormat(Qt::PlainText);
    QFont bold = m_title->font();
    bold.setBold(true);
    bold.setPointSizeF(bold.pointSizeF() * 1.15);
    m_title->setFont(bold);
    v->addWidget(m_title);
    m_text = new QLabel;
    m_text->setWordWrap(true);
    m_text->setTextFormat(Qt::RichText);
    m_text->setAlignment(Qt::AlignLeft | Qt::AlignTop);
    m_text->setMinimumWidth(fontMetrics().averageCharWidth() * 52);
    v->addWidget(m_text, 1);
    m_open_model = new QPushButton(tr("Open the default model"));
    m_open_model->setObjectName("tour-open-model");
    connect(m_open_model, &QPushButton::clicked, this, [this] {
        if (const auto found = engine::find_default_model())
            m_window->openModel(QString::fromStdString(found->string()));
        else
            m_text->setText(m_text->text() + "<p>" +
                            tr("The default model is not installed: <code>bash scripts/setup.sh</code> installs it, "
                               "or open any GGUF file with File → Open model.") +
                            "</p>");
    });
    v->addWidget(m_open_model);
    auto* row = new QHBoxLayout;
    auto* close_button = new QPushButton(tr("Close"));
    connect(close_button, &QPushButton::clicked, this, &QWidget::close);
    m_back = new QPushButton(tr("◂ Back"));
    m_back->setObjectName("tour-back");
    m_next = new QPushButton(tr("Next ▸"));
    m_next->setObjectName("tour-next");
    m_next->setDefault(true);
    row->addWidget(close_button);
    row->addStretch(1);
    row->addWidget(m_back);
    row->addWidget(m_next);
    v->addLayout(row);
    connect(m_back, &QPushButton::clicked, this, [this] { showStep(m_step - 1); });
    connect(m_next, &QPushButton::clicked, this, [this] {
        if (m_step + 1 < stepCount())
            showStep(m_step + 1);
        else
            close();
    });
    connect(m_engine, &EngineController::modelLoaded, this, [this] { updateButtons(); });
    const auto done = [this] {
        if (!m_waiting || (m_done_when && !m_done_when()))
            return;
        m_waiting = false;
        updateButtons();
        emit ready();
    };
    connect(m_window->stepperPanel(), &StepperPanel::stateChanged, this, done);
    connect(m_window->tokenizerPanel(), &TokenizerPanel::rendered, this, done);
    buildSteps();
    showStep(0);
}

QPushButton* GuidedTour::stepperButton(const QString& text) const
{
    for (auto* b : m_window->stepperPanel()->findChildren<QPushButton*>())
        if (b->text() == text)
            return b;
    return nullptr;
}

void GuidedTour::buildSteps()
{
    StepperPanel* stepper = m_window->stepperPanel();
    // Presses a stepper button and waits until the stepper's state shows it done (a prefill reports
    // progress on the way; a step is done when the step count moved).
    const auto press = [this](const QString& text, std::function<bool()> done_when) {
        if (QPushButton* b = stepperButton(text); b && b->isEnabled()) {
            m_waiting = true;
            m_done_when = std::move(done_when);
            b->click();
        }
    };
    const auto step_done = [stepper] {
        const int before = stepper->state() ? stepper->state()->steps : 0;
        return [stepper, before] {
            const auto s = stepper->state();
            return s && (s->steps == before + 1 || s->action == "error");
        };
    };
    m_steps = {
        {"",
         tr("How a model writes, one token at a time"),
         tr("<p>This tour runs the loaded model and shows each stage where it happens: text becomes tokens, the "
            "prompt is read in parallel, each step predicts a distribution, sampling picks one token, it is "
            "appended and the model predicts again — with the KV cache growing underneath and the context window "
            "filling.</p><p>Each step fills a panel and presses its button for you; everything stays as it is "
            "when you close the tour.</p>"),
         {}},
        {"tokenizer", tr("1 · Text becomes tokens"),
         tr("<p>The model never sees letters: the tokenizer cuts the text into pieces of its vocabulary and the "
            "model reads their ids. Common words are one token; the misspelt <i>leter</i> is cut into smaller "
            "pieces.</p><p>Point at a token for its id and bytes; edit the text to see which tokens change.</p>"),
         [this] {
             m_waiting = true; // until the tokens are drawn
             m_done_when = {};
             m_window->tokenizerPanel()->setText("The lighthouse keeper wrote a leter to his friend.");
         }},
        {"stepper", tr("2 · The prompt is read in parallel"),
         tr("<p><b>Prefill</b> runs every token of the prompt through every layer in one pass — that is why the "
            "first token takes longest — and stores each layer's keys and values in the KV cache.</p>"),
         [stepper, press] {
             stepper->setPrompt("The lighthouse keeper climbed the stairs and");
             press(tr("Prefill"), [stepper] {
                 const auto s = stepper->state();
                 return s && (s->action == "prefill" || s->action == "error") && s->steps == 0 && s->prompt_length > 0;
             });
         }},
        {"stepper", tr("3 · Each step predicts a distribution"),
         tr("<p>The last position's output is a score — a logit — for every token of the vocabulary; a softmax "
            "turns them into probabilities. The bars are the most likely next tokens before any sampling "
            "setting touches them.</p>"),
         [stepper] { stepper->showStage(0); }},
        {"stepper", tr("4 · Sampling picks a token"),
         tr("<p>The stages — repetition penalty, top-k, top-p, min-p, temperature — narrow and reshape the "
            "distribution; <b>Step</b> draws one token from the final one and appends it to the sequence "
            "(underlined).</p>"),
         [stepper, press, step_done] {
             stepper->showStage(6);
             press(tr("Step ▸"), step_done());
         }},
        {"stepper", tr("5 · Appended — and predict again"),
         tr("<p>The new token becomes input. The next step forwards only that one token: the keys and values of "
            "everything before it come from the cache, so a step costs the same whatever the length so far. "
            "Another step was just taken.</p>"),
         [press, step_done] { press(tr("Step ▸"), step_done()); }},
        {"kv",
         tr("6 · The KV cache grows and is reused"),
         tr("<p>Every layer holds one key and one value vector per position and KV head: the gauges grew by one "
            "position per step. Its size is 2 × layers × KV heads × head dimension × bytes per value for each "
            "token — the formula beside them.</p>"),
         {}},
        {"context", tr("7 · The context window fills"),
         tr("<p>A chat re-sends the whole conversation every turn, so the input grows until it no longer fits the "
            "context window — then something must be left out. Six turns were added here: see which requests "
            "overflow and what prefix caching saves.</p>"),
         [this] {
             ContextPanel* c = m_window->contextPanel();
             for (int i = 0; i < 6; ++i)
                 c->addSyntheticTurn(60, 140);
         }},
        {"",
         tr("That is the whole loop"),
         tr("<p>Tokens in, a distribution out, one token drawn and appended, again — with the cache making each "
            "step cheap and the context window bounding it all. Keep playing: step further in the stepper, open "
            "the Attention panel to see what each head looks at, or press Shift+F1 and click any panel for what it "
            "shows.</p>"),
         {}},
    };
}

QString GuidedTour::stepTitle() const
{
    return m_steps[std::size_t(m_step)].title;
}

QString GuidedTour::stepText() const
{
    return m_text->text();
}

void GuidedTour::outline(const QString& dock_name)
{
    delete m_outline;
    if (dock_name.isEmpty())
        return;
    auto* dock = m_window->findChild<QDockWidget*>("dock-" + dock_name);
    if (!dock)
        return;
    dock->show();
    dock->raise();
    // A frame over the panel, drawn in the highlight colour, that lets every click through.
    m_outline = new QFrame(dock);
    m_outline->setObjectName("tour-outline");
    m_outline->setAttribute(Qt::WA_TransparentForMouseEvents);
    m_outline->setStyleSheet(
        QString("#tour-outline { border: 3px solid %1; }").arg(palette().color(QPalette::Highlight).name()));
    m_outline->setGeometry(dock->rect());
    m_outline->show();
    m_outline->raise();
}

void GuidedTour::showStep(int index)
{
    if (index < 0 || index >= stepCount())
        return;
    m_step = index;
    m_waiting = false;
    m_done_when = {};
    const Step& s = m_steps[std::size_t(index)];
    m_title->setText(s.title);
    m_text->setText(s.text);
    outline(s.dock);
    if (m_engine->model() && s.act)
        s.act();
    updateButtons();
    emit stepShown(index);
}

void GuidedTour::updateButtons()
{
    const bool loaded = m_engine->model() != nullptr;
    m_open_model->setVisible(!loaded && m_step == 0);
    if (!loaded && m_step == 0)
        m_text->setText(m_steps[0].text + "<p><b>" +
                        tr("No model is loaded: the tour needs one to run. Open the default model (Gemma 3 270M), or "
                           "any GGUF with File → Open model.") +
                        "</b></p>");
    else if (m_step == 0)
        m_text->setText(m_steps[0].text);
    m_back->setEnabled(m_step > 0 && !m_waiting);
    m_next->setEnabled(loaded && !m_waiting);
    m_next->setText(m_step + 1 < stepCount() ? tr("Next ▸") : tr("Finish"));
}

} // namespace tokenscope::ui
