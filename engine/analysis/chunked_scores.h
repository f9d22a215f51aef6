// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// Perplexity and KL statistics computed under llama.cpp's `llama-perplexity` conventions, so that
// figures can be set beside the ones it prints: the text's tokens (BOS first where the model adds
// one) cut into chunks of n_ctx (a tail shorter than a chunk is dropped), each chunk's first token
// replaced by BOS where the model adds one, each chunk evaluated from an empty cache, and only the
// second half of each chunk scored (each scored token predicted from at least n_ctx/2 before it).
// For the comparison, the base model's log-probabilities are kept as llama-perplexity stores them
// in its --kl-divergence-base file: 16 bits per token with a scale and a floor per position, the
// log-probabilities more than 16 below the best one dropped; KL, the top token and Δp are taken
// from those stored values.

#include "analysis/text_analysis.h"

namespace engine {

struct ChunkedScores {
    uint32_t n_ctx = 0;
    uint32_t chunks = 0;
    std::size_t count = 0;        // positions scored
    double perplexity = 0.0;      // of the model (in a comparison: the compared one, llama's "PPL(Q)")
    double base_perplexity = 0.0; // a comparison's base model, from its stored log-probabilities
    double mean_kl = 0.0;         // KL(base ‖ model), nats
    double same_top = 0.0;        // share of positions with the same most likely token
    double rms_dp = 0.0;          // root mean square of p_model − p_base of the real token
    bool cancelled = false;
};

// Throws Error when the text has fewer tokens than one chunk or n_ctx is under 4 or above the
// backend's context.
ChunkedScores perplexity_in_chunks(Backend& backend, std::span<const TokenId> tokens, uint32_t n_ctx,
                                   const AnalysisProgress& progress = {});
ChunkedScores compare_in_chunks(Backend& base, Backend& model, std::span<const TokenId> tokens, uint32_t n_ctx,
                                const AnalysisProgress& progress = {});

} // namespace engine
