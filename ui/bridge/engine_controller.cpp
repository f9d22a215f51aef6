// SPDX-License-Identifier: GPL-3.0-or-later
#include "bridge/engine_controller.h"

#include "bridge/engine_worker.h"

namespace tokenscope::ui {

EngineController::EngineController(QObject* parent) : QObject(parent)
{
    qRegisterMetaType<std::shared_ptr<const ModelSummary>>();
    qRegisterMetaType<std::shared_ptr<const ReplyStats>>();
    qRegisterMetaType<std::shared_ptr<const ServerCacheSnapshot>>();
    qRegisterMetaType<ChatRequest>();
    qRegisterMetaType<std::shared_ptr<const Tokenization>>();
    qRegisterMetaType<StepperSettings>();
    qRegisterMetaType<std::shared_ptr<const StepperState>>();
    qRegisterMetaType<std::shared_ptr<const KvSnapshot>>();
    qRegisterMetaType<std::shared_ptr<const KvContents>>();
    qRegisterMetaType<std::shared_ptr<const TimelineSnapshot>>();
    qRegisterMetaType<MachinePeaksUi>();
    qRegisterMetaType<std::shared_ptr<const AttentionSnapshot>>();
    qRegisterMetaType<PatchingSettings>();
    qRegisterMetaType<std::shared_ptr<const PatchingSnapshot>>();
    qRegisterMetaType<std::shared_ptr<const AttributionSnapshot>>();
    qRegisterMetaType<std::shared_ptr<const HeadsSnapshot>>();
    qRegisterMetaType<std::shared_ptr<const AblationSnapshot>>();
    qRegisterMetaType<std::shared_ptr<const SteeringSnapshot>>();
    qRegisterMetaType<std::shared_ptr<const TextAnalysisSnapshot>>();
    m_thread.setObjectName("engine");
    m_worker = new EngineWorker();
    m_worker->moveToThread(&m_thread);
    connect(&m_thread, &QThread::finished, m_worker, &QObject::deleteLater);
    connect(m_worker, &EngineWorker::loadProgress, this, &EngineController::loadProgress);
    connect(m_worker, &EngineWorker::modelLoaded, this, [this](std::shared_ptr<const ModelSummary> s) {
        finished(m_load_request);
        m_model = s;
        setBusy(false);
        emit modelLoaded(std::move(s));
    });
    connect(m_worker, &EngineWorker::loadFailed, this, [this](const QString& m) {
        finished(m_load_request);
        setBusy(false);
        emit loadFailed(m);
    });
    connect(m_worker, &EngineWorker::replyStarted, this, &EngineController::replyStarted);
    connect(m_worker, &EngineWorker::replyDelta, this, &EngineController::replyDelta);
    connect(m_worker, &EngineWorker::prefillProgress, this, &EngineController::prefillProgress);
    connect(m_worker, &EngineWorker::fitChecked, this, &EngineController::fitChecked);
    connect(m_worker, &EngineWorker::tokenized, this, &EngineController::tokenized);
    connect(m_worker, &EngineWorker::stepperState, this, [this](std::shared_ptr<const StepperState> s) {
        finished(s->request_id);
        emit stepperState(std::move(s));
    });
    connect(m_worker, &EngineWorker::kvChanged, this, &EngineController::kvChanged);
    connect(m_worker, &EngineWorker::kvContents, this, &EngineController::kvContents);
    connect(m_worker, &EngineWorker::timelineChanged, this, &EngineController::timelineChanged);
    connect(m_worker, &EngineWorker::machineProbed, this, &EngineController::machineProbed);
    connect(m_worker, &EngineWorker::turnsCounted, this, &EngineController::turnsCounted);
    connect(m_worker, &EngineWorker::attentionReady, this, [this](std::shared_ptr<const AttentionSnapshot> s) {
        finished(s->request_id);
        emit attentionReady(std::move(s));
    });
    connect(m_worker, &EngineWorker::labProgress, this, &EngineController::labProgress);
    connect(m_worker, &EngineWorker::patchingReady, this, [this](std::shared_ptr<const PatchingSnapshot> s) {
        finished(s->request_id);
        emit patchingReady(std::move(s));
    });
    connect(m_worker, &EngineWorker::attributionReady, this, [this](std::shared_ptr<const AttributionSnapshot> s) {
        finished(s->request_id);
        emit attributionReady(std::move(s));
    });
    connect(m_worker, &EngineWorker::headsReady, this, [this](std::shared_ptr<const HeadsSnapshot> s) {
        finished(s->request_id);
        emit headsReady(std::move(s));
    });
    connect(m_worker, &EngineWorker::ablationReady, this, &EngineController::ablationReady);
    connect(m_worker, &EngineWorker::steeringReady, this, [this](std::shared_ptr<const SteeringSnapshot> s) {
        finished(s->request_id);
        emit steeringReady(std::move(s));
    });
    connect(m_worker, &EngineWorker::steeringApplied, this, &EngineController::steeringApplied);
    connect(m_worker, &EngineWorker::textAnalyzed, this, [this](std::shared_ptr<const TextAnalysisSnapshot> s) {
        finished(s->request_id);
        emit textAnalyzed(std::move(s));
    });
    connect(m_worker, &EngineWorker::replyFinished, this, [this](std::shared_ptr<const ReplyStats> s) {
        finished(s->request_id);
        setBusy(false);
        emit replyFinished(std::move(s));
    });
    connect(m_worker, &EngineWorker::replyFailed, this, [this](quint64 id, const QString& m) {
        finished(id);
        setBusy(false);
        emit replyFailed(id, m);
    });
    m_thread.start();
}

EngineController::~EngineController()
{
    stop(); // a running request ends at its next check, the queued ones without running
    m_thread.quit();
    m_thread.wait();
}

template <typename Call> void EngineController::post(Call call)
{
    QMetaObject::invokeMethod(
        m_worker, [worker = m_worker, call = std::move(call)]() mutable { call(*worker); }, Qt::QueuedConnection);
}

CancelToken EngineController::track(quint64 request_id)
{
    auto token = std::make_shared<std::atomic<bool>>(false);
    m_cancellable[request_id] = token;
    return token;
}

void EngineController::setBusy(bool busy)
{
    if (m_busy != busy) {
        m_busy = busy;
        emit busyChanged(busy);
    }
}

void EngineController::stop()
{
    if (m_client) { // a cancelled stream answers at once, which edits the map: walk a copy
        const auto requests = m_server_requests;
        for (const auto& [client_id, id] : requests)
            m_client->cancel(client_id);
    }
    for (auto& [id, token] : m_cancellable)
        token->store(true);
}

void EngineController::cancel(quint64 request_id)
{
    if (m_client)
        for (const auto& [client_id, id] : m_server_requests)
            if (id == request_id) {
                m_client->cancel(client_id);
                break;
            }
    if (auto it = m_cancellable.find(request_id); it != m_cancellable.end())
        it->second->store(true);
}

quint64 EngineController::loadModel(const QString& path, int threads, quint32 n_ctx, const QString& backend, int device)
{
    disconnectServer(); // a model here replaces the served one
    const quint64 id = nextId();
    m_load_request = id;
    setBusy(true);
    post([path, threads, n_ctx, backend, device, cancel = track(id), gate = m_gate](EngineWorker& w) {
        w.loadModel(path, threads, n_ctx, backend, device, cancel, gate);
    });
    return id;
}

quint64 EngineController::sendChat(std::vector<ChatTurn> turns, const SamplingSettings& sampling)
{
    if (m_server)
        return sendChatToServer(std::move(turns), sampling);
    ChatRequest request;
    request.id = nextId();
    request.turns = std::move(turns);
    request.sampling = sampling;
    setBusy(true);
    post([request, cancel = track(request.id)](EngineWorker& w) { w.generateReply(request, cancel); });
    return request.id;
}

quint64 EngineController::tokenize(const QString& text)
{
    if (m_server)
        return tokenizeOnServer(text);
    const quint64 id = nextId();
    post([id, text](EngineWorker& w) { w.tokenize(id, text); });
    return id;
}

quint64 EngineController::stepperStart(const QString& prompt, const StepperSettings& settings)
{
    if (m_server)
        return stepperOnServer("prefill", prompt, settings, -1);
    const quint64 id = nextId();
    post([id, prompt, settings, cancel = track(id)](EngineWorker& w) { w.stepperStart(id, prompt, settings, cancel); });
    return id;
}

quint64 EngineController::stepperStartTokens(const std::vector<int32_t>& ids, const QString& text,
                                             const StepperSettings& settings)
{
    if (m_server)
        return refuseOnServer<StepperState>(&EngineController::stepperState, tr("The decode stepper"));
    const quint64 id = nextId();
    post([id, ids, text, settings, cancel = track(id)](EngineWorker& w) {
        w.stepperStart(id, text, settings, cancel, ids);
    });
    return id;
}

quint64 EngineController::stepperStep(const StepperSettings& settings, int forced_token)
{
    if (m_server)
        return stepperOnServer("step", {}, settings, forced_token);
    const quint64 id = nextId();
    post([id, settings, forced_token](EngineWorker& w) { w.stepperStep(id, settings, forced_token); });
    return id;
}

quint64 EngineController::stepperBack(const StepperSettings& settings)
{
    if (m_server)
        return stepperOnServer("back", {}, settings, -1);
    const quint64 id = nextId();
    post([id, settings](EngineWorker& w) { w.stepperBack(id, settings); });
    return id;
}

quint64 EngineController::readKv(int layer, int kv_head)
{
    if (m_server)
        return refuseOnServer<KvContents>(&EngineController::kvContents, tr("The KV cache contents"));
    const quint64 id = nextId();
    post([id, layer, kv_head](EngineWorker& w) { w.readKv(id, layer, kv_head); });
    return id;
}

void EngineController::probeMachine()
{
    post([](EngineWorker& w) { w.probeMachine(); });
}

quint64 EngineController::countTurns(const QStringList& roles, const QStringList& texts)
{
    if (m_server) { // counted with the server's template, not here: the panel keeps its estimates
        const quint64 id = nextId();
        const int window = int(m_server->context_length);
        QMetaObject::invokeMethod(
            this, [this, id, window] { emit turnsCounted(id, {}, window); }, Qt::QueuedConnection);
        return id;
    }
    const quint64 id = nextId();
    post([id, roles, texts](EngineWorker& w) { w.countTurns(id, roles, texts); });
    return id;
}

quint64 EngineController::captureAttention(const QString& text, bool current_sequence, const QList<int>& layers)
{
    if (m_server)
        return refuseOnServer<AttentionSnapshot>(&EngineController::attentionReady, tr("Attention"));
    const quint64 id = nextId();
    post([id, text, current_sequence, layers, cancel = track(id)](EngineWorker& w) {
        w.captureAttention(id, text, current_sequence, layers, cancel);
    });
    return id;
}

quint64 EngineController::checkFit(std::vector<ChatTurn> turns, const SamplingSettings& sampling)
{
    if (m_server) { // the server applies its template and its own context policy
        const quint64 id = nextId();
        QMetaObject::invokeMethod(
            this, [this, id] { emit fitChecked(id, QString()); }, Qt::QueuedConnection);
        return id;
    }
    ChatRequest request;
    request.id = nextId();
    request.turns = std::move(turns);
    request.sampling = sampling;
    post([request](EngineWorker& w) { w.checkFit(request); });
    return request.id;
}

quint64 EngineController::runPatching(const PatchingSettings& settings)
{
    if (m_server)
        return refuseOnServer<PatchingSnapshot>(&EngineController::patchingReady, tr("Activation patching"));
    const quint64 id = nextId();
    post([id, settings, cancel = track(id)](EngineWorker& w) { w.runPatching(id, settings, cancel); });
    return id;
}

quint64 EngineController::runAttribution(const AttributionSettings& settings)
{
    if (m_server)
        return refuseOnServer<AttributionSnapshot>(&EngineController::attributionReady, tr("Attribution"));
    const quint64 id = nextId();
    post([id, settings, cancel = track(id)](EngineWorker& w) { w.runAttribution(id, settings, cancel); });
    return id;
}

quint64 EngineController::classifyHeads(int repeat, quint64 seed)
{
    if (m_server)
        return refuseOnServer<HeadsSnapshot>(&EngineController::headsReady, tr("Head classification"));
    const quint64 id = nextId();
    post([id, repeat, seed](EngineWorker& w) { w.classifyHeads(id, repeat, seed); });
    return id;
}

quint64 EngineController::scanAblations(const AblationSettings& settings)
{
    if (m_server)
        return refuseOnServer<AblationSnapshot>(&EngineController::ablationReady, tr("Ablation"));
    const quint64 id = nextId();
    post([id, settings, cancel = track(id)](EngineWorker& w) { w.scanAblations(id, settings, cancel); });
    return id;
}

quint64 EngineController::ablateHeads(const AblationSettings& settings)
{
    if (m_server)
        return refuseOnServer<AblationSnapshot>(&EngineController::ablationReady, tr("Ablation"));
    const quint64 id = nextId();
    post([id, settings](EngineWorker& w) { w.ablateHeads(id, settings); });
    return id;
}

quint64 EngineController::steer(const SteeringSettings& settings)
{
    if (m_server)
        return refuseOnServer<SteeringSnapshot>(&EngineController::steeringReady, tr("Steering"));
    const quint64 id = nextId();
    post([id, settings, cancel = track(id)](EngineWorker& w) { w.steer(id, settings, cancel); });
    return id;
}

quint64 EngineController::analyzeText(const QString& text, const QString& compare_with)
{
    if (m_server)
        return refuseOnServer<TextAnalysisSnapshot>(&EngineController::textAnalyzed,
                                                    tr("The text analysis (every position's logits)"));
    const quint64 id = nextId();
    post([id, text, compare_with, cancel = track(id)](EngineWorker& w) {
        w.analyzeText(id, text, compare_with, cancel);
    });
    return id;
}

void EngineController::setSteering(bool on, const SteeringSettings& settings)
{
    if (m_server) {
        const QString why = unavailableOnServer(tr("Steering"));
        QMetaObject::invokeMethod(
            this, [this, why] { emit steeringApplied(false, why); }, Qt::QueuedConnection);
        return;
    }
    post([on, settings](EngineWorker& w) { w.setSteering(on, settings); });
}

void EngineController::setAttentionWatched(bool watched)
{
    post([watched](EngineWorker& w) { w.setAttentionWatched(watched); });
}

void EngineController::resetConversation()
{
    post([](EngineWorker& w) { w.resetConversation(); });
}

} // namespace tokenscope::ui
