// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/engine_types.h"

#include <QObject>
#include <QThread>
#include <atomic>
#include <memory>

namespace tokenscope::ui {

class EngineWorker;

// The UI's handle on the engine thread: starts it, forwards requests as queued calls, re-emits
// results on the UI thread, cancels through an atomic flag, and shuts down with stop → quit → wait.
// Nothing here blocks on the engine.
class EngineController : public QObject {
    Q_OBJECT
public:
    explicit EngineController(QObject* parent = nullptr);
    ~EngineController() override;

    // backend: "cpu", "vulkan" or "auto"; device: a Vulkan device index, -1 for the best.
    void loadModel(const QString& path, int threads = 0, quint32 n_ctx = 4096, const QString& backend = "cpu", int device = -1);
    quint64 sendChat(std::vector<ChatTurn> turns, const SamplingSettings& sampling);
    void stop();                 // ends a running reply after the current token, or a load
    void setLoadGate(std::shared_ptr<LoadGate> gate); // tests only
    void resetConversation();
    quint64 checkFit(std::vector<ChatTurn> turns, const SamplingSettings& sampling);
    quint64 tokenize(const QString& text);
    quint64 stepperStart(const QString& prompt, const StepperSettings& settings);
    quint64 stepperStep(const StepperSettings& settings, int forced_token = -1);
    quint64 stepperBack(const StepperSettings& settings);
    quint64 readKv(int layer, int kv_head);
    void probeMachine();
    quint64 countTurns(const QStringList& roles, const QStringList& texts);
    quint64 captureAttention(const QString& text, bool current_sequence, const QList<int>& layers);
    bool busy() const { return m_busy; }
    std::shared_ptr<const ModelSummary> model() const { return m_model; }

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
    void machineProbed(const tokenscope::ui::MachinePeaksUi& peaks);
    void turnsCounted(quint64 request_id, const QList<int>& counts, int n_ctx_train);
    void attentionReady(std::shared_ptr<const tokenscope::ui::AttentionSnapshot> snapshot);

private:
    void setBusy(bool busy);

    QThread m_thread;
    EngineWorker* m_worker = nullptr; // lives on m_thread, deleted when it finishes
    std::shared_ptr<std::atomic<bool>> m_cancel = std::make_shared<std::atomic<bool>>(false);
    std::shared_ptr<const ModelSummary> m_model;
    quint64 m_next_request = 1;
    bool m_busy = false;
};

} // namespace tokenscope::ui
