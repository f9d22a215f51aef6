// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/engine_controller.h"
#include "bridge/engine_types.h"

#include <QObject>
#include <memory>
#include <vector>

namespace tokenscope::ui {

// The decode stepper: Prefill, Step and Back, each answered with one StepperState (action "error"
// with the reason when it cannot be done). On the engine here (stepper_client.cpp) every stage of
// the next token's sampling is there; on a server that gives next-token probabilities
// (stepper_remote.cpp), its top-N and its draw.
class StepperClient : public QObject {
    Q_OBJECT
public:
    class Source {
    public:
        virtual ~Source() = default;
        virtual quint64 start(const QString& prompt, const StepperSettings& settings) = 0;
        virtual quint64 startTokens(const std::vector<int32_t>& ids, const QString& text,
                                    const StepperSettings& settings) = 0;
        virtual quint64 step(const StepperSettings& settings, int forced_token) = 0;
        virtual quint64 back(const StepperSettings& settings) = 0;
    };

    explicit StepperClient(EngineController& engine);
    ~StepperClient() override;

    // Prefill (cancellable; prefillProgress between batches).
    quint64 stepperStart(const QString& prompt, const StepperSettings& settings)
    {
        return source().start(prompt, settings);
    }
    // The stepper on these tokens exactly (`text` names them in the prompt field), from an empty cache.
    quint64 stepperStartTokens(const std::vector<int32_t>& ids, const QString& text, const StepperSettings& settings)
    {
        return source().startTokens(ids, text, settings);
    }
    quint64 stepperStep(const StepperSettings& settings, int forced_token = -1)
    {
        return source().step(settings, forced_token);
    }
    quint64 stepperBack(const StepperSettings& settings) { return source().back(settings); }

signals:
    void stepperState(std::shared_ptr<const tokenscope::ui::StepperState> state);
    void prefillProgress(quint64 request_id, int done, int total);

private:
    Source& source() const { return m_engine.remote() ? *m_remote : *m_local; }

    EngineController& m_engine;
    std::unique_ptr<Source> m_local;
    std::unique_ptr<Source> m_remote;
};

std::unique_ptr<StepperClient::Source> make_remote_stepper(StepperClient& client, EngineController& engine);

inline StepperClient& EngineController::stepper()
{
    return client<StepperClient>();
}

} // namespace tokenscope::ui
