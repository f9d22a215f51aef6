// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/analysis_types.h"
#include "bridge/engine_types.h"
#include "bridge/lab_types.h"

#include "remote/remote_client.h"

#include <QElapsedTimer>
#include <QObject>
#include <QThread>
#include <map>
#include <memory>

namespace tokenscope::ui {

class EngineWorker;

// The UI's handle on the engine thread: starts it, posts each request to the worker as a typed call
// (checked at compile time), re-emits results on the UI thread and shuts down with cancel → quit →
// wait. Nothing here blocks on the engine. Every cancellable request (a load, a chat reply, a
// stepper prefill, an attention capture) gets its own cancel token: cancel(id) ends exactly that
// request, queued or running; stop() ends every one outstanding.
class EngineController : public QObject {
    Q_OBJECT
public:
    explicit EngineController(QObject* parent = nullptr);
    ~EngineController() override;

    // backend: "cpu", "vulkan" or "auto", or "vulkan-exact" / "auto-exact" for the Vulkan backend's
    // exact arithmetic (parse_backend_choice); device: a Vulkan device index, -1 for the best.
    quint64 loadModel(const QString& path, int threads = 0, quint32 n_ctx = 4096, const QString& backend = "cpu",
                      int device = -1);
    quint64 sendChat(std::vector<ChatTurn> turns, const SamplingSettings& sampling);
    void stop();                     // every outstanding cancellable request: a running one after its current token
    void cancel(quint64 request_id); // that request only
    void setLoadGate(std::shared_ptr<LoadGate> gate) { m_gate = std::move(gate); } // tests: goes with the next loads
    void resetConversation();
    quint64 checkFit(std::vector<ChatTurn> turns, const SamplingSettings& sampling);
    quint64 tokenize(const QString& text);
    quint64 stepperStart(const QString& prompt, const StepperSettings& settings);
    // The stepper on these tokens exactly (`text` names them in the prompt field), from an empty cache.
    quint64 stepperStartTokens(const std::vector<int32_t>& ids, const QString& text, const StepperSettings& settings);
    quint64 stepperStep(const StepperSettings& settings, int forced_token = -1);
    quint64 stepperBack(const StepperSettings& settings);
    quint64 readKv(int layer, int kv_head);
    void probeMachine();
    quint64 countTurns(const QStringList& roles, const QStringList& texts);
    quint64 captureAttention(const QString& text, bool current_sequence, const QList<int>& layers);
    // A view that shows attention says when it is on screen; the chat and the stepper record
    // attention only while one is.
    void setAttentionWatched(bool watched);
    // The interpretability lab (cancellable; patching reports labProgress).
    quint64 runPatching(const PatchingSettings& settings);
    quint64 runAttribution(const AttributionSettings& settings);
    quint64 classifyHeads(int repeat = 24, quint64 seed = 1);
    quint64 scanAblations(const AblationSettings& settings);
    quint64 ablateHeads(const AblationSettings& settings);
    quint64 steer(const SteeringSettings& settings);
    void setSteering(bool on, const SteeringSettings& settings);
    quint64 analyzeText(const QString& text, const QString& compare_with = {});
    // A model served elsewhere: from a successful probe on, chat and tokenizer requests go to the
    // server and the requests that need the model's internals (attention, KV contents, the lab, the
    // text analysis) are answered with the reason they cannot be; loadModel() or disconnectServer()
    // return to the local engine. → serverConnected (then modelLoaded with a remote summary) or
    // serverFailed.
    quint64 connectServer(const remote::Endpoint& endpoint);
    void disconnectServer();
    std::shared_ptr<const remote::ServerInfo> server() const { return m_server; }
    bool busy() const { return m_busy; }
    std::shared_ptr<const ModelSummary> model() const { return m_model; }
    // Requests that can still be cancelled (tests).
    std::size_t outstanding() const { return m_cancellable.size(); }

signals:
    void loadProgress(int percent, const QString& what);
    void modelLoaded(std::shared_ptr<const tokenscope::ui::ModelSummary> summary);
    void loadFailed(const QString& message);
    void replyStarted(quint64 request_id);
    void replyDelta(quint64 request_id, const QString& text);
    void replyFinished(std::shared_ptr<const tokenscope::ui::ReplyStats> stats);
    void replyFailed(quint64 request_id, const QString& message);
    void busyChanged(bool busy);
    void prefillProgress(quint64 request_id, int done, int total);
    void fitChecked(quint64 request_id, const QString& notice);
    void tokenized(std::shared_ptr<const tokenscope::ui::Tokenization> result);
    void stepperState(std::shared_ptr<const tokenscope::ui::StepperState> state);
    void kvChanged(std::shared_ptr<const tokenscope::ui::KvSnapshot> snapshot);
    void kvContents(std::shared_ptr<const tokenscope::ui::KvContents> contents);
    void timelineChanged(std::shared_ptr<const tokenscope::ui::TimelineSnapshot> timeline);
    // After each reply from a server: its cache as far as it says (the KV panel's server gauge).
    void serverCacheChanged(std::shared_ptr<const tokenscope::ui::ServerCacheSnapshot> cache);
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
    void serverConnected(std::shared_ptr<const tokenscope::remote::ServerInfo> server);
    void serverFailed(const QString& message);
    void serverDisconnected();

private:
    // Runs `call(worker)` on the engine thread, after the requests posted before it.
    template <typename Call> void post(Call call);
    // A new request id, and for a cancellable request its token.
    quint64 nextId() { return m_next_request++; }
    CancelToken track(quint64 request_id);
    void finished(quint64 request_id) { m_cancellable.erase(request_id); }
    void setBusy(bool busy);
    // The served-model side (engine_controller_remote.cpp).
    quint64 sendChatToServer(std::vector<ChatTurn> turns, const SamplingSettings& sampling);
    quint64 tokenizeOnServer(const QString& text);
    // The decode stepper over a server that gives next-token probabilities (llama-server).
    quint64 stepperOnServer(const QString& action, const QString& prompt, const StepperSettings& settings,
                            int forced_token);
    void askServerForNextToken();
    void onServerStepperTokens(const std::vector<engine::remote::RemoteToken>& tokens);
    void onServerNextToken(const engine::remote::TokenLogprob& next);
    void onServerReply(std::shared_ptr<const remote::StreamedReply> reply);
    // The server's cache after a reply (reused: of the prompt, -1 not said); asks /metrics when served.
    void reportServerCache(const ReplyStats& stats, int reused);
    // Answers a request that needs the model's internals with the reason a server cannot (queued, as
    // the engine would answer).
    template <typename Snapshot, typename Signal> quint64 refuseOnServer(Signal signal, const QString& what);
    // Answers request `id` with an error snapshot carrying `message` (queued, as the engine answers).
    template <typename Snapshot, typename Signal>
    quint64 answerWithError(Signal signal, quint64 id, const QString& message);
    static QString unavailableOnServer(const QString& what);

    QThread m_thread;
    EngineWorker* m_worker = nullptr; // lives on m_thread, deleted when it finishes
    std::map<quint64, CancelToken> m_cancellable;
    std::shared_ptr<LoadGate> m_gate;
    quint64 m_load_request = 0; // the load in progress, whose end the load signals report
    std::shared_ptr<const ModelSummary> m_model;
    quint64 m_next_request = 1;
    remote::Client* m_client = nullptr; // lives on the UI thread: the network is asynchronous
    std::shared_ptr<const remote::ServerInfo> m_server;
    quint64 m_server_probe = 0;
    std::map<quint64, quint64> m_server_requests; // client request → controller request id
    struct ServerTokenize {
        QString text;
        QElapsedTimer clock;
    };
    std::map<quint64, ServerTokenize> m_server_texts; // client tokenize request → its text and clock
    struct ServerStepper {
        std::vector<StepperToken> tokens;
        int prompt_length = 0;
        int steps = 0;
        std::vector<ServerCandidate> top; // for the next token
        int drawn = -1;
        QString drawn_text;
        quint64 request = 0; // the controller request being answered
        QString action;      // prefill | step | back
        quint64 tokenize_client = 0;
        quint64 next_client = 0;
        StepperSettings settings;
    };
    ServerStepper m_server_stepper;
    // The /metrics request after a reply and the cache snapshot it completes.
    quint64 m_server_metrics = 0;
    std::shared_ptr<ServerCacheSnapshot> m_server_cache;
    bool m_busy = false;
};

} // namespace tokenscope::ui
