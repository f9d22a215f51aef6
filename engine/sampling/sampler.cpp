// SPDX-License-Identifier: GPL-3.0-or-later
#include "sampling/sampler.h"

#include "util/error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <spdlog/fmt/fmt.h>
#include <string>
#include <utility>

namespace engine {

namespace {

constexpr float k_neg_inf = -std::numeric_limits<float>::infinity();

// NaN would break every ordering below; a NaN logit can never be chosen, like -inf.
float clean(float logit)
{
    return std::isnan(logit) ? k_neg_inf : logit;
}

// The one ranking every stage uses: higher logit first, ties to the lower id, so that each
// selection below gives the same survivors whatever algorithm finds them.
bool better(const Candidate& a, const Candidate& b)
{
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

std::ptrdiff_t offset(std::size_t i)
{
    return static_cast<std::ptrdiff_t>(i);
}

// The k best of n candidates (get(i) → Candidate), best first, into out. For the few dozen that
// top-k and the stage views want, a bounded heap whose front is the worst one kept: a single
// pass that rarely touches the heap, instead of sorting 262,144 logits. For a large k, a
// selection over a copy is cheaper than k heap updates.
template <typename Get> void select_top(std::size_t n, std::size_t k, Get get, std::vector<Candidate>& out)
{
    out.clear();
    k = std::min(k, n);
    if (k == 0)
        return;
    if (k > n / 8) {
        out.reserve(n);
        for (std::size_t i = 0; i < n; ++i)
            out.push_back(get(i));
        std::nth_element(out.begin(), out.begin() + offset(k - 1), out.end(), better);
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

// Softmax of a set of logits as its max and Σ exp(logit - max): probability = weight / sum.
// Sums in double so that 262,144 small terms do not drown. A set whose max is infinite (all
// -inf, or +inf after a tiny temperature) shares the probability among the logits at the max.
struct Normaliser {
    float max = k_neg_inf;
    double sum = 0.0;

    float weight(float logit) const
    {
        return std::isfinite(max) ? std::exp(logit - max) : (logit == max ? 1.0f : 0.0f);
    }
    float probability(float logit) const { return static_cast<float>(weight(logit) / sum); }
};

// The normaliser of n logits whose max is already known (the first of a best-first selection).
template <typename GetLogit> Normaliser normalise(std::size_t n, GetLogit logit, float max)
{
    Normaliser z{max, 0.0};
    for (std::size_t i = 0; i < n; ++i)
        z.sum += z.weight(logit(i));
    return z;
}

// The candidates' normaliser, leaving each one's weight exp(logit - max) in its probability
// field for the stages after it (top-p's running sum, the draw), so no exp is computed twice.
Normaliser weigh(std::vector<Candidate>& cands)
{
    Normaliser z;
    for (const auto& c : cands)
        z.max = std::max(z.max, c.logit);
    for (auto& c : cands) {
        c.probability = z.weight(c.logit);
        z.sum += c.probability;
    }
    return z;
}

// After a filter that kept the best candidate the max and the stored weights still hold.
Normaliser reweigh(const std::vector<Candidate>& cands, float max)
{
    Normaliser z{max, 0.0};
    for (const auto& c : cands)
        z.sum += c.probability;
    return z;
}

// Top-p over weighed candidates: keeps the smallest best-first set whose weight reaches
// p · sum (the candidate that crosses it stays). Returns whether the survivors are in order.
bool keep_top_p(std::vector<Candidate>& cands, bool sorted, const Normaliser& z, float p)
{
    const auto at = [&cands](std::size_t i) { return cands.begin() + offset(i); };
    const double target = static_cast<double>(p) * z.sum;
    double reached = 0.0;
    // Like llama.cpp: sorted survivors (after top-k) take a running sum; otherwise the best 256
    // first, since a real model's nucleus usually lies inside them.
    const std::size_t head = sorted ? cands.size() : std::min<std::size_t>(256, cands.size());
    if (!sorted)
        std::partial_sort(cands.begin(), at(head), cands.end(), better);
    for (std::size_t i = 0; i < head; ++i) {
        reached += cands[i].probability;
        if (reached >= target) {
            cands.resize(i + 1);
            return true;
        }
    }
    if (head == cands.size())
        return true; // rounding left the sum just short of p · sum: all stay
    // A wide nucleus (flat logits, top-k off): halve the range by mass instead of sorting the
    // vocabulary. Invariant: [0, lo) are the best lo and weigh `reached` < target; the answer m
    // lies in (lo, hi].
    std::size_t lo = head;
    std::size_t hi = cands.size();
    while (hi - lo > 32) {
        const std::size_t mid = lo + (hi - lo) / 2;
        std::nth_element(at(lo), at(mid), at(hi), better);
        double mass = 0.0;
        for (std::size_t i = lo; i < mid; ++i)
            mass += cands[i].probability;
        if (reached + mass >= target) {
            hi = mid;
        } else {
            reached += mass;
            lo = mid;
        }
    }
    std::sort(at(lo), at(hi), better);
    std::size_t keep = hi;
    for (std::size_t i = lo; i < hi; ++i) {
        reached += cands[i].probability;
        if (reached >= target) {
            keep = i + 1;
            break;
        }
    }
    cands.resize(keep);
    return false; // only the first 256 are in order
}

} // namespace

double uniform_unit(std::mt19937_64& rng)
{
    // 53 bits fill a double's mantissa exactly: every value is k / 2^53, never 1.
    return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

SamplerConfig sampler_config(const SamplingSettings& settings, bool greedy)
{
    SamplerConfig c;
    static_cast<SamplingSettings&>(c) = settings;
    c.greedy = greedy;
    return c;
}

void validate_sampler_config(const SamplerConfig& c)
{
    const auto bad = [](const std::string& what) -> void { throw Error("invalid sampling setting: " + what); };
    if (!std::isfinite(c.temperature) || c.temperature < 0.0f || c.temperature > kMaxTemperature ||
        (c.temperature > 0.0f && c.temperature < kMinTemperature))
        bad(fmt::format("temperature {} (use 0 for greedy, or {} to {})", c.temperature, kMinTemperature,
                        kMaxTemperature));
    if (c.top_k < 0)
        bad(fmt::format("top-k {} (use 0 for off, or a positive count)", c.top_k));
    if (!std::isfinite(c.top_p) || c.top_p < 0.0f || c.top_p > 1.0f)
        bad(fmt::format("top-p {} (use 0 to 1; 1 is off)", c.top_p));
    if (!std::isfinite(c.min_p) || c.min_p < 0.0f || c.min_p > 1.0f)
        bad(fmt::format("min-p {} (use 0 to 1; 0 is off)", c.min_p));
    if (!std::isfinite(c.repeat_penalty) || c.repeat_penalty <= 0.0f || c.repeat_penalty > kMaxRepeatPenalty)
        bad(fmt::format("repetition penalty {} (use above 0 up to {}; 1 is off)", c.repeat_penalty, kMaxRepeatPenalty));
    if (c.repeat_last_n < -1)
        bad(fmt::format("repetition window {} (use -1 for the whole history, 0 for off, or a positive count)",
                        c.repeat_last_n));
}

Sampler::Sampler(SamplerConfig config) : m_config(config), m_rng(config.seed)
{
    validate_sampler_config(m_config);
}

void Sampler::reseed(uint64_t seed)
{
    m_config.seed = seed;
    m_rng.seed(seed);
}

namespace {

// One call of Sampler::sample, stage by stage: its inputs, the sampler's reusable buffers it works
// in, and the stage views it records. Each stage is one member function, called in llama.cpp's
// order by Sampler::sample.
struct SamplePass {
    SamplePass(std::span<const float> logits_in, const SamplerConfig& config_in, std::vector<int32_t>& penalised_ids_in,
               std::vector<Candidate>& penalised_in, std::vector<Candidate>& raw_best_in,
               std::vector<Candidate>& cands_in, std::vector<StageView>& stages_in)
        : logits(logits_in), config(config_in), penalised_ids(penalised_ids_in), penalised(penalised_in),
          raw_best(raw_best_in), cands(cands_in), stages(stages_in), n_vocab(logits_in.size()),
          n_view(config_in.stage_view_size), views(n_view > 0),
          greedy(config_in.greedy || config_in.temperature <= 0.0f), top_k_on(config_in.top_k > 0),
          top_k(top_k_on ? std::min(n_vocab, static_cast<std::size_t>(config_in.top_k)) : n_vocab)
    {
    }

    std::span<const float> logits;
    const SamplerConfig& config;
    std::vector<int32_t>& penalised_ids; // (n_penalised) distinct ids of the penalty window, ascending
    std::vector<Candidate>& penalised;   // (n_penalised) those tokens with penalised logits, best first
    std::vector<Candidate>& raw_best;    // (needed + n_penalised) best raw logits, best first
    std::vector<Candidate>& cands;       // (survivors) what the filters still keep
    std::vector<StageView>& stages;
    const std::size_t n_vocab, n_view;
    const bool views, greedy, top_k_on;
    const std::size_t top_k;
    bool penalty_on = false;
    bool sorted = false;  // cands is in best-first order
    bool weighed = false; // cands' probability fields hold their weights at T = 1
    Normaliser z_raw, z;

    float raw_logit(std::size_t i) const { return clean(logits[i]); }
    Candidate raw_candidate(std::size_t i) const { return Candidate{static_cast<int32_t>(i), clean(logits[i]), 0.0f}; }

    // ---- the stage views ---------------------------------------------------------------------------
    StageView view(const char* name, std::size_t survivors, std::vector<Candidate> top, const Normaliser& norm) const
    {
        for (auto& c : top)
            c.probability = norm.probability(c.logit);
        return StageView{name, std::move(top), survivors, true};
    }
    std::vector<Candidate> best_of(const std::vector<Candidate>& best_first) const
    {
        return std::vector<Candidate>(best_first.begin(),
                                      best_first.begin() + offset(std::min(n_view, best_first.size())));
    }
    StageView cands_view(const char* name, const Normaliser& norm) const
    {
        std::vector<Candidate> top;
        if (sorted)
            top = best_of(cands);
        else
            select_top(
                cands.size(), n_view, [this](std::size_t i) { return cands[i]; }, top);
        return view(name, cands.size(), std::move(top), norm);
    }
    // A stage that changed nothing shows the previous distribution again, without recomputing it.
    StageView repeat_view(const char* name, bool applied) const
    {
        StageView v = stages.back();
        v.name = name;
        v.applied = applied;
        return v;
    }

    bool is_penalised(int32_t id) const { return std::binary_search(penalised_ids.begin(), penalised_ids.end(), id); }
    // The best `count` penalised logits: the best unpenalised ones are among the best
    // count + n_penalised raw logits (at most n_penalised of those are penalised), so merging
    // those with the penalised tokens is exact.
    std::vector<Candidate> penalised_best(std::size_t count) const
    {
        std::vector<Candidate> out;
        std::size_t i = 0;
        std::size_t j = 0;
        while (out.size() < count) {
            while (i < raw_best.size() && is_penalised(raw_best[i].id))
                ++i;
            const bool raw_left = i < raw_best.size();
            const bool penalised_left = j < penalised.size();
            if (!raw_left && !penalised_left)
                break;
            if (penalised_left && (!raw_left || better(penalised[j], raw_best[i])))
                out.push_back(penalised[j++]);
            else
                out.push_back(raw_best[i++]);
        }
        return out;
    }

    // ---- repetition penalty, as an overlay ----------------------------------------------------------
    // llama.cpp's penalties sampler: each distinct token of the window once, whatever its count;
    // dividing a negative logit would make the token more likely, so those are multiplied.
    // The at most repeat_last_n penalised tokens are kept aside instead of copying the logits.
    void penalise(std::span<const int32_t> history)
    {
        penalty_on = config.repeat_penalty != 1.0f && config.repeat_last_n != 0;
        penalised_ids.clear();
        penalised.clear();
        if (!penalty_on)
            return;
        const std::size_t window = config.repeat_last_n < 0
                                       ? history.size()
                                       : std::min(history.size(), static_cast<std::size_t>(config.repeat_last_n));
        for (const int32_t id : history.last(window))
            if (id >= 0 && static_cast<std::size_t>(id) < n_vocab)
                penalised_ids.push_back(id);
        std::sort(penalised_ids.begin(), penalised_ids.end());
        penalised_ids.erase(std::unique(penalised_ids.begin(), penalised_ids.end()), penalised_ids.end());
        for (const int32_t id : penalised_ids) {
            const float l = raw_logit(static_cast<std::size_t>(id));
            penalised.push_back({id, l > 0.0f ? l / config.repeat_penalty : l * config.repeat_penalty, 0.0f});
        }
        std::sort(penalised.begin(), penalised.end(), better);
    }

    // ---- the one pass over the vocabulary -----------------------------------------------------------
    // Everything short of "top-k off" needs only the best few logits: enough for the views, the
    // greedy argmax or top-k, plus as many as the penalty may push down.
    void find_best()
    {
        std::size_t needed = views ? n_view : 0;
        if (greedy)
            needed = std::max<std::size_t>(needed, 1);
        else if (top_k < n_vocab)
            needed = std::max(needed, top_k);
        raw_best.clear();
        if (needed > 0)
            select_top(
                n_vocab, needed + penalised.size(), [this](std::size_t i) { return raw_candidate(i); }, raw_best);
    }

    // ---- views of the logits and of the penalty -----------------------------------------------------
    void view_logits()
    {
        z_raw = normalise(
            n_vocab, [this](std::size_t i) { return raw_logit(i); }, raw_best.front().logit);
        stages.push_back(view("logits", n_vocab, best_of(raw_best), z_raw));
    }

    void view_penalty()
    {
        if (penalised.empty()) {
            stages.push_back(repeat_view("repetition penalty", penalty_on));
            return;
        }
        auto top = penalised_best(n_view);
        // The raw normaliser with the penalised terms swapped, rescaled to the new max. When
        // the penalised tokens held nearly all the mass the subtraction would cancel, so
        // that case (and infinite maxima) sums the vocabulary again.
        Normaliser zp{top.front().logit, 0.0};
        double removed = 0.0;
        double added = 0.0;
        for (const auto& c : penalised) {
            removed += z_raw.weight(raw_logit(static_cast<std::size_t>(c.id)));
            added += zp.weight(c.logit);
        }
        const double rest = z_raw.sum - removed;
        if (std::isfinite(z_raw.max) && std::isfinite(zp.max) && rest >= 1e-6 * z_raw.sum) {
            zp.sum = rest * std::exp(static_cast<double>(z_raw.max) - static_cast<double>(zp.max)) + added;
        } else {
            std::size_t j = 0;
            for (std::size_t i = 0; i < n_vocab; ++i) {
                if (j < penalised_ids.size() && static_cast<std::size_t>(penalised_ids[j]) == i)
                    ++j;
                else
                    zp.sum += zp.weight(raw_logit(i));
            }
            zp.sum += added;
        }
        stages.push_back(view("repetition penalty", n_vocab, std::move(top), zp));
    }

    // ---- greedy: the argmax survives every filter, so it skips them; ties go to the lowest id -------
    void take_greedy(SampleResult& result)
    {
        const Candidate best = penalised_best(1).front();
        result.token = best.id;
        result.probability = 1.0f;
        if (views) {
            for (const char* name : {"top-k", "top-p", "min-p", "temperature"})
                stages.push_back(repeat_view(name, false));
            stages.push_back(StageView{"final", {Candidate{best.id, best.logit, 1.0f}}, 1, true});
        }
    }

    // ---- top-k ---------------------------------------------------------------------------------------
    void apply_top_k()
    {
        if (top_k < n_vocab) {
            cands = penalised_best(top_k);
            sorted = true;
        } else {
            // Only without top-k do the later stages work on the whole vocabulary.
            cands.resize(n_vocab);
            for (std::size_t i = 0; i < n_vocab; ++i)
                cands[i] = raw_candidate(i);
            for (const auto& c : penalised)
                cands[static_cast<std::size_t>(c.id)].logit = c.logit;
        }
        // The weights at T = 1 serve the top-k view, top-p and the min-p view; without top-k they are
        // a pass of exp over the whole vocabulary, so they are computed only when one of those runs.
        weighed = top_k < n_vocab || config.top_p < 1.0f || (config.min_p > 0.0f && views);
        if (weighed)
            z = weigh(cands);
        if (views)
            stages.push_back(top_k < n_vocab ? cands_view("top-k", z) : repeat_view("top-k", top_k_on));
    }

    // ---- top-p ---------------------------------------------------------------------------------------
    void apply_top_p()
    {
        if (config.top_p < 1.0f) {
            sorted = keep_top_p(cands, sorted, z, config.top_p);
            z = reweigh(cands, z.max);
            if (views)
                stages.push_back(cands_view("top-p", z));
        } else if (views) {
            stages.push_back(repeat_view("top-p", false));
        }
    }

    // ---- min-p ---------------------------------------------------------------------------------------
    // p_i >= min_p · p_max, compared in logits as llama.cpp does: logit_i >= max + log(min_p).
    // Clamped to the max so that min_p >= 1 still keeps the best token.
    void apply_min_p()
    {
        if (config.min_p > 0.0f) {
            float max = z.max;
            if (!weighed)
                for (const auto& c : cands)
                    max = std::max(max, c.logit);
            const float threshold = std::min(max, max + std::log(config.min_p));
            std::erase_if(cands, [threshold](const Candidate& c) { return c.logit < threshold; });
            if (weighed)
                z = reweigh(cands, z.max);
            if (views)
                stages.push_back(cands_view("min-p", z));
        } else if (views) {
            stages.push_back(repeat_view("min-p", false));
        }
    }

    // ---- temperature: last, so the filters above saw the untempered distribution (llama.cpp's order)
    void apply_temperature()
    {
        for (auto& c : cands)
            c.logit /= config.temperature;
        z = weigh(cands);
        if (views) {
            stages.push_back(cands_view("temperature", z));
            stages.push_back(repeat_view("final", true));
        }
    }

    // ---- draw ----------------------------------------------------------------------------------------
    // Exactly one draw per sample, even with a single survivor, so that a sequence depends only
    // on the seed and the logits. The running sum adds the weights weigh() summed, in the same
    // order, so a target below z.sum always lands on a candidate; rounding that puts it at
    // z.sum falls back to the last candidate with any weight.
    void draw(std::mt19937_64& rng, SampleResult& result) const
    {
        const double target = uniform_unit(rng) * z.sum;
        double cumulative = 0.0;
        std::size_t chosen = cands.size();
        std::size_t last_weighted = 0;
        for (std::size_t i = 0; i < cands.size(); ++i) {
            const float w = cands[i].probability;
            if (w > 0.0f)
                last_weighted = i;
            cumulative += w;
            if (cumulative > target) {
                chosen = i;
                break;
            }
        }
        if (chosen == cands.size())
            chosen = last_weighted;
        result.token = cands[chosen].id;
        result.probability = static_cast<float>(cands[chosen].probability / z.sum);
    }
};

} // namespace

SampleResult Sampler::sample(std::span<const float> logits, std::span<const int32_t> history)
{
    SampleResult result;
    if (logits.empty())
        return result;
    SamplePass pass(logits, m_config, m_penalised_ids, m_penalised, m_raw_best, m_cands, result.stages);
    pass.penalise(history);
    pass.find_best();
    if (pass.views) {
        pass.view_logits();
        pass.view_penalty();
    }
    if (pass.greedy) {
        pass.take_greedy(result);
        return result;
    }
    pass.apply_top_k();
    pass.apply_top_p();
    pass.apply_min_p();
    pass.apply_temperature();
    pass.draw(m_rng, result);
    return result;
}

std::vector<Candidate> Sampler::distribution(std::span<const float> logits, std::span<const int32_t> history)
{
    if (logits.empty())
        return {};
    SamplerConfig config = m_config;
    config.stage_view_size = 0; // no views: only the survivors are wanted
    std::vector<StageView> no_views;
    SamplePass pass(logits, config, m_penalised_ids, m_penalised, m_raw_best, m_cands, no_views);
    pass.penalise(history);
    pass.find_best();
    if (pass.greedy) {
        SampleResult best;
        pass.take_greedy(best);
        return {Candidate{best.token, logits[std::size_t(best.token)], 1.0f}};
    }
    pass.apply_top_k();
    pass.apply_top_p();
    pass.apply_min_p();
    pass.apply_temperature();
    std::vector<Candidate> out;
    out.reserve(m_cands.size());
    for (const Candidate& c : m_cands)
        if (c.probability > 0.0f)
            out.push_back(Candidate{c.id, c.logit, static_cast<float>(c.probability / pass.z.sum)});
    std::sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
        return a.probability != b.probability ? a.probability > b.probability : a.id < b.id;
    });
    return out;
}

} // namespace engine
