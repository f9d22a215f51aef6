// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/engine_controller.h"
#include "bridge/serving_types.h"

#include "serve/remote_serve.h"

#include <QObject>
#include <memory>

namespace tokenscope::ui {

class RemoteServingRun;

// The serving lab: simulated clients served by the engine here — one CPU backend of the run's own,
// its passes over many sequences sharing one KV block pool — once per batching mode on the same
// workload. Progress after every step (the run so far), Stop at any time (what finished is kept).
// On a server connection the same workload can be sent to the server instead (runOnServer): as text,
// at most so many requests at once, what it streams and reports measured here.
class ServingClient : public QObject {
    Q_OBJECT
public:
    explicit ServingClient(EngineController& engine);

    // → servingProgress…, servingFinished (cancellable)
    quint64 run(const ServingSettings& settings);
    // The workload to the connected server, within `limits` (→ serverProgress…, serverFinished; an
    // error before anything is sent comes as serverRefused). One run at a time.
    void runOnServer(const engine::WorkloadSpec& workload, engine::RemoteServeLimits limits);
    void stopServer();
    bool serverRunning() const { return m_remote_run != nullptr; }

signals:
    void servingProgress(std::shared_ptr<const tokenscope::ui::ServingLive> live);
    void servingFinished(std::shared_ptr<const tokenscope::ui::ServingSnapshot> snapshot);
    void serverProgress(std::shared_ptr<const engine::RemoteServeResult> run);
    void serverFinished(std::shared_ptr<const engine::RemoteServeResult> run);
    void serverRefused(const QString& why);

private:
    EngineController& m_engine;
    RemoteServingRun* m_remote_run = nullptr; // a child while it runs
};

inline ServingClient& EngineController::serving()
{
    return client<ServingClient>();
}

} // namespace tokenscope::ui
