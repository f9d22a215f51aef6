// SPDX-License-Identifier: GPL-3.0-or-later
#include "panels/stepper_panel.h"
#include "bridge/stepper_client.h"

#include "bridge/engine_controller.h"
#include "bridge/token_selection.h"
#include "bridge/token_text.h"
#include "session/stepper.h"
#include "widgets/bounded_count_box.h"
#include "widgets/count_text.h"
#include "widgets/distribution_view.h"
#include "widgets/flow_layout.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QLocale>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QShortcut>
#include <QSlider>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QTextBrowser>
#include <QTimer>
#include <QUrl>
#include <QVBoxLayout>

namespace tokenscope::ui {

namespace {

const char* const kStageTitles[] = {"1 · logits (softmax, no sampling)",
                                    "2 · repetition penalty",
                                    "3 · top-k",
                                    "4 · top-p",
                                    "5 · min-p",
                                    "6 · temperature",
                                    "7 · final: what Step draws from"};
constexpr int kRowsShown = 12;

engine::SamplerConfig to_config(const StepperSettings& s)
{
    engine::SamplerConfig c = engine::sampler_config(s.sampling, s.greedy);
    c.stage_view_size = 64;
    return c;
}

QString mib(quint64 bytes)
{
    return decimalText(double(bytes) / (1024.0 * 1024.0), 2) + " MiB";
}

} // namespace

StepperPanel::StepperPanel(EngineController* engine, TokenSelection* selection, QWidget* parent)
    : QWidget(parent), m_engine(engine), m_selection(selection)
{
    buildUi();
    connect(&m_engine->stepper(), &StepperClient::stepperState, this, &StepperPanel::onState);
    connect(&m_engine->stepper(), &StepperClient::prefillProgress, this, [this](quint64 id, int done, int total) {
        if (id != m_pending)
            return;
        m_progress->setVisible(done < total);
        m_stop_prefill->setVisible(done < total);
        m_progress->setMaximum(total);
        m_progress->setValue(done);
    });
    connect(m_engine, &EngineController::modelLoaded, this, [this] {
        m_state.reset();
        m_drawn_from.clear();
        m_preview = {};
        m_pending = 0;
        setPlaying(false);
        renderSequence();
        renderDistribution();
        m_status->setText(tr("Model ready. Type a prompt and press Prefill."));
        updateButtons();
    });
    connect(m_selection, &TokenSelection::changed, this, [this] {
        renderSequence();
        renderDistribution();
    });
    updateButtons();
}

void StepperPanel::buildUi()
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(6, 6, 6, 6);
    buildPromptRow(layout);
    buildRunControls(layout);
    buildSamplingControls(layout);
    QWidget* views = buildViews(layout);
    connectControls();
    installShortcuts(views);
    m_distribution->setPlaceholder(
        tr("A language model writes one token at a time.\n\nPrefill runs the whole prompt through every layer in one "
           "parallel pass and stores each token's keys and values (the KV cache). Each Step then forwards only the "
           "newest token: it reads the cached K/V of all earlier ones, turns the last layer into logits → softmax → "
           "sampling, and appends the token it drew.\n\nPress Prefill, or Try an example."));
}

// The prompt, Prefill and the example.
void StepperPanel::buildPromptRow(QVBoxLayout* layout)
{
    auto* prompt_row = new QHBoxLayout;
    m_prompt = new QPlainTextEdit;
    m_prompt->setObjectName("stepperPrompt");
    m_prompt->setPlaceholderText(tr("A prompt to continue, e.g. “The capital of France is”"));
    m_prompt->setMaximumHeight(fontMetrics().height() * 4);
    prompt_row->addWidget(m_prompt, 1);
    auto* prompt_buttons = new QVBoxLayout;
    m_prefill = new QPushButton(tr("Prefill"));
    m_prefill->setToolTip(tr("Run the whole prompt through the model in one parallel pass (Ctrl+Enter)"));
    // Ctrl+Enter prefills when the focus is in this panel (window-wide, it collided with the chat's Send).
    for (const char* keys : {"Ctrl+Return", "Ctrl+Enter"}) {
        auto* shortcut = new QShortcut(QKeySequence(keys), this);
        shortcut->setContext(Qt::WidgetWithChildrenShortcut);
        connect(shortcut, &QShortcut::activated, m_prefill, &QPushButton::click);
    }
    m_example = new QPushButton(tr("Try an example"));
    prompt_buttons->addWidget(m_prefill);
    prompt_buttons->addWidget(m_example);
    prompt_row->addLayout(prompt_buttons);
    layout->addLayout(prompt_row);
}

// Step, Back, Play and its speed, the prefill's progress, the logit lens switch.
void StepperPanel::buildRunControls(QVBoxLayout* layout)
{
    auto* controls = new FlowLayout; // wraps in a narrow dock
    m_step = new QPushButton(tr("Step ▸"));
    m_step->setToolTip(tr("Draw the next token, append it and run one decode step (Space)"));
    m_back = new QPushButton(tr("◂ Back"));
    m_back->setToolTip(tr("Undo the last step: the KV cache is truncated and one position recomputed (Backspace)"));
    m_play = new QPushButton(tr("Play"));
    m_play->setCheckable(true);
    m_play->setToolTip(tr("Step on a timer until a stop reason (Shift+Space)"));
    m_speed = new QSlider(Qt::Horizontal);
    m_speed->setRange(1, 20);
    m_speed->setValue(4);
    m_speed->setMaximumWidth(120);
    m_speed_label = new QLabel;
    m_progress = new QProgressBar;
    m_progress->setMaximumWidth(160);
    m_progress->hide();
    // A long prompt's prefill can be stopped between its batches (this request only).
    m_stop_prefill = new QPushButton(tr("Stop"));
    m_stop_prefill->setObjectName("stepperStopPrefill");
    m_stop_prefill->setToolTip(tr("Stop the prefill after the batch it is computing"));
    m_stop_prefill->hide();
    m_attribute = new QPushButton(tr("Attribute"));
    m_attribute->setObjectName("stepperAttribute");
    m_attribute->setToolTip(tr("Split the logit of the token Step would take into each head's and MLP's part (Lab); "
                               "right-click a bar for another token"));
    controls->addWidget(m_step);
    controls->addWidget(m_back);
    controls->addWidget(m_play);
    controls->addWidget(m_speed);
    controls->addWidget(m_speed_label);
    controls->addWidget(m_progress);
    controls->addWidget(m_stop_prefill);
    controls->addWidget(m_attribute);
    m_lens_on = new QCheckBox(tr("Logit lens"));
    m_lens_on->setToolTip(tr("After every pass, apply the final norm and output head to each layer's residual stream"));
    controls->addWidget(m_lens_on);
    layout->addLayout(controls);
}

// The sampler's settings, as the chat has them.
void StepperPanel::buildSamplingControls(QVBoxLayout* layout)
{
    auto* sampling = new FlowLayout; // wraps in a narrow dock, each caption with its field
    m_greedy = new QCheckBox(tr("Greedy"));
    m_temperature = new QDoubleSpinBox;
    m_temperature->setRange(0.0, 5.0);
    m_temperature->setSingleStep(0.1);
    m_temperature->setValue(0.8);
    m_temperature->setToolTip(tr("Temperature: divides the logits before the softmax; 0 is greedy"));
    m_top_k = new QSpinBox;
    m_top_k->setRange(0, 1000);
    m_top_k->setValue(40);
    m_top_k->setToolTip(tr("Top-k: keep the k most likely tokens (0: off)"));
    m_top_p = new QDoubleSpinBox;
    m_top_p->setRange(0.0, 1.0);
    m_top_p->setSingleStep(0.05);
    m_top_p->setValue(0.95);
    m_top_p->setToolTip(tr("Top-p: keep the smallest set whose probability reaches p (1: off)"));
    m_min_p = new QDoubleSpinBox;
    m_min_p->setRange(0.0, 1.0);
    m_min_p->setSingleStep(0.01);
    m_min_p->setValue(0.05);
    m_min_p->setToolTip(tr("Min-p: drop tokens less likely than p × the best one (0: off)"));
    m_seed = new QSpinBox;
    m_seed->setRange(0, 1 << 30);
    m_seed->setToolTip(tr("Seed: each position draws from its own stream, so Back then Step draws the same token"));
    m_max_tokens = new BoundedCountBox(1, 4096, 64, tr("Max: the run stops after this many generated tokens"));
    connect(m_max_tokens, &BoundedCountBox::validityChanged, this, [this] { updateButtons(); });
    m_stops = new QLineEdit;
    m_stops->setPlaceholderText(tr("stop strings, | separated"));
    const std::pair<QString, QWidget*> fields[] = {{tr("Temp"), m_temperature}, {tr("Top-k"), m_top_k},
                                                   {tr("Top-p"), m_top_p},      {tr("Min-p"), m_min_p},
                                                   {tr("Seed"), m_seed},        {tr("Max"), m_max_tokens}};
    sampling->addWidget(m_greedy);
    for (const auto& [label, widget] : fields)
        sampling->addWidget(labelled(label, widget));
    m_stops->setMinimumWidth(fontMetrics().horizontalAdvance(m_stops->placeholderText()) + 24);
    sampling->addWidget(m_stops);
    layout->addLayout(sampling);
}

// The sequence and cache text beside the distribution of the chosen stage; the lens table; the
// status line. Returns the splitter the run's shortcuts act in.
QWidget* StepperPanel::buildViews(QVBoxLayout* layout)
{
    auto* split = new QSplitter(Qt::Horizontal);
    auto* left = new QWidget;
    auto* left_layout = new QVBoxLayout(left);
    left_layout->setContentsMargins(0, 0, 0, 0);
    m_sequence = new QTextBrowser;
    m_sequence->setObjectName("stepperSequence");
    m_sequence->setOpenLinks(false);
    left_layout->addWidget(m_sequence, 3);
    m_cache = new QLabel;
    m_cache->setWordWrap(true);
    m_cache->setTextInteractionFlags(Qt::TextSelectableByMouse);
    left_layout->addWidget(m_cache);
    m_generated = new QLabel;
    m_generated->setWordWrap(true);
    m_generated->setTextInteractionFlags(Qt::TextSelectableByMouse);
    left_layout->addWidget(m_generated);
    left_layout->addWidget(new QLabel(tr("Branches (paths given up after Back):")));
    m_branches = new QListWidget;
    m_branches->setMaximumHeight(fontMetrics().height() * 5);
    left_layout->addWidget(m_branches, 1);
    split->addWidget(left);

    auto* right = new QWidget;
    auto* right_layout = new QVBoxLayout(right);
    right_layout->setContentsMargins(0, 0, 0, 0);
    m_stage_box = new QComboBox;
    for (const char* title : kStageTitles)
        m_stage_box->addItem(tr(title));
    m_stage_box->setCurrentIndex(m_stage);
    right_layout->addWidget(m_stage_box);
    m_stage_note = new QLabel;
    m_stage_note->setWordWrap(true);
    right_layout->addWidget(m_stage_note);
    m_distribution = new DistributionView;
    right_layout->addWidget(m_distribution, 1);
    split->addWidget(right);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 1);
    layout->addWidget(split, 1);

    m_lens = new QTableWidget;
    m_lens->setObjectName("logitLens");
    m_lens->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_lens->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    m_lens->verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 4);
    m_lens->hide();
    layout->addWidget(m_lens, 1);

    m_status = new QLabel(tr("Load a model, type a prompt and press Prefill."));
    m_status->setWordWrap(true);
    layout->addWidget(m_status);

    return split;
}

void StepperPanel::connectControls()
{
    m_play_timer = new QTimer(this);
    m_play_timer->setSingleShot(true);
    const auto speed_text = [this] { m_speed_label->setText(tr("%1 steps/s").arg(m_speed->value())); };
    speed_text();
    connect(m_speed, &QSlider::valueChanged, this, speed_text);
    connect(m_play_timer, &QTimer::timeout, this, [this] {
        if (m_playing)
            step();
    });

    connect(m_prefill, &QPushButton::clicked, this, &StepperPanel::prefill);
    connect(m_stop_prefill, &QPushButton::clicked, this, [this] { m_engine->cancel(m_pending); });
    connect(m_example, &QPushButton::clicked, this, [this] {
        setPrompt(tr("The capital of France is"));
        prefill();
    });
    connect(m_step, &QPushButton::clicked, this, [this] { step(); });
    connect(m_back, &QPushButton::clicked, this, &StepperPanel::back);
    connect(m_play, &QPushButton::toggled, this, &StepperPanel::setPlaying);
    connect(m_distribution, &DistributionView::tokenClicked, this, [this](int id) { step(id); });
    connect(m_distribution, &DistributionView::tokenAttributionRequested, this, &StepperPanel::requestAttribution);
    connect(m_attribute, &QPushButton::clicked, this, [this] { requestAttribution(m_preview.token); });
    connect(m_stage_box, &QComboBox::currentIndexChanged, this, [this](int i) { showStage(i); });
    connect(m_sequence, &QTextBrowser::anchorClicked, this, [this](const QUrl& url) {
        if (url.scheme() == "pos")
            m_selection->select(url.path().toInt());
    });
    connect(m_greedy, &QCheckBox::toggled, this, &StepperPanel::updatePreview);
    connect(m_temperature, &QDoubleSpinBox::valueChanged, this, &StepperPanel::updatePreview);
    connect(m_top_k, &QSpinBox::valueChanged, this, &StepperPanel::updatePreview);
    connect(m_top_p, &QDoubleSpinBox::valueChanged, this, &StepperPanel::updatePreview);
    connect(m_min_p, &QDoubleSpinBox::valueChanged, this, &StepperPanel::updatePreview);
    connect(m_seed, &QSpinBox::valueChanged, this, &StepperPanel::updatePreview);
    connect(m_lens_on, &QCheckBox::toggled, this, [this](bool on) {
        m_lens->setVisible(on);
        if (on && m_state && m_state->lens.empty())
            m_status->setText(tr("The logit lens is computed with the next Prefill, Step or Back."));
    });
}

// Keys act on the run, not on the prompt being typed.
void StepperPanel::installShortcuts(QWidget* views)
{
    const auto key = [this, views](const char* sequence, auto fn) {
        auto* s = new QShortcut(QKeySequence(sequence), views);
        s->setContext(Qt::WidgetWithChildrenShortcut);
        connect(s, &QShortcut::activated, this, fn);
    };
    key("Space", [this] {
        if (m_step->isEnabled())
            step();
    });
    key("Shift+Space", [this] { m_play->toggle(); });
    key("Backspace", [this] {
        if (m_back->isEnabled())
            back();
    });
    key("Esc", [this] { m_selection->clear(); });
}

void StepperPanel::setPrompt(const QString& text)
{
    m_prompt->setPlainText(text);
}

StepperSettings StepperPanel::settings() const
{
    StepperSettings s;
    s.greedy = m_greedy->isChecked();
    s.sampling.temperature = float(m_temperature->value());
    s.sampling.top_k = m_top_k->value();
    s.sampling.top_p = float(m_top_p->value());
    s.sampling.min_p = float(m_min_p->value());
    s.sampling.seed = quint64(m_seed->value());
    s.sampling.max_tokens = m_max_tokens->value();
    s.stop_strings = m_stops->text().split('|', Qt::SkipEmptyParts);
    s.logit_lens = m_lens_on->isChecked();
    return s;
}

void StepperPanel::setSettings(const StepperSettings& s)
{
    m_greedy->setChecked(s.greedy);
    m_temperature->setValue(double(s.sampling.temperature));
    m_top_k->setValue(s.sampling.top_k);
    m_top_p->setValue(double(s.sampling.top_p));
    m_min_p->setValue(double(s.sampling.min_p));
    m_seed->setValue(int(s.sampling.seed));
    m_max_tokens->setValue(s.sampling.max_tokens);
    m_stops->setText(s.stop_strings.join('|'));
    m_lens_on->setChecked(s.logit_lens);
    updatePreview();
}

void StepperPanel::prefill()
{
    if (!m_engine->model()) {
        m_status->setText(tr("No model is loaded: open a GGUF file first."));
        return;
    }
    if (!m_max_tokens->valid()) {
        m_status->setText(tr("Max can be %1: lower it to prefill.").arg(m_max_tokens->limitText()));
        return;
    }
    setPlaying(false);
    m_drawn_from.clear();
    m_pending = m_engine->stepper().stepperStart(m_prompt->toPlainText(), settings());
    m_status->setText(tr("Prefilling…"));
    updateButtons();
}

void StepperPanel::prefillTokens(const std::vector<int32_t>& ids, const QString& text)
{
    if (!m_engine->model()) {
        m_status->setText(tr("No model is loaded: open a GGUF file first."));
        return;
    }
    setPlaying(false);
    m_drawn_from.clear();
    m_prompt->setPlainText(text);
    m_pending = m_engine->stepper().stepperStartTokens(ids, text, settings());
    m_status->setText(
        tr("Prefilling %1 from the text analysis…").arg(countText(qint64(ids.size()), tr("token"), tr("tokens"))));
    updateButtons();
}

void StepperPanel::step(int forced_token)
{
    // A saved run has no cache behind it in the engine: it is looked at, not continued.
    if (!m_state || m_pending || m_state->action == "replay")
        return;
    m_sent_preview = m_preview;
    m_pending = m_engine->stepper().stepperStep(settings(), forced_token);
    updateButtons();
}

void StepperPanel::back()
{
    if (!m_state || m_pending || m_state->action == "replay")
        return;
    setPlaying(false);
    m_pending = m_engine->stepper().stepperBack(settings());
    updateButtons();
}

void StepperPanel::setPlaying(bool playing)
{
    m_playing = playing && m_state && m_state->stop_reason.isEmpty();
    if (m_play->isChecked() != m_playing) {
        const QSignalBlocker block(m_play);
        m_play->setChecked(m_playing);
    }
    m_play->setText(m_playing ? tr("Pause") : tr("Play"));
    if (m_playing && !m_pending)
        step();
    updateButtons();
}

void StepperPanel::onState(std::shared_ptr<const StepperState> state)
{
    if (state->request_id != m_pending)
        return;
    m_pending = 0;
    m_progress->hide();
    m_stop_prefill->hide();
    m_error = state->error;
    if (state->action == "error") {
        m_status->setText(QString("<span style='color:#d0453a'>%1</span>").arg(state->error.toHtmlEscaped()));
        setPlaying(false);
        updateButtons();
        emit stateChanged();
        return;
    }
    if (state->action == "step" && state->steps > 0) {
        if (!state->server.isEmpty() && m_state)
            m_server_drawn_from[int(state->tokens.size()) - 1] = m_state->server_top;
        else
            m_drawn_from[int(state->tokens.size()) - 1] = m_sent_preview;
    }
    if (state->action == "prefill")
        m_server_drawn_from.clear();
    std::erase_if(m_server_drawn_from, [n = int(state->tokens.size())](const auto& entry) { return entry.first >= n; });
    std::erase_if(m_drawn_from, [n = int(state->tokens.size())](const auto& entry) { return entry.first >= n; });
    if (m_selection->position() >= int(state->tokens.size()))
        m_selection->clear();
    m_state = std::move(state);
    m_status->setText(statusText());
    m_cache->setText(m_state->server.isEmpty()
                         ? cacheSentence()
                         : tr("The KV cache is the server's (%1): each step sends the whole sequence and the server "
                              "reuses what it cached of it; its contents are not visible from here.")
                               .arg(m_state->server));
    m_stage_box->setEnabled(m_state->server.isEmpty()); // a server sends one distribution, not the stages
    QString generated = m_state->generated_text.isEmpty()
                            ? tr("<b>Generated so far:</b> nothing yet")
                            : tr("<b>Generated so far:</b> %1").arg(m_state->generated_text.toHtmlEscaped());
    if (!m_state->stop_reason.isEmpty())
        generated += m_state->action == "replay"
                         ? tr("<br><b>Stopped:</b> %1.").arg(m_state->stop_reason.toHtmlEscaped())
                         : tr("<br><b>Stopped:</b> %1 — press Back or Prefill to go on.")
                               .arg(m_state->stop_reason.toHtmlEscaped());
    m_generated->setText(generated);
    m_branches->clear();
    m_branches->addItems(m_state->branches);
    renderSequence();
    updatePreview();
    renderLens();
    if (!m_state->stop_reason.isEmpty())
        setPlaying(false);
    if (m_playing)
        m_play_timer->start(1000 / std::max(1, m_speed->value()));
    updateButtons();
    emit stateChanged();
}

QString StepperPanel::statusText() const
{
    if (!m_state)
        return m_status->text();
    if (m_state->action == "replay")
        return tr("Saved run · %1 (%2 prompt + %3 generated) · the distributions are those recorded; Prefill "
                  "runs the prompt live on the loaded model")
            .arg(countText(qint64(m_state->tokens.size()), tr("token"), tr("tokens")))
            .arg(numberText(m_state->prompt_length))
            .arg(numberText(m_state->steps));
    if (m_state->steps == 0)
        return tr("Prompt prefilled: %1. The bars show the distribution of token %2.")
            .arg(countText(m_state->prompt_length, tr("token"), tr("tokens")))
            .arg(numberText(qint64(m_state->tokens.size()) + 1));
    return tr("Step %1 · sequence %2 (%3 prompt + %1 generated)")
        .arg(numberText(m_state->steps))
        .arg(countText(qint64(m_state->tokens.size()), tr("token"), tr("tokens")))
        .arg(numberText(m_state->prompt_length));
}

QString StepperPanel::cacheSentence() const
{
    if (!m_state)
        return {};
    const StepperState& s = *m_state;
    int local = 0, window = 0;
    for (int w : s.layer_window)
        if (w > 0) {
            ++local;
            window = w;
        }
    const QString local_note = local ? tr(" (%1 of the %2 layers use a sliding window and see at most the last %3)")
                                           .arg(local)
                                           .arg(s.n_layers)
                                           .arg(window)
                                     : QString();
    if (s.action == "prefill") {
        QString reused = s.prefill_reused == 1 ? tr(" The first token was already cached (shared prefix) and was not "
                                                    "recomputed.")
                         : s.prefill_reused
                             ? tr(" The first %1 tokens were already cached (shared prefix) and were not recomputed.")
                                   .arg(numberText(s.prefill_reused))
                             : QString();
        return tr("<b>Prefill:</b> %1 processed in parallel (%2 batch%3, %4 ms) — K/V pairs written for "
                  "each of them in every one of the %5 layers: %6 per layer and KV head, %7 in the cache now.%8")
            .arg(countText(s.prefill_computed, tr("prompt token"), tr("prompt tokens")))
            .arg(s.prefill_batches)
            .arg(s.prefill_batches == 1 ? "" : "es")
            .arg(decimalText(s.prefill_ms, 1))
            .arg(s.n_layers)
            .arg(s.kv_tokens)
            .arg(mib(s.kv_bytes_in_use))
            .arg(reused);
    }
    if (s.action == "back")
        return tr("<b>Back:</b> the KV cache was truncated to %1 and only the last one was recomputed; the "
                  "distribution below is bit-identical to the one shown before that step.")
            .arg(countText(s.kv_tokens, tr("position"), tr("positions")));
    return tr("<b>Step %1:</b> reuses %2; computes 1 new one — in each of the %3 layers%4. %5 ms; "
              "cache %6, %7.")
        .arg(s.steps)
        .arg(countText(s.last_reused, tr("cached K/V pair"), tr("cached K/V pairs")))
        .arg(s.n_layers)
        .arg(local_note)
        .arg(decimalText(s.last_ms, 1))
        .arg(countText(s.kv_tokens, tr("token"), tr("tokens")))
        .arg(mib(s.kv_bytes_in_use));
}

void StepperPanel::updatePreview()
{
    if (!m_state || !m_state->logits || m_state->logits->empty()) {
        renderDistribution();
        return;
    }
    const std::vector<int32_t> history(m_state->history.begin(), m_state->history.end());
    m_preview = engine::Stepper::sample_at(*m_state->logits, history, to_config(settings()));
    renderDistribution();
}

void StepperPanel::showStage(int index)
{
    m_stage = std::clamp(index, 0, 6);
    if (m_stage_box->currentIndex() != m_stage)
        m_stage_box->setCurrentIndex(m_stage);
    renderDistribution();
}

QString StepperPanel::tokenText(int id) const
{
    return m_state && m_state->tokenizer ? token_display_text(*m_state->tokenizer, id) : QString("#%1").arg(id);
}

void StepperPanel::renderServerDistribution()
{
    const int selected = m_selection->position();
    const bool historic = m_server_drawn_from.count(selected) > 0;
    const std::vector<ServerCandidate>& top = historic ? m_server_drawn_from.at(selected) : m_state->server_top;
    const int chosen = historic ? m_state->tokens[std::size_t(selected)].id : m_state->server_drawn;
    std::vector<DistributionView::Row> rows;
    double shown = 0.0;
    for (const auto& c : top) {
        shown += double(c.probability);
        if (int(rows.size()) >= kRowsShown)
            continue;
        DistributionView::Row r;
        r.id = c.id;
        r.text = c.text;
        r.before = r.after = c.probability;
        r.logit = c.probability > 0.0f ? std::log(c.probability) : -INFINITY; // a log-probability, not a logit
        r.chosen = c.id == chosen;
        rows.push_back(r);
    }
    m_distribution->setRows(std::move(rows), QString(), tr("the server's top %1, before sampling").arg(top.size()));
    QString note = tr("%1 sends its %2 most likely tokens, not the whole vocabulary: together they hold %3% of the "
                      "probability. ")
                       .arg(m_state->server)
                       .arg(top.size())
                       .arg(decimalText(100.0 * shown, 1));
    if (historic)
        note += tr("Position %1 (“%2”%3) came from this distribution; Esc shows the next token's.")
                    .arg(selected)
                    .arg(m_state->tokens[std::size_t(selected)].text)
                    .arg(m_state->tokens[std::size_t(selected)].forced ? tr(", forced") : QString());
    else
        note += tr("The server drew “%1” with the settings of the last request: Step takes it. Click any bar to force "
                   "that token instead.")
                    .arg(m_state->server_drawn_text);
    m_stage_note->setText(note);
}

void StepperPanel::renderDistribution()
{
    if (m_state && !m_state->server.isEmpty()) {
        renderServerDistribution();
        return;
    }
    const int selected = m_selection->position();
    const bool historic = m_state && m_drawn_from.count(selected);
    const engine::SampleResult& result = historic ? m_drawn_from.at(selected) : m_preview;
    if (!m_state || result.stages.size() < 7) {
        if (m_state && !result.stages.empty())
            m_distribution->setPlaceholder(tr("Greedy: the most likely token is taken, nothing is drawn."));
        return;
    }
    const auto& after = result.stages[std::size_t(m_stage)];
    const auto& before = result.stages[std::size_t(m_stage == 6 ? 0 : std::max(0, m_stage - 1))];
    // The token taken: for a past position the one in the sequence (it may have been forced).
    const int chosen = historic ? m_state->tokens[std::size_t(selected)].id : result.token;
    std::vector<DistributionView::Row> rows;
    const auto find = [](const engine::StageView& v, int id) -> const engine::Candidate* {
        for (const auto& c : v.top)
            if (c.id == id)
                return &c;
        return nullptr;
    };
    const auto add = [&](const engine::Candidate& c) {
        for (const auto& r : rows)
            if (r.id == c.id)
                return;
        DistributionView::Row r;
        r.id = c.id;
        const auto* b = find(before, c.id);
        const auto* a = find(after, c.id);
        r.before = b ? b->probability : 0.0f;
        r.after = a ? a->probability : 0.0f;
        r.logit = a ? a->logit : c.logit;
        r.survives = a != nullptr || after.survivors > after.top.size();
        r.chosen = c.id == chosen;
        rows.push_back(r);
    };
    for (std::size_t i = 0; i < before.top.size() && int(rows.size()) < kRowsShown; ++i)
        add(before.top[i]);
    for (std::size_t i = 0; i < after.top.size() && int(rows.size()) < kRowsShown + 2; ++i)
        add(after.top[i]);
    for (auto& r : rows)
        r.text = tokenText(r.id);
    m_distribution->setRows(std::move(rows), tr(before.name.c_str()), tr(after.name.c_str()));
    QString note;
    if (historic)
        note = tr("Position %1 (“%2”%3) came from this distribution; Esc shows the next token's. ")
                   .arg(selected)
                   .arg(tokenText(chosen))
                   .arg(m_state->tokens[std::size_t(selected)].forced ? tr(", forced") : QString());
    note += after.applied
                ? tr("%1 this stage.")
                      .arg(countText(qint64(after.survivors), tr("candidate survives"), tr("candidates survive")))
                : tr("This stage is switched off by the settings.");
    if (!historic && m_state->action == "replay")
        note += tr(" Step would take “%1” (%2%) with these settings.")
                    .arg(tokenText(result.token))
                    .arg(decimalText(double(result.probability) * 100.0, 1));
    else if (!historic)
        note += tr(" Step would take “%1” (%2%). Click any bar to force that token instead.")
                    .arg(tokenText(result.token))
                    .arg(decimalText(double(result.probability) * 100.0, 1));
    m_stage_note->setText(note);
}

void StepperPanel::renderSequence()
{
    m_sequence->setHtml(sequenceHtml());
}

QString StepperPanel::sequenceHtml() const
{
    if (!m_state)
        return tr(
            "<p style='color:gray'>The sequence appears here after Prefill: prompt tokens plain, generated tokens "
            "underlined, forced ones marked ⚑. Click a token to select it in every panel.</p>");
    const QColor accent = palette().color(QPalette::Highlight);
    const int selected = m_selection->position();
    // A long sequence (a 128K-token prompt) is drawn as a window of it: the text layout of every token
    // as its own link costs minutes at that length. The window ends at the last token, or holds the
    // selected one when it lies earlier.
    constexpr std::size_t kDrawn = 2048;
    const std::size_t n = m_state->tokens.size();
    std::size_t first = n > kDrawn ? n - kDrawn : 0;
    if (selected >= 0 && std::size_t(selected) < first)
        first = std::size_t(selected) > kDrawn / 2 ? std::size_t(selected) - kDrawn / 2 : 0;
    const std::size_t last = std::min(n, first + kDrawn);
    QString html = "<div style='font-family: monospace; line-height: 170%'>";
    if (first > 0)
        html += "<p style='color:gray'>" +
                tr("… %1 earlier tokens not drawn (positions 0 to %2): select one in another panel to show it here.")
                    .arg(numberText(qulonglong(first)), numberText(qulonglong(first - 1))) +
                "</p>";
    for (std::size_t i = first; i < last; ++i) {
        const StepperToken& t = m_state->tokens[i];
        QString style = "text-decoration: none; color: palette(text);";
        if (!t.prompt)
            style += QString(" border-bottom: 2px solid %1; text-decoration: underline; color: %1;").arg(accent.name());
        if (t.type == "control")
            style += " font-weight: bold;";
        if (int(i) == selected)
            style += QString(" background-color: %1; color: palette(highlighted-text);").arg(accent.name());
        else if (i % 2)
            style += " background-color: rgba(128,128,128,40);";
        const QString tip = t.prompt ? tr("prompt token %1 · id %2").arg(i).arg(t.id)
                                     : tr("generated at position %1 · id %2 · p = %3%4")
                                           .arg(i)
                                           .arg(t.id)
                                           .arg(decimalText(double(t.probability) * 100.0, 1))
                                           .arg(t.forced ? tr(" · forced by you") : QString());
        if (i > first) // lines break between words, never inside one
            html += word_break_before(m_state->tokens[i - 1].text, t.text);
        html += QString("<a href='pos:%1' title='%2' style='%3'>%4%5</a>")
                    .arg(i)
                    .arg(tip.toHtmlEscaped(), style, t.text.toHtmlEscaped(), t.forced ? "<sup>⚑</sup>" : "");
    }
    if (last < n)
        html += "<p style='color:gray'>" + tr("… %1 later tokens not drawn.").arg(numberText(qulonglong(n - last))) +
                "</p>";
    return html + "</div>";
}

void StepperPanel::renderLens()
{
    m_lens->setVisible(m_lens_on->isChecked());
    if (m_state && !m_state->server.isEmpty()) { // say why, rather than show an empty table
        m_lens->clear();
        m_lens->setRowCount(1);
        m_lens->setColumnCount(1);
        m_lens->setHorizontalHeaderLabels({tr("logit lens")});
        m_lens->setItem(0, 0,
                        new QTableWidgetItem(tr("The logit lens reads every layer's residual stream, which a server "
                                                "does not expose: not available on a server connection.")));
        m_lens->resizeColumnsToContents();
        return;
    }
    if (!m_state || m_state->lens.empty()) {
        m_lens->clear();
        m_lens->setRowCount(0);
        return;
    }
    const auto& lens = m_state->lens;
    const int cols = int(lens.front().size());
    m_lens->setRowCount(int(lens.size()));
    m_lens->setColumnCount(cols);
    QStringList headers;
    for (int c = 0; c < cols; ++c)
        headers << (c == 0 ? tr("top prediction") : tr("#%1").arg(c + 1));
    m_lens->setHorizontalHeaderLabels(headers);
    QStringList rows;
    QColor accent = palette().color(QPalette::Highlight);
    for (std::size_t l = 0; l < lens.size(); ++l) {
        const bool local = l < m_state->layer_window.size() && m_state->layer_window[l] > 0;
        rows << (l + 1 == lens.size() ? tr("layer %1 = output").arg(l)
                                      : tr("after layer %1%2").arg(l).arg(local ? "" : tr(" (global)")));
        for (int c = 0; c < cols && c < int(lens[l].size()); ++c) {
            const LensCandidate& cand = lens[l][std::size_t(c)];
            auto* item = new QTableWidgetItem(
                QString("%1 %2%").arg(cand.text).arg(decimalText(double(cand.probability) * 100.0, 1)));
            QColor shade = accent;
            shade.setAlphaF(std::clamp(cand.probability, 0.05f, 0.85f));
            item->setBackground(shade);
            item->setToolTip(tr("After layer %1 the output head would give “%2” (id %3) probability %4")
                                 .arg(l)
                                 .arg(cand.text)
                                 .arg(cand.id)
                                 .arg(decimalText(double(cand.probability), 5)));
            m_lens->setItem(int(l), c, item);
        }
    }
    m_lens->setVerticalHeaderLabels(rows);
}

QStringList StepperPanel::branches() const
{
    return m_state ? m_state->branches : QStringList();
}

void StepperPanel::showSaved(std::shared_ptr<const StepperState> state, std::map<int, engine::SampleResult> drawn_from,
                             const StepperSettings& settings)
{
    if (m_pending)
        m_engine->cancel(m_pending);
    setPlaying(false);
    setSettings(settings);
    // The prompt field shows the saved prompt (Prefill runs it live on a loaded model).
    if (state->tokenizer) {
        std::vector<int32_t> prompt;
        for (const StepperToken& t : state->tokens)
            if (t.prompt)
                prompt.push_back(t.id);
        m_prompt->setPlainText(QString::fromStdString(state->tokenizer->decode(prompt, {.remove_special = true})));
    }
    m_pending = state->request_id;
    onState(std::move(state));
    m_drawn_from = std::move(drawn_from);
    renderDistribution();
    updateButtons();
}

void StepperPanel::updateButtons()
{
    const bool ready = m_engine->model() != nullptr;
    const bool idle = m_pending == 0;
    // A saved run has no cache behind it: it can be looked at, not continued.
    const bool running = m_state != nullptr && m_state->action != "replay";
    const bool stopped = running && !m_state->stop_reason.isEmpty();
    m_prefill->setEnabled(ready && idle && !m_playing && m_max_tokens->valid());
    m_example->setEnabled(ready && idle && !m_playing);
    m_step->setEnabled(running && idle && !m_playing && !stopped);
    m_back->setEnabled(running && idle && !m_playing && m_state->steps > 0);
    m_play->setEnabled(running && !stopped);
    m_attribute->setEnabled(running && idle && !m_playing);
}

void StepperPanel::requestAttribution(int token)
{
    if (!m_state || m_state->tokens.empty() || token < 0)
        return;
    std::vector<int32_t> ids;
    for (const StepperToken& t : m_state->tokens)
        ids.push_back(t.id);
    emit attributeRequested(ids, token);
}

QString StepperPanel::promptText() const
{
    return m_prompt->toPlainText();
}

} // namespace tokenscope::ui
