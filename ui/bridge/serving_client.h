// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/engine_controller.h"
#include "bridge/serving_types.h"

#include <QObject>
#include <memory>

namespace tokenscope::ui {

// The serving lab: simulated clients served by the engine here — one CPU backend of the run's own,
// its passes over many sequences sharing one KV block pool — once per batching mode on the same
// workload. Progress after every step (the run so far), Stop at any time (what finished is kept).
// A server connection cannot run it: the batching is the engine's own.
class ServingClient : public QObject {
    Q_OBJECT
public:
    explicit ServingClient(EngineController& engine);

    // → servingProgress…, servingFinished (cancellable)
    quint64 run(const ServingSettings& settings);

signals:
    void servingProgress(std::shared_ptr<const tokenscope::ui::ServingLive> live);
    void servingFinished(std::shared_ptr<const tokenscope::ui::ServingSnapshot> snapshot);

private:
    EngineController& m_engine;
};

inline ServingClient& EngineController::serving()
{
    return client<ServingClient>();
}

} // namespace tokenscope::ui
