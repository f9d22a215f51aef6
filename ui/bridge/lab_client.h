// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/engine_controller.h"
#include "bridge/lab_types.h"

#include <QObject>
#include <memory>

namespace tokenscope::ui {

// The interpretability lab: activation patching and direct logit attribution (lab_client.cpp),
// head classes, ablations and steering (lab_heads.cpp), each on a CPU backend of its own (the chat's
// and the stepper's caches are left alone) and answered with one immutable snapshot. A server
// exposes no activations: there every request is answered with the reason.
class LabClient : public QObject {
    Q_OBJECT
public:
    class Source {
    public:
        virtual ~Source() = default;
        virtual quint64 runPatching(const PatchingSettings& settings) = 0;
        virtual quint64 runAttribution(const AttributionSettings& settings) = 0;
        virtual quint64 classifyHeads(int repeat, quint64 seed) = 0;
        virtual quint64 scanAblations(const AblationSettings& settings) = 0;
        virtual quint64 ablateHeads(const AblationSettings& settings) = 0;
        virtual quint64 steer(const SteeringSettings& settings) = 0;
        virtual void setSteering(bool on, const SteeringSettings& settings) = 0;
    };

    explicit LabClient(EngineController& engine);
    ~LabClient() override;

    // Cancellable; patching and the ablation scan report labProgress after every run.
    quint64 runPatching(const PatchingSettings& settings) { return source().runPatching(settings); }
    quint64 runAttribution(const AttributionSettings& settings) { return source().runAttribution(settings); }
    quint64 classifyHeads(int repeat = 24, quint64 seed = 1) { return source().classifyHeads(repeat, seed); }
    quint64 scanAblations(const AblationSettings& settings) { return source().scanAblations(settings); }
    quint64 ablateHeads(const AblationSettings& settings) { return source().ablateHeads(settings); }
    // Side-by-side continuations, default and steered.
    quint64 steer(const SteeringSettings& settings) { return source().steer(settings); }
    // Steering applied to the chat's and the stepper's sessions (their sequences start again) until
    // turned off: steeringApplied.
    void setSteering(bool on, const SteeringSettings& settings) { source().setSteering(on, settings); }

signals:
    void labProgress(quint64 request_id, int done, int total);
    void patchingReady(std::shared_ptr<const tokenscope::ui::PatchingSnapshot> snapshot);
    void attributionReady(std::shared_ptr<const tokenscope::ui::AttributionSnapshot> snapshot);
    void headsReady(std::shared_ptr<const tokenscope::ui::HeadsSnapshot> snapshot);
    void ablationReady(std::shared_ptr<const tokenscope::ui::AblationSnapshot> snapshot);
    void steeringReady(std::shared_ptr<const tokenscope::ui::SteeringSnapshot> snapshot);
    void steeringApplied(bool on, const QString& error);

private:
    Source& source() const { return m_engine.remote() ? *m_remote : *m_local; }

    EngineController& m_engine;
    std::unique_ptr<Source> m_local;
    std::unique_ptr<Source> m_remote;
};

// The engine thread's side of the head tools (lab_heads.cpp); `progress(done, total)` returns false to stop.
using LabProgress = std::function<bool(uint32_t done, uint32_t total)>;
std::shared_ptr<HeadsSnapshot> classify_heads(EngineContext& context, int repeat, quint64 seed);
std::shared_ptr<HeadsSnapshot> scan_ablations(EngineContext& context, const AblationSettings& settings,
                                              const LabProgress& progress);
std::shared_ptr<AblationSnapshot> ablate_heads(EngineContext& context, const AblationSettings& settings);
std::shared_ptr<SteeringSnapshot> steer(EngineContext& context, const SteeringSettings& settings,
                                        const CancelToken& cancel);
// Returns whether the sessions are steered now; throws engine::Error when the vector cannot be made.
bool apply_steering(EngineContext& context, bool on, const SteeringSettings& settings);

inline LabClient& EngineController::lab()
{
    return client<LabClient>();
}

} // namespace tokenscope::ui
