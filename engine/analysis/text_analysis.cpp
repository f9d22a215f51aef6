// SPDX-License-Identifier: GPL-3.0-or-later
#include "analysis/text_analysis.h"

#include "lab/lab_run.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <spdlog/fmt/fmt.h>

namespace engine {

namespace {

constexpr uint32_t kRowsPerPass = 64; // logits rows held at once: 64 × n_vocab floats
// The kernels sum k-quant products in another order for batches under this many rows (as
// llama.cpp's do; see vec_dot_for_batch), which moves a short prompt's logits visibly. A
// prefix this short is evaluated on its own, as the stepper's prefill of it does.
constexpr uint32_t kShortPrefix = 8;

// The ids of the k largest logits, largest first.
std::vector<TokenId> top_ids(std::span<const float> l, uint32_t k)
{
    std::vector<TokenId> ids(l.size());
    std::iota(ids.begin(), ids.end(), 0);
    const auto n = std::ptrdiff_t(std::min<std::size_t>(k, ids.size()));
    std::partial_sort(ids.begin(), ids.begin() + n, ids.end(),
                      [&](TokenId a, TokenId b) { return l[std::size_t(a)] > l[std::size_t(b)]; });
    ids.resize(std::size_t(n));
    return ids;
}

// What position p's logits `l` say of the token after it: probability, surprisal, rank, entropy, top.
TokenPrediction predict(std::span<const float> l, std::span<const TokenId> tokens, uint32_t p, uint32_t top_k)
{
    const TokenId next = tokens[p + 1];
    const double lse = log_sum_exp(l);
    TokenPrediction t;
    t.position = p + 1;
    t.id = next;
    const double logp = double(l[std::size_t(next)]) - lse;
    t.p = std::exp(logp);
    t.surprisal_bits = -logp / std::log(2.0);
    uint32_t rank = 1;
    double h = 0.0;
    for (std::size_t i = 0; i < l.size(); ++i) {
        if (l[i] > l[std::size_t(next)])
            ++rank;
        const double lp = double(l[i]) - lse;
        h -= std::exp(lp) * lp;
    }
    t.rank = rank;
    t.entropy_bits = h / std::log(2.0);
    for (TokenId id : top_ids(l, top_k))
        t.top.emplace_back(id, float(std::exp(double(l[std::size_t(id)]) - lse)));
    return t;
}

// Evaluates `tokens` window by window (the backend's context) in passes of kRowsPerPass rows and
// calls `row(position, logits)` for every position that predicts a next token.
bool for_each_prediction_row(std::vector<Backend*> backends, std::span<const TokenId> tokens,
                             const AnalysisProgress& progress,
                             const std::function<void(uint32_t, std::vector<std::span<const float>>)>& row)
{
    uint32_t window = UINT32_MAX;
    for (Backend* b : backends)
        window = std::min(window, b->kv_cache().config().n_ctx);
    const auto n = uint32_t(tokens.size());
    for (uint32_t w0 = 0; w0 + 1 < n; w0 += window) {
        const uint32_t w1 = std::min(n, w0 + window);
        // positions whose prefix in the window is under kShortPrefix tokens: a pass of their own
        const uint32_t long_from = std::min(w1 - 1, w0 + kShortPrefix - 1);
        for (uint32_t p = w0; p < long_from; ++p) {
            std::vector<ForwardResult> results;
            for (Backend* b : backends) {
                b->kv_cache().clear();
                ForwardRequest r;
                r.tokens = tokens.subspan(w0, p + 1 - w0);
                results.push_back(b->forward(r));
            }
            std::vector<std::span<const float>> rows;
            for (const ForwardResult& res : results)
                rows.emplace_back(res.logits.data(), res.n_vocab);
            row(p, rows);
            if (progress && !progress(p + 1, n))
                return false;
        }
        for (Backend* b : backends)
            b->kv_cache().clear();
        for (uint32_t c0 = w0; c0 < w1; c0 += kRowsPerPass) {
            const uint32_t c1 = std::min(w1, c0 + kRowsPerPass);
            std::vector<ForwardResult> results;
            for (Backend* b : backends) {
                ForwardRequest r;
                r.tokens = tokens.subspan(c0, c1 - c0);
                r.all_logits = true;
                // every pass of the window sums in one order, so positions are comparable
                r.order_as_batch = kRowsPerPass;
                results.push_back(b->forward(r));
            }
            for (uint32_t p = c0; p < c1; ++p) {
                if (p + 1 >= w1 || p < long_from)
                    continue; // the window's last token predicts nothing inside it; short prefixes are done
                std::vector<std::span<const float>> rows;
                for (const ForwardResult& res : results)
                    rows.emplace_back(res.logits.data() + std::size_t(p - c0) * res.n_vocab, res.n_vocab);
                row(p, rows);
            }
            if (progress && !progress(c1, n))
                return false;
        }
    }
    for (Backend* b : backends)
        b->kv_cache().clear();
    return true;
}

} // namespace

double perplexity_of(std::span<const TokenPrediction> predictions)
{
    if (predictions.empty())
        return 0.0;
    double nats = 0.0;
    for (const TokenPrediction& p : predictions)
        nats += p.surprisal_bits * std::log(2.0);
    return std::exp(nats / double(predictions.size()));
}

TextAnalysis analyze_text(Backend& backend, std::span<const TokenId> tokens, uint32_t top_k,
                          const AnalysisProgress& progress)
{
    if (tokens.size() < 2)
        throw Error("the text is too short: it needs at least two tokens (one predicts the next)");
    TextAnalysis out;
    out.cancelled = !for_each_prediction_row({&backend}, tokens, progress, [&](uint32_t p, auto rows) {
        out.predictions.push_back(predict(rows[0], tokens, p, top_k));
    });
    out.perplexity = perplexity_of(out.predictions);
    return out;
}

void check_same_vocabulary(const Tokenizer& a, const Tokenizer& b)
{
    const auto& ta = a.vocab().tokens;
    const auto& tb = b.vocab().tokens;
    for (std::size_t i = 0; i < std::min(ta.size(), tb.size()); ++i)
        if (ta[i] != tb[i])
            throw Error(fmt::format("the vocabularies differ from token {} on ('{}' against '{}'): a comparison needs "
                                    "the same vocabulary",
                                    i, ta[i], tb[i]));
    if (ta.size() != tb.size())
        throw Error(fmt::format("the vocabularies have {} and {} tokens: a comparison needs the same vocabulary",
                                ta.size(), tb.size()));
}

ModelComparison compare_models(Backend& a, Backend& b, std::span<const TokenId> tokens,
                               const AnalysisProgress& progress, uint32_t top_k, TextAnalysis* analysis_a)
{
    check_same_vocabulary(a.model().tokenizer(), b.model().tokenizer());
    if (tokens.size() < 2)
        throw Error("the text is too short: it needs at least two tokens (one predicts the next)");
    ModelComparison out;
    out.cancelled = !for_each_prediction_row({&a, &b}, tokens, progress, [&](uint32_t p, auto rows) {
        const std::span<const float> la = rows[0], lb = rows[1];
        if (analysis_a)
            analysis_a->predictions.push_back(predict(la, tokens, p, top_k));
        const double za = log_sum_exp(la), zb = log_sum_exp(lb);
        PositionComparison c;
        c.position = p + 1;
        c.id = tokens[p + 1];
        // KL(A‖B) = Σ pa·(e^x − 1 − x) with x = log pb − log pa: the same sum as Σ pa·(log pa − log pb)
        // (Σ pa·(e^x − 1) = Σ pb − Σ pa = 0), written so that each term is ≥ 0 in floating point
        // too, where the textbook form could round a tiny divergence below zero.
        double kl = 0.0, rkl = 0.0;
        for (std::size_t i = 0; i < la.size(); ++i) {
            const double lpa = double(la[i]) - za, lpb = double(lb[i]) - zb, x = lpb - lpa;
            kl += std::exp(lpa) * (std::expm1(x) - x);
            rkl += std::exp(lpb) * (std::expm1(-x) + x);
        }
        c.kl = kl;
        c.reverse_kl = rkl;
        c.p_a = std::exp(double(la[std::size_t(c.id)]) - za);
        c.p_b = std::exp(double(lb[std::size_t(c.id)]) - zb);
        c.top_a = TokenId(std::max_element(la.begin(), la.end()) - la.begin());
        c.top_b = TokenId(std::max_element(lb.begin(), lb.end()) - lb.begin());
        c.same_top = c.top_a == c.top_b;
        for (const std::span<const float> l : {la, lb})
            for (TokenId id : top_ids(l, top_k))
                if (std::none_of(c.candidates.begin(), c.candidates.end(), [&](const auto& x) { return x.id == id; }))
                    c.candidates.push_back(
                        {id, std::exp(double(la[std::size_t(id)]) - za), std::exp(double(lb[std::size_t(id)]) - zb)});
        out.positions.push_back(std::move(c));
    });
    if (analysis_a) {
        analysis_a->cancelled = out.cancelled;
        analysis_a->perplexity = perplexity_of(analysis_a->predictions);
    }
    double dp2 = 0.0, same = 0.0;
    for (const PositionComparison& c : out.positions) {
        out.mean_kl += c.kl;
        out.mean_reverse_kl += c.reverse_kl;
        dp2 += (c.p_b - c.p_a) * (c.p_b - c.p_a);
        same += c.same_top ? 1.0 : 0.0;
    }
    if (!out.positions.empty()) {
        const auto n = double(out.positions.size());
        out.mean_kl /= n;
        out.mean_reverse_kl /= n;
        out.same_top = same / n;
        out.rms_dp = std::sqrt(dp2 / n);
    }
    return out;
}

} // namespace engine
