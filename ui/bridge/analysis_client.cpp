// SPDX-License-Identifier: GPL-3.0-or-later
// Text through the model on the engine here: its tokens with their byte spans, and the analysis (a
// CPU backend of its own, read in windows of 512 tokens; with a second model, the comparison
// position by position).
#include "bridge/analysis_client.h"

#include "analysis/text_analysis.h"
#include "bridge/token_text.h"
#include "model/model.h"
#include "util/error.h"

#include <QElapsedTimer>
#include <QFileInfo>
#include <optional>

namespace tokenscope::ui {

namespace {

std::shared_ptr<Tokenization> tokenize_text(EngineContext& context, const QString& text)
{
    context.requireModel();
    QElapsedTimer timer;
    timer.start();
    auto out = std::make_shared<Tokenization>();
    out->text = text;
    out->utf8 = text.toUtf8();
    const auto& tokenizer = context.model->tokenizer();
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
    return out;
}

// `compare_with`: a second model's file; `kv_compare`: instead, the loaded model itself with that
// cache (this run's own cache is F16 then, the base the damage is measured against).
std::shared_ptr<TextAnalysisSnapshot> analyze_text(EngineContext& context, const QString& text,
                                                   const QString& compare_with,
                                                   const std::function<bool(uint32_t, uint32_t)>& progress,
                                                   std::optional<engine::KvCacheTypes> kv_compare = std::nullopt)
{
    auto s = std::make_shared<TextAnalysisSnapshot>();
    try {
        if (!context.model)
            throw engine::Error(QObject::tr("No model is loaded: open a GGUF file first.").toStdString());
        QElapsedTimer timer;
        timer.start();
        const engine::Tokenizer& tok = context.model->tokenizer();
        const auto ids = tok.encode_ids(text.toStdString());
        // the second model first: a missing file or another vocabulary is said before any compute
        std::shared_ptr<const engine::Model> other;
        if (!compare_with.isEmpty()) {
            other = engine::Model::load(compare_with.toStdString());
            engine::check_same_vocabulary(tok, other->tokenizer());
        }
        if (kv_compare) {
            if (!kv_compare->quantized())
                throw engine::Error(QObject::tr("Choose a quantized cache (Q8_0 or Q4_0 keys or values) to measure "
                                                "against F16.")
                                        .toStdString());
            other = context.model;
        }
        constexpr uint32_t kWindow = 512;
        auto backend = engine::make_cpu_backend(context.model, context.cpuOptions(kWindow));
        // with a second model, one pass through both gives the comparison and this model's analysis
        engine::TextAnalysis a;
        std::optional<engine::ModelComparison> c;
        if (other) {
            engine::CpuBackendOptions options = context.cpuOptions(kWindow);
            options.kv_types = kv_compare.value_or(engine::KvCacheTypes{});
            auto b = engine::make_cpu_backend(other, options);
            c = engine::compare_models(*backend, *b, ids, progress, 5, &a);
        } else {
            a = engine::analyze_text(*backend, ids, 5, progress);
        }
        s->window = int(kWindow);
        s->model_a = QString::fromStdString(context.model->config().name.empty() ? "the loaded model"
                                                                                 : context.model->config().name);
        s->tokenizer = std::shared_ptr<const engine::Tokenizer>(context.model, &context.model->tokenizer());
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
            s->model_b =
                kv_compare
                    ? QObject::tr("%1 cache").arg(QString::fromStdString(engine::kv_cache_types_name(*kv_compare)))
                    : QFileInfo(compare_with).fileName();
            if (kv_compare)
                s->model_a = QObject::tr("F16 cache");
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
    return s;
}

// The analysis's progress, reported to the UI; false once the request is cancelled.
std::function<bool(uint32_t, uint32_t)> progress_of(AnalysisClient* client, const RequestBook::Ticket& ticket)
{
    return [client, id = ticket.id, cancel = ticket.cancel](uint32_t done, uint32_t total) {
        EngineController::toUi(client,
                               [client, id, done, total] { emit client->analysisProgress(id, int(done), int(total)); });
        return !cancel->load();
    };
}

class LocalAnalysis final : public AnalysisClient::Source {
public:
    LocalAnalysis(AnalysisClient& client, EngineController& engine) : m_client(client), m_engine(engine) {}

    quint64 tokenize(const QString& text) override
    {
        return m_engine.request(
            &m_client, &AnalysisClient::tokenized,
            [text](EngineContext& context, const RequestBook::Ticket&) { return tokenize_text(context, text); });
    }

    quint64 analyzeText(const QString& text, const QString& compare_with) override
    {
        AnalysisClient* client = &m_client;
        return m_engine.request(
            client, &AnalysisClient::textAnalyzed,
            [client, text, compare_with](EngineContext& context, const RequestBook::Ticket& ticket) {
                return analyze_text(context, text, compare_with, progress_of(client, ticket));
            });
    }

    quint64 analyzeKvCache(const QString& text, engine::KvCacheTypes types) override
    {
        AnalysisClient* client = &m_client;
        return m_engine.request(client, &AnalysisClient::textAnalyzed,
                                [client, text, types](EngineContext& context, const RequestBook::Ticket& ticket) {
                                    return analyze_text(context, text, {}, progress_of(client, ticket), types);
                                });
    }

private:
    AnalysisClient& m_client;
    EngineController& m_engine;
};

} // namespace

AnalysisClient::AnalysisClient(EngineController& engine)
    : m_engine(engine), m_local(std::make_unique<LocalAnalysis>(*this, engine)),
      m_remote(make_remote_analysis(*this, engine))
{
}

AnalysisClient::~AnalysisClient() = default;

} // namespace tokenscope::ui
