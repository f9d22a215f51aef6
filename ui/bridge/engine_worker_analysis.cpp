// SPDX-License-Identifier: GPL-3.0-or-later
// Any text through the loaded model on the engine thread (a CPU backend of its own, read in
// windows of 512 tokens): every token's surprisal, rank and entropy; with a second model, the
// comparison position by position.
#include "bridge/engine_worker.h"

#include "analysis/text_analysis.h"
#include "bridge/token_text.h"
#include "model/model.h"
#include "util/error.h"

#include <QElapsedTimer>
#include <QFileInfo>
#include <optional>

namespace tokenscope::ui {

void EngineWorker::analyzeText(quint64 request_id, const QString& text, const QString& compare_with, CancelToken cancel)
{
    auto s = std::make_shared<TextAnalysisSnapshot>();
    s->request_id = request_id;
    try {
        if (!m_model)
            throw engine::Error(tr("No model is loaded: open a GGUF file first.").toStdString());
        QElapsedTimer timer;
        timer.start();
        const engine::Tokenizer& tok = m_model->tokenizer();
        const auto ids = tok.encode_ids(text.toStdString());
        // the second model first: a missing file or another vocabulary is said before any compute
        std::shared_ptr<const engine::Model> other;
        if (!compare_with.isEmpty()) {
            other = engine::Model::load(compare_with.toStdString());
            engine::check_same_vocabulary(tok, other->tokenizer());
        }
        constexpr uint32_t kWindow = 512;
        auto backend = engine::make_cpu_backend(m_model, {.threads = m_threads, .n_ctx = kWindow});
        const auto progress = [&](uint32_t done, uint32_t total) {
            emit labProgress(request_id, int(done), int(total));
            return !cancel->load();
        };
        // with a second model, one pass through both gives the comparison and this model's analysis
        engine::TextAnalysis a;
        std::optional<engine::ModelComparison> c;
        if (other) {
            auto b = engine::make_cpu_backend(other, {.threads = m_threads, .n_ctx = kWindow});
            c = engine::compare_models(*backend, *b, ids, progress, 5, &a);
        } else {
            a = engine::analyze_text(*backend, ids, 5, progress);
        }
        s->window = int(kWindow);
        s->model_a =
            QString::fromStdString(m_model->config().name.empty() ? "the loaded model" : m_model->config().name);
        s->tokenizer = std::shared_ptr<const engine::Tokenizer>(m_model, &m_model->tokenizer());
        s->cancelled = a.cancelled;
        s->perplexity = a.perplexity;
        s->tokens.resize(ids.size());
        for (std::size_t i = 0; i < ids.size(); ++i) {
            s->tokens[i].id = ids[i];
            s->tokens[i].text = token_display_text(tok, ids[i]);
        }
        for (const engine::TokenPrediction& p : a.predictions) {
            AnalyzedToken& t = s->tokens[p.position];
            t.predicted = true;
            t.p = p.p;
            t.surprisal_bits = p.surprisal_bits;
            t.entropy_bits = p.entropy_bits;
            t.rank = int(p.rank);
            for (const auto& [id, prob] : p.top)
                t.top.emplace_back(token_display_text(tok, id), double(prob));
        }
        if (c) {
            s->compared = !c->cancelled;
            s->model_b = QFileInfo(compare_with).fileName();
            s->mean_kl = c->mean_kl;
            s->same_top = c->same_top;
            s->rms_dp = c->rms_dp;
            for (const engine::PositionComparison& p : c->positions) {
                AnalyzedToken& t = s->tokens[p.position];
                t.kl = p.kl;
                t.reverse_kl = p.reverse_kl;
                t.p_b = p.p_b;
                t.same_top = p.same_top;
                for (const auto& cand : p.candidates)
                    t.candidates.push_back({int(cand.id), token_display_text(tok, cand.id), cand.p_a, cand.p_b});
            }
        }
        s->ms = double(timer.nsecsElapsed()) / 1e6;
    } catch (const std::exception& e) {
        s->error = QString::fromUtf8(e.what());
    }
    emit textAnalyzed(std::move(s));
}

} // namespace tokenscope::ui
