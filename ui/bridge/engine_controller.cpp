// SPDX-License-Identifier: GPL-3.0-or-later
#include "bridge/engine_controller.h"

#include "backend/backend.h"
#include "backend/backend_factory.h"
#include "bridge/inspection_client.h"
#include "chat/chat_prompt.h"
#include "chat/chat_template.h"
#include "model/memory_plan.h"
#include "model/model.h"
#include "model/model_kind.h"
#include "model/quant_mix.h"
#include "quant/vec_dot.h"
#include "session/session.h"
#include "util/machine_probe.h"

#include <QFileInfo>
#include <spdlog/spdlog.h>

namespace tokenscope::ui {

namespace {

// The engine thread's object: requests run in its event queue; it owns the context and is deleted
// on that thread when the thread finishes (backends are released where they were made).
class EngineSide : public QObject {
public:
    explicit EngineSide(InspectionClient* views) : context(views) {}
    EngineContext context;
};

// What the model bar and every panel read about a loaded model.
std::shared_ptr<ModelSummary> summary_of(const engine::Model& model, const engine::Backend& backend,
                                         const QString& path, int threads, const std::string& fallback,
                                         bool deterministic)
{
    auto summary = std::make_shared<ModelSummary>();
    const auto& c = model.config();
    summary->path = path;
    summary->name = QString::fromStdString(c.name.empty() ? QFileInfo(path).completeBaseName().toStdString() : c.name);
    summary->architecture = QString::fromStdString(c.architecture);
    summary->parameters = model.parameter_count();
    summary->active_parameters = model.active_parameter_count();
    summary->n_expert = int(c.n_expert);
    summary->n_expert_used = int(c.n_expert_used);
    summary->file_size = model.file().file_size();
    summary->quant_types = QString::fromStdString(engine::quant_mix(model));
    summary->context_length = c.n_ctx_train;
    summary->n_ctx = backend.kv_cache().config().n_ctx;
    summary->backend = QString::fromStdString(backend.name());
    if (backend.kind() == "cpu")
        summary->backend += " " + QString::fromUtf8(engine::simd_level_name(engine::simd_level()).data()) +
                            (deterministic ? QObject::tr(", deterministic") : QString());
    summary->backend_note = QString::fromStdString(fallback);
    summary->threads = threads;
    summary->n_layers = int(c.n_layer);
    const engine::ChatStyle style = engine::model_chat_style(model);
    summary->chat_format = QString::fromStdString(engine::chat_style_description(style));
    summary->chat_template_notice = QString::fromStdString(style.notice);
    const engine::ModelKindVerdict tuning = engine::model_kind_verdict(model.file());
    summary->instruction_tuned = tuning.kind == engine::ModelKind::Instruct;
    summary->model_kind_reason = QString::fromStdString(tuning.reason);
    return summary;
}

} // namespace

EngineController::EngineController(QObject* parent) : QObject(parent)
{
    m_thread.setObjectName("engine");
    m_network = new remote::Client(this); // before any feature client: their remote sides listen to it
    auto* side = new EngineSide(&inspection());
    m_context = &side->context;
    m_engine_side = side;
    m_engine_side->moveToThread(&m_thread);
    connect(&m_thread, &QThread::finished, m_engine_side, &QObject::deleteLater);
    connect(m_network, &remote::Client::probed, this, &EngineController::onProbed);
    connect(m_network, &remote::Client::failed, this, [this](quint64 client_id, const QString& message) {
        if (client_id != m_probe_client || !m_probe_client)
            return;
        m_requests.close(std::exchange(m_probe, 0));
        m_probe_client = 0;
        setBusy(false);
        emit serverFailed(message);
    });
    m_thread.start();
}

EngineController::~EngineController()
{
    stop(); // a running request ends at its next check, the queued ones without running
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

void EngineController::stop()
{
    m_requests.cancelAll();
}

void EngineController::cancel(quint64 request_id)
{
    m_requests.cancel(request_id);
}

QString EngineController::unavailableOnServer(const QString& what)
{
    return tr("%1 needs the model's weights and activations, which a server does not expose: not available "
              "on a server connection (File → Open model… to run a model here)")
        .arg(what);
}

void EngineController::probeMachine()
{
    post([this](EngineContext& context) {
        const engine::MachinePeaks p = engine::probe_machine(context.threads > 0 ? context.threads : 0);
        spdlog::info("machine probe: {:.2f} GB/s read, {:.1f} GFLOP/s ({} threads, {})", p.read_bytes_per_second / 1e9,
                     p.flops_per_second / 1e9, p.threads, p.simd);
        const MachinePeaksUi peaks{p.read_bytes_per_second, p.flops_per_second, p.threads,
                                   QString::fromStdString(p.simd)};
        toUi(this, [this, peaks] { emit machineProbed(peaks); });
    });
}

quint64 EngineController::loadModel(const QString& path, int threads, quint32 n_ctx, const QString& backend_name,
                                    int device)
{
    disconnectServer(); // a model here replaces the served one
    const RequestBook::Ticket ticket = m_requests.open();
    setBusy(true);
    // On the UI thread, once: the load's end closes its request.
    const auto failed = [this, id = ticket.id](const QString& message) {
        toUi(this, [this, id, message] {
            m_requests.close(id);
            setBusy(false);
            emit loadFailed(message);
        });
    };
    const auto progress = [this](int percent, const QString& what) {
        toUi(this, [this, percent, what] { emit loadProgress(percent, what); });
    };
    post([=, this, gate = m_gate, kv_types = m_kv_types](EngineContext& context) {
        const CancelToken& cancel = ticket.cancel;
        if (cancel->load())
            return failed(tr("Loading was cancelled."));
        progress(5, tr("Opening %1").arg(QFileInfo(path).fileName()));
        try {
            // Before any weights are touched: would it fit in memory at this context?
            const engine::MemoryPlan plan = engine::plan_memory(path.toStdString(), n_ctx);
            if (!plan.fits) {
                spdlog::warn("refusing to load {}: {}", path.toStdString(), plan.message);
                return failed(QString::fromStdString(plan.message));
            }
            auto model = engine::Model::load(path.toStdString());
            progress(50, tr("Read %1 tensors").arg(model->file().tensors().size()));
            if (gate) {
                gate->reached();
                gate->wait();
            }
            if (cancel->load()) {
                spdlog::info("load of {} cancelled", path.toStdString());
                return failed(tr("Loading was cancelled.")); // the partly loaded model is released here
            }
            const engine::BackendChoice choice =
                engine::parse_backend_choice(backend_name.toStdString()).value_or(engine::BackendChoice{});
            progress(60, choice.kind == engine::BackendKind::Cpu ? tr("Preparing the CPU backend")
                                                                 : tr("Preparing the %1 backend").arg(backend_name));
            std::string fallback;
            auto backend =
                engine::make_backend(choice.kind, model, n_ctx, threads, &fallback, device, choice.vulkan_exact,
                                     choice.cpu_order, kv_types, choice.flash_attention);
            std::shared_ptr<const ModelSummary> summary =
                summary_of(*model, *backend, path, threads, fallback, choice.deterministic && backend->kind() == "cpu");
            // Prefill in batches of 128 positions: Stop is honoured between batches (the summation
            // order, and so the numbers, are those of any batch of 8 or more).
            auto session = std::make_unique<engine::Session>(model, std::move(backend), 128);
            session->set_batch_invariant(choice.deterministic);
            context.replaceModel(std::move(model), std::move(session), threads, summary->n_ctx, backend_name, device);
            context.kv_types = kv_types;
            progress(100, tr("Ready"));
            spdlog::info("loaded {} ({})", path.toStdString(), summary->backend.toStdString());
            toUi(this, [this, id = ticket.id, summary] {
                m_requests.close(id);
                m_model = summary;
                setBusy(false);
                emit modelLoaded(summary);
            });
            context.publishKv("load", 0, 0);
        } catch (const std::exception& e) {
            spdlog::warn("load failed: {}", e.what());
            failed(QString::fromUtf8(e.what()));
        }
    });
    return ticket.id;
}

} // namespace tokenscope::ui
