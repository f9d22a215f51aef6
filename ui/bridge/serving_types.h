// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// What the serving lab's client and panel exchange: the workload and engine settings of a run, the
// run as it goes (after each step) and the finished runs, as immutable snapshots.
#include "serve/remote_serve.h"
#include "serve/serve_run.h"
#include "serve/workload.h"

#include <QMetaType>
#include <QString>
#include <memory>
#include <vector>

namespace tokenscope::ui {

struct ServingSettings {
    engine::WorkloadSpec workload;
    engine::ServingOptions options;          // `mode` is set per run
    std::vector<engine::BatchingMode> modes; // run one after another on the same workload
};

// A run as far as it has gone: the panel's lanes, pool map and batch chart are drawn from it.
struct ServingRunView {
    engine::BatchingMode mode = engine::BatchingMode::Continuous;
    std::vector<engine::RequestState> requests;
    std::vector<engine::ServeStep> steps;
    engine::PoolSnapshot pool;
    double clock_s = 0; // the run's clock after the last step
};

struct ServingLive {
    quint64 request_id = 0;
    int run_index = 0, runs = 1; // which of the modes is running
    int done = 0, total = 0;     // requests finished of this run
    std::shared_ptr<const ServingRunView> run;
    std::vector<std::shared_ptr<const engine::ServeRunResult>> finished; // the modes run before this one
};

struct ServingSnapshot {
    quint64 request_id = 0;
    QString error;
    bool cancelled = false;
    ServingSettings settings; // what was run
    QString model;            // the model's name
    QString backend;          // the backend the runs computed on
    std::vector<engine::ServeRunResult> runs;
    std::vector<std::shared_ptr<const ServingRunView>> views; // the runs as drawn (one per entry of runs)
};

// A finished run as the panel draws it.
std::shared_ptr<const ServingRunView> run_view(const engine::ServeRunResult& run);

} // namespace tokenscope::ui

Q_DECLARE_METATYPE(std::shared_ptr<const tokenscope::ui::ServingLive>)
Q_DECLARE_METATYPE(std::shared_ptr<const tokenscope::ui::ServingSnapshot>)
Q_DECLARE_METATYPE(std::shared_ptr<const engine::RemoteServeResult>)
