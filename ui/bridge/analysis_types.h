// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// Text analysis and model comparison results as they cross from the engine thread (immutable).

#include <QMetaType>
#include <QString>
#include <QStringList>
#include <memory>
#include <vector>

namespace engine {
class Tokenizer;
}

namespace tokenscope::ui {

struct AnalyzedToken {
    int id = 0;
    QString text;           // as shown (visible whitespace)
    bool predicted = false; // false for the first token of a window
    double p = 0.0, surprisal_bits = 0.0, entropy_bits = 0.0;
    int rank = 0;
    std::vector<std::pair<QString, double>> top; // candidates and probabilities
    // comparison (when a second model was given)
    double kl = 0.0, reverse_kl = 0.0, p_b = 0.0;
    bool same_top = true;
    struct Candidate {
        int id = 0;
        QString text;
        double p_a = 0.0, p_b = 0.0;
    };
    std::vector<Candidate> candidates; // both models' top tokens with each one's probability
};

struct TextAnalysisSnapshot {
    quint64 request_id = 0;
    QString error;
    QString model_a; // the loaded model's file name
    QString model_b; // the second model's file name when compared
    int window = 0;  // tokens per window: each window is read from an empty cache
    std::vector<AnalyzedToken> tokens;
    double perplexity = 0.0;
    double mean_kl = 0.0, same_top = 0.0, rms_dp = 0.0; // comparison only
    bool compared = false, cancelled = false;
    double ms = 0.0;
    // The model's tokenizer (immutable, safe on any thread), for the prompt text of a linked stepper.
    std::shared_ptr<const engine::Tokenizer> tokenizer;
};

} // namespace tokenscope::ui

Q_DECLARE_METATYPE(std::shared_ptr<const tokenscope::ui::TextAnalysisSnapshot>)
