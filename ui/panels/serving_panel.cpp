// SPDX-License-Identifier: GPL-3.0-or-later
#include "panels/serving_panel.h"

#include "bridge/engine_controller.h"
#include "bridge/serving_client.h"
#include "storage/atomic_save.h"
#include "widgets/chart_style.h"
#include "widgets/count_text.h"
#include "widgets/flow_layout.h"
#include "widgets/serving_lanes.h"
#include "widgets/serving_pool_map.h"

#include <QChart>
#include <QChartView>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QHeaderView>
#include <QLabel>
#include <QLineSeries>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QTabWidget>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QValueAxis>

namespace tokenscope::ui {

namespace {

QString mode_title(engine::BatchingMode mode)
{
    switch (mode) {
    case engine::BatchingMode::OneAtATime:
        return ServingPanel::tr("One at a time");
    case engine::BatchingMode::Static:
        return ServingPanel::tr("Static batches");
    case engine::BatchingMode::Continuous:
        return ServingPanel::tr("Continuous batching");
    }
    return {};
}

QSpinBox* spin(int lo, int hi, int value, const QString& name)
{
    auto* s = new QSpinBox;
    s->setRange(lo, hi);
    s->setValue(value);
    s->setObjectName(name);
    s->setGroupSeparatorShown(true);
    return s;
}

QString ms_text(double seconds)
{
    return decimalText(seconds * 1e3, 0);
}

} // namespace

ServingPanel::ServingPanel(EngineController* engine, QWidget* parent) : QWidget(parent), m_engine(engine)
{
    auto* layout = new QVBoxLayout(this);
    auto* intro = new QLabel(tr("Simulated clients served for real by the engine here: every pass runs the tokens of "
                                "many requests at once, their keys and values in one pool of fixed-size blocks. "
                                "The same workload is served one request at a time, in static batches and by "
                                "continuous batching, one after another."));
    intro->setWordWrap(true);
    layout->addWidget(intro);

    auto* workload = new QWidget;
    auto* wflow = new FlowLayout(workload);
    m_clients = spin(1, 1000, 16, "servingClients");
    m_rate = new QDoubleSpinBox;
    m_rate->setObjectName("servingRate");
    m_rate->setRange(0, 1000);
    m_rate->setDecimals(1);
    m_rate->setValue(8.0);
    m_rate->setSpecialValueText(tr("all at once"));
    m_rate->setToolTip(tr("Requests per second, with random gaps as independent clients send them; 0: all at once"));
    m_prompt_min = spin(1, 4096, 32, "servingPromptMin");
    m_prompt_max = spin(1, 4096, 96, "servingPromptMax");
    m_output_min = spin(1, 4096, 16, "servingOutputMin");
    m_output_max = spin(1, 4096, 48, "servingOutputMax");
    m_shared_percent = spin(0, 100, 50, "servingSharedPercent");
    m_shared_percent->setSuffix(tr(" %"));
    m_shared_percent->setToolTip(tr("Share of requests that begin with the same system prompt: its blocks are "
                                    "computed once and shared (prefix caching)"));
    m_shared_tokens = spin(0, 4096, 64, "servingSharedTokens");
    wflow->addWidget(labelled(tr("Clients"), m_clients));
    wflow->addWidget(labelled(tr("Arrivals per second"), m_rate));
    auto* prompt_range = new QWidget;
    auto* pr = new QHBoxLayout(prompt_range);
    pr->setContentsMargins(0, 0, 0, 0);
    pr->addWidget(m_prompt_min);
    pr->addWidget(new QLabel(tr("to")));
    pr->addWidget(m_prompt_max);
    wflow->addWidget(labelled(tr("Prompt tokens"), prompt_range));
    auto* output_range = new QWidget;
    auto* orng = new QHBoxLayout(output_range);
    orng->setContentsMargins(0, 0, 0, 0);
    orng->addWidget(m_output_min);
    orng->addWidget(new QLabel(tr("to")));
    orng->addWidget(m_output_max);
    wflow->addWidget(labelled(tr("Reply tokens"), output_range));
    wflow->addWidget(labelled(tr("With the system prompt"), m_shared_percent));
    wflow->addWidget(labelled(tr("System prompt tokens"), m_shared_tokens));
    m_samples = spin(1, 16, 1, "servingSamples");
    m_samples->setToolTip(tr("Replies drawn from each prompt: they share its blocks, and each copies the last one "
                             "when it first writes into it (copy on write)"));
    m_temperature = new QDoubleSpinBox;
    m_temperature->setObjectName("servingTemperature");
    m_temperature->setRange(0, 2);
    m_temperature->setSingleStep(0.1);
    m_temperature->setDecimals(1);
    m_temperature->setSpecialValueText(tr("greedy"));
    wflow->addWidget(labelled(tr("Replies per prompt"), m_samples));
    wflow->addWidget(labelled(tr("Temperature"), m_temperature));
    layout->addWidget(workload);

    auto* engine_row = new QWidget;
    auto* eflow = new FlowLayout(engine_row);
    m_max_running = spin(1, 256, 16, "servingMaxRunning");
    m_max_running->setToolTip(tr("Requests in one pass at most"));
    m_step_tokens = spin(1, 8192, 256, "servingStepTokens");
    m_step_tokens->setToolTip(tr("Tokens one pass holds at most: each decoding request's next token first, prompt "
                                 "chunks the rest (chunked prefill)"));
    m_pool_blocks = spin(0, 1 << 20, 0, "servingPoolBlocks");
    m_pool_blocks->setSpecialValueText(tr("room for all"));
    m_pool_blocks->setToolTip(tr("Blocks of 32 positions in the KV pool; a pool too small for every request at "
                                 "once makes the engine preempt"));
    m_preemption = new QComboBox;
    m_preemption->setObjectName("servingPreemption");
    m_preemption->addItem(tr("recompute later"), "recompute");
    m_preemption->addItem(tr("swap to host memory"), "swap");
    m_prefix_cache = new QCheckBox(tr("Prefix cache"));
    m_prefix_cache->setObjectName("servingPrefixCache");
    m_prefix_cache->setChecked(true);
    eflow->addWidget(labelled(tr("Requests per pass"), m_max_running));
    eflow->addWidget(labelled(tr("Tokens per pass"), m_step_tokens));
    eflow->addWidget(labelled(tr("Pool blocks"), m_pool_blocks));
    eflow->addWidget(labelled(tr("When the pool is full"), m_preemption));
    eflow->addWidget(m_prefix_cache);
    layout->addWidget(engine_row);

    auto* run_row = new QWidget;
    auto* rflow = new FlowLayout(run_row);
    m_one = new QCheckBox(mode_title(engine::BatchingMode::OneAtATime));
    m_static = new QCheckBox(mode_title(engine::BatchingMode::Static));
    m_continuous = new QCheckBox(mode_title(engine::BatchingMode::Continuous));
    for (QCheckBox* c : {m_one, m_static, m_continuous})
        c->setChecked(true);
    m_run = new QPushButton(tr("Run"));
    m_run->setObjectName("servingRun");
    m_stop = new QPushButton(tr("Stop"));
    m_stop->setObjectName("servingStop");
    m_stop->setEnabled(false);
    for (QWidget* w : std::initializer_list<QWidget*>{m_one, m_static, m_continuous, m_run, m_stop})
        rflow->addWidget(w);
    layout->addWidget(run_row);
    layout->addWidget(buildServerRow());

    m_progress = new QProgressBar;
    m_progress->setObjectName("servingProgress");
    m_progress->setRange(0, 1);
    m_progress->setValue(0);
    m_progress->setTextVisible(false);
    m_progress->setMaximumHeight(8);
    layout->addWidget(m_progress);
    m_status = new QLabel(tr("Not run yet."));
    m_status->setObjectName("servingStatus");
    m_status->setWordWrap(true);
    layout->addWidget(m_status);

    m_show = new QComboBox;
    m_show->setObjectName("servingShow");
    m_show->setEnabled(false);
    m_show->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    m_show->setMinimumContentsLength(20);

    m_tabs = new QTabWidget;
    m_tabs->setObjectName("servingTabs");
    m_lanes = new ServingLanes;
    auto* lanes_scroll = new QScrollArea;
    lanes_scroll->setWidgetResizable(true);
    lanes_scroll->setWidget(m_lanes);
    lanes_scroll->setMinimumHeight(200);
    m_tabs->addTab(lanes_scroll, tr("Requests"));
    auto* pool_page = new QWidget;
    auto* pool_layout = new QVBoxLayout(pool_page);
    m_pool_note = new QLabel;
    m_pool_note->setObjectName("servingPoolNote");
    m_pool_note->setWordWrap(true);
    pool_layout->addWidget(m_pool_note);
    m_pool = new ServingPoolMap;
    auto* pool_scroll = new QScrollArea;
    pool_scroll->setWidgetResizable(true);
    pool_scroll->setWidget(m_pool);
    pool_layout->addWidget(pool_scroll, 1);
    m_tabs->addTab(pool_page, tr("KV blocks"));
    m_chart = new QChartView;
    m_chart->setObjectName("servingBatchChart");
    m_chart->setRenderHint(QPainter::Antialiasing);
    m_chart->setMinimumHeight(200);
    m_tabs->addTab(m_chart, tr("Batch size"));
    m_server_chart = new QChartView;
    m_server_chart->setObjectName("servingServerChart");
    m_server_chart->setRenderHint(QPainter::Antialiasing);
    m_server_chart->setMinimumHeight(200);
    m_tabs->addTab(m_server_chart, tr("Server"));
    layout->addWidget(m_tabs, 1);

    m_table = new QTableWidget(0, 10);
    m_table->setObjectName("servingTable");
    m_table->setHorizontalHeaderLabels({tr("Batching"), tr("Time (s)"), tr("Tokens/s"), tr("TTFT p50 (ms)"),
                                        tr("TTFT p99 (ms)"), tr("Between tokens p50 (ms)"),
                                        tr("Between tokens p99 (ms)"), tr("Largest pass"), tr("Preemptions"),
                                        tr("Prompt tokens reused")});
    m_table->verticalHeader()->hide();
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_table->setSizeAdjustPolicy(QAbstractScrollArea::AdjustToContents);
    m_table->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    m_table->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
    layout->addWidget(m_table);

    auto* export_row = new QWidget;
    auto* xflow = new FlowLayout(export_row);
    xflow->addWidget(labelled(tr("Lanes and blocks of"), m_show));
    m_export_csv = new QPushButton(tr("Export CSV…"));
    m_export_json = new QPushButton(tr("Export JSON…"));
    for (QPushButton* b : {m_export_csv, m_export_json}) {
        b->setEnabled(false);
        xflow->addWidget(b);
    }
    layout->insertWidget(layout->indexOf(m_tabs), export_row); // what the views below show, and the exports

    connect(m_run, &QPushButton::clicked, this, &ServingPanel::run);
    connect(m_stop, &QPushButton::clicked, this, &ServingPanel::stop);
    connect(m_export_csv, &QPushButton::clicked, this, [this] { exportTo(false); });
    connect(m_export_json, &QPushButton::clicked, this, [this] { exportTo(true); });
    connect(m_show, &QComboBox::currentIndexChanged, this, [this](int index) {
        if (!running() && index >= 0)
            showRun(index);
    });
    connect(m_tabs, &QTabWidget::currentChanged, this, [this](int index) {
        if (m_tabs->widget(index) == m_chart)
            drawBatchChart();
        if (m_tabs->widget(index) == m_server_chart)
            drawServerChart();
    });
    connect(&m_engine->serving(), &ServingClient::servingProgress, this, &ServingPanel::onProgress);
    connect(&m_engine->serving(), &ServingClient::servingFinished, this, &ServingPanel::onFinished);
    drawBatchChart();
}

ServingSettings ServingPanel::settings() const
{
    ServingSettings s;
    s.workload.clients = uint32_t(m_clients->value());
    s.workload.arrival_rate = m_rate->value();
    s.workload.prompt_min = uint32_t(m_prompt_min->value());
    s.workload.prompt_max = uint32_t(m_prompt_max->value());
    s.workload.output_min = uint32_t(m_output_min->value());
    s.workload.output_max = uint32_t(m_output_max->value());
    s.workload.shared_fraction = m_shared_percent->value() / 100.0;
    s.workload.shared_tokens = uint32_t(m_shared_tokens->value());
    s.workload.samples = uint32_t(m_samples->value());
    s.workload.temperature = float(m_temperature->value());
    s.options.max_running = uint32_t(m_max_running->value());
    s.options.step_tokens = uint32_t(m_step_tokens->value());
    s.options.pool_blocks = uint32_t(m_pool_blocks->value());
    s.options.preemption = engine::parse_preemption(m_preemption->currentData().toString().toStdString());
    s.options.prefix_caching = m_prefix_cache->isChecked();
    if (m_one->isChecked())
        s.modes.push_back(engine::BatchingMode::OneAtATime);
    if (m_static->isChecked())
        s.modes.push_back(engine::BatchingMode::Static);
    if (m_continuous->isChecked())
        s.modes.push_back(engine::BatchingMode::Continuous);
    return s;
}

void ServingPanel::setSettings(const ServingSettings& s)
{
    m_clients->setValue(int(s.workload.clients));
    m_rate->setValue(s.workload.arrival_rate);
    m_prompt_min->setValue(int(s.workload.prompt_min));
    m_prompt_max->setValue(int(s.workload.prompt_max));
    m_output_min->setValue(int(s.workload.output_min));
    m_output_max->setValue(int(s.workload.output_max));
    m_shared_percent->setValue(int(std::lround(s.workload.shared_fraction * 100)));
    m_shared_tokens->setValue(int(s.workload.shared_tokens));
    m_samples->setValue(int(std::max(1u, s.workload.samples)));
    m_temperature->setValue(double(s.workload.temperature));
    m_max_running->setValue(int(s.options.max_running));
    m_step_tokens->setValue(int(s.options.step_tokens));
    m_pool_blocks->setValue(int(s.options.pool_blocks));
    m_preemption->setCurrentIndex(s.options.preemption == engine::PreemptionPolicy::Swap ? 1 : 0);
    m_prefix_cache->setChecked(s.options.prefix_caching);
    const auto has = [&](engine::BatchingMode m) {
        return std::find(s.modes.begin(), s.modes.end(), m) != s.modes.end();
    };
    m_one->setChecked(has(engine::BatchingMode::OneAtATime));
    m_static->setChecked(has(engine::BatchingMode::Static));
    m_continuous->setChecked(has(engine::BatchingMode::Continuous));
}

void ServingPanel::run()
{
    if (running())
        return;
    const ServingSettings s = settings();
    QString problem;
    try {
        engine::validate_workload(s.workload);
    } catch (const std::exception& e) {
        problem = QString::fromUtf8(e.what());
    }
    if (s.modes.empty())
        problem = tr("Choose at least one way of batching to run.");
    if (!problem.isEmpty()) {
        m_status->setText(problem);
        return;
    }
    m_result.reset();
    m_live.reset();
    m_table->setRowCount(0);
    m_show->clear();
    m_show->setEnabled(false);
    m_lanes->setRun(nullptr);
    m_pool->setPool({});
    drawBatchChart();
    m_progress->setRange(0, int(s.workload.clients * s.workload.samples * s.modes.size()));
    m_progress->setValue(0);
    m_status->setText(tr("Making the workload…"));
    m_run->setEnabled(false);
    m_stop->setEnabled(true);
    m_export_csv->setEnabled(false);
    m_export_json->setEnabled(false);
    m_request = m_engine->serving().run(s);
}

void ServingPanel::stop()
{
    if (running())
        m_engine->cancel(m_request);
    m_engine->serving().stopServer();
}

QString ServingPanel::statusText() const
{
    return m_status->text();
}

void ServingPanel::onProgress(std::shared_ptr<const ServingLive> live)
{
    if (live->request_id != m_request)
        return;
    m_live = std::move(live);
    const ServingRunView& v = *m_live->run;
    const int clients = m_progress->maximum() / std::max(1, m_live->runs);
    m_progress->setValue(m_live->run_index * clients + m_live->done);
    int in_pass = 0;
    if (!v.steps.empty())
        in_pass = int(v.steps.back().slices.size());
    m_status->setText(tr("%1 (%2 of %3): %4 of %5 done, %6 in the last pass, %7 on the run's clock")
                          .arg(mode_title(v.mode))
                          .arg(m_live->run_index + 1)
                          .arg(m_live->runs)
                          .arg(numberText(m_live->done))
                          .arg(countText(m_live->total, tr("request"), tr("requests")))
                          .arg(countText(in_pass, tr("request"), tr("requests")))
                          .arg(tr("%1 s").arg(decimalText(v.clock_s, 1))));
    showView(m_live->run);
    if (m_table->rowCount() != int(m_live->finished.size())) { // a mode has finished: its row, while the next runs
        std::vector<const engine::ServeRunResult*> runs;
        for (const auto& r : m_live->finished)
            runs.push_back(r.get());
        fillTable(runs);
    }
    emit progressed();
}

void ServingPanel::showSaved(std::shared_ptr<const ServingSnapshot> snapshot)
{
    if (running())
        stop();
    m_request = 0; // the saved runs shown as if they had just finished (a stopped live run's answer is dropped)
    m_progress->setRange(0, 1);
    setSettings(snapshot->settings);
    onFinished(std::move(snapshot));
}

void ServingPanel::onFinished(std::shared_ptr<const ServingSnapshot> snapshot)
{
    if (snapshot->request_id != m_request)
        return;
    m_request = 0;
    m_live.reset();
    m_run->setEnabled(true);
    m_stop->setEnabled(false);
    if (!snapshot->error.isEmpty()) {
        m_status->setText(snapshot->error);
        m_progress->setValue(0);
        emit finished();
        return;
    }
    m_result = std::move(snapshot);
    m_progress->setValue(m_result->cancelled ? m_progress->value() : m_progress->maximum());
    const bool any = !m_result->runs.empty();
    m_export_csv->setEnabled(any);
    m_export_json->setEnabled(any);
    QSignalBlocker block(m_show);
    m_show->clear();
    for (const engine::ServeRunResult& r : m_result->runs)
        m_show->addItem(mode_title(r.options.mode));
    m_show->setEnabled(any);
    if (any) {
        m_show->setCurrentIndex(int(m_result->runs.size()) - 1);
        showRun(int(m_result->runs.size()) - 1);
    }
    fillTable(finishedRuns());
    drawBatchChart();
    QString text = m_result->cancelled
                       ? tr("Stopped: what finished is kept.")
                       : tr("Served %1 in %2 on %3.")
                             .arg(countText(m_result->runs.empty() ? 0 : qint64(m_result->runs.front().requests.size()),
                                            tr("request"), tr("requests")))
                             .arg(countText(qint64(m_result->runs.size()), tr("way"), tr("ways")))
                             .arg(m_result->backend);
    if (!m_result->cancelled && m_result->runs.size() > 1) {
        const auto& first = m_result->runs.front();
        const auto& last = m_result->runs.back();
        if (first.generated_per_s() > 0)
            text += tr(" %1 gave %2× the tokens per second of %3.")
                        .arg(mode_title(last.options.mode))
                        .arg(decimalText(last.generated_per_s() / first.generated_per_s(), 1))
                        .arg(mode_title(first.options.mode).toLower());
    }
    m_status->setText(text);
    emit finished();
}

void ServingPanel::showRun(int index)
{
    if (!m_result || index < 0 || index >= int(m_result->views.size()))
        return;
    showView(m_result->views[std::size_t(index)]);
}

void ServingPanel::showView(const std::shared_ptr<const ServingRunView>& view)
{
    // every finished run on one time axis, so that their lanes compare at a glance
    double axis = view->clock_s;
    if (m_result)
        for (const auto& v : m_result->views)
            axis = std::max(axis, v->clock_s);
    m_lanes->setAxisEnd(axis);
    m_lanes->setRun(view);
    m_pool->setPool(view->pool);
    uint32_t held = 0, shared = 0, cached = 0;
    for (const auto& b : view->pool.blocks) {
        held += b.refs > 0;
        shared += b.refs > 1;
        cached += b.cached;
    }
    const auto& c = view->pool.counters;
    m_pool_note->setText(
        tr("%1: %2 of %3 held, %4 shared, %5 cached for later prompts. Over the run: %6 taken from the prefix "
           "cache instead of computed, %7, %8.")
            .arg(mode_title(view->mode))
            .arg(numberText(held))
            .arg(countText(qint64(view->pool.blocks.size()), tr("block"), tr("blocks")))
            .arg(numberText(shared))
            .arg(numberText(cached))
            .arg(countText(qint64(c.prefix_hits), tr("block"), tr("blocks")))
            .arg(countText(qint64(c.cow_copies), tr("copy on write"), tr("copies on write")))
            .arg(countText(qint64(c.evictions), tr("cached block given up"), tr("cached blocks given up"))));
    if (running() && m_chart->isVisible()) // the chart is rebuilt only while someone looks at it
        drawBatchChart();
}

std::vector<const engine::ServeRunResult*> ServingPanel::finishedRuns() const
{
    std::vector<const engine::ServeRunResult*> runs;
    if (m_result)
        for (const engine::ServeRunResult& r : m_result->runs)
            runs.push_back(&r);
    return runs;
}

void ServingPanel::fillTable(const std::vector<const engine::ServeRunResult*>& runs)
{
    m_table->setRowCount(0);
    const auto add_row = [&](const QStringList& cells) {
        const int row = m_table->rowCount();
        m_table->insertRow(row);
        for (int c = 0; c < cells.size(); ++c) {
            auto* item = new QTableWidgetItem(cells[c]);
            if (c > 0)
                item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            m_table->setItem(row, c, item);
        }
    };
    for (const engine::ServeRunResult* run : runs) {
        const engine::ServeRunResult& r = *run;
        add_row({mode_title(r.options.mode) + (r.cancelled ? tr(" (stopped)") : QString()),
                 decimalText(r.makespan_s, 2), decimalText(r.generated_per_s(), 1), ms_text(r.ttft.p50),
                 ms_text(r.ttft.p99), ms_text(r.itl.p50), ms_text(r.itl.p99), numberText(r.max_batch_sequences),
                 numberText(r.preemptions), numberText(qint64(r.reused_tokens))});
    }
    if (m_server_result) { // the same workload on the server, measured here (its batching is its own)
        const engine::RemoteServeResult& r = *m_server_result;
        add_row({tr("On the server") + (r.cancelled ? tr(" (stopped)") : QString()), decimalText(r.makespan_s, 2),
                 decimalText(r.generated_per_s(), 1), ms_text(r.ttft.p50), ms_text(r.ttft.p99), ms_text(r.itl.p50),
                 ms_text(r.itl.p99), tr("%1 in flight").arg(r.max_in_flight), QString("—"), QString("—")});
    }
}

void ServingPanel::drawBatchChart()
{
    auto* chart = new QChart;
    chart->setTitle(tr("Requests in each pass"));
    double x_end = 0.1;
    double y_end = 1;
    const auto add = [&](const ServingRunView& v) {
        auto* series = new QLineSeries;
        series->setName(mode_title(v.mode));
        for (const engine::ServeStep& s : v.steps) {
            const auto n = double(s.slices.size());
            series->append(s.start_s, n);
            series->append(s.end_s, n);
            y_end = std::max(y_end, n);
        }
        x_end = std::max(x_end, v.clock_s);
        chart->addSeries(series);
    };
    if (m_result)
        for (const auto& v : m_result->views)
            add(*v);
    if (m_live && m_live->run)
        add(*m_live->run);
    auto* x = new QValueAxis;
    x->setTitleText(tr("Run clock (s)"));
    nice_axis(x, 0, x_end, false);
    auto* y = new QValueAxis;
    y->setTitleText(tr("Requests"));
    nice_axis(y, 0, y_end, true);
    show_chart(m_chart, chart, x, y, palette());
}

void ServingPanel::exportTo(bool json)
{
    if ((!m_result || m_result->runs.empty()) && !m_server_result)
        return;
    const QString path = QFileDialog::getSaveFileName(this, json ? tr("Export the runs as JSON") : tr("Export as CSV"),
                                                      json ? "serving.json" : "serving.csv",
                                                      json ? tr("JSON (*.json)") : tr("CSV (*.csv)"));
    if (path.isEmpty())
        return;
    const std::span<const engine::ServeRunResult> runs =
        m_result ? std::span<const engine::ServeRunResult>(m_result->runs) : std::span<const engine::ServeRunResult>();
    const std::string bytes = json ? engine::serve_runs_json(runs, m_server_result.get())
                                   : engine::serve_runs_csv(runs, m_server_result.get());
    QString error;
    if (!save_atomically(path, QByteArray::fromStdString(bytes), &error))
        QMessageBox::warning(this, tr("Export"), error);
}

} // namespace tokenscope::ui
