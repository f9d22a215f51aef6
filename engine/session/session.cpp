// SPDX-License-Identifier: GPL-3.0-or-later
#include "session/session.h"

#include "util/error.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <spdlog/fmt/fmt.h>

namespace engine {

void check_exit_depth(const Model& model, uint32_t layers)
{
    const uint32_t n_layer = model.config().n_layer;
    if (layers == 0 || layers >= n_layer)
        throw Error(fmt::format("an early exit after {} layers: the model has {}, so it must stop before the last "
                                "(1 … {})",
                                layers, n_layer, n_layer - 1));
}

Session::Session(std::shared_ptr<const Model> model, std::unique_ptr<Backend> backend, uint32_t n_batch)
    : m_model(std::move(model)), m_backend(std::move(backend)), m_n_batch(std::max(1u, n_batch))
{
}

bool Session::evaluate(std::span<const TokenId> tokens, const CaptureRequest* capture, uint32_t order_as_batch,
                       const PrefillProgress& progress)
{
    // Batches of m_n_batch, except that none after the first is left under kEvenOrderRows rows: the
    // kernels sum in another order below that (as llama.cpp's do), so a short trailing batch would
    // make a prompt's last logits depend on where the batch boundary fell; the batch before it
    // gives up rows instead. The text analysis relies on this (each prefix's distribution is one
    // summation order, whatever its length beyond 8).
    constexpr std::size_t kEvenOrderRows = 8;
    for (std::size_t i = 0, size = 0; i < tokens.size(); i += size) {
        const std::size_t left = tokens.size() - i;
        size = std::min<std::size_t>(m_n_batch, left);
        if (left > size && left - size < kEvenOrderRows && size > 2 * kEvenOrderRows)
            size -= kEvenOrderRows - (left - size);
        const auto batch = tokens.subspan(i, size);
        // A batch shorter than the one llama.cpp evaluates these positions in (its n_ubatch of 512 from
        // the start of the call) follows that one's order: its flash attention tiles batches of 64 or
        // more, so a prompt cut into batches here gives the logits of the prompt in one call there.
        // (Matrices sum alike in any batch of 8 or more: only that tiling sees it.)
        constexpr std::size_t kLlamaCppUbatch = 512;
        const auto as_batch = std::max<uint32_t>(
            order_as_batch, uint32_t(std::min(kLlamaCppUbatch, tokens.size() - i / kLlamaCppUbatch * kLlamaCppUbatch)));
        ForwardResult r = m_backend->forward({.tokens = batch,
                                              .all_logits = false,
                                              .capture = capture,
                                              .order_as_batch = size >= kEvenOrderRows ? as_batch : order_as_batch,
                                              .batch_invariant = m_batch_invariant,
                                              .interventions = m_interventions,
                                              .end_layer = m_exit_layer});
        m_tokens.insert(m_tokens.end(), batch.begin(), batch.end());
        m_batch_of.insert(
            m_batch_of.end(), batch.size(),
            std::max<uint32_t>(uint32_t(batch.size()), size >= kEvenOrderRows ? as_batch : order_as_batch));
        m_logits = std::move(r.logits);
        m_captures = std::move(r.captures);
        // Garbage is named, never sampled: NaN or infinite logits stop here.
        for (std::size_t v = 0; v < m_logits.size(); ++v)
            if (!std::isfinite(m_logits[v]))
                throw Error(fmt::format("the model produced a non-finite logit ({} for token {}) at position {}: its "
                                        "weights or hyperparameters are broken",
                                        m_logits[v], v, m_tokens.size() - 1));
        const auto done = static_cast<uint32_t>(i + batch.size());
        if (progress && !progress(done, static_cast<uint32_t>(tokens.size())) && done < tokens.size())
            return false;
    }
    return true;
}

void Session::set_batch_invariant(bool on)
{
    if (on == m_batch_invariant)
        return;
    if (on)
        require_batch_invariant(*m_backend);
    m_batch_invariant = on;
    drop_sequence(); // the cache was summed in the other order
}

void Session::drop_sequence()
{
    m_lower_tokens.clear();
    m_lower_rows.clear();
    m_lower_logits.clear();
    m_tokens.clear();
    m_batch_of.clear();
    m_logits.clear();
    m_captures.reset();
    m_backend->kv_cache().clear();
}

void Session::set_interventions(std::vector<Intervention> interventions)
{
    for (const Intervention& iv : interventions) {
        const uint32_t cols = intervention_columns(m_model->config(), iv).cols;
        if (iv.values.size() != cols)
            throw Error("a session's interventions apply to every position: give one row of values each");
    }
    check_interventions(m_model->config(), interventions, 0, 1);
    m_interventions = std::move(interventions);
    drop_sequence();
}

PrefillReport Session::prefill(std::span<const TokenId> tokens, const CaptureRequest* capture,
                               const PrefillProgress& progress)
{
    discard_lower();
    const auto start = std::chrono::steady_clock::now();
    if (tokens.empty())
        throw Error("the prompt is empty: there is nothing to evaluate");
    // Refused before any compute: a prompt longer than the context would otherwise run for minutes
    // and fail at the batch that overflows.
    if (const uint32_t n_ctx = m_backend->kv_cache().config().n_ctx; tokens.size() > n_ctx)
        throw Error(fmt::format("the prompt has {} tokens but the context holds {}: shorten it or use a larger context",
                                tokens.size(), n_ctx));
    PrefillReport report;
    const auto common = static_cast<uint32_t>(
        std::mismatch(m_tokens.begin(), m_tokens.end(), tokens.begin(), tokens.end()).first - m_tokens.begin());
    // The last prompt token is always evaluated, so that its logits exist.
    const uint32_t keep = std::min<uint32_t>(common, static_cast<uint32_t>(tokens.size()) - 1);
    const KvTruncation t = m_backend->kv_cache().truncate(keep);
    // When only the last token is re-evaluated (a step back to a known position), it is summed in
    // the order of the batch it first came in, so that its logits are exactly the ones shown then.
    const uint32_t order =
        (keep + 1 == tokens.size() && keep < m_batch_of.size() && !t.recompute) ? m_batch_of[keep] : 0;
    if (t.recompute) {
        report.window_recompute = true;
        report.window_layer = t.first_layer_short;
        m_tokens.clear();
    } else {
        m_tokens.resize(keep);
    }
    m_batch_of.resize(m_tokens.size());
    report.reused = static_cast<uint32_t>(m_tokens.size());
    report.computed = static_cast<uint32_t>(tokens.size()) - report.reused;
    report.cancelled = !evaluate(tokens.subspan(report.reused), capture, order, progress);
    report.computed = static_cast<uint32_t>(m_tokens.size()) - report.reused; // fewer when cancelled
    report.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return report;
}

void Session::decode(TokenId token, const CaptureRequest* capture)
{
    discard_lower();
    const TokenId one[] = {token};
    evaluate(one, capture);
}

std::span<const float> Session::lower_pass(TokenId token, uint32_t layers)
{
    check_exit_depth(*m_model, layers);
    if (m_exit_layer)
        throw Error("lower passes are for a session of the whole model");
    if (!m_lower_tokens.empty() && layers != m_lower_layers)
        discard_lower();
    KvCache& kv = m_backend->kv_cache();
    if (kv.n_cached() != m_tokens.size() + m_lower_tokens.size())
        throw Error("lower passes continue the session's sequence");
    CaptureRequest capture;
    capture.residuals = true;
    const TokenId one[] = {token};
    ForwardResult r = m_backend->forward({.tokens = one,
                                          .capture = &capture,
                                          .batch_invariant = m_batch_invariant,
                                          .interventions = m_interventions,
                                          .end_layer = layers});
    for (float v : r.logits)
        if (!std::isfinite(v))
            throw Error("the model produced a non-finite logit in an early exit: its weights or hyperparameters "
                        "are broken");
    const std::vector<float>& residual = r.captures->residuals[layers - 1];
    m_lower_layers = layers;
    m_lower_tokens.push_back(token);
    m_lower_rows.insert(m_lower_rows.end(), residual.begin(), residual.end());
    m_lower_logits = std::move(r.logits);
    return m_lower_logits;
}

void Session::discard_lower()
{
    if (m_lower_tokens.empty())
        return;
    m_backend->kv_cache().truncate(static_cast<uint32_t>(m_tokens.size()));
    m_lower_tokens.clear();
    m_lower_rows.clear();
    m_lower_logits.clear();
}

std::span<const float> Session::verify_upper(std::span<const TokenId> batch)
{
    if (batch.empty() || batch.size() > m_lower_tokens.size() ||
        !std::equal(batch.begin(), batch.end(), m_lower_tokens.begin()))
        throw Error("verify_upper verifies the tokens lower-passed, in order");
    const auto n0 = static_cast<uint32_t>(m_tokens.size());
    const std::size_t E = m_model->config().n_embd;
    const std::vector<float> rows(m_lower_rows.begin(), m_lower_rows.begin() + std::ptrdiff_t(batch.size() * E));
    const std::vector<TokenId> tokens(batch.begin(), batch.end());
    const uint32_t layers = m_lower_layers;
    m_lower_tokens.clear();
    m_lower_rows.clear();
    m_lower_logits.clear();
    if (!m_backend->kv_cache().rewind(n0)) { // a window freed what the upper layers need: all layers again
        m_backend->kv_cache().truncate(n0);
        return verify(tokens);
    }
    ForwardResult r = m_backend->forward({.tokens = tokens,
                                          .all_logits = true,
                                          .batch_invariant = m_batch_invariant,
                                          .interventions = m_interventions,
                                          .start_layer = layers,
                                          .start_residual = rows});
    return hold_verified(std::move(r), tokens, n0);
}

std::span<const float> Session::verify(std::span<const TokenId> batch)
{
    discard_lower();
    if (batch.empty())
        throw Error("nothing to verify: the batch is empty");
    if (const uint32_t n_ctx = m_backend->kv_cache().config().n_ctx; m_tokens.size() + batch.size() > n_ctx)
        throw Error(fmt::format("the context is full: {} positions requested, the cache holds {}",
                                m_tokens.size() + batch.size(), n_ctx));
    ForwardResult r = m_backend->forward({.tokens = batch,
                                          .all_logits = true,
                                          .batch_invariant = m_batch_invariant,
                                          .interventions = m_interventions,
                                          .end_layer = m_exit_layer});
    return hold_verified(std::move(r), batch, static_cast<uint32_t>(m_tokens.size()));
}

std::span<const float> Session::hold_verified(ForwardResult r, std::span<const TokenId> batch, uint32_t from)
{
    for (std::size_t v = 0; v < r.logits.size(); ++v)
        if (!std::isfinite(r.logits[v]))
            throw Error(fmt::format("the model produced a non-finite logit at position {}: its weights or "
                                    "hyperparameters are broken",
                                    from + v / std::max<uint32_t>(1, r.n_vocab)));
    m_verified_from = from;
    m_tokens.insert(m_tokens.end(), batch.begin(), batch.end());
    m_batch_of.insert(m_batch_of.end(), batch.size(), static_cast<uint32_t>(batch.size()));
    m_captures.reset();
    m_verified = std::move(r.logits);
    return m_verified;
}

void Session::accept(uint32_t kept)
{
    const std::size_t verified = m_tokens.size() - m_verified_from;
    if (kept == 0 || kept > verified || m_verified.empty())
        throw Error(fmt::format("accept({}) after a verification of {} tokens", kept, verified));
    const std::size_t n_vocab = m_verified.size() / verified;
    const uint32_t n = m_verified_from + kept;
    const KvTruncation t = m_backend->kv_cache().truncate(n);
    m_logits.assign(m_verified.begin() + std::ptrdiff_t((kept - 1) * n_vocab),
                    m_verified.begin() + std::ptrdiff_t(kept * n_vocab));
    m_verified.clear();
    if (t.recompute) { // a sliding window had freed what the kept end needs: evaluate the kept tokens again
        const std::vector<TokenId> keep(m_tokens.begin(), m_tokens.begin() + n);
        m_tokens.clear();
        m_batch_of.clear();
        prefill(keep);
        return;
    }
    m_tokens.resize(n);
    m_batch_of.resize(n);
}

void Session::set_exit_layer(uint32_t layers)
{
    if (layers != 0) // 0: the whole model again
        check_exit_depth(*m_model, layers);
    if (layers == m_exit_layer)
        return;
    m_exit_layer = layers;
    drop_sequence(); // the cache holds the other depth's layers
}

PrefillReport Session::truncate(uint32_t n, const CaptureRequest* capture)
{
    discard_lower();
    if (n == 0) {
        m_backend->kv_cache().clear();
        m_tokens.clear();
        m_batch_of.clear();
        m_logits.clear();
        return {};
    }
    const std::vector<TokenId> keep(m_tokens.begin(), m_tokens.begin() + std::min<std::size_t>(n, m_tokens.size()));
    return prefill(keep, capture);
}

} // namespace engine
