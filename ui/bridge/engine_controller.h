// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/engine_context.h"
#include "bridge/engine_types.h"
#include "bridge/request_book.h"

#include "remote/remote_client.h"

#include <QMetaObject>
#include <QObject>
#include <QThread>
#include <map>
#include <memory>
#include <typeindex>

namespace tokenscope::ui {

class ChatClient;
class StepperClient;
class InspectionClient;
class LabClient;
class AnalysisClient;
class ServingClient;
class SpeculationClient;
class ExpertsClient;

// The UI's handle on the engine: the engine thread and what it holds, the model (loaded here or
// served elsewhere), the request ids and cancel tokens, and one client per feature (chat, stepper,
// inspection, lab, analysis). A feature client is what panels use: its requests go to its local
// implementation (work posted to the engine thread) or, while a server is connected, to its remote
// one (the server, or the reason a server cannot answer). Nothing here blocks on the engine; it
// shuts down with cancel → quit → wait.
class EngineController : public QObject {
    Q_OBJECT
public:
    explicit EngineController(QObject* parent = nullptr);
    ~EngineController() override;

    // backend: "cpu", "vulkan" or "auto", "vulkan-exact" / "auto-exact" for the Vulkan backend's
    // exact arithmetic, "cpu-plain" for llama.cpp's plain order or "cpu-deterministic" for batch-invariant sessions
    // (parse_backend_choice); device: a Vulkan device index, -1 for the best.
    quint64 loadModel(const QString& path, int threads = 0, quint32 n_ctx = 4096, const QString& backend = "cpu",
                      int device = -1);
    // The KV cache types the next loads use (F16, or llama.cpp's Q8_0 / Q4_0; the CPU backend only).
    void setKvCacheTypes(engine::KvCacheTypes types) { m_kv_types = types; }
    engine::KvCacheTypes kvCacheTypes() const { return m_kv_types; }
    void stop();                     // every outstanding cancellable request: a running one after its current token
    void cancel(quint64 request_id); // that request only
    void setLoadGate(std::shared_ptr<LoadGate> gate) { m_gate = std::move(gate); } // tests: goes with the next loads
    void probeMachine();
    // A model served elsewhere: from a successful probe on, every feature's requests go to its remote
    // implementation; loadModel() or disconnectServer() return to the local engine. → serverConnected
    // (then modelLoaded with a remote summary) or serverFailed.
    quint64 connectServer(const remote::Endpoint& endpoint);
    void disconnectServer();
    std::shared_ptr<const remote::ServerInfo> server() const { return m_server; }
    bool remote() const { return m_server != nullptr; }
    bool busy() const { return m_busy; }
    std::shared_ptr<const ModelSummary> model() const { return m_model; }
    // Requests that can still be cancelled (tests).
    std::size_t outstanding() const { return m_requests.outstanding(); }

    // The features (each defined inline in its own header).
    ChatClient& chat();
    StepperClient& stepper();
    InspectionClient& inspection();
    LabClient& lab();
    AnalysisClient& analysis();
    ServingClient& serving();
    SpeculationClient& speculation();
    ExpertsClient& experts();
    // Any feature client, made on first use with this controller.
    template <typename Client> Client& client();

    // --- For the feature clients ---------------------------------------------------------------
    RequestBook& requests() { return m_requests; }
    remote::Client& network() { return *m_network; }
    void setBusy(bool busy);
    // Runs `work(context)` on the engine thread, after the requests posted before it.
    template <typename Work> void post(Work work);
    // Runs `f` on the UI thread in `receiver`'s event queue (dropped if it is gone).
    template <typename F> static void toUi(QObject* receiver, F f)
    {
        QMetaObject::invokeMethod(receiver, std::move(f), Qt::QueuedConnection);
    }
    // The one way a request with a snapshot answer runs: `work(context, ticket)` on the engine thread
    // makes the snapshot (an exception becomes its error); on the UI thread the request closes and
    // `ready` is emitted on `client` with it.
    template <typename Snapshot, typename Client, typename Work>
    quint64 request(Client* client, void (Client::*ready)(std::shared_ptr<const Snapshot>), Work work);
    // Called from any thread: on the UI thread, request `s->request_id` closes and `ready` is emitted
    // on `client` with `s` (every snapshot answer ends this way).
    template <typename Snapshot, typename Client>
    void deliver(Client* client, void (Client::*ready)(std::shared_ptr<const Snapshot>),
                 std::shared_ptr<const Snapshot> s)
    {
        toUi(client, [this, client, ready, s] {
            m_requests.close(s->request_id);
            emit(client->*ready)(s);
        });
    }
    // Answers request `id` (queued, as the engine answers) with a snapshot carrying only `message`.
    template <typename Snapshot, typename Client>
    quint64 answer(Client* client, void (Client::*ready)(std::shared_ptr<const Snapshot>), quint64 id,
                   const QString& message);
    // A request that needs the model's weights or activations, made while a server is connected.
    template <typename Snapshot, typename Client>
    quint64 refuse(Client* client, void (Client::*ready)(std::shared_ptr<const Snapshot>), const QString& what)
    {
        return answer(client, ready, m_requests.next(), unavailableOnServer(what));
    }
    static QString unavailableOnServer(const QString& what);

signals:
    void loadProgress(int percent, const QString& what);
    void modelLoaded(std::shared_ptr<const tokenscope::ui::ModelSummary> summary);
    void loadFailed(const QString& message);
    void busyChanged(bool busy);
    void machineProbed(const tokenscope::ui::MachinePeaksUi& peaks);
    void serverConnected(std::shared_ptr<const tokenscope::remote::ServerInfo> server);
    void serverFailed(const QString& message);
    void serverDisconnected();
    // Emitted just before a connection ends (server() still set): remote implementations end their requests.
    void serverClosing();

private:
    void onProbed(quint64 id, std::shared_ptr<const remote::ServerInfo> server);

    QThread m_thread;
    QObject* m_engine_side = nullptr;   // lives on m_thread, owns the context; deleted there when it finishes
    EngineContext* m_context = nullptr; // touched only on m_thread
    RequestBook m_requests;
    std::shared_ptr<LoadGate> m_gate;
    engine::KvCacheTypes m_kv_types;
    std::shared_ptr<const ModelSummary> m_model;
    remote::Client* m_network = nullptr; // lives on the UI thread: the network is asynchronous
    std::shared_ptr<const remote::ServerInfo> m_server;
    quint64 m_probe = 0;        // the request id of the probe in progress
    quint64 m_probe_client = 0; // …and the network client's number for it
    std::map<std::type_index, std::unique_ptr<QObject>> m_clients;
    bool m_busy = false;
};

template <typename Client> Client& EngineController::client()
{
    auto& slot = m_clients[std::type_index(typeid(Client))];
    if (!slot)
        slot = std::make_unique<Client>(*this);
    return static_cast<Client&>(*slot);
}

template <typename Work> void EngineController::post(Work work)
{
    QMetaObject::invokeMethod(
        m_engine_side, [context = m_context, work = std::move(work)]() mutable { work(*context); },
        Qt::QueuedConnection);
}

template <typename Snapshot, typename Client, typename Work>
quint64 EngineController::request(Client* client, void (Client::*ready)(std::shared_ptr<const Snapshot>), Work work)
{
    const RequestBook::Ticket ticket = m_requests.open();
    post([this, client, ready, ticket, work = std::move(work)](EngineContext& context) mutable {
        std::shared_ptr<Snapshot> s;
        try {
            s = work(context, ticket);
        } catch (const std::exception& e) {
            s = std::make_shared<Snapshot>();
            s->error = QString::fromUtf8(e.what());
            if constexpr (requires { s->action; })
                s->action = "error";
        }
        s->request_id = ticket.id;
        deliver(client, ready, std::shared_ptr<const Snapshot>(std::move(s)));
    });
    return ticket.id;
}

template <typename Snapshot, typename Client>
quint64 EngineController::answer(Client* client, void (Client::*ready)(std::shared_ptr<const Snapshot>), quint64 id,
                                 const QString& message)
{
    auto s = std::make_shared<Snapshot>();
    s->request_id = id;
    s->error = message;
    if constexpr (requires { s->action; })
        s->action = "error";
    deliver(client, ready, std::shared_ptr<const Snapshot>(std::move(s)));
    return id;
}

} // namespace tokenscope::ui
