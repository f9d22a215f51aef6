// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/engine_types.h"

#include "backend/backend.h"
#include "chat/chat_prompt.h"
#include "session/attention_recorder.h"

#include <QString>
#include <memory>
#include <vector>

namespace engine {
class Backend;
class Model;
class Session;
class Stepper;
} // namespace engine

namespace tokenscope::ui {

class InspectionClient;

// What the engine thread holds between requests: the model, the chat's and the stepper's sessions,
// the attention recording, the lab's backend. Every feature's local implementation reads and
// changes it from the engine thread only (requests reach it through EngineController::post), so
// nothing here is locked. The helpers are the pieces several features share.
class EngineContext {
public:
    // `views`: where the live KV gauges and timelines go (an object on the UI thread; this only posts to it).
    explicit EngineContext(InspectionClient* views);
    ~EngineContext();
    EngineContext(const EngineContext&) = delete;
    EngineContext& operator=(const EngineContext&) = delete;

    // Throws engine::Error with the message every view shows when no model is loaded.
    void requireModel() const;
    // A newly loaded model and the chat's session on it; every other session is dropped.
    void replaceModel(std::shared_ptr<const engine::Model> model, std::unique_ptr<engine::Session> chat, int threads,
                      quint32 n_ctx, const QString& backend_name, int device);

    // The session the chat and the other views use last: the KV views, the attention recorder and
    // "current sequence" follow it. Switching between the chat and the stepper drops the recording.
    void activate(engine::Session& session);
    // The stepper's own session, made on its first prefill (same backend kind as the chat's).
    engine::Session& stepperSession();
    // The lab's CPU backend, every run from an empty cache.
    engine::Backend& labBackend();
    // A lab prompt is evaluated many times over: long ones would take minutes per experiment.
    static constexpr int kMaxLabTokens = 256;
    // A lab prompt's tokens; throws engine::Error when it is empty or too long.
    std::vector<int32_t> labTokens(const QString& text, const char* what) const;

    std::vector<StepperToken> tokensOf(const std::vector<int32_t>& ids, int prompt_length) const;
    std::vector<StepperToken> sequenceTokens(int prompt_length) const; // the active session's sequence
    int activePromptLength() const; // of the active session: the stepper's prompt or the chat's last
    // What a view of "a text or the current sequence" runs on: the active session's sequence and its
    // prompt length, or `text` tokenized (all of it prompt). Throws Error with `no_sequence` when there is
    // no sequence yet, `empty_text` for a blank text.
    struct ViewedTokens {
        std::vector<int32_t> ids;
        int prompt_length = 0;
    };
    ViewedTokens viewedTokens(const QString& text, bool current_sequence, const QString& no_sequence,
                              const QString& empty_text) const;

    // The attention recording of the real passes, kept only while a view shows attention.
    const engine::CaptureRequest& recordingRequest(uint32_t next_length);
    void record();
    bool snapshotFromRecording(AttentionSnapshot& s, const QList<int>& layers);

    // The live views: the active session's KV accounting, and a timeline.
    void publishKv(const QString& source, int prompt_tokens, int reused_tokens);
    void publishTimeline(std::shared_ptr<const TimelineSnapshot> timeline);

    std::shared_ptr<const engine::Model> model;
    std::unique_ptr<engine::Session> session;         // the chat's
    std::unique_ptr<engine::Session> stepper_session; // the stepper's: a chat reply leaves its sequence alone
    engine::Session* active = nullptr;
    std::unique_ptr<engine::Stepper> stepper;
    std::unique_ptr<engine::Session> attention_session; // the attention explorer's own, one pass per request
    bool steering = false;                              // the chat and stepper sessions are steered
    std::unique_ptr<engine::Backend> lab_backend;       // the lab's, every run from an empty cache
    engine::AttentionRecorder recorder;                 // attention of the session's real passes
    bool attention_watched = false;
    double stepper_tokenize_ms = 0.0;
    int last_prompt_tokens = 0;        // of the last chat request, for the KV views' prompt/generated marks
    engine::ChatPromptBuilder prompts; // the chat's: the fit check's prompt is the reply's
    int threads = 0;
    quint32 n_ctx = 0;
    QString backend_name;          // as the load asked for it, for the stepper's session
    engine::KvCacheTypes kv_types; // the cache types the load asked for (the stepper's session uses them too)
    // The CPU backends' summation order for this backend choice (the lab's, attention's and text
    // analysis' backends run on the CPU in the order the user chose).
    engine::WeightOrder cpuOrder() const;
    bool cpuFlash() const; // the CPU's attention in llama.cpp's flash-attention order (BackendChoice)
    // Whether the backend chosen is the CPU in deterministic (batch-invariant) mode: the lab's, the
    // attention explorer's and the text analysis's CPU backends follow it too.
    bool deterministic() const;
    // The options of those views' own CPU backends, with a cache of `positions`: this context's
    // threads and the order, flash attention and deterministic mode chosen.
    engine::CpuBackendOptions cpuOptions(uint32_t positions) const;
    int device = -1;

private:
    InspectionClient* m_views;
};

} // namespace tokenscope::ui
