// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/serving_types.h"

#include <QWidget>
#include <functional>
#include <memory>

class QCheckBox;
class QChartView;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableWidget;
class QTabWidget;

namespace tokenscope::ui {

class EngineController;
class ServingLanes;
class ServingPoolMap;

// The serving lab: simulated clients (arrival rate, prompt and reply lengths, a common system prompt)
// served by the engine for real, one request at a time, in static batches and by continuous batching,
// one after another on the same workload. Live: a lane per request, the KV block pool coloured by
// owner with shared blocks marked, the batch size over time; afterwards the three side by side
// (throughput, time to first token, inter-token latency). Stop at any time; CSV and JSON export.
class ServingPanel : public QWidget {
    Q_OBJECT
public:
    explicit ServingPanel(EngineController* engine, QWidget* parent = nullptr);

    ServingSettings settings() const;
    void setSettings(const ServingSettings& settings);
    void run();
    void stop();
    bool running() const { return m_request != 0; }
    const std::shared_ptr<const ServingSnapshot>& result() const { return m_result; }
    ServingLanes* lanes() const { return m_lanes; }
    ServingPoolMap* poolMap() const { return m_pool; }
    QTableWidget* table() const { return m_table; }
    QString statusText() const;
    // The run the lanes and pool map show: a finished one by index (they follow the live run while one goes).
    void showRun(int index);
    // A saved run's serving lab (File → Open run…): its settings, table, lanes and pool as they were.
    void showSaved(std::shared_ptr<const ServingSnapshot> snapshot);

    // On a server connection: the workload sent to the server (after the confirmation), its results
    // beside the local runs; the Server tab charts what the server reported.
    void runOnServer();
    const std::shared_ptr<const engine::RemoteServeResult>& serverResult() const { return m_server_result; }
    // How the run asks before it sends anything (tests answer for the user): text → go ahead?
    void setConfirmation(std::function<bool(const QString&)> confirm) { m_confirm = std::move(confirm); }
    QString serverStatusText() const;

signals:
    void progressed();
    void finished();
    void serverFinished();

private:
    void onProgress(std::shared_ptr<const ServingLive> live);
    void onFinished(std::shared_ptr<const ServingSnapshot> snapshot);
    void showView(const std::shared_ptr<const ServingRunView>& view);
    void fillTable(const std::vector<const engine::ServeRunResult*>& runs);
    // The local runs of the last finished run (none after a new one starts or fails).
    std::vector<const engine::ServeRunResult*> finishedRuns() const;
    void drawBatchChart();
    void exportTo(bool json);
    QWidget* buildServerRow();
    void updateServerButton();
    void onServerProgress(std::shared_ptr<const engine::RemoteServeResult> run);
    void onServerFinished(std::shared_ptr<const engine::RemoteServeResult> run);
    void drawServerChart();

    EngineController* m_engine;
    quint64 m_request = 0;
    std::shared_ptr<const ServingSnapshot> m_result;
    std::shared_ptr<const ServingLive> m_live;
    QSpinBox* m_clients = nullptr;
    QDoubleSpinBox* m_rate = nullptr;
    QSpinBox *m_prompt_min = nullptr, *m_prompt_max = nullptr, *m_output_min = nullptr, *m_output_max = nullptr;
    QSpinBox* m_shared_percent = nullptr;
    QSpinBox* m_shared_tokens = nullptr;
    QSpinBox* m_samples = nullptr;
    QDoubleSpinBox* m_temperature = nullptr;
    QSpinBox* m_max_running = nullptr;
    QSpinBox* m_step_tokens = nullptr;
    QSpinBox* m_pool_blocks = nullptr;
    QComboBox* m_preemption = nullptr;
    QCheckBox* m_prefix_cache = nullptr;
    QCheckBox *m_one = nullptr, *m_static = nullptr, *m_continuous = nullptr;
    QPushButton* m_run = nullptr;
    QPushButton* m_stop = nullptr;
    QPushButton* m_export_csv = nullptr;
    QPushButton* m_export_json = nullptr;
    QProgressBar* m_progress = nullptr;
    QLabel* m_status = nullptr;
    QComboBox* m_show = nullptr;
    QTabWidget* m_tabs = nullptr;
    ServingLanes* m_lanes = nullptr;
    ServingPoolMap* m_pool = nullptr;
    QLabel* m_pool_note = nullptr;
    QChartView* m_chart = nullptr;
    QTableWidget* m_table = nullptr;
    // on a server
    QSpinBox *m_server_concurrent = nullptr, *m_server_max = nullptr;
    QPushButton* m_run_server = nullptr;
    QChartView* m_server_chart = nullptr;
    std::shared_ptr<const engine::RemoteServeResult> m_server_result;
    std::function<bool(const QString&)> m_confirm;
};

} // namespace tokenscope::ui
