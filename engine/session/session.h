// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "backend/backend.h"
#include "model/model.h"

#include <functional>
#include <memory>
#include <span>
#include <vector>

namespace engine {

// Called after each batch of a prefill with (evaluated, total); returning false stops the prefill
// there (the session then holds the tokens evaluated so far, cache and sequence in step).
using PrefillProgress = std::function<bool(uint32_t done, uint32_t total)>;

struct PrefillReport {
    uint32_t reused = 0;           // prompt tokens whose K/V were already cached (shared prefix)
    uint32_t computed = 0;         // tokens evaluated now
    bool window_recompute = false; // a sliding-window layer had freed what the prefix needed
    bool cancelled = false;        // the progress callback stopped it
    std::optional<uint32_t> window_layer;
    double ms = 0.0;
};

// Throws Error unless 0 < layers < the model's layer count: an early exit must stop before the last.
void check_exit_depth(const Model& model, uint32_t layers);

// One conversation with a model on a backend: the token sequence, its KV cache and the logits of
// the last position. Not thread-safe; the engine thread owns it.
class Session {
public:
    Session(std::shared_ptr<const Model> model, std::unique_ptr<Backend> backend, uint32_t n_batch = 512);

    const Model& model() const { return *m_model; }
    Backend& backend() { return *m_backend; }
    const Backend& backend() const { return *m_backend; }
    const std::vector<TokenId>& tokens() const { return m_tokens; }
    std::span<const float> logits() const { return m_logits; }
    const std::shared_ptr<ForwardCaptures>& last_captures() const { return m_captures; }

    // Makes the sequence exactly `tokens`, evaluating only what is not cached already (the shared
    // prefix is reused), in batches of n_batch positions (a trailing batch under 8 takes rows from the
    // one before: see evaluate). Leaves the logits of the last token.
    PrefillReport prefill(std::span<const TokenId> tokens, const CaptureRequest* capture = nullptr,
                          const PrefillProgress& progress = {});
    // Appends one token and evaluates it: one decode step.
    void decode(TokenId token, const CaptureRequest* capture = nullptr);
    // Back to the first n tokens (undo, what-if); their last token's logits are recomputed (one
    // position), or everything when a sliding-window layer no longer holds what it needs.
    PrefillReport truncate(uint32_t n, const CaptureRequest* capture = nullptr);
    // Speculative decoding's verification: appends `batch` and evaluates it in one pass, returning
    // every position's logits ([batch.size()][n_vocab]: row i predicts the token after batch[i]), held
    // by the session until accept(). Until then, logits() stays the prediction of batch[0].
    std::span<const float> verify(std::span<const TokenId> batch);
    // Keeps the first `kept` tokens (1 … its size) of the last verify(), cutting the rest from the
    // sequence and the cache; logits() becomes the prediction after the last one kept (its row).
    void accept(uint32_t kept);
    // Self-speculation by early exit, on this session's own cache: lower_pass evaluates `token` at the
    // next position through the first `layers` layers only (their K/V written, the rest not) and
    // returns the logits the final norm and output head give there (valid until the next call);
    // calls chain, one position after another, after the session's sequence. verify_upper then
    // verifies exactly the tokens lower-passed (as verify(), accept() after it) computing only the
    // layers above: each token resumes at `layers` from its lower pass's residual. When a sliding
    // window has freed what the verification needs, it computes every layer again instead.
    std::span<const float> lower_pass(TokenId token, uint32_t layers);
    std::span<const float> verify_upper(std::span<const TokenId> batch);
    std::span<const TokenId> lower_tokens() const { return m_lower_tokens; }
    // Forgets the lower passes (their cache entries cut).
    void discard_lower();
    // Deterministic mode from now on (ForwardRequest::batch_invariant): a token's logits do not depend
    // on how the sequence was cut into batches. The cache was summed in the other order, so the
    // sequence is dropped. Throws UnsupportedError on a backend that cannot (the GPU backends).
    void set_batch_invariant(bool on);
    bool batch_invariant() const { return m_batch_invariant; }
    // Every pass from now on stops after the first `layers` layers, read through the final norm and the
    // output head (0: the whole model): speculative decoding's early-exit drafter, sharing the
    // model's weights. The sequence is dropped. Throws Error unless 0 < layers < n_layer (or 0).
    void set_exit_layer(uint32_t layers);
    uint32_t exit_layer() const { return m_exit_layer; }
    // Interventions applied to every pass from now on (steering: a one-row addition from position 0
    // on; ablation: a one-row replacement). The cache was computed without them, so the sequence is
    // dropped (the next prefill evaluates everything). Throws Error for one the model cannot take.
    void set_interventions(std::vector<Intervention> interventions);
    const std::vector<Intervention>& interventions() const { return m_interventions; }

private:
    // Returns false when progress stopped it.
    bool evaluate(std::span<const TokenId> tokens, const CaptureRequest* capture, uint32_t order_as_batch = 0,
                  const PrefillProgress& progress = {});
    // Empties the sequence and its cache: the next prefill evaluates everything.
    void drop_sequence();
    // verify() and verify_upper(): the pass's rows (every one finite) held for accept(), `batch`
    // appended to the sequence after position `from`.
    std::span<const float> hold_verified(ForwardResult r, std::span<const TokenId> batch, uint32_t from);

    bool m_batch_invariant = false;
    uint32_t m_exit_layer = 0;
    std::shared_ptr<const Model> m_model;
    std::unique_ptr<Backend> m_backend;
    uint32_t m_n_batch;
    std::vector<TokenId> m_tokens;
    std::vector<uint32_t> m_batch_of; // per position: size of the batch it was evaluated in
    std::vector<float> m_logits;
    std::shared_ptr<ForwardCaptures> m_captures;
    std::vector<Intervention> m_interventions;
    std::vector<float> m_verified;       // the last verify()'s rows
    std::vector<TokenId> m_lower_tokens; // lower_pass(): the tokens, their residuals after the
    std::vector<float> m_lower_rows;     // lower layers ([tokens][n_embd]), the depth and the
    uint32_t m_lower_layers = 0;         // last pass's logits
    std::vector<float> m_lower_logits;
    uint32_t m_verified_from = 0; // where its batch began
};

} // namespace engine
