// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/engine_controller.h"
#include "bridge/speculation_types.h"

#include <QObject>

namespace tokenscope::ui {

// Speculative decoding compared with plain decoding on the same prompt and seed: a target session
// and the drafter's (a draft model, the target stopped early, or none for lookup) on CPU backends of
// the comparison's own, then the plain loop on a third. The snapshot after every speculative step
// (at most every 80 ms), then the finished comparison. run() cancels the comparison still going.
class SpeculationClient : public QObject {
    Q_OBJECT
public:
    explicit SpeculationClient(EngineController& engine);

    quint64 run(const SpeculationSettings& settings); // → speculationProgress…, speculationFinished
    void stop();
    bool running() const { return m_running != 0; }

signals:
    void speculationProgress(std::shared_ptr<const tokenscope::ui::SpeculationSnapshot> snapshot);
    void speculationFinished(std::shared_ptr<const tokenscope::ui::SpeculationSnapshot> snapshot);

private:
    EngineController& m_engine;
    quint64 m_running = 0;
};

inline SpeculationClient& EngineController::speculation()
{
    return client<SpeculationClient>();
}

} // namespace tokenscope::ui
