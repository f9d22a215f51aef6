// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// Where drafts come from (shared/reference/speculative.md §2): prompt lookup (n-gram matches in the
// text so far, no second model), a draft model the user picks (with llama.cpp's vocabulary rules) and
// early exit (the target's own first L layers read through its final norm and output head).

#include "sampling/sampler.h"
#include "tokenizer/vocab.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace engine {

class Backend;
class Model;
class Session;

// A drafted continuation. `q[i]` is the distribution tokens[i] was drawn from (sorted by probability,
// summing to 1); empty `q`: every token a point mass (lookup, greedy drafts). `logits[i]`, when the
// caller asked for them, are the drafter's raw logits at that position (the draft–target KL).
struct Draft {
    std::vector<TokenId> tokens;
    std::vector<std::vector<Candidate>> q;
    std::vector<std::vector<float>> logits;
    double ms = 0.0; // time spent drafting
};

class Drafter {
public:
    virtual ~Drafter() = default;
    // "prompt lookup", "early exit after 6 of 18 layers", "draft model NAME"
    virtual std::string name() const = 0;
    // Up to k tokens to follow `context` (the whole sequence so far: prompt and generated). With
    // `want_logits`, Draft::logits is filled where the drafter has logits (model drafts).
    virtual Draft draft(std::span<const TokenId> context, uint32_t k, bool want_logits) = 0;
    // The target's verification of `batch` (the opening token and the draft): one pass of the whole
    // model by default; a drafter that computed part of it already finishes it.
    virtual std::span<const float> verify(Session& target, std::span<const TokenId> batch);
};

// A draw from a distribution (probabilities summing to about 1), one uniform from `rng`; rounding that
// runs past the end takes the last candidate with any mass.
TokenId draw_from(std::span<const Candidate> distribution, std::mt19937_64& rng);

// Prompt lookup: the most recent earlier place where the last n tokens of `context` occurred (n from
// max_ngram down to min_ngram), and up to k of the tokens that followed it there; empty when none.
std::vector<TokenId> lookup_draft(std::span<const TokenId> context, uint32_t k, uint32_t max_ngram = 3,
                                  uint32_t min_ngram = 1);

// Prompt lookup by n-gram statistics, token by token: for n = 4 down to 1, every earlier place the
// last n tokens occurred votes for the token that followed it; the winner is drafted when it has
// enough votes and a large enough share (n = 1: 2 votes, 66%; n = 2: 2, 50%; n = 3, 4: 1, 50% — the
// thresholds of llama.cpp's context n-gram cache, shared/reference/speculative.md §3), and the draft
// ends at the first position where no n passes. Drafting only where the text is confident keeps the
// wasted verification width small.
std::vector<TokenId> ngram_draft(std::span<const TokenId> context, uint32_t k);

class LookupDrafter final : public Drafter {
public:
    std::string name() const override { return "prompt lookup"; }
    Draft draft(std::span<const TokenId> context, uint32_t k, bool want_logits) override;
};

// A model run autoregressively on its own session: a separate draft model, or the target itself
// stopped early (Session::set_exit_layer). Each token is drawn with the drafter's sampler (greedy
// config: the argmax, a point mass; otherwise a sample from its distribution, which is recorded as q).
// Its session follows the context by prefill, so tokens the target rejected are cut from its cache.
class ModelDrafter final : public Drafter {
public:
    ModelDrafter(std::unique_ptr<Session> session, SamplerConfig sampler, std::string name);
    ~ModelDrafter() override;
    std::string name() const override { return m_name; }
    Draft draft(std::span<const TokenId> context, uint32_t k, bool want_logits) override;
    Session& session() { return *m_session; }

private:
    std::unique_ptr<Session> m_session;
    Sampler m_sampler;
    std::string m_name;
};

// Early exit on the target's own session and cache (self-speculation): each token the draft reads
// goes through the first `layers` layers once (Session::lower_pass), the draft is read off the output
// head there, and the verification computes only the layers above for the tokens drafted
// (Session::verify_upper) — the lower layers' keys and values and residuals are the draft's.
class SharedEarlyExitDrafter final : public Drafter {
public:
    SharedEarlyExitDrafter(Session& target, uint32_t layers, SamplerConfig sampler, std::string name);
    std::string name() const override { return m_name; }
    Draft draft(std::span<const TokenId> context, uint32_t k, bool want_logits) override;
    std::span<const float> verify(Session& target, std::span<const TokenId> batch) override;

private:
    Session& m_target;
    uint32_t m_layers;
    Sampler m_sampler;
    std::string m_name;
};

// llama.cpp's rules for a draft model (common_speculative_are_compatible): the same tokenizer type,
// the same add-BOS/EOS flags and ids, vocabulary sizes within 128, and the same text for every token
// from id 5 on. Throws Error naming the first mismatch.
void check_draft_vocabulary(const Model& target, const Model& draft);

// The early exit's name, for the target stopped after `layers` of its layers.
std::string early_exit_name(const Model& target, uint32_t layers);

// Which drafter, as the CLI and the settings write it: "lookup", "early-exit:L", "draft:FILE".
struct DraftSource {
    enum class Kind { lookup, early_exit, draft_model } kind = Kind::lookup;
    uint32_t layers = 0;    // early exit
    std::string draft_path; // draft model
    std::string text() const;
};
// Throws Error naming what is wrong ("early-exit:x: …").
DraftSource parse_draft_source(std::string_view text);

// A backend for a model (the caller's choice of device, threads and context).
using BackendFactory = std::function<std::unique_ptr<Backend>(std::shared_ptr<const Model>)>;
// The drafter for a source: a lookup drafter; the target stopped early (layers checked against it) —
// on `target_session`'s own cache when one is given (the verification then computes only the layers
// above), else on a session of its own; or the draft model loaded and checked
// (check_draft_vocabulary). The model drafters sample with `sampler` (greedy config: greedy drafts).
std::unique_ptr<Drafter> make_drafter(const DraftSource& source, std::shared_ptr<const Model> target,
                                      const BackendFactory& backend_for, const SamplerConfig& sampler,
                                      Session* target_session = nullptr);

} // namespace engine
