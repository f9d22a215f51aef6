// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// Any text through the model: one pass with every position's logits, read as it streams (one batch
// of rows at a time, so memory stays bounded), giving each token's surprisal, rank and the
// entropy of the distribution it was drawn from; and two models (or two quantizations) on the
// same text, position by position: KL divergence both ways, top-1 agreement, the real token's
// probability under each. Texts longer than the context are read in windows of the context,
// each from an empty cache; the first token of each window has no prediction. Each position's
// distribution is the one a prefill of its prefix gives (what the stepper shows there): the
// kernels' summation order depends on the batch size below 8 rows, so prefixes that short are
// evaluated on their own.

#include "backend/backend.h"

#include <functional>
#include <span>
#include <vector>

namespace engine {

class Tokenizer;

// Called with (tokens evaluated, tokens in all); returning false stops the pass.
using AnalysisProgress = std::function<bool(uint32_t done, uint32_t total)>;

struct TokenPrediction {
    uint32_t position = 0; // of the predicted token
    TokenId id = 0;
    double p = 0.0;                             // its probability given everything before it
    double surprisal_bits = 0.0;                // −log2 p
    uint32_t rank = 0;                          // 1: it was the most likely
    double entropy_bits = 0.0;                  // of the distribution it was drawn from
    std::vector<std::pair<TokenId, float>> top; // the most likely candidates and their probabilities
};

struct TextAnalysis {
    std::vector<TokenPrediction> predictions;
    double perplexity = 0.0; // exp of the mean surprisal in nats
    bool cancelled = false;
};

// Perplexity of predictions [first, last) (a selection), from their surprisals.
double perplexity_of(std::span<const TokenPrediction> predictions);

TextAnalysis analyze_text(Backend& backend, std::span<const TokenId> tokens, uint32_t top_k = 5,
                          const AnalysisProgress& progress = {});

struct PositionComparison {
    uint32_t position = 0;
    TokenId id = 0;
    double kl = 0.0, reverse_kl = 0.0; // KL(A ‖ B) and KL(B ‖ A), nats
    double p_a = 0.0, p_b = 0.0;       // the real token's probability under each
    bool same_top = false;
    TokenId top_a = 0, top_b = 0;
    // Both models' most likely tokens (each one's top `top_k`, merged, A's order first) with their
    // probability under each: the two distributions side by side.
    struct Candidate {
        TokenId id = 0;
        double p_a = 0.0, p_b = 0.0;
    };
    std::vector<Candidate> candidates;
};

struct ModelComparison {
    std::vector<PositionComparison> positions;
    double mean_kl = 0.0, mean_reverse_kl = 0.0;
    double same_top = 0.0; // share of positions whose most likely tokens agree
    double rms_dp = 0.0;   // root mean square of p_b − p_a
    bool cancelled = false;
};

// Throws Error naming the first token that differs when the two vocabularies are not the same.
void check_same_vocabulary(const Tokenizer& a, const Tokenizer& b);

// With `analysis_a`, A's own analysis (analyze_text's) is read from the same pass instead of another.
ModelComparison compare_models(Backend& a, Backend& b, std::span<const TokenId> tokens,
                               const AnalysisProgress& progress = {}, uint32_t top_k = 5,
                               TextAnalysis* analysis_a = nullptr);

} // namespace engine
