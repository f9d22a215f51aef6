// SPDX-License-Identifier: GPL-3.0-or-later
#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace engine {

namespace {

constexpr float k_neg_inf = -std::numeric_limits<float>::infinity();

// The one ranking every stage uses: higher logit first, ties to the lower id, so that each
// selection below gives the same survivors whatever algorithm finds them.
bool better(const Candidate& a, const Candidate& b)
{
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// The k best of n candidates (get(i) → Candidate), best first, into out. For the few dozen that
// top-k and the stage views want, a bounded heap whose front is the worst one kept: a single
// pass that rarely touches the heap, instead of sorting 262,144 logits. For a large k, a
// selection over a copy is cheaper than k heap updates.
template <typename Get>
void select_top(std::size_t n, std::size_t k, Get get, std::vector<Candidate>& out)
{
    out.clear();
    k = std::min(k, n);
    if (k == 0)
        return;
    if (k > n / 8) {
        out.reserve(n);
        for (std::size_t i = 0; i < n; ++i)
            out.push_back(get(i));
        std::nth_element(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(k - 1), out.end(), better);
        out.resize(k);
        std::sort(out.begin(), out.end(), better);
        return;
    }
    out.reserve(k);
    std::size_t i = 0;
    for (; i < k; ++i)
        out.push_back(get(i));
    std::make_heap(out.begin(), out.end(), better);
    for (; i < n; ++i) {
        const Candidate c = get(i);
        if (!better(c, out.front()))
            continue;
        std::pop_heap(out.begin(), out.end(), better);
        out.back() = c;
        std::push_heap(out.begin(), out.end(), better);
    }
    std::sort_heap(out.begin(), out.end(), better);
}

// Softmax of a set of logits as max and Σ exp(logit - max): probability = weight / sum. Sums in
// double so that 262,144 small terms do not drown. A set whose max is infinite (all -inf, or a
// +inf after a tiny temperature) shares the probability among the logits equal to the max.
struct Normaliser {
    float max = k_neg_inf;
    double sum = 0.0;

    float weight(float logit) const
    {
        return std::isfinite(max) ? std::exp(logit - max) : (logit == max ? 1.0f : 0.0f);
    }
    float probability(float logit) const { return static_cast<float>(weight(logit) / sum); }
};

template <typename GetLogit>
Normaliser normalise(std::size_t n, GetLogit logit)
{
    Normaliser z;
    for (std::size_t i = 0; i < n; ++i)
        z.max = std::max(z.max, logit(i));
    for (std::size_t i = 0; i < n; ++i)
        z.sum += z.weight(logit(i));
    return z;
}

} // namespace

double uniform_unit(std::mt19937_64& rng)
{
    // 53 bits fill a double's mantissa exactly: every value is k / 2^53, never 1.
    return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

Sampler::Sampler(SamplerConfig config) : m_config(config), m_rng(config.seed) {}

void Sampler::reseed(uint64_t seed)
{
    m_config.seed = seed;
    m_rng.seed(seed);
}

SampleResult Sampler::sample(std::span<const float> logits, std::span<const int32_t> history)
{
    SampleResult result;
    const std::size_t n_vocab = logits.size();
    if (n_vocab == 0)
        return result;
    const std::size_t n_view = m_config.stage_view_size;
    const bool views = n_view > 0;
    auto& stages = result.stages;

    // ---- helpers for the stage views -------------------------------------------------------
    const auto vocab_logit = [this](std::size_t i) { return m_logits[i]; };
    const auto vocab_candidate = [this](std::size_t i) { return Candidate{static_cast<int32_t>(i), m_logits[i], 0.0f}; };
    const auto cand_logit = [this](std::size_t i) { return m_cands[i].logit; };
    const auto cand_candidate = [this](std::size_t i) { return m_cands[i]; };
    bool sorted = false; // m_cands is ordered best first

    const auto with_probabilities = [](StageView v, const Normaliser& z) {
        for (auto& c : v.top)
            c.probability = z.probability(c.logit);
        return v;
    };
    // The whole vocabulary (m_logits): one pass for the best, two for the softmax normaliser.
    const auto vocab_view = [&](const char* name) {
        StageView v{name, {}, n_vocab, true};
        select_top(n_vocab, n_view, vocab_candidate, v.top);
        return with_probabilities(std::move(v), normalise(n_vocab, vocab_logit));
    };
    // The current survivors (m_cands).
    const auto cands_view = [&](const char* name, const Normaliser& z) {
        StageView v{name, {}, m_cands.size(), true};
        if (sorted)
            v.top.assign(m_cands.begin(), m_cands.begin() + static_cast<std::ptrdiff_t>(std::min(n_view, m_cands.size())));
        else
            select_top(m_cands.size(), n_view, cand_candidate, v.top);
        return with_probabilities(std::move(v), z);
    };
    // A stage that changed nothing shows the previous distribution again, without recomputing it.
    const auto repeat_view = [&](const char* name, bool applied) {
        StageView v = stages.back();
        v.name = name;
        v.applied = applied;
        return v;
    };

    // ---- logits ----------------------------------------------------------------------------
    // The one full copy of the vocabulary: the penalty must not write into the caller's logits.
    m_logits.resize(n_vocab);
    for (std::size_t i = 0; i < n_vocab; ++i)
        m_logits[i] = std::isnan(logits[i]) ? k_neg_inf : logits[i];
    if (views)
        stages.push_back(vocab_view("logits"));

    // ---- repetition penalty ----------------------------------------------------------------
    // llama.cpp's penalties sampler: each distinct token of the window once, whatever its count;
    // dividing a negative logit would make the token more likely, so those are multiplied.
    const bool penalty_on = m_config.repeat_penalty != 1.0f && m_config.repeat_last_n != 0;
    m_penalised.clear();
    if (penalty_on) {
        const std::size_t window = m_config.repeat_last_n < 0
            ? history.size()
            : std::min(history.size(), static_cast<std::size_t>(m_config.repeat_last_n));
        for (const int32_t id : history.last(window))
            if (id >= 0 && static_cast<std::size_t>(id) < n_vocab)
                m_penalised.push_back(id);
        std::sort(m_penalised.begin(), m_penalised.end());
        m_penalised.erase(std::unique(m_penalised.begin(), m_penalised.end()), m_penalised.end());
        for (const int32_t id : m_penalised) {
            float& l = m_logits[static_cast<std::size_t>(id)];
            l = l > 0.0f ? l / m_config.repeat_penalty : l * m_config.repeat_penalty;
        }
    }
    if (views)
        stages.push_back(m_penalised.empty() ? repeat_view("repetition penalty", penalty_on)
                                             : vocab_view("repetition penalty"));

    // ---- greedy ----------------------------------------------------------------------------
    // The argmax survives every filter, so greedy skips them; max_element keeps the first
    // maximum, i.e. the lowest id of a tie.
    if (m_config.greedy || m_config.temperature <= 0.0f) {
        const auto best = std::max_element(m_logits.begin(), m_logits.end());
        result.token = static_cast<int32_t>(best - m_logits.begin());
        result.probability = 1.0f;
        if (views) {
            for (const char* name : {"top-k", "top-p", "min-p", "temperature"})
                stages.push_back(repeat_view(name, false));
            stages.push_back(StageView{"final", {Candidate{result.token, *best, 1.0f}}, 1, true});
        }
        return result;
    }

    // ---- top-k -----------------------------------------------------------------------------
    const bool top_k_on = m_config.top_k > 0;
    if (top_k_on && static_cast<std::size_t>(m_config.top_k) < n_vocab) {
        select_top(n_vocab, static_cast<std::size_t>(m_config.top_k), vocab_candidate, m_cands);
        sorted = true;
        if (views)
            stages.push_back(cands_view("top-k", normalise(m_cands.size(), cand_logit)));
    } else {
        // Only without top-k do the later stages work on the whole vocabulary.
        m_cands.resize(n_vocab);
        for (std::size_t i = 0; i < n_vocab; ++i)
            m_cands[i] = vocab_candidate(i);
        if (views)
            stages.push_back(repeat_view("top-k", top_k_on));
    }

    // ---- top-p -----------------------------------------------------------------------------
    // The smallest best-first prefix whose probability reaches p (the token that crosses p is kept).
    const bool top_p_on = m_config.top_p < 1.0f;
    if (top_p_on) {
        const Normaliser z = normalise(m_cands.size(), cand_logit);
        // Sort only as far as the nucleus reaches: like llama.cpp, try the best 256 first and
        // widen only when they do not reach p, so that top-k off does not sort the vocabulary.
        std::size_t sorted_n = sorted ? m_cands.size() : 0;
        std::size_t keep = m_cands.size();
        double cumulative = 0.0;
        for (std::size_t i = 0; i < m_cands.size(); ++i) {
            if (i == sorted_n) {
                sorted_n = std::min(m_cands.size(), std::max<std::size_t>(256, sorted_n * 8));
                std::partial_sort(m_cands.begin() + static_cast<std::ptrdiff_t>(i),
                                  m_cands.begin() + static_cast<std::ptrdiff_t>(sorted_n), m_cands.end(), better);
            }
            cumulative += static_cast<double>(z.weight(m_cands[i].logit)) / z.sum;
            if (cumulative >= static_cast<double>(m_config.top_p)) {
                keep = i + 1;
                break;
            }
        }
        m_cands.resize(keep);
        sorted = true;
        if (views)
            stages.push_back(cands_view("top-p", normalise(m_cands.size(), cand_logit)));
    } else if (views) {
        stages.push_back(repeat_view("top-p", false));
    }

    // ---- min-p -----------------------------------------------------------------------------
    // p_i >= min_p · p_max, compared in logits as llama.cpp does: logit_i >= max + log(min_p).
    // Clamped to the max so that min_p >= 1 still keeps the best token.
    const bool min_p_on = m_config.min_p > 0.0f;
    if (min_p_on) {
        float best_logit = sorted ? m_cands.front().logit : k_neg_inf;
        if (!sorted)
            for (const auto& c : m_cands)
                best_logit = std::max(best_logit, c.logit);
        const float threshold = std::min(best_logit, best_logit + std::log(m_config.min_p));
        std::erase_if(m_cands, [threshold](const Candidate& c) { return c.logit < threshold; });
        if (views)
            stages.push_back(cands_view("min-p", normalise(m_cands.size(), cand_logit)));
    } else if (views) {
        stages.push_back(repeat_view("min-p", false));
    }

    // ---- temperature -----------------------------------------------------------------------
    // Last, so the filters above saw the untempered distribution (llama.cpp's default order).
    for (auto& c : m_cands)
        c.logit /= m_config.temperature;
    const Normaliser z = normalise(m_cands.size(), cand_logit);
    if (views) {
        stages.push_back(cands_view("temperature", z));
        stages.push_back(repeat_view("final", true));
    }

    // ---- draw ------------------------------------------------------------------------------
    // Exactly one draw per sample, even with a single survivor, so that a sequence depends only
    // on the seed and the logits. The running sum adds the same weights in the same order as
    // z.sum, so a target below z.sum always lands on a candidate; rounding that puts it at
    // z.sum falls back to the last candidate with any weight.
    const double target = uniform_unit(m_rng) * z.sum;
    double cumulative = 0.0;
    std::size_t chosen = m_cands.size();
    std::size_t last_weighted = 0;
    for (std::size_t i = 0; i < m_cands.size(); ++i) {
        const float w = z.weight(m_cands[i].logit);
        if (w > 0.0f)
            last_weighted = i;
        cumulative += w;
        if (cumulative > target) {
            chosen = i;
            break;
        }
    }
    if (chosen == m_cands.size())
        chosen = last_weighted;
    result.token = m_cands[chosen].id;
    result.probability = z.probability(m_cands[chosen].logit);
    return result;
}

} // namespace engine
