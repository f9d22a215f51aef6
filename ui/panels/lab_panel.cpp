// SPDX-License-Identifier: GPL-3.0-or-later
#include "panels/lab_panel.h"
#include "bridge/lab_client.h"

#include "bridge/engine_controller.h"
#include "lab/attribution.h"
#include "panels/lab_heads_tab.h"
#include "panels/lab_steering_tab.h"
#include "storage/atomic_save.h"
#include "widgets/attribution_waterfall.h"
#include "widgets/count_text.h"
#include "widgets/effect_grid.h"

#include <QBuffer>
#include <QComboBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPainter>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QSvgGenerator>
#include <QTabWidget>
#include <QVBoxLayout>
#include <cmath>

namespace tokenscope::ui {

LabPanel::LabPanel(EngineController* engine, QWidget* parent) : QWidget(parent), m_engine(engine)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(6, 6, 6, 6);
    m_tabs = new QTabWidget;
    m_tabs->addTab(buildPatchingTab(), tr("Activation patching"));
    m_tabs->addTab(buildAttributionTab(), tr("Logit attribution"));
    m_heads = new LabHeadsTab(engine);
    m_tabs->addTab(m_heads, tr("Heads"));
    m_steering = new LabSteeringTab(engine);
    m_tabs->addTab(m_steering, tr("Steering"));
    layout->addWidget(m_tabs);
    connect(&engine->lab(), &LabClient::patchingReady, this, &LabPanel::onPatching);
    connect(&engine->lab(), &LabClient::attributionReady, this, &LabPanel::onAttribution);
    connect(&engine->lab(), &LabClient::labProgress, this, [this](quint64 id, int done, int total) {
        if (id != m_patch_request)
            return;
        m_progress->setMaximum(std::max(1, total));
        m_progress->setValue(done);
        m_patch_status->setText(tr("Patching: run %1 of %2…").arg(done).arg(total));
    });
    connect(engine, &EngineController::modelLoaded, this, [this](std::shared_ptr<const ModelSummary> m) {
        m_heads->reset();
        m_steering->reset();
        m_steering->setLayers(m->n_layers);
        m_patching.reset();
        m_attribution.reset();
        m_grid->clear();
        m_waterfall->clear();
        m_patch_status->setText(tr("Two prompts of the same token length, differing where it matters."));
        m_attr_status->clear();
        for (auto* b : m_exports)
            b->setEnabled(false);
    });
}

QWidget* LabPanel::buildPatchingTab()
{
    auto* tab = new QWidget;
    auto* v = new QVBoxLayout(tab);
    auto* form = new QFormLayout;
    m_clean = new QLineEdit("The Eiffel Tower is in the city of");
    m_clean->setObjectName("labClean");
    m_corrupt = new QLineEdit("The Colosseum is in the city of");
    m_corrupt->setObjectName("labCorrupt");
    form->addRow(tr("Clean prompt"), m_clean);
    form->addRow(tr("Corrupted prompt"), m_corrupt);
    auto* metric_row = new QHBoxLayout;
    m_metric = new QComboBox;
    m_metric->addItems({tr("Logit difference A − B"), tr("Log-probability of A"), tr("KL to the clean run")});
    m_token_a = new QLineEdit(" Paris");
    m_token_a->setPlaceholderText(tr("token A"));
    m_token_b = new QLineEdit(" Rome");
    m_token_b->setPlaceholderText(tr("token B"));
    m_token_a->setToolTip(tr("One token as the model spells it (mind the leading space), or #id"));
    m_token_b->setToolTip(m_token_a->toolTip());
    metric_row->addWidget(m_metric, 2);
    metric_row->addWidget(new QLabel(tr("A")));
    metric_row->addWidget(m_token_a, 1);
    metric_row->addWidget(new QLabel(tr("B")));
    metric_row->addWidget(m_token_b, 1);
    form->addRow(tr("Metric"), metric_row);
    m_over = new QComboBox;
    m_over->setObjectName("labOver");
    m_over->addItems({tr("Residual stream (layers × positions)"), tr("Attention output (layers × positions)"),
                      tr("MLP output (layers × positions)"), tr("Heads (layers × heads, every position)"),
                      tr("Expert routes (layers × positions; mixture-of-experts models)")});
    form->addRow(tr("Patch"), m_over);
    v->addLayout(form);
    connect(m_metric, &QComboBox::currentIndexChanged, this, &LabPanel::updateMetricFields);

    auto* run_row = new QHBoxLayout;
    m_run = new QPushButton(tr("Run patching"));
    m_run->setObjectName("labRunPatching");
    m_stop = new QPushButton(tr("Stop"));
    m_stop->setObjectName("labStopPatching");
    m_stop->setEnabled(false);
    m_progress = new QProgressBar;
    m_progress->setTextVisible(true);
    m_progress->setValue(0);
    run_row->addWidget(m_run);
    run_row->addWidget(m_stop);
    run_row->addWidget(m_progress, 1);
    for (const QString& ext :
         {QStringLiteral("csv"), QStringLiteral("json"), QStringLiteral("png"), QStringLiteral("svg")}) {
        auto* b = new QPushButton(ext.toUpper());
        b->setToolTip(tr("Export the result as %1").arg(ext.toUpper()));
        b->setEnabled(false);
        connect(b, &QPushButton::clicked, this, [this, ext] { exportWithDialog(ext); });
        run_row->addWidget(b);
        m_exports << b;
    }
    v->addLayout(run_row);
    m_patch_status = new QLabel(tr("Two prompts of the same token length, differing where it matters."));
    m_patch_status->setWordWrap(true);
    m_patch_status->setTextFormat(Qt::PlainText); // it names tokens and prompts: never markup
    v->addWidget(m_patch_status);
    m_grid = new EffectGrid;
    v->addWidget(m_grid, 1);
    connect(m_run, &QPushButton::clicked, this, [this] { runPatching(formSettings()); });
    connect(m_stop, &QPushButton::clicked, this, &LabPanel::stopPatching);
    return tab;
}

QWidget* LabPanel::buildAttributionTab()
{
    auto* tab = new QWidget;
    auto* v = new QVBoxLayout(tab);
    auto* form = new QFormLayout;
    m_prompt = new QLineEdit("The Eiffel Tower is in the city of");
    m_prompt->setObjectName("labPrompt");
    form->addRow(tr("Prompt"), m_prompt);
    auto* tokens = new QHBoxLayout;
    m_token = new QLineEdit;
    m_token->setPlaceholderText(tr("the most likely next token"));
    m_versus = new QLineEdit;
    m_versus->setPlaceholderText(tr("optional: a second token"));
    tokens->addWidget(m_token, 1);
    tokens->addWidget(new QLabel(tr("minus")));
    tokens->addWidget(m_versus, 1);
    form->addRow(tr("Token"), tokens);
    v->addLayout(form);
    auto* row = new QHBoxLayout;
    m_attribute = new QPushButton(tr("Attribute"));
    m_attribute->setObjectName("labAttribute");
    m_shown = new QSpinBox;
    m_shown->setRange(4, 120);
    m_shown->setValue(18);
    m_shown->setPrefix(tr("largest "));
    m_shown->setSuffix(tr(" parts"));
    row->addWidget(m_attribute);
    row->addStretch(1);
    row->addWidget(m_shown);
    v->addLayout(row);
    m_attr_status = new QLabel;
    m_attr_status->setWordWrap(true);
    m_attr_status->setTextFormat(Qt::PlainText);
    v->addWidget(m_attr_status);
    m_waterfall = new AttributionWaterfall;
    v->addWidget(m_waterfall, 1);
    connect(m_attribute, &QPushButton::clicked, this, [this] { attribute(m_prompt->text()); });
    connect(m_shown, &QSpinBox::valueChanged, m_waterfall, &AttributionWaterfall::setShown);
    return tab;
}

void LabPanel::showTab(int index)
{
    m_tabs->setCurrentIndex(index);
}

void LabPanel::updateMetricFields()
{
    m_token_a->setEnabled(m_metric->currentIndex() != 2);
    m_token_b->setEnabled(m_metric->currentIndex() == 0);
}

PatchingSettings LabPanel::formSettings() const
{
    PatchingSettings s;
    s.clean = m_clean->text();
    s.corrupted = m_corrupt->text();
    s.metric = m_metric->currentIndex();
    s.token_a = m_token_a->text();
    s.token_b = m_token_b->text();
    s.over = m_over->currentIndex();
    return s;
}

void LabPanel::setForm(const PatchingSettings& s)
{
    m_clean->setText(s.clean);
    m_corrupt->setText(s.corrupted);
    m_metric->setCurrentIndex(s.metric);
    m_token_a->setText(s.token_a);
    m_token_b->setText(s.token_b);
    m_over->setCurrentIndex(s.over);
}

void LabPanel::runPatching(const PatchingSettings& s)
{
    setForm(s);
    if (m_patch_request)
        m_engine->cancel(m_patch_request);
    m_patch_request = m_engine->lab().runPatching(s);
    m_run->setEnabled(false);
    m_stop->setEnabled(true);
    m_progress->setValue(0);
    m_patch_status->setText(tr("Patching: the clean and corrupted runs…"));
}

void LabPanel::stopPatching()
{
    if (m_patch_request)
        m_engine->cancel(m_patch_request);
}

void LabPanel::showSaved(std::shared_ptr<const PatchingSnapshot> patching,
                         std::shared_ptr<const AttributionSnapshot> attribution)
{
    if (patching) {
        stopPatching();
        setForm(patching->settings); // the form says what the grid is of
        m_patch_request = patching->request_id;
        onPatching(std::move(patching));
    }
    if (attribution) {
        if (m_attr_request)
            m_engine->cancel(m_attr_request);
        m_attr_request = attribution->request_id;
        onAttribution(std::move(attribution));
    }
}

void LabPanel::onPatching(std::shared_ptr<const PatchingSnapshot> s)
{
    if (s->request_id != m_patch_request)
        return;
    m_patch_request = 0;
    m_run->setEnabled(true);
    m_stop->setEnabled(false);
    if (!s->error.isEmpty()) {
        m_patch_status->setText(s->error);
        emit patchingFinished();
        return;
    }
    m_patching = s;
    const bool heads = s->settings.over == 3;
    QStringList columns;
    if (heads)
        for (int h = 0; h < s->n_columns; ++h)
            columns << tr("head %1").arg(h);
    else
        for (int i = 0; i < s->corrupted_pieces.size(); ++i)
            columns << (s->clean_pieces[i] == s->corrupted_pieces[i]
                            ? s->clean_pieces[i]
                            : s->clean_pieces[i] + " / " + s->corrupted_pieces[i]);
    const QString metric = s->settings.metric == 0   ? tr("logit(%1) − logit(%2)").arg(s->token_a, s->token_b)
                           : s->settings.metric == 1 ? tr("log p(%1)").arg(s->token_a)
                                                     : tr("−KL(clean ‖ patched)");
    m_grid->setData(s->effect, columns, tr("%1 patched from clean into corrupted — %2").arg(s->over_name, metric));
    m_progress->setMaximum(std::max(1, s->runs));
    m_progress->setValue(s->runs);
    m_patch_status->setText(describePatching());
    for (auto* b : m_exports)
        b->setEnabled(true);
    emit patchingFinished();
}

QString LabPanel::patchingStatus() const
{
    return m_patch_status->text();
}

QString LabPanel::describePatching() const
{
    const auto& s = *m_patching;
    return tr("%1%2 runs in %3 s on %4 · metric (%5): clean %6, corrupted %7 · 1 = the clean run's value restored, "
              "0 = the corrupted run's")
        .arg(s.cancelled ? tr("Stopped: ") : QString())
        .arg(s.runs)
        .arg(decimalText(s.ms / 1000.0, 1))
        .arg(s.backend, s.metric_name)
        .arg(decimalText(s.clean_metric, 3))
        .arg(decimalText(s.corrupted_metric, 3));
}

void LabPanel::attribute(const QString& prompt, const std::vector<int32_t>& ids, int token)
{
    AttributionSettings s;
    s.prompt = prompt;
    s.ids = ids;
    s.token = token;
    // A sequence from the stepper leaves the prompt field as the user typed it (Attribute then runs
    // that prompt again); the status line says which was attributed.
    m_attr_sequence_tokens = int(ids.size());
    if (ids.empty()) {
        m_prompt->setText(prompt);
        s.token_text = m_token->text();
    }
    s.versus_text = m_versus->text();
    if (m_attr_request)
        m_engine->cancel(m_attr_request);
    m_attr_request = m_engine->lab().runAttribution(s);
    m_attribute->setEnabled(false);
    m_attr_status->setText(ids.empty()
                               ? tr("Attributing…")
                               : tr("Attributing the stepper's sequence (%n tokens)…", nullptr, int(ids.size())));
    m_tabs->setCurrentIndex(1);
}

void LabPanel::onAttribution(std::shared_ptr<const AttributionSnapshot> s)
{
    if (s->request_id != m_attr_request)
        return;
    m_attr_request = 0;
    m_attribute->setEnabled(true);
    if (!s->error.isEmpty()) {
        m_attr_status->setText(s->error);
        emit attributionFinished();
        return;
    }
    m_attribution = s;
    std::vector<AttributionWaterfall::Bar> bars;
    for (const auto& p : s->parts)
        bars.push_back({p.name, p.value});
    const QString what =
        s->versus.isEmpty() ? tr("logit of %1").arg(s->token) : tr("logit(%1) − logit(%2)").arg(s->token, s->versus);
    m_waterfall->setParts(std::move(bars), s->logit, tr("%1 at position %2").arg(what).arg(s->position));
    m_attr_status->setText(describeAttribution());
    emit attributionFinished();
}

QString LabPanel::attributionStatus() const
{
    return m_attr_status->text();
}

QString LabPanel::describeAttribution() const
{
    const auto& s = *m_attribution;
    double sum = 0.0;
    for (const auto& p : s.parts)
        sum += p.value;
    const QString source = m_attr_sequence_tokens
                               ? tr("The stepper's sequence (%n tokens): ", nullptr, m_attr_sequence_tokens)
                               : QString();
    // A soft-capped model (gemma2) bends the logit through tanh after the head: its part is that bend,
    // not a linear share, and the other parts add up to the logit before it.
    QString cap;
    for (const auto& p : s.parts)
        if (p.kind == int(engine::AttributionPart::Kind::SoftCap))
            cap = tr(" · the final soft-cap bends it by %1 (a tanh, not a share: the other parts sum to the "
                     "uncapped %2)")
                      .arg(decimalText(p.value, 4))
                      .arg(decimalText(s.logit - p.value, 4));
    return source +
           tr("%1 = %2, the sum of %3 parts (%4) · final norm's scale frozen at %5 · %6 ms on %7")
               .arg(s.versus.isEmpty() ? tr("logit") : tr("difference"))
               .arg(decimalText(s.logit, 4))
               .arg(s.parts.size())
               .arg(decimalText(sum, 4))
               .arg(s.final_norm_scale, 0, 'g', 4)
               .arg(decimalText(s.ms, 0))
               .arg(s.backend) +
           cap;
}

// ---- export ---------------------------------------------------------------------------------------

bool LabPanel::exportCsv(const QString& path, QString* error) const
{
    if (!m_patching) {
        if (error)
            *error = tr("Nothing to export: run patching first.");
        return false;
    }
    const auto& s = *m_patching;
    QByteArray out = "layer";
    for (int c = 0; c < s.n_columns; ++c) {
        QString label = s.settings.over == 3 ? QString("head %1").arg(c) : s.corrupted_pieces.value(c);
        label.replace('"', "\"\"");
        out += ",\"" + label.toUtf8() + "\"";
    }
    out += "\r\n";
    for (int l = 0; l < s.n_layers; ++l) {
        out += QByteArray::number(l);
        for (double v : s.effect[std::size_t(l)])
            out += "," + (std::isnan(v) ? QByteArray() : QByteArray::number(v, 'g', 17));
        out += "\r\n";
    }
    return save_atomically(path, out, error);
}

bool LabPanel::exportJson(const QString& path, QString* error) const
{
    if (!m_patching) {
        if (error)
            *error = tr("Nothing to export: run patching first.");
        return false;
    }
    const auto& s = *m_patching;
    QJsonObject j;
    j["over"] = s.over_name;
    j["metric"] = s.metric_name;
    j["clean"] = s.settings.clean;
    j["corrupted"] = s.settings.corrupted;
    j["token_a"] = s.token_a;
    j["token_b"] = s.token_b;
    j["clean_metric"] = s.clean_metric;
    j["corrupted_metric"] = s.corrupted_metric;
    j["layers"] = s.n_layers;
    j[s.settings.over == 3 ? "heads" : "positions"] = s.n_columns;
    j["tokens"] = QJsonArray::fromStringList(s.corrupted_pieces);
    QJsonArray effect;
    for (const auto& row : s.effect) {
        QJsonArray cells;
        for (double v : row)
            cells.append(std::isnan(v) ? QJsonValue() : QJsonValue(v));
        effect.append(cells);
    }
    j["effect"] = effect;
    j["runs"] = s.runs;
    j["cancelled"] = s.cancelled;
    return save_atomically(path, QJsonDocument(j).toJson(), error);
}

bool LabPanel::exportImage(const QString& path, QString* error) const
{
    if (!m_patching) {
        if (error)
            *error = tr("Nothing to export: run patching first.");
        return false;
    }
    const QSize size = m_grid->size().expandedTo(QSize(720, 480));
    QBuffer buffer;
    buffer.open(QIODevice::WriteOnly);
    if (path.endsWith(".svg", Qt::CaseInsensitive)) {
        QSvgGenerator svg;
        svg.setOutputDevice(&buffer);
        svg.setSize(size);
        svg.setViewBox(QRect(QPoint(0, 0), size));
        svg.setTitle(tr("Tokenscope activation patching"));
        QPainter p;
        if (!p.begin(&svg)) {
            if (error)
                *error = tr("Could not draw the SVG for %1").arg(path);
            return false;
        }
        m_grid->render(p, QSizeF(size));
        p.end();
    } else {
        QImage image(size * 2, QImage::Format_ARGB32);
        image.setDevicePixelRatio(2);
        image.fill(palette().color(QPalette::Window));
        QPainter p(&image);
        m_grid->render(p, QSizeF(size));
        p.end();
        if (!image.save(&buffer, "PNG")) {
            if (error)
                *error = tr("Could not encode the PNG for %1").arg(path);
            return false;
        }
    }
    return save_atomically(path, buffer.data(), error);
}

void LabPanel::exportWithDialog(const QString& ext)
{
    const QString path = QFileDialog::getSaveFileName(this, tr("Export"), "patching." + ext, "*." + ext);
    if (path.isEmpty())
        return;
    QString error;
    const bool ok = ext == "csv"    ? exportCsv(path, &error)
                    : ext == "json" ? exportJson(path, &error)
                                    : exportImage(path, &error);
    if (!ok)
        QMessageBox::warning(this, tr("Export"), error);
}

} // namespace tokenscope::ui
