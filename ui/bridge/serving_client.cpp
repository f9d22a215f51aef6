// SPDX-License-Identifier: GPL-3.0-or-later
// The serving lab on the engine thread: the workload made with the model's tokenizer, then one run
// per batching mode on a CPU backend of its own (the only backend with multi-sequence passes), the
// run so far posted to the UI at most every 80 ms and after its last step.
#include "bridge/serving_client.h"

#include "backend/backend.h"
#include "bridge/serving_remote.h"
#include "model/model.h"
#include "util/error.h"

#include <chrono>

namespace tokenscope::ui {

std::shared_ptr<const ServingRunView> run_view(const engine::ServeRunResult& run)
{
    auto view = std::make_shared<ServingRunView>();
    view->mode = run.options.mode;
    view->requests = run.requests;
    view->steps = run.steps;
    view->pool = run.pool;
    view->clock_s = run.steps.empty() ? 0.0 : run.steps.back().end_s;
    return view;
}

ServingClient::ServingClient(EngineController& engine) : m_engine(engine)
{
    qRegisterMetaType<std::shared_ptr<const engine::RemoteServeResult>>();
}

void ServingClient::runOnServer(const engine::WorkloadSpec& workload, engine::RemoteServeLimits limits)
{
    const auto server = m_engine.server();
    if (!server)
        return emit serverRefused(tr("No server is connected (File → Connect to server…)."));
    if (m_remote_run)
        return emit serverRefused(tr("A run on the server is still going: stop it first."));
    std::vector<engine::TextRequest> requests;
    try {
        requests = engine::make_text_workload(workload);
        engine::check_remote_workload(requests, limits);
    } catch (const std::exception& e) {
        return emit serverRefused(QString::fromUtf8(e.what()));
    }
    auto* run = new RemoteServingRun(m_engine.network(), std::move(requests), limits,
                                     tr("%1 at %2").arg(server->kind_name, server->base.toString()), this);
    m_remote_run = run;
    connect(run, &RemoteServingRun::progressed, this, &ServingClient::serverProgress);
    connect(run, &RemoteServingRun::done, this, [this, run](std::shared_ptr<const engine::RemoteServeResult> r) {
        m_remote_run = nullptr;
        run->deleteLater();
        emit serverFinished(std::move(r));
    });
    run->start();
}

void ServingClient::stopServer()
{
    if (m_remote_run)
        m_remote_run->cancel();
}

quint64 ServingClient::run(const ServingSettings& settings)
{
    if (m_engine.remote())
        return m_engine.refuse(this, &ServingClient::servingFinished, tr("The serving lab"));
    ServingClient* client = this;
    return m_engine.request(
        client, &ServingClient::servingFinished,
        [client, settings](EngineContext& context, const RequestBook::Ticket& ticket) {
            context.requireModel();
            if (settings.modes.empty())
                throw engine::Error(tr("Choose at least one way of batching to run.").toStdString());
            auto s = std::make_shared<ServingSnapshot>();
            s->settings = settings;
            s->model = QString::fromStdString(context.model->config().name);
            const std::vector<engine::ServeRequest> requests =
                engine::make_workload(settings.workload, context.model->tokenizer());
            const engine::WorkloadRoom room = engine::room_for(requests, settings.options.block_tokens);
            engine::ServingOptions options = settings.options;
            options.n_ctx = room.longest;
            if (options.pool_blocks == 0) // room for every request at once
                options.pool_blocks = room.blocks;
            options.deterministic = options.deterministic || context.deterministic();
            engine::CpuBackendOptions cpu = context.cpuOptions(room.longest);
            cpu.batch_invariant = false; // each run's engine takes deterministic mode as its options say
            auto backend = engine::make_cpu_backend(context.model, cpu);
            s->backend = QString::fromStdString(backend->name());
            std::vector<std::shared_ptr<const engine::ServeRunResult>> finished;
            for (std::size_t i = 0; i < settings.modes.size() && !ticket.cancel->load(); ++i) {
                options.mode = settings.modes[i];
                auto steps = std::make_shared<std::vector<engine::ServeStep>>();
                auto last_post = std::chrono::steady_clock::now() - std::chrono::seconds(1);
                const auto progress = [&](const engine::ServingEngine& serving, const engine::ServeStep& step) {
                    steps->push_back(step);
                    const auto now = std::chrono::steady_clock::now();
                    const bool last = serving.done();
                    if (!last && now - last_post < std::chrono::milliseconds(80))
                        return;
                    last_post = now;
                    auto view = std::make_shared<ServingRunView>();
                    view->mode = options.mode;
                    view->requests = serving.requests();
                    view->steps = *steps;
                    view->pool = serving.pool_snapshot();
                    view->clock_s = step.end_s;
                    auto live = std::make_shared<ServingLive>();
                    live->request_id = ticket.id;
                    live->run_index = int(i);
                    live->runs = int(settings.modes.size());
                    live->total = int(view->requests.size());
                    for (const engine::RequestState& r : view->requests)
                        live->done += r.phase == engine::RequestPhase::Done;
                    live->run = std::move(view);
                    live->finished = finished;
                    EngineController::toUi(client, [client, live] { emit client->servingProgress(live); });
                };
                engine::ServeRunResult result =
                    engine::run_serving(*backend, options, requests, ticket.cancel.get(), progress);
                auto view = std::make_shared<ServingRunView>();
                view->mode = options.mode;
                view->requests = result.requests;
                view->steps = result.steps;
                view->pool = result.pool;
                view->clock_s = result.steps.empty() ? 0.0 : result.steps.back().end_s;
                s->cancelled = s->cancelled || result.cancelled;
                finished.push_back(std::make_shared<const engine::ServeRunResult>(result));
                s->runs.push_back(std::move(result));
                s->views.push_back(std::move(view));
            }
            s->cancelled = s->cancelled || ticket.cancel->load();
            return s;
        });
}

} // namespace tokenscope::ui
