// SPDX-License-Identifier: GPL-3.0-or-later
#include "panels/experts_panel.h"

#include "bridge/engine_controller.h"
#include "bridge/experts_client.h"
#include "widgets/count_text.h"
#include "widgets/distribution_overlay.h"
#include "widgets/effect_grid.h"
#include "widgets/expert_views.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QSplitter>
#include <QTextBrowser>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

namespace tokenscope::ui {

ExpertsPanel::ExpertsPanel(EngineController* engine, QWidget* parent) : QWidget(parent), m_engine(engine)
{
    buildUi();
    connect(&m_engine->experts(), &ExpertsClient::routed, this, &ExpertsPanel::onRouted);
    connect(&m_engine->experts(), &ExpertsClient::whatIfReady, this, &ExpertsPanel::onWhatIf);
    connect(&m_engine->experts(), &ExpertsClient::scanProgress, this,
            [this](std::shared_ptr<const ExpertScanSnapshot> s) { onScan(std::move(s), false); });
    connect(&m_engine->experts(), &ExpertsClient::scanFinished, this,
            [this](std::shared_ptr<const ExpertScanSnapshot> s) { onScan(std::move(s), true); });
    connect(m_engine, &EngineController::modelLoaded, this, [this] {
        stopScan();
        m_scan.reset();
        m_scan_grid->clear();
        m_scan_grid->hide();
        m_scan_status->clear();
        m_snapshot.reset();
        m_what_if.reset();
        m_map->setSnapshot(nullptr);
        m_route_view->setSnapshot(nullptr, -1);
        m_load->setSnapshot(nullptr, 0, -1);
        m_overlay->clear();
        m_vocabulary->clear();
        m_what_if_status->clear();
        m_status->setText(tr("Type a text and press Route, or route the chat's or the stepper's sequence."));
    });
}

void ExpertsPanel::buildUi()
{
    auto* layout = new QVBoxLayout(this);
    auto* top = new QHBoxLayout;
    m_text = new QLineEdit;
    m_text->setPlaceholderText(tr("A text to route through the experts"));
    m_text->setAccessibleName(tr("Text"));
    m_route = new QPushButton(tr("Route"));
    m_route->setToolTip(tr("One pass over the text with every router's decision recorded"));
    m_sequence = new QPushButton(tr("Chat / stepper sequence"));
    m_sequence->setToolTip(tr("Route the sequence the chat or the decode stepper holds now"));
    top->addWidget(m_text, 1);
    top->addWidget(m_route);
    top->addWidget(m_sequence);
    layout->addLayout(top);
    m_status = new QLabel(tr("Type a text and press Route, or route the chat's or the stepper's sequence."));
    m_status->setWordWrap(true);
    layout->addWidget(m_status);

    m_views = new QWidget;
    auto* views = new QVBoxLayout(m_views);
    views->setContentsMargins(0, 0, 0, 0);
    auto* upper = new QSplitter(Qt::Horizontal);
    m_map = new ExpertMap;
    auto* map_scroll = new QScrollArea;
    map_scroll->setWidget(m_map);
    map_scroll->setWidgetResizable(true);
    map_scroll->setMinimumWidth(220);
    upper->addWidget(map_scroll);
    auto* right = new QWidget;
    auto* right_layout = new QVBoxLayout(right);
    right_layout->setContentsMargins(0, 0, 0, 0);
    m_route_view = new ExpertRoute;
    m_load = new ExpertLoad;
    right_layout->addWidget(m_route_view, 3);
    right_layout->addWidget(m_load, 2);
    m_vocabulary = new QTextBrowser;
    m_vocabulary->setMaximumHeight(90);
    m_vocabulary->setAccessibleName(tr("The tokens the selected expert takes"));
    right_layout->addWidget(m_vocabulary);
    upper->addWidget(right);
    upper->setStretchFactor(0, 2);
    upper->setStretchFactor(1, 3);
    views->addWidget(upper, 1);

    auto* what_if = new QHBoxLayout;
    what_if->addWidget(new QLabel(tr("What if:")));
    m_kind = new QComboBox;
    m_kind->addItem(tr("remove expert"), int(ExpertWhatIf::Kind::Remove));
    m_kind->addItem(tr("zero the output of expert"), int(ExpertWhatIf::Kind::ZeroOutput));
    m_kind->addItem(tr("force for the selected token, expert"), int(ExpertWhatIf::Kind::Force));
    m_kind->setAccessibleName(tr("What to change"));
    m_expert_box = new QSpinBox;
    m_expert_box->setAccessibleName(tr("Expert"));
    m_scope = new QComboBox;
    m_scope->setAccessibleName(tr("Where"));
    m_scope->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    m_what_if_run = new QPushButton(tr("Show the change"));
    what_if->addWidget(m_kind);
    what_if->addWidget(m_expert_box);
    what_if->addWidget(new QLabel(tr("in")));
    what_if->addWidget(m_scope);
    what_if->addWidget(m_what_if_run);
    what_if->addStretch(1);
    views->addLayout(what_if);
    m_what_if_status = new QLabel;
    m_what_if_status->setWordWrap(true);
    views->addWidget(m_what_if_status);
    m_overlay = new DistributionOverlay;
    m_overlay->hide(); // until a change has been run
    views->addWidget(m_overlay);
    auto* scan_row = new QHBoxLayout;
    scan_row->addWidget(new QLabel(tr("Every expert in turn:")));
    m_scan_mode = new QComboBox;
    m_scan_mode->addItem(tr("removed"), false);
    m_scan_mode->addItem(tr("output zeroed"), true);
    m_scan_mode->setAccessibleName(tr("Scan mode"));
    m_scan_run = new QPushButton(tr("Scan"));
    m_scan_run->setToolTip(tr("One pass per expert some token chose, at its layer: the next token's KL from the "
                              "pass as routed"));
    m_scan_stop = new QPushButton(tr("Stop"));
    m_scan_stop->setEnabled(false);
    scan_row->addWidget(m_scan_mode);
    scan_row->addWidget(m_scan_run);
    scan_row->addWidget(m_scan_stop);
    m_scan_status = new QLabel;
    m_scan_status->setWordWrap(true);
    scan_row->addWidget(m_scan_status, 1);
    views->addLayout(scan_row);
    m_scan_grid = new EffectGrid;
    m_scan_grid->setMinimumHeight(180);
    m_scan_grid->hide();
    views->addWidget(m_scan_grid);
    layout->addWidget(m_views, 1);
    m_views->setEnabled(false);
    connect(m_scan_run, &QPushButton::clicked, this, [this] { scan(m_scan_mode->currentData().toBool()); });
    connect(m_scan_stop, &QPushButton::clicked, this, &ExpertsPanel::stopScan);

    connect(m_route, &QPushButton::clicked, this, &ExpertsPanel::route);
    connect(m_text, &QLineEdit::returnPressed, this, &ExpertsPanel::route);
    connect(m_sequence, &QPushButton::clicked, this, &ExpertsPanel::routeSequence);
    connect(m_map, &ExpertMap::selected, this, [this](int t, int li) { select(t, li, m_expert); });
    connect(m_load, &ExpertLoad::expertClicked, this, [this](int e) { select(m_token, m_layer, e); });
    connect(m_expert_box, &QSpinBox::valueChanged, this, [this](int e) {
        if (e != m_expert)
            select(m_token, m_layer, e);
    });
    connect(m_what_if_run, &QPushButton::clicked, this, [this] {
        const int scope = m_scope->currentData().toInt();
        runWhatIf(ExpertWhatIf::Kind(m_kind->currentData().toInt()), scope, m_expert_box->value());
    });
}

void ExpertsPanel::setText(const QString& text)
{
    m_text->setText(text);
}

void ExpertsPanel::route()
{
    m_status->setText(tr("Routing…"));
    m_request = m_engine->experts().route(m_text->text(), false);
}

void ExpertsPanel::routeSequence()
{
    m_status->setText(tr("Routing the sequence…"));
    m_request = m_engine->experts().route(QString(), true);
}

void ExpertsPanel::onRouted(std::shared_ptr<const ExpertsSnapshot> s)
{
    if (s->request_id != m_request || s->cancelled)
        return;
    if (!s->error.isEmpty()) {
        m_status->setText(s->error);
        emit routed();
        return;
    }
    // whatever still runs belongs to the routing this one replaces
    stopScan();
    m_scan_request = m_what_if_request = 0;
    m_scan.reset();
    m_scan_grid->clear();
    m_scan_grid->hide();
    m_scan_status->clear();
    m_scan_run->setEnabled(true);
    m_scan_stop->setEnabled(false);
    m_snapshot = s;
    m_what_if.reset();
    m_overlay->clear();
    m_overlay->hide();
    m_what_if_status->clear();
    if (s->dense || s->n() == 0 || s->moe_layers.empty()) {
        m_views->setEnabled(false);
        m_map->setSnapshot(nullptr);
        m_route_view->setSnapshot(nullptr, -1);
        m_load->setSnapshot(nullptr, 0, -1);
        m_vocabulary->clear();
        m_status->setText(tr("This model (%1) is dense: it has no router. Every token goes through the same "
                             "feed-forward block in every layer, so there are no experts to show. Open a "
                             "mixture-of-experts model (qwen3moe, olmoe, granitemoe) to see routing.")
                              .arg(s->architecture));
        emit routed();
        return;
    }
    m_views->setEnabled(true);
    // a saved run's routing: nothing behind it to run again (the loaded model, if any, may be another)
    for (QWidget* w :
         std::initializer_list<QWidget*>{m_kind, m_scope, m_expert_box, m_what_if_run, m_scan_mode, m_scan_run})
        w->setEnabled(!s->saved);
    m_scope->clear();
    m_scope->addItem(tr("every layer"), -1);
    for (const int l : s->moe_layers)
        m_scope->addItem(tr("layer %1").arg(l), l);
    // the selection clamped to this routing before any widget hears of it
    m_token = std::clamp(m_token, 0, std::max(0, s->n() - 1));
    m_layer = std::clamp(m_layer, 0, std::max(0, int(s->moe_layers.size()) - 1));
    m_expert = std::clamp(m_expert, 0, std::max(0, s->n_expert - 1));
    {
        const QSignalBlocker block(m_expert_box);
        m_expert_box->setRange(0, std::max(0, s->n_expert - 1));
    }
    m_map->setSnapshot(s);
    m_status->setText(tr("%1 tokens through %2 routers of %3 experts, %4 per token (weights %5) · %6 ms. Click a "
                         "token for its route, a bar for an expert's tokens.")
                          .arg(numberText(s->n()))
                          .arg(s->moe_layers.size())
                          .arg(s->n_expert)
                          .arg(s->k)
                          .arg(s->normalized ? tr("normalised to sum 1") : tr("the router's probabilities"))
                          .arg(s->ms, 0, 'f', 0) +
                      (s->saved ? tr(" Reopened from a saved run: route again to change it.") : QString()) +
                      (s->random_weights ? tr(" <b>Random routing:</b> this is a generated model with random "
                                              "weights, so no expert has learned anything to specialise in.")
                                         : QString()));
    select(m_token, m_layer, m_expert);
    emit routed();
}

void ExpertsPanel::showSaved(std::shared_ptr<const ExpertsSnapshot> snapshot)
{
    m_request = snapshot->request_id; // 0: not a request of this session
    onRouted(std::move(snapshot));
}

void ExpertsPanel::select(int token, int layer_index, int expert)
{
    m_token = token;
    m_layer = layer_index;
    m_expert = expert;
    renderSelection();
}

QString ExpertsPanel::vocabularyText() const
{
    return m_vocabulary->toPlainText();
}

void ExpertsPanel::renderSelection()
{
    const auto& s = m_snapshot;
    if (!s || s->dense || s->moe_layers.empty() || s->n() == 0 || s->k < 1 || s->n_expert < 1)
        return;
    m_map->setSelection(m_token, m_layer);
    m_route_view->setSnapshot(s, m_token);
    m_load->setSnapshot(s, m_layer, m_expert);
    {
        const QSignalBlocker block(m_expert_box);
        m_expert_box->setValue(m_expert);
    }
    // the tokens the expert takes at this layer, heaviest first
    struct Taken {
        int t;
        float w;
    };
    std::vector<Taken> taken;
    for (int t = 0; t < s->n(); ++t)
        for (int slot = 0; slot < s->k; ++slot)
            if (s->expert(m_layer, t, slot) == m_expert)
                taken.push_back({t, s->weight(m_layer, t, slot)});
    std::sort(taken.begin(), taken.end(), [](const Taken& a, const Taken& b) { return a.w > b.w; });
    QString html = tr("<b>Expert %1 at layer %2</b> takes %3 of %4 tokens%5")
                       .arg(m_expert)
                       .arg(s->moe_layers[std::size_t(m_layer)])
                       .arg(taken.size())
                       .arg(s->n())
                       .arg(taken.empty() ? tr(".") : tr(":"));
    for (const Taken& k : taken)
        html += QString(" <span style='background-color:%1'>%2</span>&nbsp;<small>%3</small>")
                    .arg(expert_colour(m_expert).lighter(150).name(), s->tokens[std::size_t(k.t)].text.toHtmlEscaped())
                    .arg(k.w, 0, 'f', 2);
    m_vocabulary->setHtml(html);
}

void ExpertsPanel::runWhatIf(ExpertWhatIf::Kind kind, int layer, int expert)
{
    if (!m_snapshot || m_snapshot->dense) {
        m_what_if_status->setText(tr("Route a text first."));
        return;
    }
    { // the controls say what runs, however it was asked for
        const QSignalBlocker b1(m_kind), b2(m_scope), b3(m_expert_box);
        m_kind->setCurrentIndex(std::max(0, m_kind->findData(int(kind))));
        m_scope->setCurrentIndex(std::max(0, m_scope->findData(layer)));
        m_expert_box->setValue(expert);
    }
    ExpertWhatIf w;
    w.kind = kind;
    w.layer = layer;
    w.expert = expert;
    w.position = m_token;
    m_what_if_status->setText(tr("Running the pass again with the change…"));
    m_what_if_request = m_engine->experts().whatIf(m_snapshot->ids, w);
}

void ExpertsPanel::onWhatIf(std::shared_ptr<const ExpertWhatIfSnapshot> s)
{
    if (s->request_id != m_what_if_request)
        return;
    if (!s->error.isEmpty()) {
        m_what_if_status->setText(s->error);
        emit whatIfFinished();
        return;
    }
    m_what_if = s;
    std::vector<DistributionOverlay::Row> rows;
    for (const auto& c : s->candidates)
        if (rows.size() < 10) // the most likely before the change (the list is in that order)
            rows.push_back({c.text, c.p_before, c.p_after, false});
    m_overlay->setDistributions(tr("The next token, before and after"), tr("as routed"), tr("changed"), rows);
    m_overlay->show();
    m_what_if_status->setText(tr("%1: %2 token-layer routes changed; KL(before ‖ after) of the next token %3 "
                                 "nats · %4 ms.")
                                  .arg(s->description)
                                  .arg(s->rerouted)
                                  .arg(s->kl, 0, 'g', 3)
                                  .arg(s->ms, 0, 'f', 0));
    emit whatIfFinished();
}

void ExpertsPanel::scan(bool zero)
{
    if (!m_snapshot || m_snapshot->dense) {
        m_scan_status->setText(tr("Route a text first."));
        return;
    }
    m_scan_mode->setCurrentIndex(zero ? 1 : 0);
    m_scan_status->setText(tr("Planning the scan…"));
    m_scan_run->setEnabled(false);
    m_scan_stop->setEnabled(true);
    m_scan_request = m_engine->experts().scan(m_snapshot->ids, zero);
}

void ExpertsPanel::stopScan()
{
    m_engine->experts().stopScan();
}

QString ExpertsPanel::scanStatusText() const
{
    return m_scan_status->text();
}

void ExpertsPanel::onScan(std::shared_ptr<const ExpertScanSnapshot> s, bool final)
{
    if (s->request_id != m_scan_request)
        return;
    if (final) { // (a saved run's routing has no model behind it to scan)
        m_scan_run->setEnabled(m_snapshot && !m_snapshot->saved);
        m_scan_stop->setEnabled(false);
    }
    if (!s->error.isEmpty()) {
        m_scan_status->setText(s->error);
        if (final)
            emit scanFinished();
        return;
    }
    if (!final) { // the plan and the progress: passes done, time left by the estimate
        const double left_s = std::max(0.0, s->estimated_ms - s->elapsed_ms) / 1000.0;
        m_scan_status->setText(tr("%1 of %2 passes (one per expert some token chose) · about %3 s left")
                                   .arg(s->done)
                                   .arg(s->planned)
                                   .arg(left_s, 0, 'f', left_s < 10 ? 1 : 0));
        return;
    }
    m_scan = s;
    double top = 0.0;
    for (const auto& row : s->kl)
        for (const double v : row)
            if (std::isfinite(v))
                top = std::max(top, v);
    std::vector<std::vector<double>> shares;
    for (const auto& row : s->kl) {
        std::vector<double> r;
        for (const double v : row)
            r.push_back(std::isfinite(v) && top > 0 ? v / top : v);
        shares.push_back(std::move(r));
    }
    QStringList columns;
    for (int e = 0; e < s->n_expert; ++e)
        columns << QString::number(e);
    m_scan_grid->setData(std::move(shares), columns,
                         tr("Next-token KL with each expert %1, as a share of the largest (%2 nats); rows: layers, "
                            "columns: experts")
                             .arg(s->zero ? tr("zeroed") : tr("removed"))
                             .arg(top, 0, 'g', 3));
    m_scan_grid->setScaleLabels(tr("largest"), "0", QString()); // a KL is never below 0
    m_scan_grid->show();
    m_scan_status->setText(s->cancelled
                               ? tr("Stopped after %1 of %2 passes (hatched: not run).").arg(s->done).arg(s->planned)
                               : tr("%1 passes in %2 s; experts no token chose are 0 without a pass "
                                    "(removing them changes no bit). Predicted next token: “%3”.")
                                     .arg(s->done)
                                     .arg(s->elapsed_ms / 1000.0, 0, 'f', 1)
                                     .arg(s->token));
    emit scanFinished();
}

QString ExpertsPanel::statusText() const
{
    return m_status->text();
}

} // namespace tokenscope::ui
