// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// Speculative decoding (shared/reference/speculative.md §1): a drafter proposes up to k tokens, the
// target evaluates the token that opens the step and the draft in one pass (Session::verify), each
// drafted token is accepted with probability min(1, p/q) — p the target's distribution after every
// sampler stage, q the drafter's (a point mass for lookup and greedy drafts) — the first rejected one
// is replaced by a draw from the residual max(0, p − q), and the rest is cut from the sequence and the
// cache (Session::accept). With every draft accepted, one more token comes from the last row. The
// output is drawn from the target's own distribution; greedy (temperature 0) it is the target's
// argmax at every position, and in deterministic mode (Session::set_batch_invariant) bit for bit the
// plain loop's. In the default mode the verification sums in another order, so a near tie may go the
// other way: the comparison counts and shows such steps.

#include "sampling/sampler.h"
#include "speculative/drafters.h"

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace engine {

class Session;

// What the residual draw at a rejection uses. `target_only` draws from p itself — wrong on purpose
// (the drafted token gets more than its share): the statistical test's control, never offered to users.
enum class ResidualRule { exact, target_only };

// One drafted token as the verification saw it.
struct DraftVerdict {
    TokenId token = 0;
    float q = 1.0f;            // the drafter's probability of it (1: a point mass)
    float p = 0.0f;            // the target's, at the same position, after its sampler
    TokenId target_top = 0;    // the target's most likely token there
    float target_top_p = 0.0f; // and its probability
    float overlap = 0.0f;      // Σ min(p, q): the chance a draft from q is accepted here
    float kl = -1.0f;          // KL(target ‖ draft) of the raw softmaxes, nats (−1: no draft logits)
    bool accepted = false;
};

// Outcome of checking one draft against the target's distributions.
struct Acceptance {
    uint32_t accepted = 0;              // leading drafted tokens kept
    TokenId next = 0;                   // the residual draw at the rejection, or the bonus token
    bool corrected = false;             // next replaced a rejected draft (false: a bonus after a full accept)
    std::vector<DraftVerdict> verdicts; // the drafted tokens examined: the accepted ones and the first rejected
};

// The rejection rule. p[i] (i = 0 … draft size) is the target's distribution after the step's i-th
// token (p[0]: for the first drafted token; p[draft size]: the bonus); q as in Draft. Takes one
// uniform per examined token and one more for the token that follows, from `rng`.
Acceptance accept_draft(std::span<const std::vector<Candidate>> p, const Draft& draft, std::mt19937_64& rng,
                        ResidualRule rule = ResidualRule::exact);

struct SpeculativeStep {
    TokenId opened = 0;           // the target's token that opened the step (corrected, bonus or first)
    std::vector<TokenId> drafted; // what the drafter proposed after it
    Acceptance acceptance;
    double draft_ms = 0.0, verify_ms = 0.0;
};

// Per generated token: the logits it was chosen from (its two best), for the default mode's comparison
// with the plain loop: where a token differs, both runs' logits of the two are shown.
struct TokenChoice {
    TokenId token = 0;
    TokenId best = 0, second = 0;
    float best_logit = 0.0f, second_logit = 0.0f;
};

struct SpeculativeResult {
    std::vector<TokenId> tokens; // generated, in order (exactly the n asked for)
    std::vector<TokenChoice> choices;
    std::vector<SpeculativeStep> steps;
    uint32_t drafted = 0, accepted = 0;
    uint32_t passes = 0; // target passes (one per step)
    double draft_ms = 0.0, verify_ms = 0.0;
    double acceptance() const { return drafted ? double(accepted) / drafted : 0.0; }
};

struct SpeculativeOptions {
    uint32_t draft_max = 8;
    bool record_kl = false; // the draft–target KL per drafted token (model drafters; a softmax per position)
    ResidualRule residual = ResidualRule::exact;
    // Called after every step with the result so far; returning false stops (the result then holds
    // the tokens generated so far).
    std::function<bool(const SpeculativeResult&)> progress;
};

// `n` tokens after the session's sequence (which must have logits: a prefill first), drafting up to
// draft_max at a time, drawn with `sampler` (its configuration and generator: the same seed gives the
// same tokens). The session ends holding the sequence and every generated token but the last, as a
// decode loop would before its last step.
SpeculativeResult generate_speculative(Session& target, uint32_t n, Drafter& drafter, Sampler& sampler,
                                       const SpeculativeOptions& options = {});

// The loop it is measured against: `n` tokens one pass each, drawn with `sampler`, leaving the session
// as above; with `choices`, each token's two best logits; `keep_going` returning false stops it early.
std::vector<TokenId> generate_plain(Session& target, uint32_t n, Sampler& sampler,
                                    std::vector<TokenChoice>* choices = nullptr,
                                    const std::function<bool()>& keep_going = {});

// Greedy shorthands (the tests of the deterministic identity).
using DraftFn = std::function<std::vector<TokenId>(std::span<const TokenId> context, uint32_t k)>;
SpeculativeResult generate_speculative_greedy(Session& target, uint32_t n, uint32_t k, const DraftFn& draft);
std::vector<TokenId> generate_plain_greedy(Session& target, uint32_t n);

// Along the draft: how many steps drafted a token at position j (0: right after the opening token)
// and how many of those were accepted — acceptance falls with depth, and this shows where.
struct PositionAcceptance {
    uint32_t drafted = 0, accepted = 0;
};
std::vector<PositionAcceptance> acceptance_by_position(const SpeculativeResult& r);

// The two best logits of a row (ties: lowest id), as TokenChoice holds them.
TokenChoice top_two(std::span<const float> logits, TokenId token);

} // namespace engine
