// SPDX-License-Identifier: GPL-3.0-or-later
#include "bridge/engine_worker.h"

#include "backend/backend.h"
#include "backend/backend_factory.h"
#include "bridge/sampler_settings.h"
#include "bridge/token_text.h"
#include "chat/chat_prompt.h"
#include "chat/chat_template.h"
#include "chat/context_policy.h"
#include "model/forward_cost.h"
#include "model/memory_plan.h"
#include "model/model.h"
#include "model/model_kind.h"
#include "model/quant_mix.h"
#include "quant/vec_dot.h"
#include "session/generator.h"
#include "session/stepper.h"
#include "util/error.h"

#include <QElapsedTimer>
#include <QFileInfo>
#include <map>
#include <spdlog/spdlog.h>

namespace tokenscope::ui {

namespace {

// The chat reply's timeline as the panel draws it, with each forward pass's work (for achieved
// FLOP/s and bytes/s).
std::shared_ptr<TimelineSnapshot> timeline_of(const engine::GenerationTrace& trace, const engine::Model& model,
                                              bool live)
{
    auto t = std::make_shared<TimelineSnapshot>();
    t->source = "chat";
    t->live = live;
    for (const engine::TimelineEvent& e : trace.events)
        t->events.push_back({int(e.stage), e.step, e.begin_ns, e.end_ns});
    t->tokenize_ms = trace.tokenize_ms;
    t->prefill_ms = trace.prefill.ms;
    t->prompt_tokens = int(trace.prompt_tokens);
    t->prefill_computed = int(trace.prefill.computed);
    const engine::ForwardCost prefill = engine::forward_cost(model, trace.prefill.computed, trace.prefill.reused);
    t->prefill_flops = prefill.flops;
    t->prefill_bytes = prefill.weight_bytes + prefill.kv_bytes_read;
    t->ttft_ms = trace.ttft_ms;
    for (std::size_t i = 0; i < trace.steps.size(); ++i) {
        const engine::StepTrace& s = trace.steps[i];
        TimelineStepUi u;
        u.token = s.token;
        u.text = token_display_text(model.tokenizer(), s.token);
        u.forward_ms = s.ms;
        u.sample_ms = s.sample_ms;
        u.detokenize_ms = s.detokenize_ms;
        u.latency_ms = s.latency_ms;
        if (i > 0) { // the pass that forwarded token i − 1 at position prompt + i − 1
            const engine::ForwardCost c = engine::forward_cost(model, 1, trace.prompt_tokens + uint32_t(i) - 1);
            u.flops = c.flops;
            u.bytes_read = c.weight_bytes + c.kv_bytes_read;
        }
        t->steps.push_back(std::move(u));
    }
    return t;
}

std::vector<engine::ChatMessage> to_messages(const std::vector<ChatTurn>& turns)
{
    std::vector<engine::ChatMessage> out;
    for (const auto& t : turns)
        out.push_back({t.role.toStdString(), t.content.toStdString()});
    return out;
}

} // namespace

EngineWorker::EngineWorker() = default;

EngineWorker::~EngineWorker() = default;

void EngineWorker::loadModel(const QString& path, int threads, quint32 n_ctx, const QString& backend_name, int device,
                             CancelToken cancel, std::shared_ptr<LoadGate> gate)
{
    if (cancel->load()) {
        emit loadFailed(tr("Loading was cancelled."));
        return;
    }
    emit loadProgress(5, tr("Opening %1").arg(QFileInfo(path).fileName()));
    try {
        // Before any weights are touched: would it fit in memory at this context?
        const engine::MemoryPlan plan = engine::plan_memory(path.toStdString(), n_ctx);
        if (!plan.fits) {
            spdlog::warn("refusing to load {}: {}", path.toStdString(), plan.message);
            emit loadFailed(QString::fromStdString(plan.message));
            return;
        }
        auto model = engine::Model::load(path.toStdString());
        emit loadProgress(50, tr("Read %1 tensors").arg(model->file().tensors().size()));
        if (gate) {
            gate->reached();
            gate->wait();
        }
        if (cancel->load()) {
            spdlog::info("load of {} cancelled", path.toStdString());
            emit loadFailed(tr("Loading was cancelled."));
            return; // the partly loaded model is released here
        }
        const engine::BackendChoice choice =
            engine::parse_backend_choice(backend_name.toStdString()).value_or(engine::BackendChoice{});
        const engine::BackendKind kind = choice.kind;
        emit loadProgress(60, kind == engine::BackendKind::Cpu ? tr("Preparing the CPU backend")
                                                               : tr("Preparing the %1 backend").arg(backend_name));
        std::string fallback;
        auto backend = engine::make_backend(kind, model, n_ctx, threads, &fallback, device, choice.vulkan_exact);
        auto summary = std::make_shared<ModelSummary>();
        const auto& c = model->config();
        summary->path = path;
        summary->name =
            QString::fromStdString(c.name.empty() ? QFileInfo(path).completeBaseName().toStdString() : c.name);
        summary->architecture = QString::fromStdString(c.architecture);
        summary->parameters = model->parameter_count();
        summary->file_size = model->file().file_size();
        summary->quant_types = QString::fromStdString(engine::quant_mix(*model));
        summary->context_length = c.n_ctx_train;
        summary->n_ctx = backend->kv_cache().config().n_ctx;
        summary->backend = QString::fromStdString(backend->name());
        if (backend->name().rfind("CPU", 0) == 0)
            summary->backend += " " + QString::fromUtf8(engine::simd_level_name(engine::simd_level()).data());
        summary->backend_note = QString::fromStdString(fallback);
        summary->threads = threads;
        summary->n_layers = int(c.n_layer);
        const engine::ChatStyle style = engine::model_chat_style(*model);
        summary->chat_format = QString::fromStdString(engine::chat_style_description(style));
        summary->chat_template_notice = QString::fromStdString(style.notice);
        const engine::ModelKindVerdict tuning = engine::model_kind_verdict(model->file());
        summary->instruction_tuned = tuning.kind == engine::ModelKind::Instruct;
        summary->model_kind_reason = QString::fromStdString(tuning.reason);
        // Prefill in batches of 128 positions: Stop is honoured between batches (the summation
        // order, and so the numbers, are those of any batch of 8 or more).
        m_stepper.reset(); // it refers to the session being replaced
        m_stepper_session.reset();
        m_attention_session.reset();
        m_lab_backend.reset();
        m_steering = false; // the new sessions are not steered
        m_recorder.clear();
        m_session = std::make_unique<engine::Session>(model, std::move(backend), 128);
        m_active = m_session.get();
        m_model = std::move(model);
        m_threads = threads;
        m_n_ctx = summary->n_ctx;
        m_backend_name = backend_name;
        m_device = device;
        emit loadProgress(100, tr("Ready"));
        spdlog::info("loaded {} ({})", path.toStdString(), summary->backend.toStdString());
        emit modelLoaded(std::move(summary));
        emitKv("load", 0, 0);
    } catch (const std::exception& e) {
        spdlog::warn("load failed: {}", e.what());
        emit loadFailed(QString::fromUtf8(e.what()));
    }
}

namespace {

// What the user should read about a prompt: the context policy's message and, when the model's own
// template could not render it, which layout was used instead and why.
std::string prompt_notice(const engine::ChatPrompt& chat)
{
    if (chat.template_notice.empty())
        return chat.fit.notice;
    if (chat.fit.notice.empty())
        return chat.template_notice;
    return chat.fit.notice + "\n" + chat.template_notice;
}

} // namespace

void EngineWorker::checkFit(const ChatRequest& request)
{
    if (!m_model)
        return;
    const auto chat = engine::build_chat_prompt(*m_model, to_messages(request.turns), m_n_ctx,
                                                size_t(std::max(16, request.sampling.max_tokens)));
    emit fitChecked(request.id, QString::fromStdString(prompt_notice(chat)));
}

void EngineWorker::tokenize(quint64 request_id, const QString& text)
{
    if (!m_model)
        return;
    QElapsedTimer timer;
    timer.start();
    auto out = std::make_shared<Tokenization>();
    out->request_id = request_id;
    out->text = text;
    out->utf8 = text.toUtf8();
    const auto& tokenizer = m_model->tokenizer();
    for (const engine::Token& t :
         tokenizer.encode(std::string_view(out->utf8.constData(), std::size_t(out->utf8.size())))) {
        TokenSpan span;
        span.id = t.id;
        span.begin = int(t.byte_begin);
        span.end = int(t.byte_end);
        span.piece = QString::fromStdString(tokenizer.vocab().tokens[std::size_t(t.id)]);
        span.type = QString::fromUtf8(engine::token_type_name(tokenizer.vocab().type_of(t.id)).data());
        out->tokens.push_back(std::move(span));
    }
    out->ms = double(timer.nsecsElapsed()) / 1e6;
    emit tokenized(std::move(out));
}

void EngineWorker::resetConversation()
{
    if (m_session) {
        m_session->truncate(0);
        activate(*m_session);
        m_recorder.clear();
        emitKv("reset", 0, 0);
    }
}

void EngineWorker::activate(engine::Session& session)
{
    if (m_active != &session) {
        m_recorder.clear(); // the recording was of the other sequence
        m_active = &session;
    }
}

engine::Session& EngineWorker::stepperSession()
{
    if (!m_stepper_session) {
        const engine::BackendChoice choice =
            engine::parse_backend_choice(m_backend_name.toStdString()).value_or(engine::BackendChoice{});
        std::string fallback;
        auto backend =
            engine::make_backend(choice.kind, m_model, m_n_ctx, m_threads, &fallback, m_device, choice.vulkan_exact);
        spdlog::info("stepper: a session of its own on {}", backend->name());
        m_stepper_session = std::make_unique<engine::Session>(m_model, std::move(backend), 128);
    }
    return *m_stepper_session;
}

void EngineWorker::generateReply(const ChatRequest& request, CancelToken cancel)
{
    if (!m_session) {
        emit replyFailed(request.id, tr("No model is loaded: open a GGUF file first."));
        return;
    }
    emit replyStarted(request.id);
    activate(*m_session);
    if (cancel->load()) { // stopped while it waited in the queue: nothing runs
        auto stats = std::make_shared<ReplyStats>();
        stats->request_id = request.id;
        stats->cancelled = true;
        stats->stop_reason = tr("stopped by you");
        emit replyFinished(std::move(stats));
        return;
    }
    try {
        const auto& tokenizer = m_model->tokenizer();
        const int reserve = std::max(16, request.sampling.max_tokens);
        const engine::ChatPrompt chat =
            engine::build_chat_prompt(*m_model, to_messages(request.turns), m_n_ctx, size_t(reserve));
        const engine::FitResult& fit = chat.fit;
        if (!fit.fits) {
            emit replyFailed(request.id, QString::fromStdString(fit.notice));
            return;
        }
        const std::string& prompt = chat.text;

        engine::Sampler sampler(sampler_config(request.sampling));
        engine::GenerationOptions options;
        options.max_tokens = static_cast<uint32_t>(request.sampling.max_tokens);
        options.stop_strings = chat.stop_strings;
        options.cancel = cancel.get();
        options.on_prefill_progress = [&](uint32_t done, uint32_t total) {
            record();
            emit prefillProgress(request.id, int(done), int(total));
        };
        // The attention explorer's recording: every prefill batch and decode step of this reply.
        options.capture = &recordingRequest(uint32_t(fit.prompt_tokens) + uint32_t(request.sampling.max_tokens));
        // Live views: the KV gauges after every token, the timeline a few times a second.
        QElapsedTimer since_timeline;
        since_timeline.start();
        options.on_step = [&](const engine::StepTrace&, const engine::GenerationTrace& so_far) {
            record();
            m_last_prompt_tokens = int(so_far.prompt_tokens);
            emitKv("chat", int(so_far.prompt_tokens), int(so_far.prefill.reused));
            if (since_timeline.elapsed() >= 200) {
                emit timelineChanged(timeline_of(so_far, *m_model, true));
                since_timeline.restart();
            }
        };
        const engine::GenerationTrace trace =
            engine::generate(*m_session, sampler, prompt, options, [&](std::string_view delta) {
                emit replyDelta(request.id, QString::fromUtf8(delta.data(), qsizetype(delta.size())));
            });

        m_last_prompt_tokens = int(trace.prompt_tokens);
        emitKv("chat", int(trace.prompt_tokens), int(trace.prefill.reused));
        if (!trace.events.empty())
            emit timelineChanged(timeline_of(trace, *m_model, false));

        auto stats = std::make_shared<ReplyStats>();
        stats->request_id = request.id;
        stats->prompt_tokens = int(trace.prompt_tokens);
        stats->reused_tokens = int(trace.prefill.reused);
        stats->computed_tokens = int(trace.prefill.computed);
        stats->generated_tokens = int(trace.steps.size());
        stats->ttft_ms = trace.ttft_ms;
        stats->tokens_per_second = trace.decode_tokens_per_second();
        stats->cancelled = trace.cancelled;
        stats->stop_reason =
            stats->cancelled ? tr("stopped by you") : QString::fromUtf8(engine::stop_reason_name(trace.stop).data());
        stats->prompt_text = QString::fromStdString(prompt);
        for (engine::TokenId id : trace.prompt_ids) // as the model received them, not tokenized again
            stats->prompt_pieces << token_display_text(tokenizer, id); // as every other view shows tokens
        stats->notice = QString::fromStdString(prompt_notice(chat));
        stats->attention_bytes = m_recorder.bytes();
        emit replyFinished(std::move(stats));
    } catch (const std::exception& e) {
        spdlog::warn("generation failed: {}", e.what());
        emit replyFailed(request.id, QString::fromUtf8(e.what()));
    }
}

} // namespace tokenscope::ui
