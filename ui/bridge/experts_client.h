// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/engine_controller.h"
#include "bridge/experts_types.h"

#include <QObject>

namespace tokenscope::ui {

// A mixture-of-experts model's routers made visible: one pass over a text (or the chat's or the
// stepper's sequence) with every router's decision captured, and "what if" — the same pass with an
// expert forced, removed or zeroed, and the next token's distribution before and after. Each runs on
// a CPU session of its own; a new request cancels the one of its kind still going. A dense model
// answers with `dense` set; a server, with the reason it cannot.
class ExpertsClient : public QObject {
    Q_OBJECT
public:
    explicit ExpertsClient(EngineController& engine);

    quint64 route(const QString& text, bool current_sequence);                 // → routed
    quint64 whatIf(const std::vector<int32_t>& ids, const ExpertWhatIf& what); // → whatIfReady
    // Every expert of every layer removed (or zeroed) in turn: scanProgress while it runs, scanFinished.
    quint64 scan(const std::vector<int32_t>& ids, bool zero);
    void stopScan();
    bool scanning() const { return m_scan != 0; }

signals:
    void routed(std::shared_ptr<const tokenscope::ui::ExpertsSnapshot> snapshot);
    void whatIfReady(std::shared_ptr<const tokenscope::ui::ExpertWhatIfSnapshot> snapshot);
    void scanProgress(std::shared_ptr<const tokenscope::ui::ExpertScanSnapshot> snapshot);
    void scanFinished(std::shared_ptr<const tokenscope::ui::ExpertScanSnapshot> snapshot);

private:
    EngineController& m_engine;
    quint64 m_route = 0, m_what_if = 0, m_scan = 0;
};

inline ExpertsClient& EngineController::experts()
{
    return client<ExpertsClient>();
}

} // namespace tokenscope::ui
