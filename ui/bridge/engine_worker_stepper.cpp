// SPDX-License-Identifier: GPL-3.0-or-later
// The decode stepper's side of the engine thread: Prefill, Step and Back on the engine's Stepper,
// each answered with one immutable StepperState.
#include "bridge/engine_worker.h"

#include "bridge/sampler_settings.h"
#include "bridge/token_text.h"
#include "model/model.h"
#include "session/generator.h"
#include "session/stepper.h"
#include "util/error.h"

#include <QElapsedTimer>
#include <spdlog/spdlog.h>

namespace tokenscope::ui {

namespace {

engine::SamplerConfig sampler_config(const StepperSettings& s)
{
    return ui::sampler_config(s.sampling, s.greedy);
}

engine::StopCondition stop_condition(const engine::Model& model, const StepperSettings& s)
{
    std::vector<std::string> stops;
    for (const QString& text : s.stop_strings)
        if (!text.isEmpty())
            stops.push_back(text.toStdString());
    return engine::StopCondition(model.tokenizer().vocab().end_of_generation,
                                 std::size_t(std::max(0, s.sampling.max_tokens)), std::move(stops));
}

} // namespace

void EngineWorker::emitStepperError(quint64 request_id, const QString& message)
{
    auto state = std::make_shared<StepperState>();
    state->request_id = request_id;
    state->action = "error";
    state->error = message;
    emit stepperState(std::move(state));
}

bool EngineWorker::stepperIsCurrent(quint64 request_id)
{
    if (!m_stepper || !m_stepper->started()) {
        emitStepperError(request_id, tr("Press Prefill first: the stepper needs a prompt."));
        return false;
    }
    activate(*m_stepper_session);
    return true;
}

void EngineWorker::stepperStart(quint64 request_id, const QString& prompt, const StepperSettings& settings,
                                CancelToken cancel, const std::vector<int32_t>& given)
{
    if (cancel->load()) { // stopped while it waited in the queue: nothing runs
        emitStepperError(request_id, tr("Prefill cancelled before it started."));
        return;
    }
    if (!m_session) {
        emitStepperError(request_id, tr("No model is loaded: open a GGUF file first."));
        return;
    }
    try {
        QElapsedTimer tokenize_timer;
        tokenize_timer.start();
        const auto ids = given.empty() ? m_model->tokenizer().encode_ids(prompt.toStdString()) : given;
        m_stepper_tokenize_ms = double(tokenize_timer.nsecsElapsed()) / 1e6;
        if ((given.empty() && prompt.trimmed().isEmpty()) || ids.empty()) {
            emitStepperError(request_id, tr("The prompt is empty: type some text to prefill."));
            return;
        }
        engine::Session& session = stepperSession();
        activate(session);
        if (!given.empty()) // a position of an analysed text: its probabilities as the analysis computed them
            session.truncate(0);
        if (!m_stepper)
            m_stepper = std::make_unique<engine::Stepper>(session);
        m_stepper->set_attention_capture(
            recordingRequest(uint32_t(ids.size()) + uint32_t(std::max(0, settings.sampling.max_tokens))));
        const auto report =
            m_stepper->start(ids, stop_condition(*m_model, settings), [&](uint32_t done, uint32_t total) {
                record();
                emit prefillProgress(request_id, int(done), int(total));
                return !cancel->load();
            });
        if (report.cancelled) {
            emitStepperError(request_id,
                             tr("Prefill cancelled after %1 of %2 tokens.").arg(report.computed).arg(ids.size()));
            return;
        }
        emitStepperState(request_id, "prefill", settings);
    } catch (const std::exception& e) {
        spdlog::warn("stepper prefill failed: {}", e.what());
        emitStepperError(request_id, QString::fromUtf8(e.what()));
    }
}

void EngineWorker::stepperStep(quint64 request_id, const StepperSettings& settings, int forced_token)
{
    if (!m_session || !stepperIsCurrent(request_id))
        return;
    try {
        std::optional<engine::TokenId> forced;
        if (forced_token >= 0)
            forced = forced_token;
        m_stepper->set_attention_capture(recordingRequest(uint32_t(m_stepper_session->tokens().size()) + 1));
        m_stepper->step(sampler_config(settings), forced);
        record();
        emitStepperState(request_id, "step", settings);
    } catch (const std::exception& e) {
        spdlog::warn("stepper step failed: {}", e.what());
        emitStepperError(request_id, QString::fromUtf8(e.what()));
    }
}

void EngineWorker::stepperBack(quint64 request_id, const StepperSettings& settings)
{
    if (!m_session || !stepperIsCurrent(request_id))
        return;
    try {
        m_stepper->set_attention_capture(recordingRequest(uint32_t(m_stepper_session->tokens().size())));
        if (!m_stepper->back()) {
            emitStepperError(request_id, tr("Only the prompt is left: there is no step to undo."));
            return;
        }
        record();
        emitStepperState(request_id, "back", settings);
    } catch (const std::exception& e) {
        emitStepperError(request_id, QString::fromUtf8(e.what()));
    }
}

void EngineWorker::emitStepperState(quint64 request_id, const QString& action, const StepperSettings& settings)
{
    const engine::Tokenizer& tokenizer = m_model->tokenizer();
    auto state = std::make_shared<StepperState>();
    state->request_id = request_id;
    state->action = action;
    const engine::Session& session = *m_stepper_session;
    const auto& tokens = session.tokens();
    state->prompt_length = int(m_stepper->prompt_length());
    state->steps = int(m_stepper->steps().size());
    state->tokens = tokensOf(tokens, state->prompt_length);
    for (const engine::StepRecord& r : m_stepper->steps())
        if (r.position < state->tokens.size()) {
            state->tokens[r.position].forced = r.forced;
            state->tokens[r.position].probability = r.probability;
        }
    const engine::PrefillReport& p = m_stepper->prefill_report();
    state->prefill_computed = int(p.computed);
    state->prefill_reused = int(p.reused);
    state->prefill_batches = p.computed ? int((p.computed + 127) / 128) : 0;
    state->prefill_ms = p.ms;

    const auto& config = m_model->config();
    const engine::KvAccounting kv = session.backend().kv_cache().accounting();
    state->n_layers = int(config.n_layer);
    state->n_kv_heads = config.n_head_kv.empty() ? 0 : int(config.n_head_kv.front());
    state->kv_tokens = int(kv.tokens_cached);
    state->kv_bytes_in_use = kv.bytes_in_use;
    for (const auto& layer : kv.layers)
        state->kv_layer_tokens.push_back(int(layer.tokens_in_use));
    for (uint32_t w : session.backend().kv_cache().config().window)
        state->layer_window.push_back(int(w));
    if (!m_stepper->steps().empty()) {
        state->last_reused = int(m_stepper->steps().back().reused);
        state->last_ms = m_stepper->steps().back().ms;
    }
    state->logits = std::make_shared<const std::vector<float>>(session.logits().begin(), session.logits().end());
    state->history.assign(tokens.begin(), tokens.end());
    state->tokenizer = std::shared_ptr<const engine::Tokenizer>(m_model, &m_model->tokenizer());
    if (settings.logit_lens)
        for (const engine::LensRow& row : m_stepper->logit_lens(std::size_t(std::max(1, settings.lens_top)))) {
            std::vector<LensCandidate> cells;
            for (const engine::Candidate& c : row.top)
                cells.push_back({c.id, token_display_text(tokenizer, c.id), c.probability});
            state->lens.push_back(std::move(cells));
        }
    for (const engine::StepperBranch& b : m_stepper->branches()) {
        QString text;
        for (engine::TokenId id : b.abandoned)
            text += token_display_text(tokenizer, id);
        const QString count = b.abandoned.size() == 1 ? tr("1 token") : tr("%1 tokens").arg(b.abandoned.size());
        state->branches << tr("at position %1: “%2” (%3)").arg(b.position).arg(text, count);
    }
    if (m_stepper->stop_reason() != engine::StopReason::None)
        state->stop_reason = QString::fromUtf8(engine::stop_reason_name(m_stepper->stop_reason()).data());
    state->generated_text = QString::fromStdString(m_stepper->generated_text());
    emit stepperState(std::move(state));
    emitKv("stepper", int(m_stepper->prompt_length()), int(p.reused));
    emitStepperTimeline();
}

} // namespace tokenscope::ui
