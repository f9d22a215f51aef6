// SPDX-License-Identifier: GPL-3.0-or-later
#include "panels/speculation_panel.h"

#include "bridge/engine_controller.h"
#include "bridge/speculation_client.h"
#include "widgets/chart_style.h"
#include "widgets/speculation_lanes.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QLineSeries>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QTextBrowser>
#include <QTimer>
#include <QUrl>
#include <QVBoxLayout>
#include <QValueAxis>

namespace tokenscope::ui {

namespace {

const QColor kAccepted(0x2e, 0x9d, 0x4a);
const QColor kRejected(0xd6, 0x27, 0x28);
const QColor kCorrected(0xe0, 0x8a, 0x1e);
const QColor kBonus(0x2f, 0x7e, 0xc1);

// A token on its verdict's colour; a newline token ends the line (kept tokens only: a rejected one
// was never part of the text).
QString chip(const QString& text, const QColor& colour, const QString& href, bool struck = false)
{
    QColor bg = colour;
    bg.setAlpha(struck ? 0 : 70);
    const QString a = QString("<a href=\"%1\" style=\"text-decoration:none; color:%2; background-color:%3;%4\">%5</a>")
                          .arg(href, struck ? colour.name() : QString("palette(text)"), bg.name(QColor::HexArgb),
                               struck ? " text-decoration:line-through;" : "", text.toHtmlEscaped());
    return !struck && text.endsWith(QChar(0x23CE)) ? a + "<br>" : a;
}

QString percent(double v)
{
    return QString::number(100.0 * v, 'f', v < 0.1 && v > 0 ? 1 : 0) + "%";
}

} // namespace

SpeculationPanel::SpeculationPanel(EngineController* engine, QWidget* parent) : QWidget(parent), m_engine(engine)
{
    buildUi();
    connect(&m_engine->speculation(), &SpeculationClient::speculationProgress, this,
            [this](std::shared_ptr<const SpeculationSnapshot> s) { onSnapshot(std::move(s), false); });
    connect(&m_engine->speculation(), &SpeculationClient::speculationFinished, this,
            [this](std::shared_ptr<const SpeculationSnapshot> s) { onSnapshot(std::move(s), true); });
    connect(m_engine, &EngineController::modelLoaded, this, [this](std::shared_ptr<const ModelSummary> m) {
        m_layers->setMaximum(std::max(1, m->n_layers - 1));
        if (m_layers->value() == 0 || m_layers->value() >= m->n_layers)
            m_layers->setValue(std::max(1, m->n_layers * 3 / 4));
    });
}

void SpeculationPanel::buildUi()
{
    auto* layout = new QVBoxLayout(this);
    auto* prompt_row = new QHBoxLayout;
    m_prompt = new QPlainTextEdit;
    m_prompt->setObjectName("speculationPrompt");
    m_prompt->setPlaceholderText(tr("A prompt to continue — code to edit or a text that repeats suits prompt lookup"));
    m_prompt->setMaximumHeight(fontMetrics().height() * 5);
    prompt_row->addWidget(m_prompt, 1);
    auto* from_stepper = new QPushButton(tr("From the stepper"));
    from_stepper->setToolTip(tr("The decode stepper's prompt and temperature"));
    connect(from_stepper, &QPushButton::clicked, this, &SpeculationPanel::stepperPromptWanted);
    prompt_row->addWidget(from_stepper, 0, Qt::AlignTop);
    layout->addLayout(prompt_row);

    auto* controls = new QHBoxLayout;
    controls->addWidget(new QLabel(tr("Drafts from")));
    m_source = new QComboBox;
    m_source->setObjectName("speculationSource");
    m_source->addItem(tr("Prompt lookup"), "lookup");
    m_source->addItem(tr("Early exit"), "early-exit");
    m_source->addItem(tr("Draft model"), "draft");
    m_source->setToolTip(tr("Prompt lookup: the tokens that followed the last match of the recent text (no second "
                            "model). Early exit: the model's own first L layers read through its output head. "
                            "Draft model: a small model with the same vocabulary."));
    controls->addWidget(m_source);
    m_layers_label = new QLabel(tr("L"));
    controls->addWidget(m_layers_label);
    m_layers = new QSpinBox;
    m_layers->setObjectName("speculationLayers");
    m_layers->setRange(1, 200);
    m_layers->setValue(0);
    m_layers->setToolTip(tr("Layers the early exit drafts with (the model checks with all of them)"));
    controls->addWidget(m_layers);
    m_draft_path = new QLineEdit;
    m_draft_path->setPlaceholderText(tr("draft model (.gguf)"));
    controls->addWidget(m_draft_path, 1);
    m_draft_pick = new QPushButton(tr("Choose…"));
    controls->addWidget(m_draft_pick);
    controls->addWidget(new QLabel(tr("k")));
    m_k = new QSpinBox;
    m_k->setObjectName("speculationK");
    m_k->setRange(1, 16);
    m_k->setValue(4);
    m_k->setToolTip(tr("Tokens drafted at most per step"));
    controls->addWidget(m_k);
    controls->addStretch();
    layout->addLayout(controls);
    // two rows: the drafter's settings, then the run's (one row needed 905 px, more than a docked
    // panel has on a 1280×800 screen)
    controls = new QHBoxLayout;
    controls->addWidget(new QLabel(tr("Tokens")));
    m_tokens = new QSpinBox;
    m_tokens->setRange(1, 512);
    m_tokens->setValue(48);
    controls->addWidget(m_tokens);
    controls->addWidget(new QLabel(tr("Temperature")));
    m_temperature = new QDoubleSpinBox;
    m_temperature->setRange(0.0, 2.0);
    m_temperature->setSingleStep(0.1);
    m_temperature->setValue(0.0);
    m_temperature->setSpecialValueText(tr("greedy"));
    controls->addWidget(m_temperature);
    controls->addWidget(new QLabel(tr("Seed")));
    m_seed = new QSpinBox;
    m_seed->setRange(0, 1 << 30);
    controls->addWidget(m_seed);
    controls->addStretch();
    m_run = new QPushButton(tr("Run"));
    m_run->setObjectName("speculationRun");
    m_run->setToolTip(tr("Speculative decoding on this prompt, then the plain loop on the same prompt and seed"));
    controls->addWidget(m_run);
    m_run_chat = new QPushButton(tr("Chat reply"));
    m_run_chat->setToolTip(tr("The chat's last request (every turn, as sent) and as many tokens as its reply"));
    controls->addWidget(m_run_chat);
    m_stop = new QPushButton(tr("Stop"));
    m_stop->setEnabled(false);
    controls->addWidget(m_stop);
    layout->addLayout(controls);

    m_status = new QLabel(tr("Choose a draft source and press Run."));
    m_status->setObjectName("speculationStatus");
    m_status->setWordWrap(true);
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_status);

    auto* split = new QSplitter(Qt::Horizontal);
    m_text = new QTextBrowser;
    m_text->setObjectName("speculationText");
    m_text->setOpenLinks(false);
    split->addWidget(m_text);
    auto* right = new QSplitter(Qt::Vertical);
    m_chart = new QChartView;
    m_chart->setRenderHint(QPainter::Antialiasing);
    m_chart->setMinimumHeight(200);
    right->addWidget(m_chart);
    m_table = new QTableWidget(0, 8);
    m_table->setObjectName("speculationTable");
    m_table->setHorizontalHeaderLabels(
        {tr("step"), tr("at"), tr("drafted"), tr("draft q"), tr("target p"), tr("overlap"), tr("KL"), tr("verdict")});
    m_table->horizontalHeaderItem(5)->setToolTip(
        tr("Σ min(p, q): the chance a token drawn from the draft is accepted here"));
    m_table->horizontalHeaderItem(6)->setToolTip(tr("KL(target ‖ draft) of the two models' full distributions, nats "
                                                    "(lookup has none: its drafts are certain)"));
    m_table->verticalHeader()->hide();
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->horizontalHeader()->setStretchLastSection(true);
    right->addWidget(m_table);
    split->addWidget(right);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 1);
    right->setSizes({320, 400});
    m_chart->setMinimumHeight(260);
    layout->addWidget(split, 1);
    m_lanes = new SpeculationLanes;
    layout->addWidget(m_lanes);

    m_restart = new QTimer(this);
    m_restart->setSingleShot(true);
    m_restart->setInterval(300);
    connect(m_restart, &QTimer::timeout, this, [this] { m_chat ? runOnChat() : run(); });
    connect(m_run, &QPushButton::clicked, this, &SpeculationPanel::run);
    connect(m_run_chat, &QPushButton::clicked, this, &SpeculationPanel::runOnChat);
    connect(m_stop, &QPushButton::clicked, this, &SpeculationPanel::stop);
    connect(m_draft_pick, &QPushButton::clicked, this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Draft model"), {}, "*.gguf");
        if (!path.isEmpty())
            m_draft_path->setText(path);
    });
    connect(m_source, &QComboBox::currentIndexChanged, this, [this] {
        updateSourceControls();
        settingChanged();
    });
    connect(m_layers, &QSpinBox::valueChanged, this, &SpeculationPanel::settingChanged);
    connect(m_k, &QSpinBox::valueChanged, this, &SpeculationPanel::settingChanged);
    connect(m_draft_path, &QLineEdit::editingFinished, this, &SpeculationPanel::settingChanged);
    connect(m_text, &QTextBrowser::anchorClicked, this, [this](const QUrl& url) {
        if (url.scheme() != "step" || !m_table)
            return;
        const int step = url.path().toInt();
        for (int r = 0; r < m_table->rowCount(); ++r)
            if (m_table->item(r, 0)->text().toInt() == step + 1) {
                m_table->selectRow(r);
                m_table->scrollToItem(m_table->item(r, 0));
                break;
            }
    });
    updateSourceControls();
    render();
}

void SpeculationPanel::updateSourceControls()
{
    const QString kind = m_source->currentData().toString();
    m_layers->setVisible(kind == "early-exit");
    m_layers_label->setVisible(kind == "early-exit");
    m_draft_path->setVisible(kind == "draft");
    m_draft_pick->setVisible(kind == "draft");
}

SpeculationSettings SpeculationPanel::settings() const
{
    SpeculationSettings s;
    s.prompt = m_prompt->toPlainText();
    const QString kind = m_source->currentData().toString();
    s.source = kind == "early-exit" ? QString("early-exit:%1").arg(m_layers->value())
               : kind == "draft"    ? "draft:" + m_draft_path->text()
                                    : QString("lookup");
    s.draft_max = m_k->value();
    s.tokens = m_tokens->value();
    s.sampling.temperature = float(m_temperature->value());
    s.sampling.seed = uint64_t(m_seed->value());
    return s;
}

void SpeculationPanel::setSettings(const SpeculationSettings& s)
{
    const QSignalBlocker b1(m_source), b2(m_layers), b3(m_k);
    m_prompt->setPlainText(s.prompt);
    if (s.source.startsWith("early-exit:")) {
        m_source->setCurrentIndex(1);
        m_layers->setValue(s.source.mid(11).toInt());
    } else if (s.source.startsWith("draft:")) {
        m_source->setCurrentIndex(2);
        m_draft_path->setText(s.source.mid(6));
    } else {
        m_source->setCurrentIndex(0);
    }
    m_k->setValue(s.draft_max);
    m_tokens->setValue(s.tokens);
    m_temperature->setValue(s.sampling.temperature);
    m_seed->setValue(int(s.sampling.seed));
    updateSourceControls();
}

void SpeculationPanel::setPrompt(const QString& text, double temperature)
{
    m_prompt->setPlainText(text);
    m_temperature->setValue(temperature);
}

void SpeculationPanel::run()
{
    m_live = true;
    m_chat = false;
    m_request = m_engine->speculation().run(settings());
    m_stop->setEnabled(true);
    m_status->setText(tr("Drafting and verifying…"));
}

void SpeculationPanel::runOnChat()
{
    m_live = true;
    m_chat = true;
    SpeculationSettings s = settings();
    s.from_chat = true;
    m_request = m_engine->speculation().run(s);
    m_stop->setEnabled(true);
    m_status->setText(tr("Drafting and verifying the chat's last reply…"));
}

void SpeculationPanel::stop()
{
    m_live = false;
    m_restart->stop();
    m_engine->speculation().stop();
}

void SpeculationPanel::showSaved(std::shared_ptr<const SpeculationSnapshot> snapshot)
{
    stop();
    m_request = 0; // a run still going is not this panel's any more: its answer is ignored
    m_stop->setEnabled(false);
    setSettings(snapshot->settings);
    m_snapshot = std::move(snapshot);
    render();
}

void SpeculationPanel::settingChanged()
{
    if (m_live) // the comparison shown is for other settings now: run it again
        m_restart->start();
}

void SpeculationPanel::onSnapshot(std::shared_ptr<const SpeculationSnapshot> s, bool final)
{
    if (s->request_id != m_request)
        return; // an earlier comparison's, cancelled by a changed setting
    if (final) {
        m_stop->setEnabled(false);
        m_live = m_live && s->error.isEmpty() && !s->cancelled;
        if (s->cancelled && s->result.steps.empty())
            return;
    }
    if (final && s->settings.from_chat && s->error.isEmpty()) { // the box says what was run: the chat's request
        const QSignalBlocker quiet(m_prompt);
        m_prompt->setPlainText(s->prompt_text);
    }
    m_snapshot = std::move(s);
    render();
    if (final)
        m_table->scrollToTop();
    emit final ? finished() : progressed();
}

QString SpeculationPanel::statusText() const
{
    return m_status->text();
}

QString SpeculationPanel::summary() const
{
    const SpeculationSnapshot& s = *m_snapshot;
    if (!s.error.isEmpty())
        return s.error;
    const auto& r = s.result;
    QString text = tr("%1 on %2: %3 tokens in %4 target passes · %5 drafted, %6 accepted (%7)")
                       .arg(s.drafter, s.model)
                       .arg(r.tokens.size())
                       .arg(r.passes)
                       .arg(r.drafted)
                       .arg(r.accepted)
                       .arg(percent(r.acceptance()));
    if (!s.finished)
        return text + (s.cancelled ? tr(" · stopped") : tr(" · running…"));
    const double speedup = s.speedup();
    text += tr(" · speculative %1 tokens/s, plain decode %2 tokens/s: <b>%3×</b>%4")
                .arg(s.tokensPerSecond(), 0, 'f', 1)
                .arg(s.plainTokensPerSecond(), 0, 'f', 1)
                .arg(speedup, 0, 'f', 2)
                .arg(speedup < 1 ? tr(" (slower than plain decoding: the drafts cost more than the passes they save)")
                                 : QString());
    if (s.settings.sampling.temperature > 0)
        text += tr(" · sampled at T %1: drawn from the model's own distribution (the draws differ from the plain "
                   "loop's by design)")
                    .arg(s.settings.sampling.temperature);
    else if (s.parted < 0)
        text += s.deterministic ? tr(" · output identical to the plain loop (deterministic mode)")
                                : tr(" · output identical to the plain loop");
    else if (std::size_t(s.parted) >= r.choices.size() || std::size_t(s.parted) >= s.plain_choices.size()) {
        text += tr(" · <span style=\"color:%1\">parts from the plain loop at token %2</span> — default mode: the "
                   "verification pass sums in another order; deterministic mode (Settings) makes them equal")
                    .arg(kRejected.name())
                    .arg(s.parted);
    } else {
        const auto& a = r.choices[std::size_t(s.parted)];
        const auto& b = s.plain_choices[std::size_t(s.parted)];
        text += tr(" · <span style=\"color:%1\">parts from the plain loop at token %2</span>: speculative chose “%3” "
                   "(logits %4 %5 vs %6 %7), plain “%8” (%9 vs %10) — default mode: the verification pass sums in "
                   "another order; deterministic mode (Settings) makes them equal")
                    .arg(kRejected.name())
                    .arg(s.parted)
                    .arg(s.piece(a.token).toHtmlEscaped())
                    .arg(s.piece(a.best).toHtmlEscaped())
                    .arg(a.best_logit, 0, 'f', 4)
                    .arg(s.piece(a.second).toHtmlEscaped())
                    .arg(a.second_logit, 0, 'f', 4)
                    .arg(s.piece(b.token).toHtmlEscaped())
                    .arg(b.best_logit, 0, 'f', 4)
                    .arg(b.second_logit, 0, 'f', 4);
    }
    return text;
}

QString SpeculationPanel::sequenceHtml() const
{
    const SpeculationSnapshot& s = *m_snapshot;
    QString html = "<p style=\"line-height:150%\">";
    // the prompt's end, muted, its lines kept
    html += QString("<span style=\"color:palette(mid); white-space:pre-wrap\">%1</span>")
                .arg(s.prompt_text.right(400).toHtmlEscaped());
    const auto& steps = s.result.steps;
    const auto legend = [](const QColor& c, const QString& what) {
        return QString("<span style=\"background-color:%1\">&nbsp;%2&nbsp;</span> ")
            .arg(QColor(c.red(), c.green(), c.blue(), 70).name(QColor::HexArgb), what);
    };
    // the token that opens a step: the model's own (no draft before it), a correction or a bonus
    const auto opened_colour = [&](std::size_t i) {
        if (i == 0 || steps[i - 1].drafted.empty())
            return QColor(0x80, 0x80, 0x80);
        return steps[i - 1].acceptance.corrected ? kCorrected : kBonus;
    };
    for (std::size_t i = 0; i < steps.size(); ++i) {
        const auto& st = steps[i];
        const QString href = QString("step:%1").arg(i);
        html += chip(s.piece(st.opened), opened_colour(i), href);
        for (std::size_t j = 0; j < st.acceptance.verdicts.size(); ++j) {
            const auto& v = st.acceptance.verdicts[j];
            html +=
                v.accepted ? chip(s.piece(v.token), kAccepted, href) : chip(s.piece(v.token), kRejected, href, true);
        }
    }
    if (s.result.tokens.size() > steps.size() + s.result.accepted) // the last token: no pass after it
        html += chip(s.piece(s.result.tokens.back()), opened_colour(steps.size()), "step:-1");
    html += "</p><p>" + legend(kAccepted, tr("draft accepted")) +
            QString("<span style=\"color:%1; text-decoration:line-through\">rejected</span> ").arg(kRejected.name()) +
            legend(kCorrected, tr("the model's correction")) + legend(kBonus, tr("bonus (every draft kept)")) +
            legend(QColor(0x80, 0x80, 0x80), tr("the model's own (nothing drafted)")) +
            tr("— click a token for its step") + "</p>";
    return html;
}

void SpeculationPanel::fillTable()
{
    m_table->setRowCount(0);
    const SpeculationSnapshot& s = *m_snapshot;
    const auto& steps = s.result.steps;
    int rows = 0;
    for (const auto& st : steps)
        rows += int(st.acceptance.verdicts.size());
    m_table->setRowCount(std::min(rows, 2000));
    int row = 0;
    for (std::size_t i = 0; i < steps.size() && row < m_table->rowCount(); ++i) {
        const auto& st = steps[i];
        for (std::size_t j = 0; j < st.acceptance.verdicts.size() && row < m_table->rowCount(); ++j, ++row) {
            const auto& v = st.acceptance.verdicts[j];
            const bool last_examined = j + 1 == st.acceptance.verdicts.size();
            QString verdict = v.accepted ? tr("accepted") : tr("rejected → “%1”").arg(s.piece(st.acceptance.next));
            if (v.accepted && last_examined && st.acceptance.accepted == st.drafted.size())
                verdict += tr(", bonus “%1”").arg(s.piece(st.acceptance.next));
            const QStringList cells = {QString::number(i + 1),
                                       QString::number(j + 1),
                                       s.piece(v.token),
                                       QString::number(v.q, 'f', 3),
                                       QString::number(v.p, 'f', 3),
                                       QString::number(v.overlap, 'f', 3),
                                       v.kl >= 0 ? QString::number(v.kl, 'f', 3) : QString("—"),
                                       verdict};
            for (int c = 0; c < cells.size(); ++c) {
                auto* item = new QTableWidgetItem(cells[c]);
                if (c == 7)
                    item->setForeground(v.accepted ? kAccepted : kRejected);
                if (c == 4)
                    item->setToolTip(tr("The model's most likely token here: “%1” (p %2)")
                                         .arg(s.piece(v.target_top))
                                         .arg(v.target_top_p, 0, 'f', 3));
                m_table->setItem(row, c, item);
            }
        }
    }
    m_table->resizeColumnsToContents();
}

void SpeculationPanel::fillChart()
{
    const auto by_position = engine::acceptance_by_position(m_snapshot->result);
    auto* rate = new QBarSet(tr("accepted, of those drafted there"));
    rate->setColor(kAccepted);
    auto* reached = new QBarSet(tr("steps that drafted this far"));
    reached->setColor(QColor(0x9a, 0x9a, 0x9a));
    QStringList categories;
    const double steps = double(std::max<std::size_t>(1, m_snapshot->result.steps.size()));
    for (std::size_t j = 0; j < by_position.size(); ++j) {
        const auto& p = by_position[j];
        *rate << (p.drafted ? 100.0 * p.accepted / p.drafted : 0.0);
        *reached << 100.0 * p.drafted / steps;
        categories << QString::number(j + 1);
    }
    auto* series = new QBarSeries;
    series->append({reached, rate});
    auto* chart = new QChart;
    chart->addSeries(series);
    chart->setTitle(tr("Acceptance along the draft"));
    auto* x = new QBarCategoryAxis;
    x->append(categories);
    x->setTitleText(tr("position in the draft"));
    auto* y = new QValueAxis;
    y->setTitleText(tr("%"));
    nice_axis(y, 0, 100, true);
    show_chart(m_chart, chart, x, y, palette());
}

void SpeculationPanel::render()
{
    if (!m_snapshot) {
        m_text->setHtml(tr("<p>Speculative decoding: a drafter guesses the next k tokens, the model checks all of them "
                           "in one pass and keeps the ones it agrees with — the same text, fewer passes, when the "
                           "guesses are good.</p>"));
        m_lanes->setSnapshot(nullptr);
        return;
    }
    m_status->setText(summary());
    if (!m_snapshot->error.isEmpty()) {
        m_text->clear();
        m_table->setRowCount(0);
        m_lanes->setSnapshot(nullptr);
        return;
    }
    m_text->setHtml(sequenceHtml());
    fillTable();
    fillChart();
    m_lanes->setSnapshot(m_snapshot);
}

} // namespace tokenscope::ui
