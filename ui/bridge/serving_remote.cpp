// SPDX-License-Identifier: GPL-3.0-or-later
#include "bridge/serving_remote.h"

namespace tokenscope::ui {

RemoteServingRun::RemoteServingRun(remote::Client& network, std::vector<engine::TextRequest> requests,
                                   engine::RemoteServeLimits limits, QString server, QObject* parent)
    : QObject(parent), m_network(network)
{
    m_run.server = server.toStdString();
    m_run.limits = limits;
    m_run.requests = std::move(requests);
    m_run.results.resize(m_run.requests.size());
    m_timer.setInterval(10);
    connect(&m_timer, &QTimer::timeout, this, &RemoteServingRun::tick);
    connect(&m_network, &remote::Client::delta, this, [this](quint64 id, const QString&) { onDelta(id); });
    connect(&m_network, &remote::Client::replyFinished, this, &RemoteServingRun::onReply);
    connect(&m_network, &remote::Client::failed, this, &RemoteServingRun::onFailed);
    connect(&m_network, &remote::Client::metricsRead, this, [this](quint64 id, const engine::remote::ServerMetrics& m) {
        if (id != m_metrics_request)
            return;
        m_metrics_request = 0;
        m_run.metrics.push_back({now_s(), m.running, m.waiting, m.kv_cache_usage});
    });
}

void RemoteServingRun::start()
{
    m_clock.start();
    m_timer.start();
    tick();
}

void RemoteServingRun::tick()
{
    if (m_finished)
        return;
    const double t = now_s();
    // Every request whose time has come, while there is room in flight.
    while (m_next < m_run.requests.size() && m_run.requests[m_next].arrival_s <= t &&
           m_run.in_flight < m_run.limits.max_concurrent)
        send(m_next++);
    const auto server = m_network.server();
    if (server && server->metrics && !m_metrics_request && (m_last_metrics < 0 || t - m_last_metrics >= 0.25)) {
        m_last_metrics = t;
        m_metrics_request = m_network.metrics();
    }
    if (m_last_post < 0 || t - m_last_post >= 0.1)
        post(false);
}

void RemoteServingRun::send(std::size_t index)
{
    const engine::TextRequest& r = m_run.requests[index];
    engine::SamplingSettings s;
    s.temperature = r.temperature;
    s.top_k = 0;
    s.top_p = 1.0f;
    s.min_p = 0.0f;
    s.seed = r.seed;
    s.max_tokens = int32_t(r.max_new_tokens);
    engine::remote::SamplingRequest request = engine::remote::sampling_request(s, r.temperature <= 0.0f);
    if (const auto server = m_network.server())
        request.model = server->model.toStdString();
    m_run.results[index].sent_s = now_s();
    ++m_run.in_flight;
    m_run.max_in_flight = std::max(m_run.max_in_flight, m_run.in_flight);
    // the client answers a failure to send on the next turn of the event loop, never inside this call
    m_ids[m_network.complete(QString::fromStdString(r.prompt), request)] = index;
}

void RemoteServingRun::onDelta(quint64 id)
{
    const auto it = m_ids.find(id);
    if (it == m_ids.end())
        return;
    engine::RemoteRequestResult& r = m_run.results[it->second];
    const double t = now_s();
    if (r.first_token_s < 0)
        r.first_token_s = t;
    r.token_s.push_back(t);
}

void RemoteServingRun::onReply(const std::shared_ptr<const remote::StreamedReply>& reply)
{
    const auto it = m_ids.find(reply->id);
    if (it == m_ids.end())
        return;
    const std::size_t index = it->second;
    m_ids.erase(it);
    engine::RemoteRequestResult& r = m_run.results[index];
    r.tokens = reply->usage && reply->usage->completion_tokens > 0 ? uint32_t(reply->usage->completion_tokens)
                                                                   : uint32_t(reply->chunks);
    r.finish_reason = reply->finish_reason.toStdString();
    if (reply->cut_off || reply->cancelled)
        r.error =
            reply->error.isEmpty() ? "the stream ended before the server said it was done" : reply->error.toStdString();
    end(index);
}

void RemoteServingRun::onFailed(quint64 id, const QString& message)
{
    if (id == m_metrics_request) { // a server may stop answering /metrics: the requests go on
        m_metrics_request = 0;
        return;
    }
    const auto it = m_ids.find(id);
    if (it == m_ids.end())
        return;
    const std::size_t index = it->second;
    m_ids.erase(it);
    m_run.results[index].error = message.isEmpty() ? "the request failed" : message.toStdString();
    end(index);
}

void RemoteServingRun::end(std::size_t index)
{
    m_run.results[index].done_s = now_s();
    --m_run.in_flight;
    std::size_t ended = 0;
    for (const auto& r : m_run.results)
        ended += r.done();
    if (ended == m_run.results.size()) {
        m_finished = true;
        m_timer.stop();
        post(true);
        return;
    }
    tick(); // room for the next one
}

void RemoteServingRun::cancel()
{
    if (m_finished)
        return;
    m_finished = true;
    m_timer.stop();
    m_run.cancelled = true;
    for (const auto& [id, index] : m_ids) {
        m_network.cancel(id);
        m_run.results[index].error = "stopped";
        m_run.results[index].done_s = now_s();
    }
    m_ids.clear();
    m_run.in_flight = 0;
    post(true);
}

void RemoteServingRun::post(bool last)
{
    m_last_post = now_s();
    auto snapshot = std::make_shared<engine::RemoteServeResult>(m_run);
    engine::summarize_remote_run(*snapshot);
    if (last)
        emit done(std::move(snapshot));
    else
        emit progressed(std::move(snapshot));
}

} // namespace tokenscope::ui
