// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// The serving lab's workload sent to the connected server: each request at its arrival time (on a
// wall clock started with the run), never more than the limit in flight (the rest wait their turn,
// first come first served), streamed through the app's network client; /metrics read four times a
// second where the server has it. Lives on the UI thread (the network is asynchronous there); posts
// the run so far every 100 ms and once at the end. Stop cancels what is in flight and keeps the rest.
#include "remote/remote_client.h"
#include "serve/remote_serve.h"

#include <QElapsedTimer>
#include <QObject>
#include <QTimer>
#include <map>
#include <memory>

namespace tokenscope::ui {

class RemoteServingRun : public QObject {
    Q_OBJECT
public:
    RemoteServingRun(remote::Client& network, std::vector<engine::TextRequest> requests,
                     engine::RemoteServeLimits limits, QString server, QObject* parent = nullptr);
    void start();
    void cancel();
    bool finished() const { return m_finished; }

signals:
    void progressed(std::shared_ptr<const engine::RemoteServeResult> run);
    void done(std::shared_ptr<const engine::RemoteServeResult> run);

private:
    double now_s() const { return double(m_clock.nsecsElapsed()) / 1e9; }
    void tick();
    void send(std::size_t index);
    void onDelta(quint64 id);
    void onReply(const std::shared_ptr<const remote::StreamedReply>& reply);
    void onFailed(quint64 id, const QString& message);
    void end(std::size_t index);
    void post(bool last);

    remote::Client& m_network;
    engine::RemoteServeResult m_run;
    QElapsedTimer m_clock;
    QTimer m_timer;
    std::size_t m_next = 0;               // the next request to send, in arrival order
    std::map<quint64, std::size_t> m_ids; // in flight: the client's request id → request
    quint64 m_metrics_request = 0;
    double m_last_metrics = -1, m_last_post = -1;
    bool m_finished = false;
};

} // namespace tokenscope::ui
