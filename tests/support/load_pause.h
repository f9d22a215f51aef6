// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/engine_controller.h"

#include <QSemaphore>
#include <memory>

namespace testsupport {

// A model load held at 50% (the controller's LoadGate) until the test lets it go: for the tests
// that queue, cancel or connect while a load is running. Declare it after the controller, and
// release() before the controller goes away.
class LoadPause {
public:
    explicit LoadPause(tokenscope::ui::EngineController& engine)
    {
        auto gate = std::make_shared<tokenscope::ui::LoadGate>();
        gate->reached = [this] { m_reached.release(); };
        gate->wait = [this] { m_proceed.acquire(); };
        engine.setLoadGate(std::move(gate));
    }
    // The engine thread is held inside the load.
    bool reached(int timeout_ms = 120000) { return m_reached.tryAcquire(1, timeout_ms); }
    void release() { m_proceed.release(); }

private:
    QSemaphore m_reached, m_proceed;
};

} // namespace testsupport
