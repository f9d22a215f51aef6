// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// Speculative decoding (greedy): a drafter proposes up to k tokens, the target evaluates the token it
// chose and the draft in one pass (Session::verify), keeps the longest prefix of the draft that
// agrees with its own greedy choices plus the token it would have chosen next, and cuts the rest from
// the sequence and the cache (Session::accept). In deterministic mode (Session::set_batch_invariant)
// the output is bit for bit that of decoding one token at a time; in the default mode the
// verification pass sums in another order, so a near tie may go the other way (counted by tests).

#include "tokenizer/vocab.h"

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace engine {

class Session;

// Prompt lookup: the most recent earlier place where the last n tokens of `context` occurred (n from
// max_ngram down to min_ngram), and up to k of the tokens that followed it there; empty when none.
std::vector<TokenId> lookup_draft(std::span<const TokenId> context, uint32_t k, uint32_t max_ngram = 3,
                                  uint32_t min_ngram = 1);

// A drafter: up to k tokens to follow `context`.
using DraftFn = std::function<std::vector<TokenId>(std::span<const TokenId> context, uint32_t k)>;

struct SpeculativeStep {
    TokenId chosen = 0;           // the target's token that opened the step (corrected or bonus)
    std::vector<TokenId> drafted; // what the drafter proposed after it
    uint32_t accepted = 0;        // of those, kept
};

struct SpeculativeResult {
    std::vector<TokenId> tokens; // generated, in order (exactly the n asked for)
    std::vector<SpeculativeStep> steps;
    uint32_t drafted = 0, accepted = 0;
    uint32_t passes = 0; // target passes (one per step)
    double acceptance() const { return drafted ? double(accepted) / drafted : 0.0; }
};

// `n` greedy tokens after the session's sequence (which must have logits: a prefill first), drafting
// up to k at a time. The session ends holding the sequence and every generated token but the last
// (whose logits it does not need), as a decode loop would before its last step.
SpeculativeResult generate_speculative_greedy(Session& target, uint32_t n, uint32_t k, const DraftFn& draft);

// The loop it is measured against: `n` greedy tokens one pass each, leaving the session as above.
std::vector<TokenId> generate_plain_greedy(Session& target, uint32_t n);

} // namespace engine
