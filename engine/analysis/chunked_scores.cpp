// SPDX-License-Identifier: GPL-3.0-or-later
#include "analysis/chunked_scores.h"

#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

#include <algorithm>
#include <cmath>
#include <spdlog/fmt/fmt.h>

namespace engine {

namespace {

// One position's base log-probabilities as llama-perplexity's --kl-divergence-base file holds them.
// The arithmetic (float where it computes in float) follows its own, so that the stored values and
// therefore the statistics come out as it computes them.
struct StoredLogProbs {
    float scale = 0.0f, min_log_prob = 0.0f;
    std::vector<uint16_t> q;

    float at(std::size_t i) const { return scale * float(q[i]) + min_log_prob; }
};

StoredLogProbs store_log_probs(std::span<const float> l)
{
    float max_logit = l[0], min_logit = l[0];
    for (float x : l) {
        max_logit = std::max(max_logit, x);
        min_logit = std::min(min_logit, x);
    }
    min_logit = std::max(min_logit, max_logit - 16);
    double sum_exp = 0.0;
    for (float x : l)
        sum_exp += std::exp(x - max_logit); // float exponentials, as expf there
    const auto log_sum_exp = float(std::log(sum_exp));
    StoredLogProbs s;
    s.min_log_prob = min_logit - max_logit - log_sum_exp;
    s.scale = (max_logit - min_logit) / 65535.f;
    s.q.assign(l.size(), 0);
    if (s.scale != 0.0f) {
        const float inv_scale = 1 / s.scale;
        for (std::size_t i = 0; i < l.size(); ++i)
            if (l[i] > min_logit)
                s.q[i] = uint16_t(std::nearbyint(inv_scale * (l[i] - min_logit)));
    }
    return s;
}

// −log p of `token` under logits `l`, in llama-perplexity's float arithmetic.
float nll_of(std::span<const float> l, TokenId token, float* max_out = nullptr, float* lse_out = nullptr,
             std::size_t* argmax = nullptr)
{
    float max_logit = l[0];
    std::size_t imax = 0;
    for (std::size_t i = 1; i < l.size(); ++i)
        if (l[i] > max_logit) {
            max_logit = l[i];
            imax = i;
        }
    double sum_exp = 0.0;
    for (float x : l)
        sum_exp += std::exp(x - max_logit);
    const auto log_sum_exp = float(std::log(sum_exp));
    if (max_out)
        *max_out = max_logit;
    if (lse_out)
        *lse_out = log_sum_exp;
    if (argmax)
        *argmax = imax;
    return max_logit + log_sum_exp - l[std::size_t(token)];
}

// Runs every chunk through the backends and calls `score(position, rows)` for its scored positions.
bool for_each_scored_row(std::vector<Backend*> backends, std::span<const TokenId> tokens, uint32_t n_ctx,
                         ChunkedScores& out, const AnalysisProgress& progress,
                         const std::function<void(std::size_t, std::vector<std::span<const float>>)>& score)
{
    if (n_ctx < 4)
        throw Error(fmt::format("a chunk of {} tokens is too short (at least 4)", n_ctx));
    for (Backend* b : backends)
        if (n_ctx > b->kv_cache().config().n_ctx)
            throw Error(fmt::format("a chunk of {} tokens does not fit the context of {}", n_ctx,
                                    b->kv_cache().config().n_ctx));
    out.n_ctx = n_ctx;
    out.chunks = uint32_t(tokens.size() / n_ctx);
    if (out.chunks == 0)
        throw Error(fmt::format("the text has {} tokens: fewer than one chunk of {}", tokens.size(), n_ctx));
    const Vocab& vocab = backends[0]->model().tokenizer().vocab();
    const bool add_bos = vocab.add_bos && vocab.bos;
    const uint32_t first = n_ctx / 2;
    std::vector<TokenId> chunk(n_ctx);
    for (uint32_t k = 0; k < out.chunks; ++k) {
        const std::size_t start = std::size_t(k) * n_ctx;
        std::copy_n(tokens.begin() + std::ptrdiff_t(start), n_ctx, chunk.begin());
        if (add_bos)
            chunk[0] = *vocab.bos;
        std::vector<ForwardResult> results;
        for (Backend* b : backends) {
            b->kv_cache().clear();
            ForwardRequest r;
            r.tokens = chunk;
            r.all_logits = true;
            results.push_back(b->forward(r));
        }
        for (uint32_t j = first; j + 1 < n_ctx; ++j) {
            std::vector<std::span<const float>> rows;
            for (const ForwardResult& res : results)
                rows.emplace_back(res.logits.data() + std::size_t(j) * res.n_vocab, res.n_vocab);
            score(start + j, rows);
        }
        if (progress && !progress(k + 1, out.chunks))
            return false;
    }
    for (Backend* b : backends)
        b->kv_cache().clear();
    return true;
}

} // namespace

ChunkedScores perplexity_in_chunks(Backend& backend, std::span<const TokenId> tokens, uint32_t n_ctx,
                                   const AnalysisProgress& progress)
{
    ChunkedScores out;
    double nll = 0.0;
    out.cancelled = !for_each_scored_row({&backend}, tokens, n_ctx, out, progress, [&](std::size_t p, auto rows) {
        nll += double(nll_of(rows[0], tokens[p + 1]));
        ++out.count;
    });
    out.perplexity = std::exp(nll / double(out.count));
    return out;
}

ChunkedScores compare_in_chunks(Backend& base, Backend& model, std::span<const TokenId> tokens, uint32_t n_ctx,
                                const AnalysisProgress& progress)
{
    check_same_vocabulary(base.model().tokenizer(), model.model().tokenizer());
    ChunkedScores out;
    double nll = 0.0, nll_base = 0.0, kl = 0.0, dp2 = 0.0;
    std::size_t same = 0;
    out.cancelled = !for_each_scored_row({&base, &model}, tokens, n_ctx, out, progress, [&](std::size_t p, auto rows) {
        const StoredLogProbs stored = store_log_probs(rows[0]);
        const std::span<const float> l = rows[1];
        const TokenId next = tokens[p + 1];
        float max_logit = 0, lse = 0;
        std::size_t imax = 0;
        const float n = nll_of(l, next, &max_logit, &lse, &imax);
        const float n_base = -stored.at(std::size_t(next));
        nll += double(n);
        nll_base += double(n_base);
        max_logit += lse;
        double sum = 0.0;
        std::size_t imax_base = 0;
        float best = 0.0f;
        for (std::size_t i = 0; i < l.size(); ++i) {
            const float lp_base = stored.at(i);
            if (i == 0 || lp_base > best) {
                best = lp_base;
                imax_base = i;
            }
            if (lp_base > -16.f)
                sum += double(std::exp(lp_base) * (lp_base - l[i] + max_logit));
        }
        kl += sum;
        same += imax == imax_base ? 1 : 0;
        const float dp = std::exp(-n) - std::exp(-n_base);
        dp2 += double(dp) * double(dp);
        ++out.count;
    });
    const auto c = double(out.count);
    out.perplexity = std::exp(nll / c);
    out.base_perplexity = std::exp(nll_base / c);
    out.mean_kl = kl / c;
    out.same_top = double(same) / c;
    out.rms_dp = std::sqrt(dp2 / c);
    return out;
}

} // namespace engine
