// SPDX-License-Identifier: GPL-3.0-or-later
// The serving lab on a server connection: the same workload sent to the server (as text, at its
// arrival times, at most so many at once, after the user says yes), its figures beside the local
// runs and a chart of what the server reported of itself while it ran (/metrics).
#include "bridge/engine_controller.h"
#include "bridge/serving_client.h"
#include "panels/serving_panel.h"
#include "widgets/chart_style.h"
#include "widgets/count_text.h"
#include "widgets/flow_layout.h"

#include <QChart>
#include <QChartView>
#include <QLabel>
#include <QLineSeries>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QTabWidget>
#include <QValueAxis>

namespace tokenscope::ui {

QWidget* ServingPanel::buildServerRow()
{
    auto* row = new QWidget;
    auto* flow = new FlowLayout(row);
    m_server_concurrent = new QSpinBox;
    m_server_concurrent->setObjectName("servingServerConcurrent");
    m_server_concurrent->setRange(1, int(engine::RemoteServeLimits::kMostConcurrent));
    m_server_concurrent->setValue(int(engine::RemoteServeLimits{}.max_concurrent));
    m_server_concurrent->setToolTip(tr("Requests in flight on the server at once; the rest wait their turn here"));
    m_server_max = new QSpinBox;
    m_server_max->setObjectName("servingServerMax");
    m_server_max->setRange(1, int(engine::RemoteServeLimits::kMostRequests));
    m_server_max->setValue(int(engine::RemoteServeLimits{}.max_requests));
    m_server_max->setToolTip(tr("A larger workload is refused before anything is sent"));
    m_run_server = new QPushButton(tr("Run on the server…"));
    m_run_server->setObjectName("servingRunServer");
    flow->addWidget(m_run_server);
    flow->addWidget(labelled(tr("At once"), m_server_concurrent));
    flow->addWidget(labelled(tr("Requests at most"), m_server_max));
    connect(m_run_server, &QPushButton::clicked, this, &ServingPanel::runOnServer);
    ServingClient& client = m_engine->serving();
    connect(&client, &ServingClient::serverProgress, this, &ServingPanel::onServerProgress);
    connect(&client, &ServingClient::serverFinished, this, &ServingPanel::onServerFinished);
    connect(&client, &ServingClient::serverRefused, this, [this](const QString& why) {
        m_status->setText(why);
        updateServerButton();
        emit serverFinished();
    });
    connect(m_engine, &EngineController::serverConnected, this, &ServingPanel::updateServerButton);
    connect(m_engine, &EngineController::serverDisconnected, this, &ServingPanel::updateServerButton);
    connect(m_engine, &EngineController::modelLoaded, this, &ServingPanel::updateServerButton);
    m_confirm = [this](const QString& text) {
        return QMessageBox::question(this, tr("Send the workload to the server?"), text,
                                     QMessageBox::Yes | QMessageBox::No, QMessageBox::No) == QMessageBox::Yes;
    };
    updateServerButton();
    return row;
}

void ServingPanel::updateServerButton()
{
    const bool connected = m_engine->remote();
    m_run_server->setEnabled(connected && !m_engine->serving().serverRunning() && !running());
    m_run_server->setToolTip(
        connected ? tr("Sends this workload to %1, at its arrival times").arg(m_engine->server()->base.toString())
                  : tr("Connect to a server first (File → Connect to server…)"));
}

void ServingPanel::runOnServer()
{
    const auto server = m_engine->server();
    if (!server || m_engine->serving().serverRunning())
        return;
    const ServingSettings s = settings();
    const engine::RemoteServeLimits limits{uint32_t(m_server_concurrent->value()), uint32_t(m_server_max->value())};
    const qint64 requests = qint64(s.workload.clients) * qint64(s.workload.samples);
    const QString text =
        tr("This sends %1 to %2 (%3), at most %4 at once: prompts of %5 to %6 words, replies of up to %7 tokens, "
           "arriving at %8 per second. Everyone else using that server shares it while they run. Send them?")
            .arg(countText(requests, tr("request"), tr("requests")), server->base.toString(), server->kind_name)
            .arg(limits.max_concurrent)
            .arg(s.workload.prompt_min)
            .arg(s.workload.prompt_max)
            .arg(s.workload.output_max)
            .arg(decimalText(s.workload.arrival_rate, 1));
    if (!m_confirm || !m_confirm(text)) {
        m_status->setText(tr("Nothing was sent to the server."));
        return;
    }
    m_server_result.reset();
    m_progress->setRange(0, int(std::max<qint64>(1, requests)));
    m_progress->setValue(0);
    m_status->setText(tr("Sending the workload to the server…"));
    m_stop->setEnabled(true);
    m_run->setEnabled(false);
    m_engine->serving().runOnServer(s.workload, limits);
    updateServerButton();
}

QString ServingPanel::serverStatusText() const
{
    if (!m_server_result)
        return {};
    const engine::RemoteServeResult& r = *m_server_result;
    QString text =
        tr("The server: %1 of %2 done (%3 failed), %4 in flight (at most %5 at once), %6 tokens per second, TTFT p50 "
           "%7 ms")
            .arg(r.finished + r.failed)
            .arg(r.results.size())
            .arg(r.failed)
            .arg(r.in_flight)
            .arg(r.max_in_flight)
            .arg(decimalText(r.generated_per_s(), 1))
            .arg(decimalText(r.ttft.p50 * 1e3, 0));
    if (!r.metrics.empty()) {
        const engine::MetricsSample& m = r.metrics.back();
        QStringList said;
        if (m.running)
            said << tr("%1 running").arg(*m.running);
        if (m.waiting)
            said << tr("%1 waiting").arg(*m.waiting);
        if (m.kv_cache_usage)
            said << tr("cache %1% used").arg(decimalText(100.0 * *m.kv_cache_usage, 1));
        if (!said.isEmpty())
            text += tr(" · it reports %1").arg(said.join(", "));
    }
    for (const engine::RemoteRequestResult& q : r.results)
        if (!q.error.empty() && q.error != "stopped")
            return text + tr(" · first failure: %1").arg(QString::fromStdString(q.error));
    return text;
}

void ServingPanel::onServerProgress(std::shared_ptr<const engine::RemoteServeResult> run)
{
    m_server_result = std::move(run);
    m_progress->setValue(int(m_server_result->finished + m_server_result->failed));
    m_status->setText(serverStatusText());
    if (m_tabs->currentWidget() == m_server_chart)
        drawServerChart();
}

void ServingPanel::onServerFinished(std::shared_ptr<const engine::RemoteServeResult> run)
{
    m_server_result = std::move(run);
    m_stop->setEnabled(false);
    m_run->setEnabled(true);
    m_progress->setValue(m_progress->maximum());
    m_status->setText((m_server_result->cancelled ? tr("Stopped: what finished is kept. ") : QString()) +
                      serverStatusText());
    fillTable(finishedRuns()); // derived from the result each time: a local run started since left none
    drawServerChart();
    m_export_csv->setEnabled(true);
    m_export_json->setEnabled(true);
    m_tabs->setCurrentWidget(m_server_chart);
    updateServerButton();
    emit serverFinished();
}

// What the server said of itself, sample by sample: requests running and waiting, and the share of
// its KV cache in use (in percent, on the same axis when it says).
void ServingPanel::drawServerChart()
{
    auto* chart = new QChart;
    chart->setTitle(m_server_result
                        ? tr("What %1 reported (/metrics)").arg(QString::fromStdString(m_server_result->server))
                        : tr("What the server reported (/metrics): run the workload on a server"));
    double x_end = 0.1, y_end = 1;
    if (m_server_result) {
        auto* running = new QLineSeries;
        running->setName(tr("running"));
        auto* waiting = new QLineSeries;
        waiting->setName(tr("waiting"));
        auto* cache = new QLineSeries;
        cache->setName(tr("KV cache used (%)"));
        auto* flight = new QLineSeries;
        flight->setName(tr("in flight (sent here)"));
        // Steps, not slopes: a value holds until the next answer (a busy server answers /metrics late).
        const auto step_to = [](QLineSeries* series, double t, double v) {
            if (series->count() > 0)
                series->append(t, series->at(series->count() - 1).y());
            series->append(t, v);
        };
        for (const engine::MetricsSample& m : m_server_result->metrics) {
            if (m.running)
                step_to(running, m.t_s, *m.running);
            if (m.waiting)
                step_to(waiting, m.t_s, *m.waiting);
            if (m.kv_cache_usage)
                step_to(cache, m.t_s, 100.0 * *m.kv_cache_usage);
            x_end = std::max(x_end, m.t_s);
            for (const auto v : {m.running, m.waiting})
                y_end = std::max(y_end, v.value_or(0.0));
            if (m.kv_cache_usage)
                y_end = std::max(y_end, 100.0 * *m.kv_cache_usage);
        }
        // requests in flight from this side, from the sends and ends
        std::vector<std::pair<double, int>> events;
        for (const engine::RemoteRequestResult& r : m_server_result->results) {
            if (r.sent_s >= 0)
                events.emplace_back(r.sent_s, 1);
            if (r.done_s >= 0)
                events.emplace_back(r.done_s, -1);
        }
        std::sort(events.begin(), events.end());
        int n = 0;
        for (const auto& [t, d] : events) {
            flight->append(t, n);
            n += d;
            flight->append(t, n);
            x_end = std::max(x_end, t);
            y_end = std::max(y_end, double(n));
        }
        for (QLineSeries* series : {flight, running, waiting, cache})
            if (series->count() > 0)
                chart->addSeries(series);
            else
                delete series;
    }
    auto* x = new QValueAxis;
    x->setTitleText(tr("Since the run started (s)"));
    nice_axis(x, 0, x_end, false);
    auto* y = new QValueAxis;
    y->setTitleText(tr("Requests (cache: %)"));
    nice_axis(y, 0, y_end, true);
    show_chart(m_server_chart, chart, x, y, palette());
}

} // namespace tokenscope::ui
