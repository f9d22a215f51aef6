// SPDX-License-Identifier: GPL-3.0-or-later
#include "speculative/drafters.h"

#include "backend/backend.h"
#include "model/model.h"
#include "session/session.h"
#include "util/error.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <spdlog/fmt/fmt.h>
#include <unordered_map>

namespace engine {

TokenId draw_from(std::span<const Candidate> distribution, std::mt19937_64& rng)
{
    if (distribution.empty())
        throw Error("nothing to draw from: the distribution is empty");
    double sum = 0.0;
    for (const Candidate& c : distribution)
        sum += c.probability;
    const double target = uniform_unit(rng) * sum;
    double cumulative = 0.0;
    std::size_t last = 0;
    for (std::size_t i = 0; i < distribution.size(); ++i) {
        if (distribution[i].probability > 0.0f)
            last = i;
        cumulative += distribution[i].probability;
        if (cumulative > target)
            return distribution[i].id;
    }
    return distribution[last].id;
}

std::vector<TokenId> lookup_draft(std::span<const TokenId> context, uint32_t k, uint32_t max_ngram, uint32_t min_ngram)
{
    const std::size_t size = context.size();
    const auto longest = static_cast<uint32_t>(std::min<std::size_t>(max_ngram, size > 0 ? size - 1 : 0));
    for (uint32_t n = longest; n >= std::max(1u, min_ngram); --n) {
        const auto tail = context.subspan(size - n);
        // the most recent earlier occurrence: its start at most size − n − 1
        for (std::size_t start = size - n; start-- > 0;) {
            if (!std::equal(tail.begin(), tail.end(), context.begin() + std::ptrdiff_t(start)))
                continue;
            const std::size_t from = start + n;
            const std::size_t take = std::min<std::size_t>(k, size - from);
            if (take == 0)
                continue;
            return {context.begin() + std::ptrdiff_t(from), context.begin() + std::ptrdiff_t(from + take)};
        }
        if (n == 1)
            break;
    }
    return {};
}

std::vector<TokenId> ngram_draft(std::span<const TokenId> context, uint32_t k)
{
    struct Rule {
        uint32_t votes;
        double share;
    };
    static constexpr Rule kRules[5] = {{0, 0}, {2, 0.66}, {2, 0.5}, {1, 0.5}, {1, 0.5}};
    std::vector<TokenId> seq(context.begin(), context.end());
    std::vector<TokenId> draft;
    std::unordered_map<TokenId, uint32_t> votes;
    while (draft.size() < k) {
        const std::size_t size = seq.size();
        std::optional<TokenId> chosen;
        for (uint32_t n = 4; n >= 1 && !chosen; --n) {
            if (size < n + 1)
                continue;
            votes.clear();
            uint32_t total = 0;
            const auto tail = std::span<const TokenId>(seq).subspan(size - n);
            for (std::size_t start = 0; start + n < size; ++start) // each earlier occurrence and what followed
                if (std::equal(tail.begin(), tail.end(), seq.begin() + std::ptrdiff_t(start))) {
                    ++votes[seq[start + n]];
                    ++total;
                }
            TokenId best = 0;
            uint32_t best_votes = 0;
            for (const auto& [token, count] : votes)
                if (count > best_votes || (count == best_votes && token < best)) {
                    best = token;
                    best_votes = count;
                }
            if (best_votes >= kRules[n].votes && best_votes > 0 && double(best_votes) >= kRules[n].share * total)
                chosen = best;
        }
        if (!chosen)
            break;
        draft.push_back(*chosen);
        seq.push_back(*chosen);
    }
    return draft;
}

std::span<const float> Drafter::verify(Session& target, std::span<const TokenId> batch)
{
    return target.verify(batch);
}

Draft LookupDrafter::draft(std::span<const TokenId> context, uint32_t k, bool)
{
    const auto t0 = std::chrono::steady_clock::now();
    Draft d;
    d.tokens = ngram_draft(context, k);
    d.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return d;
}

namespace {

// SplitMix64's finaliser: a seed for the drafter's generator that shares nothing with the target's
// stream started from the same seed (the acceptance tests must be independent of the draws they test).
uint64_t drafter_seed(uint64_t seed)
{
    uint64_t z = seed + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// A drafter's sampler: no stage views, its own stream.
SamplerConfig drafting_config(SamplerConfig sampler)
{
    sampler.stage_view_size = 0;
    sampler.seed = drafter_seed(sampler.seed);
    return sampler;
}

// One drafted token from a drafter's logits: the argmax (a point mass) when greedy, else a draw whose
// distribution joins the draft as q; the logits too when asked for.
TokenId draft_token(Sampler& sampler, std::span<const float> logits, std::span<const int32_t> history, Draft& d,
                    bool want_logits)
{
    TokenId token;
    if (sampler.config().greedy || sampler.config().temperature <= 0.0f) {
        token = sampler.sample(logits, history).token;
    } else {
        std::vector<Candidate> q = sampler.distribution(logits, history);
        token = draw_from(q, sampler.rng());
        d.q.push_back(std::move(q));
    }
    if (want_logits)
        d.logits.emplace_back(logits.begin(), logits.end());
    d.tokens.push_back(token);
    return token;
}

} // namespace

ModelDrafter::ModelDrafter(std::unique_ptr<Session> session, SamplerConfig sampler, std::string name)
    : m_session(std::move(session)), m_sampler(drafting_config(sampler)), m_name(std::move(name))
{
}

ModelDrafter::~ModelDrafter() = default;

Draft ModelDrafter::draft(std::span<const TokenId> context, uint32_t k, bool want_logits)
{
    const auto t0 = std::chrono::steady_clock::now();
    Draft d;
    if (context.empty() || k == 0)
        return d;
    Session& s = *m_session;
    // Follow the context: the shared prefix stays cached, a rejected tail is cut, new tokens evaluated.
    // Drafting stops (short) where the draft's context is full; the target goes on without it.
    const uint32_t n_ctx = s.backend().kv_cache().config().n_ctx;
    if (context.size() >= n_ctx)
        return d;
    // a draft model's vocabulary may be smaller (llama.cpp allows 128 fewer): where the text holds a
    // token it does not have, it cannot read the text, so it drafts nothing
    const uint32_t n_vocab = s.model().config().n_vocab;
    if (std::any_of(context.begin(), context.end(), [&](TokenId t) { return t < 0 || uint32_t(t) >= n_vocab; }))
        return d;
    s.prefill(context);
    std::vector<int32_t> history(context.begin(), context.end());
    for (uint32_t i = 0; i < k; ++i) {
        const TokenId token = draft_token(m_sampler, s.logits(), history, d, want_logits);
        history.push_back(token);
        if (i + 1 == k || s.tokens().size() + 1 >= n_ctx)
            break;
        s.decode(token);
    }
    d.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return d;
}

SharedEarlyExitDrafter::SharedEarlyExitDrafter(Session& target, uint32_t layers, SamplerConfig sampler,
                                               std::string name)
    : m_target(target), m_layers(layers), m_sampler(drafting_config(sampler)), m_name(std::move(name))
{
    check_exit_depth(target.model(), layers);
}

Draft SharedEarlyExitDrafter::draft(std::span<const TokenId> context, uint32_t k, bool want_logits)
{
    const auto t0 = std::chrono::steady_clock::now();
    Draft d;
    m_target.discard_lower();
    const auto& seq = m_target.tokens();
    // the context is the target's sequence and the token that opens the step (not evaluated yet)
    if (k == 0 || context.size() != seq.size() + 1 || !std::equal(seq.begin(), seq.end(), context.begin()))
        return d;
    std::vector<int32_t> history(context.begin(), context.end());
    TokenId token = context.back();
    for (uint32_t i = 0; i < k; ++i) {
        token = draft_token(m_sampler, m_target.lower_pass(token, m_layers), history, d, want_logits);
        history.push_back(token);
    }
    d.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return d;
}

std::span<const float> SharedEarlyExitDrafter::verify(Session& target, std::span<const TokenId> batch)
{
    if (&target != &m_target)
        return target.verify(batch);
    const auto done = m_target.lower_tokens();
    if (done.size() > batch.size() || !std::equal(done.begin(), done.end(), batch.begin()))
        m_target.discard_lower(); // the loop cut the draft elsewhere: its lower passes again
    // the tokens not lower-passed yet (the draft's last, or the opening token of an empty draft)
    for (std::size_t j = m_target.lower_tokens().size(); j < batch.size(); ++j)
        m_target.lower_pass(batch[j], m_layers);
    return m_target.verify_upper(batch);
}

void check_draft_vocabulary(const Model& target, const Model& draft)
{
    const Vocab& t = target.tokenizer().vocab();
    const Vocab& d = draft.tokenizer().vocab();
    const auto refuse = [&](const std::string& why) {
        throw Error(fmt::format("the draft model {} cannot draft for {}: {} (a draft model needs the target's "
                                "vocabulary)",
                                std::filesystem::path(draft.file().name()).filename().string(),
                                std::filesystem::path(target.file().name()).filename().string(), why));
    };
    if (t.model != d.model || t.model_name != d.model_name)
        refuse(fmt::format("its tokenizer is {}, the target's {}", d.model_name, t.model_name));
    const auto id = [](const std::optional<TokenId>& v) { return v ? std::to_string(*v) : std::string("none"); };
    if (t.add_bos != d.add_bos || (t.add_bos && t.bos != d.bos))
        refuse(fmt::format("it {} BOS {}, the target {} BOS {}", d.add_bos ? "adds" : "does not add", id(d.bos),
                           t.add_bos ? "adds" : "does not add", id(t.bos)));
    if (t.add_eos != d.add_eos || (t.add_eos && t.eos != d.eos))
        refuse(fmt::format("it {} EOS {}, the target {} EOS {}", d.add_eos ? "adds" : "does not add", id(d.eos),
                           t.add_eos ? "adds" : "does not add", id(t.eos)));
    const uint32_t nt = target.config().n_vocab, nd = draft.config().n_vocab;
    if ((nt > nd ? nt - nd : nd - nt) > 128)
        refuse(fmt::format("its vocabulary has {} tokens, the target's {} (at most 128 apart)", nd, nt));
    const std::size_t common = std::min(t.size(), d.size());
    for (std::size_t i = 5; i < common; ++i)
        if (t.tokens[i] != d.tokens[i])
            refuse(fmt::format("token {} is \"{}\" in it and \"{}\" in the target", i, d.tokens[i], t.tokens[i]));
}

std::string early_exit_name(const Model& target, uint32_t layers)
{
    return fmt::format("early exit after {} of {} layers", layers, target.config().n_layer);
}

std::string DraftSource::text() const
{
    switch (kind) {
    case Kind::lookup:
        return "lookup";
    case Kind::early_exit:
        return fmt::format("early-exit:{}", layers);
    case Kind::draft_model:
        return "draft:" + draft_path;
    }
    return {};
}

DraftSource parse_draft_source(std::string_view text)
{
    DraftSource s;
    if (text == "lookup")
        return s;
    if (text.starts_with("early-exit:")) {
        const std::string n(text.substr(11));
        char* end = nullptr;
        const unsigned long v = n.empty() ? 0 : std::strtoul(n.c_str(), &end, 10);
        if (n.empty() || *end != '\0' || v == 0 || v > 100000)
            throw Error(fmt::format("{}: early-exit needs the number of the target's layers to draft with "
                                    "(early-exit:L, L ≥ 1)",
                                    text));
        s.kind = DraftSource::Kind::early_exit;
        s.layers = uint32_t(v);
        return s;
    }
    if (text.starts_with("draft:") && text.size() > 6) {
        s.kind = DraftSource::Kind::draft_model;
        s.draft_path = std::string(text.substr(6));
        return s;
    }
    throw Error(fmt::format("{}: not a draft source (lookup, early-exit:L or draft:FILE)", text));
}

std::unique_ptr<Drafter> make_drafter(const DraftSource& source, std::shared_ptr<const Model> target,
                                      const BackendFactory& backend_for, const SamplerConfig& sampler,
                                      Session* target_session)
{
    switch (source.kind) {
    case DraftSource::Kind::lookup:
        return std::make_unique<LookupDrafter>();
    case DraftSource::Kind::early_exit: {
        if (target_session)
            return std::make_unique<SharedEarlyExitDrafter>(*target_session, source.layers, sampler,
                                                            early_exit_name(*target, source.layers));
        auto session = std::make_unique<Session>(target, backend_for(target));
        session->set_exit_layer(source.layers); // throws for a depth the model does not have
        return std::make_unique<ModelDrafter>(std::move(session), sampler, early_exit_name(*target, source.layers));
    }
    case DraftSource::Kind::draft_model: {
        std::shared_ptr<const Model> draft = Model::load(source.draft_path);
        check_draft_vocabulary(*target, *draft);
        auto session = std::make_unique<Session>(draft, backend_for(draft));
        return std::make_unique<ModelDrafter>(std::move(session), sampler,
                                              "draft model " +
                                                  std::filesystem::path(draft->file().name()).filename().string());
    }
    }
    throw Error("unknown draft source");
}

} // namespace engine
