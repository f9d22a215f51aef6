// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/analysis_types.h"
#include "bridge/engine_types.h"
#include "bridge/lab_types.h"

#include "session/attention_recorder.h"

#include <QObject>
#include <atomic>
#include <memory>

namespace engine {
class Backend;
class Model;
class Session;
class Stepper;
} // namespace engine

namespace tokenscope::ui {

// Lives on the engine thread and owns the model and its session. Requests arrive as calls the
// controller posts to this thread; results leave as queued signals carrying immutable snapshots.
// Cancellation does not go through the event loop: each cancellable request carries its own
// token, checked before it starts and between its tokens or batches. Only the engine thread
// touches this object after construction.
class EngineWorker : public QObject {
    Q_OBJECT
public:
    EngineWorker();
    ~EngineWorker() override;

    // `gate` (tests) pauses the load at 50%.
    void loadModel(const QString& path, int threads, quint32 n_ctx, const QString& backend, int device,
                   CancelToken cancel, std::shared_ptr<LoadGate> gate);
    void generateReply(const tokenscope::ui::ChatRequest& request, CancelToken cancel);
    void resetConversation();
    // Would this conversation (with the draft) fit the context? Answers with fitChecked.
    void checkFit(const tokenscope::ui::ChatRequest& request);
    void tokenize(quint64 request_id, const QString& text);
    // The decode stepper: each answers with one stepperState.
    // With `ids`, those tokens are the prompt (the text only names it), prefilled from an empty cache.
    void stepperStart(quint64 request_id, const QString& prompt, const tokenscope::ui::StepperSettings& settings,
                      CancelToken cancel, const std::vector<int32_t>& ids = {});
    void stepperStep(quint64 request_id, const tokenscope::ui::StepperSettings& settings, int forced_token);
    void stepperBack(quint64 request_id, const tokenscope::ui::StepperSettings& settings);
    // The KV cache's contents for one layer and KV head: answers with kvContents.
    void readKv(quint64 request_id, int layer, int kv_head);
    // Measures this machine's memory read bandwidth and FLOP rate (a short probe): machineProbed.
    void probeMachine();
    // Token counts of chat turns as the template renders them: turnsCounted.
    void countTurns(quint64 request_id, const QStringList& roles, const QStringList& texts);
    // Attention of the given layers (all their heads; every layer when layers is empty) over a
    // text, or over the model's current sequence (chat or stepper) when text is null: one forward
    // pass on a separate session, so the chat's cache is left alone. Answers with attentionReady.
    void captureAttention(quint64 request_id, const QString& text, bool current_sequence, const QList<int>& layers,
                          CancelToken cancel);
    // Whether some view shows attention: only then do the chat's and the stepper's passes record
    // it (turning it off drops the recording).
    void setAttentionWatched(bool watched);
    // The interpretability lab, on a CPU backend of its own: patchingReady (labProgress after each
    // run) and attributionReady.
    void runPatching(quint64 request_id, const tokenscope::ui::PatchingSettings& settings, CancelToken cancel);
    void runAttribution(quint64 request_id, const tokenscope::ui::AttributionSettings& settings, CancelToken cancel);
    // Head classes on the probe, an ablation scan of every head (labProgress), one ablation's
    // before/after distribution, and steering: side-by-side continuations, or applied to the chat's
    // and the stepper's sessions (their sequences start again) until turned off.
    void classifyHeads(quint64 request_id, int repeat, quint64 seed);
    void scanAblations(quint64 request_id, const tokenscope::ui::AblationSettings& settings, CancelToken cancel);
    void ablateHeads(quint64 request_id, const tokenscope::ui::AblationSettings& settings);
    void steer(quint64 request_id, const tokenscope::ui::SteeringSettings& settings, CancelToken cancel);
    void setSteering(bool on, const tokenscope::ui::SteeringSettings& settings);
    // Every token of a text through the model (surprisal, rank, entropy); with `compare_with` (a
    // GGUF of the same vocabulary) the two position by position: textAnalyzed, labProgress.
    void analyzeText(quint64 request_id, const QString& text, const QString& compare_with, CancelToken cancel);

signals:
    void loadProgress(int percent, const QString& what);
    void modelLoaded(std::shared_ptr<const tokenscope::ui::ModelSummary> summary);
    void loadFailed(const QString& message);
    void replyStarted(quint64 request_id);
    void replyDelta(quint64 request_id, const QString& text);
    void replyFinished(std::shared_ptr<const tokenscope::ui::ReplyStats> stats);
    void replyFailed(quint64 request_id, const QString& message);
    void prefillProgress(quint64 request_id, int done, int total);
    void fitChecked(quint64 request_id, const QString& notice);
    void tokenized(std::shared_ptr<const tokenscope::ui::Tokenization> result);
    void stepperState(std::shared_ptr<const tokenscope::ui::StepperState> state);
    void kvChanged(std::shared_ptr<const tokenscope::ui::KvSnapshot> snapshot);
    void kvContents(std::shared_ptr<const tokenscope::ui::KvContents> contents);
    void timelineChanged(std::shared_ptr<const tokenscope::ui::TimelineSnapshot> timeline);
    void machineProbed(const tokenscope::ui::MachinePeaksUi& peaks);
    void turnsCounted(quint64 request_id, const QList<int>& counts, int n_ctx_train);
    void attentionReady(std::shared_ptr<const tokenscope::ui::AttentionSnapshot> snapshot);
    void labProgress(quint64 request_id, int done, int total);
    void patchingReady(std::shared_ptr<const tokenscope::ui::PatchingSnapshot> snapshot);
    void attributionReady(std::shared_ptr<const tokenscope::ui::AttributionSnapshot> snapshot);
    void headsReady(std::shared_ptr<const tokenscope::ui::HeadsSnapshot> snapshot);
    void ablationReady(std::shared_ptr<const tokenscope::ui::AblationSnapshot> snapshot);
    void steeringReady(std::shared_ptr<const tokenscope::ui::SteeringSnapshot> snapshot);
    void steeringApplied(bool on, const QString& error);
    void textAnalyzed(std::shared_ptr<const tokenscope::ui::TextAnalysisSnapshot> snapshot);

private:
    void emitStepperState(quint64 request_id, const QString& action, const StepperSettings& settings);
    void emitStepperError(quint64 request_id, const QString& message);
    bool stepperIsCurrent(quint64 request_id);
    void emitKv(const QString& source, int prompt_tokens, int reused_tokens);
    void emitStepperTimeline();
    std::vector<StepperToken> sequenceTokens(int prompt_length) const; // the active session's sequence
    int activePromptLength() const; // of the active session: the stepper's prompt or the chat's last
    std::vector<StepperToken> tokensOf(const std::vector<int32_t>& ids, int prompt_length) const;
    // What the next passes capture for the attention explorer (recorded as the model runs).
    const engine::CaptureRequest& recordingRequest(uint32_t next_length);
    void record();
    bool snapshotFromRecording(AttentionSnapshot& s, const QList<int>& layers, int prompt_length);

    // The session the chat and the other views use last: the KV views, the attention recorder and
    // "current sequence" follow it. Switching between the chat and the stepper drops the recording.
    void activate(engine::Session& session);
    // The stepper's own session, made on its first prefill (same backend kind as the chat's).
    engine::Session& stepperSession();
    engine::Backend& labBackend();
    // A lab prompt's tokens; throws engine::Error when it is empty or too long.
    std::vector<int32_t> labTokens(const QString& text, const char* what) const;

    std::shared_ptr<const engine::Model> m_model;
    std::unique_ptr<engine::Session> m_session;         // the chat's
    std::unique_ptr<engine::Session> m_stepper_session; // the stepper's: a chat reply leaves its sequence alone
    engine::Session* m_active = nullptr;
    std::unique_ptr<engine::Stepper> m_stepper;
    std::unique_ptr<engine::Session> m_attention_session; // the attention explorer's own, one pass per request
    bool m_steering = false;                              // the chat and stepper sessions are steered
    std::unique_ptr<engine::Backend> m_lab_backend;       // the lab's, every run from an empty cache
    engine::AttentionRecorder m_recorder;                 // attention of the session's real passes
    bool m_attention_watched = false;
    double m_stepper_tokenize_ms = 0.0;
    int m_last_prompt_tokens = 0; // of the last chat request, for the KV views' prompt/generated marks
    int m_threads = 0;
    quint32 m_n_ctx = 0;
    QString m_backend_name; // as the load asked for it, for the stepper's session
    int m_device = -1;
};

} // namespace tokenscope::ui
