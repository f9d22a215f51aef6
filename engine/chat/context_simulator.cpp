// SPDX-License-Identifier: GPL-3.0-or-later
#include "chat/context_simulator.h"

#include "chat/model_template.h"
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <ctime>
#include <numeric>

namespace engine {

std::string_view overflow_policy_name(OverflowPolicy policy)
{
    switch (policy) {
    case OverflowPolicy::DropOldest:
        return "drop oldest turns";
    case OverflowPolicy::KeepSystemPrompt:
        return "keep system prompt, drop oldest turns";
    case OverflowPolicy::SlidingWindow:
        return "sliding window";
    }
    return "?";
}

namespace {

// What the cache holds after a request: (turn, tokens as sent) in order, the reply last.
using CachedRun = std::vector<std::pair<uint32_t, uint32_t>>;

uint32_t reused_prefix(const CachedRun& cached, const SimRequest& r)
{
    uint32_t reused = 0;
    for (std::size_t i = 0; i < r.kept.size() && i < cached.size(); ++i) {
        if (cached[i].first != r.kept[i] || cached[i].second != r.kept_tokens[i])
            break;
        reused += r.kept_tokens[i];
    }
    return reused;
}

} // namespace

std::vector<SimRequest> simulate_context(const std::vector<SimTurn>& turns, uint32_t window, OverflowPolicy policy)
{
    std::vector<SimRequest> out;
    CachedRun cached;
    uint64_t without = 0, with = 0;
    for (uint32_t t = 0; t < turns.size(); ++t) {
        if (turns[t].role != "user")
            continue;
        SimRequest r;
        r.turn = t;
        r.output_tokens = t + 1 < turns.size() && turns[t + 1].role == "assistant" ? turns[t + 1].tokens : 0;
        std::vector<uint32_t> candidates(t + 1);
        std::iota(candidates.begin(), candidates.end(), 0u);
        const auto input_of = [&](const std::vector<uint32_t>& kept) {
            uint64_t n = 0;
            for (uint32_t i : kept)
                n += turns[i].tokens;
            return n;
        };
        const uint64_t budget = window > r.output_tokens ? window - r.output_tokens : 0;
        r.kept = candidates;
        if (input_of(r.kept) > budget) {
            r.overflow = true;
            if (policy == OverflowPolicy::SlidingWindow) {
                // Keep the newest `budget` tokens: whole turns from the end, then part of one.
                std::vector<uint32_t> kept, kept_tokens;
                uint64_t room = budget;
                for (uint32_t i = t + 1; i-- > 0 && room > 0;) {
                    const uint32_t take = uint32_t(std::min<uint64_t>(room, turns[i].tokens));
                    kept.insert(kept.begin(), i);
                    kept_tokens.insert(kept_tokens.begin(), take);
                    r.cut_tokens = turns[i].tokens - take;
                    room -= take;
                }
                r.dropped_turns = uint32_t(candidates.size() - kept.size());
                r.kept = std::move(kept);
                r.kept_tokens = std::move(kept_tokens);
                r.fits = budget > 0;
            } else {
                const bool keep_system = policy == OverflowPolicy::KeepSystemPrompt && turns[0].role == "system";
                // Drop from the oldest droppable turn; the triggering user turn always stays.
                std::size_t first = keep_system ? 1 : 0;
                while (input_of(r.kept) > budget && first < r.kept.size() - 1) {
                    r.kept.erase(r.kept.begin() + std::ptrdiff_t(first));
                    ++r.dropped_turns;
                }
                r.fits = input_of(r.kept) <= budget;
            }
        }
        if (r.kept_tokens.empty())
            for (uint32_t i : r.kept)
                r.kept_tokens.push_back(turns[i].tokens);
        r.input_tokens = std::accumulate(r.kept_tokens.begin(), r.kept_tokens.end(), 0u);
        r.recomputed_tokens = r.input_tokens - reused_prefix(cached, r);
        without += r.input_tokens;
        with += r.recomputed_tokens;
        r.processed_without_cache = without;
        r.processed_with_cache = with;
        cached.clear();
        for (std::size_t i = 0; i < r.kept.size(); ++i)
            cached.emplace_back(r.kept[i], r.kept_tokens[i]);
        if (r.output_tokens)
            cached.emplace_back(t + 1, r.output_tokens);
        out.push_back(std::move(r));
    }
    return out;
}

uint32_t count_turn_tokens(const Tokenizer& tokenizer, ChatFormat format, const ChatMessage& message)
{
    const std::string text = render_chat(format, {message}, false);
    return static_cast<uint32_t>(tokenizer.encode_ids(text, {.add_special = false, .parse_special = true}).size());
}

} // namespace engine

namespace engine {

std::vector<uint32_t> count_turn_tokens(const Tokenizer& tokenizer, const ChatStyle& style,
                                        const std::vector<ChatMessage>& messages)
{
    const auto count = [&](const std::string& text) {
        return tokenizer.encode_ids(text, {.add_special = false, .parse_special = true}).size();
    };
    std::vector<uint32_t> out;
    if (style.model_template) {
        try {
            std::size_t before = 0;
            for (std::size_t i = 0; i < messages.size(); ++i) {
                const std::vector<ChatMessage> prefix(messages.begin(), messages.begin() + std::ptrdiff_t(i + 1));
                const std::size_t now = count(style.model_template->render(prefix, false, std::time(nullptr)));
                out.push_back(static_cast<uint32_t>(now > before ? now - before : 0));
                before = now;
            }
            return out;
        } catch (const jinja::TemplateError&) {
            out.clear(); // counted on their own below
        }
    }
    for (const auto& m : messages)
        out.push_back(count_turn_tokens(tokenizer, style.format, m));
    return out;
}

} // namespace engine
