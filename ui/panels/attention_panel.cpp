// SPDX-License-Identifier: GPL-3.0-or-later
#include "panels/attention_panel.h"
#include "bridge/inspection_client.h"
#include "widgets/count_text.h"

#include "bridge/engine_controller.h"
#include "bridge/token_selection.h"
#include "storage/atomic_save.h"
#include "widgets/attention_heatmap.h"
#include "widgets/attention_views.h"
#include "widgets/distribution_view.h"
#include "widgets/flow_layout.h"

#include <QBuffer>
#include <QCheckBox>
#include <QComboBox>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QPainter>
#include <QPushButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QSplitter>
#include <QSvgGenerator>
#include <QTabWidget>
#include <QVBoxLayout>
#include <cmath>

namespace tokenscope::ui {

namespace {

constexpr const char* kBankA = "I sat on the river bank";
constexpr const char* kBankB = "I paid cash at the bank";

// Sizes in MiB, or KiB below a tenth of a MiB (a short prompt's head would read "0.0 MiB").
QString mib(double bytes)
{
    if (bytes < 0.1 * 1024.0 * 1024.0)
        return QLocale().toString(bytes / 1024.0, 'f', 1) + " KiB";
    return QLocale().toString(bytes / (1024.0 * 1024.0), 'f', 1) + " MiB";
}

} // namespace

AttentionPanel::AttentionPanel(EngineController* engine, TokenSelection* selection, QWidget* parent)
    : QWidget(parent), m_engine(engine), m_selection(selection)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(6, 6, 6, 6);

    auto* top = new QHBoxLayout;
    m_source = new QComboBox;
    m_source->addItem(tr("Prompt typed here"));
    m_source->addItem(tr("The model's current sequence (chat or stepper)"));
    // its longest item would set the panel's minimum width: shorter, with the whole text in the list
    m_source->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    m_source->setMinimumContentsLength(18);
    top->addWidget(m_source);
    m_prompt = new QLineEdit;
    m_prompt->setObjectName("attentionPrompt");
    m_prompt->setPlaceholderText(tr("a prompt, e.g. “The cat sat on the mat because it was tired”"));
    top->addWidget(m_prompt, 1);
    auto* run_button = new QPushButton(tr("Run"));
    run_button->setToolTip(tr("One forward pass over the tokens, the attention of this layer captured"));
    top->addWidget(run_button);
    auto* all_button = new QPushButton(tr("Capture all layers…"));
    top->addWidget(all_button);
    layout->addLayout(top);

    auto* controls = new FlowLayout; // wraps in a narrow dock
    m_layer = new QSpinBox;
    controls->addWidget(labelled(tr("Layer"), m_layer));
    m_head = new QSpinBox;
    controls->addWidget(labelled(tr("Head"), m_head));
    m_mode_box = new QComboBox;
    m_mode_box->addItems({tr("one head"), tr("mean over the layer's heads"), tr("max over the layer's heads")});
    controls->addWidget(m_mode_box);
    m_log = new QCheckBox(tr("log scale"));
    controls->addWidget(m_log);
    for (const auto& [label, ext] : {std::pair<QString, QString>{tr("PNG"), "png"},
                                     {tr("SVG"), "svg"},
                                     {tr("CSV"), "csv"},
                                     {tr("JSON"), "json"}}) {
        auto* b = new QPushButton(tr("Export %1").arg(label));
        connect(b, &QPushButton::clicked, this, [this, ext = ext] {
            const QString path = QFileDialog::getSaveFileName(this, tr("Export"), "attention." + ext, "*." + ext);
            if (path.isEmpty())
                return;
            QString error;
            const bool ok = ext == "csv"    ? exportCsv(path, &error)
                            : ext == "json" ? exportJson(path, &error)
                                            : exportImage(path, &error);
            m_status->setText(ok ? tr("Wrote %1").arg(path) : error);
        });
        controls->addWidget(b);
    }
    layout->addLayout(controls);

    m_tabs = new QTabWidget;
    // Head view
    auto* head_split = new QSplitter(Qt::Horizontal);
    m_heatmap = new AttentionHeatmap;
    head_split->addWidget(m_heatmap);
    auto* side = new QSplitter(Qt::Vertical);
    m_row_view = new DistributionView;
    m_row_view->setPlaceholder(tr("Click a row: what that token attends to."));
    side->addWidget(m_row_view);
    m_qk = new QkView;
    side->addWidget(m_qk);
    head_split->addWidget(side);
    head_split->setStretchFactor(0, 3);
    head_split->setStretchFactor(1, 2);
    m_tabs->addTab(head_split, tr("Head view"));
    // Layer grid / model overview
    auto* grid_page = new QWidget;
    auto* grid_layout = new QVBoxLayout(grid_page);
    m_overview = new QCheckBox(tr("whole model (every layer × head; needs all layers captured)"));
    grid_layout->addWidget(m_overview);
    m_grid = new HeadGrid;
    // a whole model's heads at their smallest can outgrow the page: they scroll, never cut off
    auto* grid_scroll = new QScrollArea;
    grid_scroll->setWidgetResizable(true);
    grid_scroll->setFrameShape(QFrame::NoFrame);
    grid_scroll->setWidget(m_grid);
    grid_layout->addWidget(grid_scroll, 1);
    m_tabs->addTab(grid_page, tr("Layer grid"));
    // Lines
    m_lines = new AttentionLines;
    m_tabs->addTab(m_lines, tr("Lines"));
    // Compare
    auto* compare_page = new QWidget;
    auto* compare_layout = new QVBoxLayout(compare_page);
    auto* compare_row = new QHBoxLayout;
    m_compare_a = new QLineEdit(kBankA);
    m_compare_b = new QLineEdit(kBankB);
    auto* compare_button = new QPushButton(tr("Compare"));
    auto* bank_button = new QPushButton(tr("“bank” example"));
    compare_row->addWidget(m_compare_a, 1);
    compare_row->addWidget(m_compare_b, 1);
    compare_row->addWidget(compare_button);
    compare_row->addWidget(bank_button);
    compare_layout->addLayout(compare_row);
    auto* maps = new QHBoxLayout;
    m_heat_a = new AttentionHeatmap;
    m_heat_b = new AttentionHeatmap;
    m_diff = new AttentionHeatmap;
    maps->addWidget(m_heat_a);
    maps->addWidget(m_heat_b);
    maps->addWidget(m_diff);
    compare_layout->addLayout(maps, 1);
    m_compare_note =
        new QLabel(tr("Same head, two prompts: the same token in different contexts attends differently. The third "
                      "map is A − B (red: more in A, blue: more in B)."));
    m_compare_note->setWordWrap(true);
    compare_layout->addWidget(m_compare_note);
    m_tabs->addTab(compare_page, tr("Compare"));
    layout->addWidget(m_tabs, 1);

    m_cost = new QLabel;
    m_cost->setWordWrap(true);
    layout->addWidget(m_cost);
    m_status = new QLabel(tr("Type a prompt and press Run, or pick the model's current sequence."));
    m_status->setWordWrap(true);
    m_status->setTextFormat(Qt::RichText);
    layout->addWidget(m_status);

    connect(run_button, &QPushButton::clicked, this, [this] {
        if (m_source->currentIndex() == 1)
            runSequence();
        else
            run();
    });
    connect(m_prompt, &QLineEdit::returnPressed, this, &AttentionPanel::run);
    // Picking the model's current sequence shows it at once: there is nothing to type first.
    connect(m_source, &QComboBox::activated, this, [this](int index) {
        if (index == 1 && m_engine->model())
            runSequence();
    });
    connect(all_button, &QPushButton::clicked, this, &AttentionPanel::captureAllLayers);
    connect(m_layer, &QSpinBox::valueChanged, this, [this] {
        // The layer in view is captured on demand (memory stays bounded), unless all are held.
        if (m_snapshot && !m_all_layers && !m_snapshot->find(layer(), 0))
            request(m_snapshot->text, m_sequence, false);
        m_head->setMaximum(m_snapshot && layer() < int(m_snapshot->heads_per_layer.size())
                               ? m_snapshot->heads_per_layer[std::size_t(layer())] - 1
                               : 0);
        refresh();
    });
    connect(m_head, &QSpinBox::valueChanged, this, &AttentionPanel::refresh);
    connect(m_mode_box, &QComboBox::currentIndexChanged, this, [this](int i) { setMode(Mode(i)); });
    connect(m_log, &QCheckBox::toggled, this, [this](bool on) { m_heatmap->setLogScale(on); });
    connect(m_overview, &QCheckBox::toggled, this, &AttentionPanel::refreshGrid);
    connect(m_heatmap, &AttentionHeatmap::cellClicked, this, [this](int row, int column) {
        selectCell(row, column);
        m_selection->select(row);
    });
    connect(m_grid, &HeadGrid::headClicked, this, [this](int l, int h) {
        showHead(l, h);
        showTab(0);
    });
    connect(m_grid, &HeadGrid::headAblationToggled, this, &AttentionPanel::headAblationToggled);
    connect(m_lines, &AttentionLines::rowClicked, m_selection, &TokenSelection::select);
    connect(m_selection, &TokenSelection::changed, this, [this](int position) {
        if (position != m_row)
            selectCell(position, -1);
    });
    connect(compare_button, &QPushButton::clicked, this, [this] { compare(m_compare_a->text(), m_compare_b->text()); });
    connect(bank_button, &QPushButton::clicked, this, &AttentionPanel::compareBankExample);
    connect(&m_engine->inspection(), &InspectionClient::attentionReady, this, &AttentionPanel::onSnapshot);
    connect(m_engine, &EngineController::modelLoaded, this, [this] {
        m_snapshot.reset();
        m_a.reset();
        m_b.reset();
        refresh();
    });
}

void AttentionPanel::showEvent(QShowEvent* event)
{
    QWidget::showEvent(event);
    m_engine->inspection().setAttentionWatched(true);
}

void AttentionPanel::hideEvent(QHideEvent* event)
{
    QWidget::hideEvent(event);
    m_engine->inspection().setAttentionWatched(false);
}

void AttentionPanel::setPrompt(const QString& text)
{
    m_prompt->setText(text);
}

void AttentionPanel::request(const QString& text, bool sequence, bool all_layers)
{
    m_sequence = sequence;
    m_all_layers = all_layers;
    QList<int> layers;
    if (!all_layers)
        layers << layer();
    m_request = m_engine->inspection().captureAttention(sequence ? QString() : text, sequence, layers);
    m_status->setText(tr("Running the forward pass…"));
}

void AttentionPanel::run()
{
    m_source->setCurrentIndex(0);
    request(m_prompt->text(), false, false);
}

void AttentionPanel::runSequence()
{
    m_source->setCurrentIndex(1);
    request(QString(), true, false);
}

void AttentionPanel::captureAllLayers()
{
    request(m_snapshot ? m_snapshot->text : m_prompt->text(), m_source->currentIndex() == 1, true);
}

void AttentionPanel::showSaved(std::shared_ptr<const AttentionSnapshot> snapshot)
{
    if (m_request)
        m_engine->cancel(m_request);
    m_request = snapshot->request_id;
    m_request_a = m_request_b = ~quint64(0);
    onSnapshot(std::move(snapshot));
    m_request_a = m_request_b = 0;
}

void AttentionPanel::onSnapshot(std::shared_ptr<const AttentionSnapshot> snapshot)
{
    if (snapshot->request_id == m_request_a || snapshot->request_id == m_request_b) {
        (snapshot->request_id == m_request_a ? m_a : m_b) = snapshot;
        if (m_a && m_b && m_a->request_id == m_request_a && m_b->request_id == m_request_b)
            refreshCompare();
        return;
    }
    if (snapshot->request_id != m_request)
        return;
    if (!snapshot->error.isEmpty()) {
        m_status->setText(QString("<span style='color:#d0453a'>%1</span>").arg(snapshot->error.toHtmlEscaped()));
        emit captured();
        return;
    }
    m_snapshot = std::move(snapshot);
    m_layer->setMaximum(std::max(0, m_snapshot->n_layers - 1));
    m_head->setMaximum(
        layer() < int(m_snapshot->heads_per_layer.size()) ? m_snapshot->heads_per_layer[std::size_t(layer())] - 1 : 0);
    if (m_wanted_head >= 0) {
        m_head->setValue(m_wanted_head);
        m_wanted_head = -1;
    }
    refresh();
    emit captured();
}

int AttentionPanel::layer() const
{
    return m_layer->value();
}
int AttentionPanel::head() const
{
    return m_head->value();
}

const AttentionHead* AttentionPanel::currentHead() const
{
    return m_snapshot ? m_snapshot->find(layer(), head()) : nullptr;
}

void AttentionPanel::showHead(int l, int h)
{
    m_layer->setMaximum(std::max(m_layer->maximum(), l));
    m_layer->setValue(l);
    m_wanted_head = h;
    if (h <= m_head->maximum()) {
        m_head->setValue(h);
        m_wanted_head = -1;
    }
    refresh();
}

void AttentionPanel::setMode(Mode mode)
{
    m_mode = mode;
    if (m_mode_box->currentIndex() != int(mode))
        m_mode_box->setCurrentIndex(int(mode));
    refresh();
}

void AttentionPanel::showTab(int index)
{
    m_tabs->setCurrentIndex(index);
}

void AttentionPanel::setOverview(bool whole_model)
{
    m_overview->setChecked(whole_model);
}

QStringList AttentionPanel::labels(const AttentionSnapshot& s) const
{
    QStringList out;
    for (const auto& t : s.tokens)
        out << t.text;
    return out;
}

QString AttentionPanel::costText() const
{
    if (!m_snapshot)
        return {};
    double heads = 0;
    for (int h : m_snapshot->heads_per_layer)
        heads += h;
    const double n = double(m_snapshot->tokens.size());
    const double per_head =
        (n * n + 3.0 * n * (m_snapshot->heads.empty() ? 0.0 : double(m_snapshot->heads.front().head_dim))) * 4.0;
    return tr("Capturing every layer of this sequence would hold %1 heads × %2 = %3.")
        .arg(heads)
        .arg(mib(per_head), mib(per_head * heads));
}

void AttentionPanel::refresh()
{
    m_cost->setText(costText());
    const AttentionHead* h = currentHead();
    if (!m_snapshot || !h) {
        m_heatmap->setMatrix({});
        m_lines->setHead(m_snapshot, nullptr, -1);
        refreshGrid();
        return;
    }
    const int window = layer() < int(m_snapshot->window.size()) ? m_snapshot->window[std::size_t(layer())] : 0;
    AttentionHeatmap::Matrix m;
    m.n = h->n;
    m.labels = labels(*m_snapshot);
    m.window = window;
    if (m_mode == Mode::Head) {
        m.owner = m_snapshot;
        m.values = h->weights.data();
    } else {
        auto agg = std::make_shared<std::vector<float>>(std::size_t(h->n) * std::size_t(h->n), 0.0f);
        int count = 0;
        for (const auto& other : m_snapshot->heads)
            if (other.layer == layer()) {
                ++count;
                for (std::size_t i = 0; i < agg->size(); ++i)
                    (*agg)[i] =
                        m_mode == Mode::Mean ? (*agg)[i] + other.weights[i] : std::max((*agg)[i], other.weights[i]);
            }
        if (m_mode == Mode::Mean && count > 0)
            for (float& v : *agg)
                v /= float(count);
        m_aggregate = agg;
        m.owner = agg;
        m.values = agg->data();
    }
    m_heatmap->setMatrix(std::move(m));
    m_heatmap->setSelected(m_row, m_column);

    // Attention sinks: how much each head of the layer gives the first token, on average.
    QStringList sinks;
    for (const auto& other : m_snapshot->heads)
        if (other.layer == layer() && other.n > 0) {
            double sum = 0;
            for (int r = 0; r < other.n; ++r)
                sum += double(other.weights[std::size_t(r) * std::size_t(other.n)]);
            const double mean = sum / other.n;
            const QString s = QString("H%1 %2").arg(other.head).arg(decimalText(mean, 2));
            sinks << (mean > 0.5 ? "<b style='color:#d0453a'>" + s + "</b>" : s);
        }
    // A recording ran no pass of its own: no time to give for it.
    const bool recorded = m_snapshot->source == "recorded";
    const QString pass = recorded ? QString() : tr(" · forward pass %1 ms").arg(decimalText(m_snapshot->ms, 1));
    m_status->setText(
        tr("%1 · layer %2 (%3) · %4 captured, %5%6%7<br>Attention to the first "
           "token (sinks above 0.5 in red): %8")
            .arg(countText(qint64(m_snapshot->tokens.size()), tr("token"), tr("tokens")))
            .arg(layer())
            .arg(window ? tr("sliding window %1").arg(window) : tr("global"))
            .arg(countText(qint64(m_snapshot->heads.size()), tr("head"), tr("heads")))
            .arg(mib(double(m_snapshot->bytes)))
            .arg(pass)
            .arg(recorded ? tr(" · the model's current sequence, as computed during its prefill and each decode step")
                 : m_snapshot->source == "sequence"
                     ? tr(" · the model's current sequence, recomputed in one pass (not recorded while it ran)")
                     : QString())
            .arg(sinks.join(" · ")));
    m_lines->setHead(m_snapshot, h, m_row);
    refreshRowView();
    refreshGrid();
}

QString AttentionPanel::statusText() const
{
    return m_status->text();
}

void AttentionPanel::selectCell(int row, int column)
{
    const AttentionHead* h = currentHead();
    if (!h || row < 0 || row >= h->n)
        return;
    m_row = row;
    if (column < 0) { // the strongest key of the row
        column = 0;
        for (int j = 1; j < h->n; ++j)
            if (h->weights[std::size_t(row) * std::size_t(h->n) + std::size_t(j)] >
                h->weights[std::size_t(row) * std::size_t(h->n) + std::size_t(column)])
                column = j;
    }
    m_column = column;
    m_heatmap->setSelected(row, column);
    m_lines->setHead(m_snapshot, h, row);
    refreshRowView();
}

void AttentionPanel::refreshRowView()
{
    const AttentionHead* h = currentHead();
    if (!h || m_row < 0 || m_row >= h->n) {
        m_row_view->setPlaceholder(tr("Click a row: what that token attends to."));
        m_qk->setCell(m_snapshot, nullptr, 0, -1, -1);
        return;
    }
    const int window = layer() < int(m_snapshot->window.size()) ? m_snapshot->window[std::size_t(layer())] : 0;
    std::vector<std::pair<float, int>> keys;
    for (int j = 0; j <= m_row; ++j)
        keys.emplace_back(h->weights[std::size_t(m_row) * std::size_t(h->n) + std::size_t(j)], j);
    std::sort(keys.rbegin(), keys.rend());
    std::vector<DistributionView::Row> rows;
    for (std::size_t i = 0; i < keys.size() && i < 14; ++i) {
        DistributionView::Row r;
        r.id = keys[i].second;
        r.text = QString("%1 %2").arg(m_snapshot->tokens[std::size_t(r.id)].text).arg(r.id);
        r.after = keys[i].first;
        r.before = keys[i].first;
        r.survives = keys[i].first > 0.0f || !(r.id > m_row || (window > 0 && m_row - r.id >= window));
        r.chosen = r.id == m_column;
        rows.push_back(r);
    }
    m_row_view->setRows(std::move(rows), tr("weight"),
                        tr("“%1” (%2) attends to").arg(m_snapshot->tokens[std::size_t(m_row)].text).arg(m_row));
    m_qk->setCell(m_snapshot, h, window, m_row, m_column);
}

void AttentionPanel::refreshGrid()
{
    std::vector<HeadGrid::Thumb> thumbs;
    const QColor base = palette().color(QPalette::Base);
    int columns = 4;
    QString caption;
    if (m_snapshot) {
        const bool overview = m_overview->isChecked();
        std::vector<const AttentionHead*> heads;
        for (const auto& h : m_snapshot->heads)
            if (overview || h.layer == layer())
                heads.push_back(&h);
        std::stable_sort(heads.begin(), heads.end(), [](const AttentionHead* a, const AttentionHead* b) {
            return a->layer != b->layer       ? a->layer < b->layer
                   : a->kv_head != b->kv_head ? a->kv_head < b->kv_head
                                              : a->head < b->head;
        });
        const int size = overview ? 64 : 200;
        for (const AttentionHead* h : heads) {
            const int window =
                h->layer < int(m_snapshot->window.size()) ? m_snapshot->window[std::size_t(h->layer)] : 0;
            double sink = 0;
            for (int r = 0; r < h->n; ++r)
                sink += double(h->weights[std::size_t(r) * std::size_t(h->n)]);
            thumbs.push_back({h->layer, h->head, h->kv_head, window, head_thumbnail(*h, window, size, base),
                              float(sink / std::max(1, h->n))});
        }
        columns = overview
                      ? std::max(1, m_snapshot->heads_per_layer.empty() ? 4 : m_snapshot->heads_per_layer.front()) * 3
                      : std::max(1, int(thumbs.size()));
        caption = overview
                      ? tr("Every captured head, by layer (colour frames: heads sharing a KV head; red label: an "
                           "attention sink)")
                      : tr("Layer %1: its heads, grouped by the KV head they share (GQA); hatched corners are masked")
                            .arg(layer());
        if (overview && int(thumbs.size()) < m_snapshot->n_layers)
            caption += tr(" — only the captured layers are shown: use “Capture all layers…”");
    }
    m_grid->setThumbs(std::move(thumbs), columns, caption);
}

void AttentionPanel::compare(const QString& a, const QString& b)
{
    m_compare_a->setText(a);
    m_compare_b->setText(b);
    m_a.reset();
    m_b.reset();
    m_request_a = m_engine->inspection().captureAttention(a, false, {layer()});
    m_request_b = m_engine->inspection().captureAttention(b, false, {layer()});
    showTab(3);
}

void AttentionPanel::compareBankExample()
{
    compare(kBankA, kBankB);
}

void AttentionPanel::refreshCompare()
{
    if (!m_a->error.isEmpty() || !m_b->error.isEmpty()) {
        m_compare_note->setText(m_a->error.isEmpty() ? m_b->error : m_a->error);
        emit compared();
        return;
    }
    const AttentionHead* ha = m_a->find(layer(), head());
    const AttentionHead* hb = m_b->find(layer(), head());
    if (!ha || !hb)
        return;
    const int window = layer() < int(m_a->window.size()) ? m_a->window[std::size_t(layer())] : 0;
    AttentionHeatmap::Matrix ma{ha->n, m_a, ha->weights.data(), labels(*m_a), window};
    AttentionHeatmap::Matrix mb{hb->n, m_b, hb->weights.data(), labels(*m_b), window};
    m_heat_a->setMatrix(ma);
    m_heat_b->setMatrix(mb);
    // The difference over the positions both have, aligned at the start.
    const int n = std::min(ha->n, hb->n);
    m_difference.assign(std::size_t(n) * std::size_t(n), 0.0f);
    float range = 1e-6f;
    for (int r = 0; r < n; ++r)
        for (int c = 0; c <= r; ++c) {
            const float d = ha->weights[std::size_t(r) * std::size_t(ha->n) + std::size_t(c)] -
                            hb->weights[std::size_t(r) * std::size_t(hb->n) + std::size_t(c)];
            m_difference[std::size_t(r) * std::size_t(n) + std::size_t(c)] = d;
            range = std::max(range, std::abs(d));
        }
    QStringList diff_labels;
    for (int i = 0; i < n; ++i)
        diff_labels << (m_a->tokens[std::size_t(i)].text == m_b->tokens[std::size_t(i)].text
                            ? m_a->tokens[std::size_t(i)].text
                            : m_a->tokens[std::size_t(i)].text + "/" + m_b->tokens[std::size_t(i)].text);
    AttentionHeatmap::Matrix md{n, nullptr, m_difference.data(), diff_labels, window, true, range};
    m_diff->setMatrix(md);
    const int last = n - 1;
    QString note = tr("Layer %1, head %2. A: %3, B: %4; the difference covers the first %5. Largest change: %6.")
                       .arg(layer())
                       .arg(head())
                       .arg(countText(ha->n, tr("token"), tr("tokens")))
                       .arg(countText(hb->n, tr("token"), tr("tokens")))
                       .arg(n)
                       .arg(decimalText(double(range), 3));
    if (last >= 0 && m_a->tokens[std::size_t(last)].id == m_b->tokens[std::size_t(last)].id)
        note += tr(" The last token, “%1”, is the same id in both, yet its row differs: context changes attention.")
                    .arg(m_a->tokens[std::size_t(last)].text);
    m_compare_note->setText(note);
    emit compared();
}

bool AttentionPanel::exportCsv(const QString& path, QString* error) const
{
    const AttentionHead* h = currentHead();
    if (!h) {
        if (error)
            *error = tr("Nothing to export: run a prompt first.");
        return false;
    }
    QByteArray out = "query,token";
    for (int j = 0; j < h->n; ++j)
        out += ",k" + QByteArray::number(j);
    out += "\r\n";
    for (int i = 0; i < h->n; ++i) {
        QString token = m_snapshot->tokens[std::size_t(i)].text;
        token.replace('"', "\"\"");
        out += QByteArray::number(i) + ",\"" + token.toUtf8() + "\"";
        for (int j = 0; j < h->n; ++j)
            out += "," +
                   QByteArray::number(double(h->weights[std::size_t(i) * std::size_t(h->n) + std::size_t(j)]), 'g', 9);
        out += "\r\n";
    }
    return save_atomically(path, out, error);
}

bool AttentionPanel::exportJson(const QString& path, QString* error) const
{
    const AttentionHead* h = currentHead();
    if (!h) {
        if (error)
            *error = tr("Nothing to export: run a prompt first.");
        return false;
    }
    QJsonArray tokens, rows;
    for (const auto& t : m_snapshot->tokens)
        tokens.append(QJsonObject{{"id", t.id}, {"text", t.text}});
    for (int i = 0; i < h->n; ++i) {
        QJsonArray row;
        for (int j = 0; j < h->n; ++j)
            row.append(double(h->weights[std::size_t(i) * std::size_t(h->n) + std::size_t(j)]));
        rows.append(row);
    }
    const QJsonObject root{{"layer", h->layer},         {"head", h->head},  {"kv_head", h->kv_head},
                           {"scale", double(h->scale)}, {"tokens", tokens}, {"weights", rows}};
    return save_atomically(path, QJsonDocument(root).toJson(QJsonDocument::Compact), error);
}

bool AttentionPanel::exportImage(const QString& path, QString* error)
{
    // Drawn into memory first, then written whole (engine::write_file_atomically): a full disk or a
    // planted link gives an error and leaves the old file as it was.
    QWidget* view = m_tabs->currentWidget();
    QBuffer buffer;
    buffer.open(QIODevice::WriteOnly);
    if (path.endsWith(".svg", Qt::CaseInsensitive)) {
        QSvgGenerator svg;
        svg.setOutputDevice(&buffer);
        svg.setSize(view->size());
        svg.setViewBox(QRect(QPoint(0, 0), view->size()));
        svg.setTitle(tr("Tokenscope attention, layer %1 head %2").arg(layer()).arg(head()));
        QPainter painter;
        if (!painter.begin(&svg)) {
            if (error)
                *error = tr("Could not draw the SVG for %1").arg(path);
            return false;
        }
        view->render(&painter);
        painter.end();
    } else if (!view->grab().save(&buffer, "PNG")) {
        if (error)
            *error = tr("Could not encode the PNG for %1").arg(path);
        return false;
    }
    return save_atomically(path, buffer.data(), error);
}

} // namespace tokenscope::ui
