// SPDX-License-Identifier: GPL-3.0-or-later
#include "speculative/speculative.h"

#include "session/session.h"
#include "util/error.h"

#include <algorithm>

namespace engine {

namespace {

// The highest logit, ties to the lowest id (the greedy rule of every generator here).
TokenId argmax(std::span<const float> logits)
{
    return static_cast<TokenId>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

} // namespace

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

std::vector<TokenId> generate_plain_greedy(Session& target, uint32_t n)
{
    if (target.logits().empty())
        throw Error("decoding needs a prompt evaluated first");
    std::vector<TokenId> out;
    for (uint32_t i = 0; i < n; ++i) {
        out.push_back(argmax(target.logits()));
        if (i + 1 < n)
            target.decode(out.back());
    }
    return out;
}

SpeculativeResult generate_speculative_greedy(Session& target, uint32_t n, uint32_t k, const DraftFn& draft)
{
    if (target.logits().empty())
        throw Error("speculative decoding needs a prompt evaluated first");
    SpeculativeResult r;
    std::vector<TokenId> context(target.tokens().begin(), target.tokens().end());
    while (r.tokens.size() < n) {
        SpeculativeStep step;
        step.chosen = argmax(target.logits());
        r.tokens.push_back(step.chosen);
        context.push_back(step.chosen);
        if (r.tokens.size() == n)
            break; // the last token needs no pass: nothing follows it
        // drafts stop one short of n, so the last token is always the target's own choice and the
        // session ends as a decode loop's would (every token but the last evaluated)
        const uint32_t room = std::min<uint32_t>(k, n - 1 - uint32_t(r.tokens.size()));
        step.drafted = room ? draft(context, room) : std::vector<TokenId>{};
        if (step.drafted.size() > room)
            step.drafted.resize(room);
        std::vector<TokenId> batch{step.chosen};
        batch.insert(batch.end(), step.drafted.begin(), step.drafted.end());
        const std::span<const float> rows = target.verify(batch); // valid until accept()
        ++r.passes;
        const std::size_t n_vocab = rows.size() / batch.size();
        // row i predicts the token after batch[i]: draft token i is kept while row i chose it
        while (step.accepted < step.drafted.size() &&
               argmax(rows.subspan(step.accepted * n_vocab, n_vocab)) == step.drafted[step.accepted])
            ++step.accepted;
        for (uint32_t i = 0; i < step.accepted; ++i) {
            r.tokens.push_back(step.drafted[i]);
            context.push_back(step.drafted[i]);
        }
        target.accept(1 + step.accepted);
        r.drafted += uint32_t(step.drafted.size());
        r.accepted += step.accepted;
        r.steps.push_back(std::move(step));
    }
    r.tokens.resize(n);
    return r;
}

} // namespace engine
