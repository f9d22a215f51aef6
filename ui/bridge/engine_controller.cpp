// SPDX-License-Identifier: GPL-3.0-or-later
#include "bridge/engine_controller.h"

#include "bridge/engine_worker.h"

namespace tokenscope::ui {

EngineController::EngineController(QObject* parent) : QObject(parent)
{
    qRegisterMetaType<std::shared_ptr<const ModelSummary>>();
    qRegisterMetaType<std::shared_ptr<const ReplyStats>>();
    qRegisterMetaType<ChatRequest>();
    qRegisterMetaType<std::shared_ptr<const Tokenization>>();
    qRegisterMetaType<StepperSettings>();
    qRegisterMetaType<std::shared_ptr<const StepperState>>();
    qRegisterMetaType<std::shared_ptr<const KvSnapshot>>();
    qRegisterMetaType<std::shared_ptr<const KvContents>>();
    qRegisterMetaType<std::shared_ptr<const TimelineSnapshot>>();
    qRegisterMetaType<MachinePeaksUi>();
    qRegisterMetaType<std::shared_ptr<const AttentionSnapshot>>();
    m_thread.setObjectName("engine");
    m_worker = new EngineWorker(m_cancel);
    m_worker->moveToThread(&m_thread);
    connect(&m_thread, &QThread::finished, m_worker, &QObject::deleteLater);
    connect(m_worker, &EngineWorker::loadProgress, this, &EngineController::loadProgress);
    connect(m_worker, &EngineWorker::modelLoaded, this, [this](std::shared_ptr<const ModelSummary> s) {
        m_model = s;
        setBusy(false);
        emit modelLoaded(std::move(s));
    });
    connect(m_worker, &EngineWorker::loadFailed, this, [this](const QString& m) {
        setBusy(false);
        emit loadFailed(m);
    });
    connect(m_worker, &EngineWorker::replyStarted, this, &EngineController::replyStarted);
    connect(m_worker, &EngineWorker::replyDelta, this, &EngineController::replyDelta);
    connect(m_worker, &EngineWorker::prefillProgress, this, &EngineController::prefillProgress);
    connect(m_worker, &EngineWorker::fitChecked, this, &EngineController::fitChecked);
    connect(m_worker, &EngineWorker::tokenized, this, &EngineController::tokenized);
    connect(m_worker, &EngineWorker::stepperState, this, &EngineController::stepperState);
    connect(m_worker, &EngineWorker::kvChanged, this, &EngineController::kvChanged);
    connect(m_worker, &EngineWorker::kvContents, this, &EngineController::kvContents);
    connect(m_worker, &EngineWorker::timelineChanged, this, &EngineController::timelineChanged);
    connect(m_worker, &EngineWorker::machineProbed, this, &EngineController::machineProbed);
    connect(m_worker, &EngineWorker::turnsCounted, this, &EngineController::turnsCounted);
    connect(m_worker, &EngineWorker::attentionReady, this, &EngineController::attentionReady);
    connect(m_worker, &EngineWorker::replyFinished, this, [this](std::shared_ptr<const ReplyStats> s) {
        setBusy(false);
        emit replyFinished(std::move(s));
    });
    connect(m_worker, &EngineWorker::replyFailed, this, [this](quint64 id, const QString& m) {
        setBusy(false);
        emit replyFailed(id, m);
    });
    m_thread.start();
}

EngineController::~EngineController()
{
    m_cancel->store(true); // a running reply ends at the next token
    m_thread.quit();
    m_thread.wait();
}

void EngineController::setBusy(bool busy)
{
    if (m_busy != busy) {
        m_busy = busy;
        emit busyChanged(busy);
    }
}

void EngineController::loadModel(const QString& path, int threads, quint32 n_ctx, const QString& backend, int device)
{
    m_cancel->store(false);
    setBusy(true);
    QMetaObject::invokeMethod(m_worker, "loadModel", Qt::QueuedConnection, Q_ARG(QString, path), Q_ARG(int, threads),
                              Q_ARG(quint32, n_ctx), Q_ARG(QString, backend), Q_ARG(int, device));
}

quint64 EngineController::sendChat(std::vector<ChatTurn> turns, const SamplingSettings& sampling)
{
    ChatRequest request;
    request.id = m_next_request++;
    request.turns = std::move(turns);
    request.sampling = sampling;
    setBusy(true);
    QMetaObject::invokeMethod(m_worker, "generateReply", Qt::QueuedConnection,
                              Q_ARG(tokenscope::ui::ChatRequest, request));
    return request.id;
}

void EngineController::stop() { m_cancel->store(true); }

quint64 EngineController::tokenize(const QString& text)
{
    const quint64 id = m_next_request++;
    QMetaObject::invokeMethod(m_worker, "tokenize", Qt::QueuedConnection, Q_ARG(quint64, id), Q_ARG(QString, text));
    return id;
}

quint64 EngineController::stepperStart(const QString& prompt, const StepperSettings& settings)
{
    const quint64 id = m_next_request++;
    m_cancel->store(false);
    QMetaObject::invokeMethod(m_worker, "stepperStart", Qt::QueuedConnection, Q_ARG(quint64, id), Q_ARG(QString, prompt),
                              Q_ARG(tokenscope::ui::StepperSettings, settings));
    return id;
}

quint64 EngineController::stepperStep(const StepperSettings& settings, int forced_token)
{
    const quint64 id = m_next_request++;
    QMetaObject::invokeMethod(m_worker, "stepperStep", Qt::QueuedConnection, Q_ARG(quint64, id),
                              Q_ARG(tokenscope::ui::StepperSettings, settings), Q_ARG(int, forced_token));
    return id;
}

quint64 EngineController::stepperBack(const StepperSettings& settings)
{
    const quint64 id = m_next_request++;
    QMetaObject::invokeMethod(m_worker, "stepperBack", Qt::QueuedConnection, Q_ARG(quint64, id),
                              Q_ARG(tokenscope::ui::StepperSettings, settings));
    return id;
}

quint64 EngineController::readKv(int layer, int kv_head)
{
    const quint64 id = m_next_request++;
    QMetaObject::invokeMethod(m_worker, "readKv", Qt::QueuedConnection, Q_ARG(quint64, id), Q_ARG(int, layer), Q_ARG(int, kv_head));
    return id;
}

void EngineController::probeMachine() { QMetaObject::invokeMethod(m_worker, "probeMachine", Qt::QueuedConnection); }

quint64 EngineController::countTurns(const QStringList& roles, const QStringList& texts)
{
    const quint64 id = m_next_request++;
    QMetaObject::invokeMethod(m_worker, "countTurns", Qt::QueuedConnection, Q_ARG(quint64, id), Q_ARG(QStringList, roles),
                              Q_ARG(QStringList, texts));
    return id;
}

quint64 EngineController::captureAttention(const QString& text, bool current_sequence, const QList<int>& layers)
{
    const quint64 id = m_next_request++;
    QMetaObject::invokeMethod(m_worker, "captureAttention", Qt::QueuedConnection, Q_ARG(quint64, id), Q_ARG(QString, text),
                              Q_ARG(bool, current_sequence), Q_ARG(QList<int>, layers));
    return id;
}

quint64 EngineController::checkFit(std::vector<ChatTurn> turns, const SamplingSettings& sampling)
{
    ChatRequest request;
    request.id = m_next_request++;
    request.turns = std::move(turns);
    request.sampling = sampling;
    QMetaObject::invokeMethod(m_worker, "checkFit", Qt::QueuedConnection, Q_ARG(tokenscope::ui::ChatRequest, request));
    return request.id;
}

void EngineController::setLoadGate(std::shared_ptr<LoadGate> gate) { m_worker->setLoadGate(std::move(gate)); }

void EngineController::resetConversation()
{
    QMetaObject::invokeMethod(m_worker, "resetConversation", Qt::QueuedConnection);
}

} // namespace tokenscope::ui
