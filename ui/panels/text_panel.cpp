// SPDX-License-Identifier: GPL-3.0-or-later
#include "panels/text_panel.h"
#include "bridge/analysis_client.h"
#include "bridge/token_text.h"
#include "widgets/count_text.h"
#include "widgets/flow_layout.h"
#include "widgets/token_heat_html.h"

#include "bridge/engine_controller.h"
#include "tokenizer/tokenizer.h"
#include "widgets/colormap.h"
#include "widgets/distribution_overlay.h"

#include <QComboBox>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSplitter>
#include <QTextBrowser>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

namespace tokenscope::ui {

TextPanel::TextPanel(EngineController* engine, QWidget* parent) : QWidget(parent), m_engine(engine)
{
    auto* v = new QVBoxLayout(this);
    m_input = new QPlainTextEdit;
    m_input->setPlaceholderText(tr("Paste any text, or open a file"));
    auto* row = new QHBoxLayout;
    auto* open = new QPushButton(tr("Open…"));
    m_compare = new QLineEdit;
    m_compare->setPlaceholderText(tr("optional: a second GGUF (same vocabulary) to compare with"));
    auto* pick = new QPushButton(tr("…"));
    m_colour = new QComboBox;
    m_colour->addItems({tr("surprisal (bits)"), tr("rank bucket"), tr("entropy"), tr("KL to the second model")});
    m_run = new QPushButton(tr("Analyze"));
    m_run->setObjectName("textAnalyze");
    m_stop = new QPushButton(tr("Stop"));
    m_stop->setObjectName("textStop");
    m_stop->setEnabled(false);
    m_progress = new QProgressBar;
    row->addWidget(open);
    row->addWidget(m_compare, 1);
    row->addWidget(pick);
    // the colouring and the run on a line of their own that wraps: the file row keeps its width
    auto* run_row = new FlowLayout;
    run_row->addWidget(m_colour);
    run_row->addWidget(m_run);
    run_row->addWidget(m_stop);
    run_row->addWidget(m_progress);
    m_status = new QLabel;
    m_status->setWordWrap(true);
    m_status->setTextFormat(Qt::PlainText); // it names model files: never markup
    m_legend = new QLabel;
    m_legend->setObjectName("textLegend");
    m_legend->setEnabled(false); // secondary text
    m_view = new QTextBrowser;
    m_view->setOpenLinks(false);
    m_view->setMouseTracking(true);
    m_overlay = new DistributionOverlay;
    m_overlay->setObjectName("textOverlay");
    m_overlay->hide();
    auto* split = new QSplitter(Qt::Vertical);
    split->addWidget(m_input);
    split->addWidget(m_view);
    split->addWidget(m_overlay);
    split->setStretchFactor(1, 3);
    split->setStretchFactor(2, 1);
    v->addLayout(row);
    v->addLayout(run_row);
    v->addWidget(m_status);
    v->addWidget(m_legend);
    v->addWidget(split, 1);

    connect(open, &QPushButton::clicked, this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Open a text"));
        if (path.isEmpty())
            return;
        QFile f(path);
        if (f.open(QIODevice::ReadOnly))
            m_input->setPlainText(QString::fromUtf8(f.readAll()));
    });
    connect(pick, &QPushButton::clicked, this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Model to compare with"), {}, "*.gguf");
        if (!path.isEmpty())
            m_compare->setText(path);
    });
    connect(m_run, &QPushButton::clicked, this, [this] { analyze(m_input->toPlainText(), m_compare->text()); });
    connect(m_stop, &QPushButton::clicked, this, [this] {
        if (m_request)
            m_engine->cancel(m_request);
    });
    connect(m_colour, &QComboBox::currentIndexChanged, this, &TextPanel::render);
    connect(m_view, &QTextBrowser::highlighted, this, [this](const QUrl& url) {
        const int i = url.path().toInt();
        if (url.scheme() == "token" && m_result && i >= 0 && i < int(m_result->tokens.size()))
            m_view->setToolTip(tokenTip(i));
    });
    connect(m_view, &QTextBrowser::anchorClicked, this, [this](const QUrl& url) {
        if (url.scheme() == "token")
            selectToken(url.path().toInt());
    });
    connect(m_view, &QTextBrowser::selectionChanged, this, [this] {
        if (!m_result)
            return;
        // the selection's tokens: the anchors it covers
        const QTextCursor c = m_view->textCursor();
        if (!c.hasSelection()) {
            m_status->setText(status());
            return;
        }
        int first = -1, last = -1;
        QTextCursor probe(m_view->document());
        for (int pos = c.selectionStart(); pos < c.selectionEnd(); ++pos) {
            probe.setPosition(pos + 1);
            const QString href = probe.charFormat().anchorHref();
            if (href.startsWith("token:")) {
                const int i = href.mid(6).toInt();
                first = first < 0 ? i : std::min(first, i);
                last = std::max(last, i + 1);
            }
        }
        if (first >= 0)
            m_status->setText(tr("Selection: %1, perplexity %2 · whole text %3")
                                  .arg(countText(last - first, tr("token"), tr("tokens")))
                                  .arg(decimalText(selectionPerplexity(first, last), 3))
                                  .arg(decimalText(m_result->perplexity, 3)));
    });
    connect(&engine->analysis(), &AnalysisClient::textAnalyzed, this, &TextPanel::onResult);
    connect(&engine->analysis(), &AnalysisClient::analysisProgress, this, [this](quint64 id, int done, int total) {
        if (id != m_request)
            return;
        m_progress->setMaximum(std::max(1, total));
        m_progress->setValue(done);
    });
}

void TextPanel::analyze(const QString& text, const QString& compare_with)
{
    m_input->setPlainText(text);
    m_compare->setText(compare_with);
    if (m_request)
        m_engine->cancel(m_request);
    m_request = m_engine->analysis().analyzeText(text, compare_with);
    m_run->setEnabled(false);
    m_stop->setEnabled(true);
    m_progress->setValue(0);
    m_status->setText(tr("Reading the text through the model…"));
}

void TextPanel::setColouring(int mode)
{
    m_colour->setCurrentIndex(mode);
    render();
}

void TextPanel::showSaved(std::shared_ptr<const TextAnalysisSnapshot> result)
{
    if (m_request)
        m_engine->cancel(m_request);
    m_request = result->request_id;
    // The text field holds the analysed text (read back from its tokens with the saved vocabulary).
    if (result->tokenizer) {
        std::vector<int32_t> ids;
        for (const AnalyzedToken& t : result->tokens)
            ids.push_back(t.id);
        m_input->setPlainText(QString::fromStdString(result->tokenizer->decode(ids, {.remove_special = true})));
    }
    onResult(std::move(result));
}

void TextPanel::onResult(std::shared_ptr<const TextAnalysisSnapshot> s)
{
    if (s->request_id != m_request)
        return;
    m_request = 0;
    m_run->setEnabled(true);
    m_stop->setEnabled(false);
    if (!s->error.isEmpty()) { // the previous result stays on screen; the status says what failed
        m_error = s->error;
        m_status->setText(m_error);
        emit analyzed();
        return;
    }
    m_error.clear();
    m_result = s;
    m_selected = -1;
    m_overlay->clear();
    m_overlay->setVisible(s->compared);
    if (s->compared)
        m_colour->setCurrentIndex(3);
    render();
    m_status->setText(status());
    emit analyzed();
}

QString TextPanel::status() const
{
    if (!m_error.isEmpty())
        return m_error;
    if (!m_result)
        return m_status->text();
    const auto& s = *m_result;
    QString text = tr("%1%2 · perplexity %3 · %4 ms")
                       .arg(s.cancelled ? tr("Stopped: ") : QString())
                       .arg(countText(qint64(s.tokens.size()), tr("token"), tr("tokens")))
                       .arg(decimalText(s.perplexity, 3))
                       .arg(decimalText(s.ms, 0));
    if (s.compared)
        text += tr(" · against %1: mean KLD %2, same top %3%, RMS Δp %4%")
                    .arg(s.model_b)
                    .arg(decimalText(s.mean_kl, 5))
                    .arg(decimalText(100 * s.same_top, 2))
                    .arg(decimalText(100 * s.rms_dp, 3));
    return text;
}

double TextPanel::selectionPerplexity(int first, int last) const
{
    double nats = 0;
    int n = 0;
    for (int i = std::max(0, first); i < std::min(last, int(m_result->tokens.size())); ++i)
        if (m_result->tokens[std::size_t(i)].predicted) {
            nats += m_result->tokens[std::size_t(i)].surprisal_bits * std::log(2.0);
            ++n;
        }
    return n ? std::exp(nats / n) : 0.0;
}

QString TextPanel::tokenTip(int index) const
{
    const AnalyzedToken& t = m_result->tokens[std::size_t(index)];
    if (!t.predicted)
        return tr("“%1”: the first token of a window — nothing before it to predict it from").arg(t.text);
    QString tip = tr("“%1”: p %2 · %3 bits · rank %4 · entropy %5 bits")
                      .arg(t.text)
                      .arg(t.p, 0, 'g', 4)
                      .arg(decimalText(t.surprisal_bits, 2))
                      .arg(t.rank)
                      .arg(decimalText(t.entropy_bits, 2));
    for (const auto& [text, p] : t.top)
        tip += QString("\n  %1  %2%").arg(text).arg(decimalText(100 * p, 2));
    if (m_result->compared)
        tip += tr("\nsecond model: p %1 · KL %2 · %3")
                   .arg(t.p_b, 0, 'g', 4)
                   .arg(t.kl, 0, 'g', 4)
                   .arg(t.same_top ? tr("same top token") : tr("a different top token"));
    return tip;
}

void TextPanel::selectToken(int index)
{
    if (!m_result || index < 0 || index >= int(m_result->tokens.size()))
        return;
    m_selected = index;
    const AnalyzedToken& t = m_result->tokens[std::size_t(index)];
    if (m_result->compared && t.predicted) {
        std::vector<DistributionOverlay::Row> rows;
        bool real_listed = false;
        for (const auto& c : t.candidates) {
            rows.push_back({c.text, c.p_a, c.p_b, c.id == t.id});
            real_listed |= c.id == t.id;
        }
        if (!real_listed)
            rows.push_back({t.text, t.p, t.p_b, true});
        m_overlay->setDistributions(tr("Before “%1” (position %2): KL %3 nats · %4")
                                        .arg(t.text)
                                        .arg(index)
                                        .arg(t.kl, 0, 'g', 4)
                                        .arg(t.same_top ? tr("same top token") : tr("different top tokens")),
                                    m_result->model_a, m_result->model_b, std::move(rows));
        m_overlay->show();
    }
    // the stepper at this position: the tokens of its window before it, as the analysis read them
    if (!t.predicted || !m_result->tokenizer || m_result->window <= 0)
        return;
    const int w0 = index / m_result->window * m_result->window;
    std::vector<int32_t> ids;
    for (int i = w0; i < index; ++i)
        ids.push_back(m_result->tokens[std::size_t(i)].id);
    const QString text = QString::fromStdString(m_result->tokenizer->decode(ids, {.remove_special = true}));
    emit stepperRequested(ids, text);
}

void TextPanel::render()
{
    if (!m_result) {
        m_view->clear();
        return;
    }
    const int mode = m_colour->currentIndex();
    double max_kl = 1e-9;
    for (const AnalyzedToken& t : m_result->tokens)
        max_kl = std::max(max_kl, t.kl);
    const QString html = token_heat_html(m_result->tokens, [&](const AnalyzedToken& t) {
        if (!t.predicted)
            return 0.0; // higher = more remarkable
        if (mode == 0)
            return t.surprisal_bits / 16.0;
        if (mode == 1)
            return t.rank <= 1 ? 0.0 : t.rank <= 10 ? 0.33 : t.rank <= 100 ? 0.66 : 1.0;
        if (mode == 2)
            return t.entropy_bits / 10.0;
        return m_result->compared ? t.kl / max_kl : 0.0; // linear up to the largest: where the models part
    });
    m_view->setHtml(html);
    static const char* const scales[] = {
        QT_TR_NOOP("light: expected (0 bits) → dark: surprising (16 bits or more)"),
        QT_TR_NOOP("light: the model's first choice → dark: ranked below 100"),
        QT_TR_NOOP("light: a confident prediction (0 bits of entropy) → dark: 10 bits or more"),
        QT_TR_NOOP("light: the models agree (KL 0) → dark: the largest KL in the text (%1 nats)")};
    const QString scale = tr(scales[std::clamp(mode, 0, 3)]);
    m_legend->setText(mode == 3 ? scale.arg(max_kl, 0, 'g', 3) : scale);
}

} // namespace tokenscope::ui
