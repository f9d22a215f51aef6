// SPDX-License-Identifier: GPL-3.0-or-later
// EngineController on a model served elsewhere: the probe that connects, and the summary the model
// bar shows. What each feature does over the connection is its remote implementation's business.
#include "bridge/engine_controller.h"

namespace tokenscope::ui {

namespace {

// A served model's id is often a path on the server; the file or repository name reads better.
QString model_display_name(const QString& id)
{
    const QString last = id.section('/', -1);
    return last.isEmpty() ? id : last;
}

std::shared_ptr<const ModelSummary> summary_of(const remote::ServerInfo& s)
{
    auto m = std::make_shared<ModelSummary>();
    m->remote = true;
    m->server_url = s.base.toString();
    m->server_kind = s.kind_name;
    m->path = s.base.toString() + " · " + s.model;
    m->name = model_display_name(s.model);
    m->architecture = s.kind_name;
    m->context_length = s.trained_context ? s.trained_context : s.context_length;
    m->n_ctx = s.context_length;
    m->backend = QObject::tr("Server: %1 at %2").arg(s.kind_name, s.base.toString());
    m->chat_format = QObject::tr("the server's own template");
    // The server applies its template and answers as a chat model; whether the model was
    // instruction-tuned is not something these APIs say.
    m->instruction_tuned = true;
    m->model_kind_reason = QObject::tr("the server answers through its own chat template");
    return m;
}

} // namespace

quint64 EngineController::connectServer(const remote::Endpoint& endpoint)
{
    if (m_probe_client) // a probe still on its way is replaced by this one
        m_network->cancel(std::exchange(m_probe_client, 0));
    m_requests.close(std::exchange(m_probe, 0));
    m_network->setEndpoint(endpoint);
    setBusy(true);
    const RequestBook::Ticket ticket = m_requests.open();
    m_probe = ticket.id;
    m_probe_client = m_network->probe();
    m_requests.onCancel(ticket.id, [this, client_id = m_probe_client] { m_network->cancel(client_id); });
    return ticket.id;
}

void EngineController::onProbed(quint64 client_id, std::shared_ptr<const remote::ServerInfo> server)
{
    if (client_id != m_probe_client || !m_probe_client)
        return;
    m_requests.close(std::exchange(m_probe, 0));
    m_probe_client = 0;
    m_server = server;
    m_model = summary_of(*server);
    setBusy(false);
    emit serverConnected(server);
    emit modelLoaded(m_model);
}

void EngineController::disconnectServer()
{
    if (!m_server)
        return;
    emit serverClosing(); // every feature's remote side ends its requests: nothing of this server reaches the next
    m_server.reset();
    m_model.reset();
    emit serverDisconnected();
}

} // namespace tokenscope::ui
