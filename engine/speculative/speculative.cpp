// SPDX-License-Identifier: GPL-3.0-or-later
#include "speculative/speculative.h"

#include "lab/lab_run.h"
#include "model/model.h"
#include "session/session.h"
#include "util/error.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace engine {

namespace {

using clock = std::chrono::steady_clock;

double ms_since(clock::time_point t0)
{
    return std::chrono::duration<double, std::milli>(clock::now() - t0).count();
}

// A distribution's probabilities by id, for the lookups of the rejection rule (q may hold every
// survivor of a wide filter, so no scanning per token).
class ById {
public:
    explicit ById(std::span<const Candidate> d) : m_sorted(d.begin(), d.end())
    {
        std::sort(m_sorted.begin(), m_sorted.end(), [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
    }
    float operator()(TokenId id) const
    {
        const auto it = std::lower_bound(m_sorted.begin(), m_sorted.end(), id,
                                         [](const Candidate& c, TokenId v) { return c.id < v; });
        return it != m_sorted.end() && it->id == id ? it->probability : 0.0f;
    }

private:
    std::vector<Candidate> m_sorted;
};

float probability_in(std::span<const Candidate> d, TokenId id)
{
    for (const Candidate& c : d)
        if (c.id == id)
            return c.probability;
    return 0.0f;
}

// KL(target ‖ draft) of the softmaxes of two logit rows, over the ids both have (a draft model's
// vocabulary may differ by up to 128), nats.
float draft_kl(std::span<const float> target, std::span<const float> draft)
{
    const std::size_t n = std::min(target.size(), draft.size());
    return n ? float(kl_divergence(target.first(n), draft.first(n))) : -1.0f;
}

} // namespace

TokenChoice top_two(std::span<const float> logits, TokenId token)
{
    TokenChoice c;
    c.token = token;
    if (logits.empty())
        return c;
    c.best = 0;
    c.best_logit = logits[0];
    c.second = logits.size() > 1 ? 1 : 0;
    c.second_logit = -INFINITY;
    for (std::size_t i = 1; i < logits.size(); ++i) {
        if (logits[i] > c.best_logit) {
            c.second = c.best;
            c.second_logit = c.best_logit;
            c.best = TokenId(i);
            c.best_logit = logits[i];
        } else if (logits[i] > c.second_logit) {
            c.second = TokenId(i);
            c.second_logit = logits[i];
        }
    }
    return c;
}

Acceptance accept_draft(std::span<const std::vector<Candidate>> p, const Draft& draft, std::mt19937_64& rng,
                        ResidualRule rule)
{
    if (p.size() != draft.tokens.size() + 1)
        throw Error("accept_draft: one target distribution per drafted token and one for the token after");
    if (!draft.q.empty() && draft.q.size() != draft.tokens.size())
        throw Error("accept_draft: one draft distribution per drafted token, or none (point masses)");
    Acceptance a;
    for (std::size_t i = 0; i < draft.tokens.size(); ++i) {
        const std::vector<Candidate>& pi = p[i];
        if (pi.empty())
            throw Error("accept_draft: an empty target distribution");
        const TokenId d = draft.tokens[i];
        const bool point = draft.q.empty();
        DraftVerdict v;
        v.token = d;
        v.p = probability_in(pi, d);
        v.q = point ? 1.0f : probability_in(draft.q[i], d);
        v.target_top = pi.front().id;
        v.target_top_p = pi.front().probability;
        std::optional<ById> q;
        if (point) {
            v.overlap = v.p;
        } else {
            q.emplace(draft.q[i]);
            double overlap = 0.0;
            for (const Candidate& c : pi)
                overlap += std::min(c.probability, (*q)(c.id));
            v.overlap = float(overlap);
        }
        // accept with probability min(1, p/q): u < p/q, multiplied out
        v.accepted = uniform_unit(rng) * double(v.q) < double(v.p);
        a.verdicts.push_back(v);
        if (v.accepted) {
            ++a.accepted;
            continue;
        }
        // the residual max(0, p − q), over p's support (outside it p − q ≤ 0)
        std::vector<Candidate> residual;
        if (rule == ResidualRule::exact) {
            for (const Candidate& c : pi) {
                const float qc = point ? (c.id == d ? 1.0f : 0.0f) : (*q)(c.id);
                if (c.probability > qc)
                    residual.push_back(Candidate{c.id, c.logit, c.probability - qc});
            }
        }
        // target_only (the control), or rounding that left nothing: draw from p itself
        a.next =
            draw_from(residual.empty() ? std::span<const Candidate>(pi) : std::span<const Candidate>(residual), rng);
        a.corrected = true;
        return a;
    }
    a.next = draw_from(p.back(), rng);
    return a;
}

SpeculativeResult generate_speculative(Session& target, uint32_t n, Drafter& drafter, Sampler& sampler,
                                       const SpeculativeOptions& options)
{
    if (target.logits().empty())
        throw Error("speculative decoding needs a prompt evaluated first");
    if (options.draft_max == 0)
        throw Error("speculative decoding needs room for at least one drafted token (draft_max 1 or more)");
    SpeculativeResult r;
    if (n == 0)
        return r;
    const uint32_t n_vocab = target.model().config().n_vocab;
    const uint32_t n_ctx = target.backend().kv_cache().config().n_ctx;
    std::vector<TokenId> context(target.tokens().begin(), target.tokens().end());
    TokenId opened = sampler.sample(target.logits(), context).token;
    TokenChoice opened_choice = top_two(target.logits(), opened);
    while (true) {
        r.tokens.push_back(opened);
        r.choices.push_back(opened_choice);
        context.push_back(opened);
        if (r.tokens.size() == n)
            break; // the last token needs no pass: nothing follows it
        SpeculativeStep step;
        step.opened = opened;
        // drafts stop one short of n, so the last token is always the target's own draw and the session
        // ends as a decode loop's would (every token but the last evaluated); and where the cache ends
        const std::size_t free = n_ctx > context.size() ? n_ctx - context.size() : 0;
        const auto room = uint32_t(std::min<std::size_t>({options.draft_max, n - 1 - r.tokens.size(), free}));
        Draft d = room ? drafter.draft(context, room, options.record_kl) : Draft{};
        std::size_t keep = std::min<std::size_t>(d.tokens.size(), room);
        // A draft model's vocabulary may be larger (llama.cpp allows 128 more). A token the target does
        // not have has p = 0 there: it ends the draft, is always rejected, and the residual
        // max(0, p − q) is drawn at its position (so the output keeps the target's distribution).
        std::size_t valid = keep;
        for (std::size_t i = 0; i < keep && valid == keep; ++i)
            if (d.tokens[i] < 0 || uint32_t(d.tokens[i]) >= n_vocab)
                valid = i;
        if (valid < keep)
            keep = valid + 1;
        d.tokens.resize(keep);
        if (!d.q.empty())
            d.q.resize(keep);
        if (d.logits.size() > keep)
            d.logits.resize(keep);
        step.drafted = d.tokens;
        step.draft_ms = d.ms;

        std::vector<TokenId> batch{opened};
        batch.insert(batch.end(), d.tokens.begin(), d.tokens.begin() + std::ptrdiff_t(std::min(valid, keep)));
        const auto t0 = clock::now();
        const std::span<const float> rows = drafter.verify(target, batch); // valid until accept()
        ++r.passes;
        const std::size_t row = rows.size() / batch.size();
        const auto row_of = [&](std::size_t i) { return rows.subspan(i * row, row); };
        std::vector<std::vector<Candidate>> p(d.tokens.size() + 1);
        std::vector<TokenId> history = context;
        for (std::size_t i = 0; i < batch.size(); ++i) {
            p[i] = sampler.distribution(row_of(i), history);
            if (i < d.tokens.size())
                history.push_back(d.tokens[i]);
        }
        if (batch.size() < p.size()) // past a token the target does not have: never reached (it is rejected)
            p.back() = p[batch.size() - 1];
        step.acceptance = accept_draft(p, d, sampler.rng(), options.residual);
        const uint32_t accepted = step.acceptance.accepted;
        for (std::size_t i = 0; i < step.acceptance.verdicts.size(); ++i)
            if (options.record_kl && i < d.logits.size())
                step.acceptance.verdicts[i].kl = draft_kl(row_of(i), d.logits[i]);
        for (uint32_t i = 0; i < accepted; ++i) {
            r.tokens.push_back(d.tokens[i]);
            r.choices.push_back(top_two(row_of(i), d.tokens[i]));
            context.push_back(d.tokens[i]);
        }
        opened = step.acceptance.next;
        opened_choice = top_two(row_of(accepted), opened);
        target.accept(1 + accepted);
        step.verify_ms = ms_since(t0);
        r.drafted += uint32_t(d.tokens.size());
        r.accepted += accepted;
        r.draft_ms += step.draft_ms;
        r.verify_ms += step.verify_ms;
        r.steps.push_back(std::move(step));
        if (options.progress && !options.progress(r))
            return r;
    }
    return r;
}

std::vector<TokenId> generate_plain(Session& target, uint32_t n, Sampler& sampler, std::vector<TokenChoice>* choices,
                                    const std::function<bool()>& keep_going)
{
    if (target.logits().empty())
        throw Error("decoding needs a prompt evaluated first");
    std::vector<TokenId> context(target.tokens().begin(), target.tokens().end());
    std::vector<TokenId> out;
    for (uint32_t i = 0; i < n; ++i) {
        if (keep_going && !keep_going())
            break;
        const TokenId t = sampler.sample(target.logits(), context).token;
        if (choices)
            choices->push_back(top_two(target.logits(), t));
        out.push_back(t);
        context.push_back(t);
        if (i + 1 < n)
            target.decode(t);
    }
    return out;
}

std::vector<PositionAcceptance> acceptance_by_position(const SpeculativeResult& r)
{
    std::vector<PositionAcceptance> out;
    for (const SpeculativeStep& step : r.steps) {
        if (out.size() < step.drafted.size())
            out.resize(step.drafted.size());
        for (std::size_t j = 0; j < step.drafted.size(); ++j) {
            ++out[j].drafted;
            out[j].accepted += j < step.acceptance.accepted;
        }
    }
    return out;
}

namespace {

class FunctionDrafter final : public Drafter {
public:
    explicit FunctionDrafter(const DraftFn& fn) : m_fn(fn) {}
    std::string name() const override { return "function"; }
    Draft draft(std::span<const TokenId> context, uint32_t k, bool) override { return Draft{m_fn(context, k), {}, {}}; }

private:
    const DraftFn& m_fn;
};

Sampler greedy_sampler()
{
    SamplerConfig c;
    c.greedy = true;
    c.stage_view_size = 0;
    c.repeat_penalty = 1.0f;
    return Sampler(c);
}

} // namespace

SpeculativeResult generate_speculative_greedy(Session& target, uint32_t n, uint32_t k, const DraftFn& draft)
{
    FunctionDrafter drafter(draft);
    Sampler sampler = greedy_sampler();
    return generate_speculative(target, n, drafter, sampler, {.draft_max = k});
}

std::vector<TokenId> generate_plain_greedy(Session& target, uint32_t n)
{
    Sampler sampler = greedy_sampler();
    return generate_plain(target, n, sampler);
}

} // namespace engine
