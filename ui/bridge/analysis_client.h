// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/analysis_types.h"
#include "bridge/engine_controller.h"
#include "bridge/engine_types.h"

#include "kv/kv_cache_types.h"

#include <QObject>
#include <memory>

namespace tokenscope::ui {

// Text through the model: its tokens (on the engine here, or by the server's tokenizer), and every
// token's surprisal, rank and entropy, alone or against a second model (here only: a server gives
// no logits for every position).
class AnalysisClient : public QObject {
    Q_OBJECT
public:
    class Source {
    public:
        virtual ~Source() = default;
        virtual quint64 tokenize(const QString& text) = 0;
        virtual quint64 analyzeText(const QString& text, const QString& compare_with) = 0;
        virtual quint64 analyzeKvCache(const QString& text, engine::KvCacheTypes types) = 0;
    };

    explicit AnalysisClient(EngineController& engine);
    ~AnalysisClient() override;

    // → tokenized (with an error when it could not be done)
    quint64 tokenize(const QString& text) { return source().tokenize(text); }
    // `compare_with`: a GGUF of the same vocabulary, or empty. → analysisProgress…, textAnalyzed (cancellable)
    quint64 analyzeText(const QString& text, const QString& compare_with = {})
    {
        return source().analyzeText(text, compare_with);
    }

    // The loaded model with an F16 cache against itself with `types` (a quantized cache), on the same
    // text: the comparison's KL per token is the damage the cache does. → analysisProgress…, textAnalyzed
    quint64 analyzeKvCache(const QString& text, engine::KvCacheTypes types)
    {
        return source().analyzeKvCache(text, types);
    }

signals:
    void tokenized(std::shared_ptr<const tokenscope::ui::Tokenization> result);
    void analysisProgress(quint64 request_id, int done, int total);
    void textAnalyzed(std::shared_ptr<const tokenscope::ui::TextAnalysisSnapshot> snapshot);

private:
    Source& source() const { return m_engine.remote() ? *m_remote : *m_local; }

    EngineController& m_engine;
    std::unique_ptr<Source> m_local;
    std::unique_ptr<Source> m_remote;
};

std::unique_ptr<AnalysisClient::Source> make_remote_analysis(AnalysisClient& client, EngineController& engine);

inline AnalysisClient& EngineController::analysis()
{
    return client<AnalysisClient>();
}

} // namespace tokenscope::ui
