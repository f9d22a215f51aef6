// SPDX-License-Identifier: GPL-3.0-or-later
#include "chat/context_policy.h"

#include <limits>
#include <map>

namespace engine {

namespace {

constexpr std::size_t k_none = std::numeric_limits<std::size_t>::max();

// The conversation cut into what may be dropped: turn[i] is the droppable turn message i belongs
// to (0 = oldest), or k_none for a system message or one of the protected tail — the latest user
// message and everything after it.
struct Turns {
    std::vector<std::size_t> turn;
    std::size_t count = 0;
    bool has_system = false;
    bool has_user = false;
};

Turns split_turns(const std::vector<ChatMessage>& messages)
{
    Turns t;
    t.turn.assign(messages.size(), k_none);
    std::size_t tail = messages.size();
    for (std::size_t i = 0; i < messages.size(); ++i) {
        if (messages[i].role == "user")
            tail = i;
        t.has_system = t.has_system || messages[i].role == "system";
    }
    t.has_user = tail < messages.size();
    bool open = false; // a turn has started (a leading reply before any user message is a turn of its own)
    for (std::size_t i = 0; i < tail; ++i) {
        if (messages[i].role == "system")
            continue;
        if (messages[i].role == "user" || !open) {
            ++t.count;
            open = true;
        }
        t.turn[i] = t.count - 1;
    }
    return t;
}

std::vector<ChatMessage> keep_after(const std::vector<ChatMessage>& messages, const Turns& t, std::size_t dropped)
{
    std::vector<ChatMessage> kept;
    for (std::size_t i = 0; i < messages.size(); ++i)
        if (t.turn[i] == k_none || t.turn[i] >= dropped)
            kept.push_back(messages[i]);
    return kept;
}

std::string drop_notice(std::size_t turns, std::size_t tokens, std::size_t context_size, bool has_system)
{
    std::string s = turns == 1 ? "Dropped the oldest turn" : "Dropped the " + format_count(turns) + " oldest turns";
    s += " (" + format_count(tokens) + (tokens == 1 ? " token" : " tokens") + ") to fit the " +
         format_count(context_size) + "-token context";
    s += has_system ? "; the system prompt is kept." : ".";
    return s;
}

std::string overflow_notice(const Turns& t, std::size_t prompt_tokens, std::size_t reply_reserve,
                            std::size_t context_size)
{
    std::string s;
    if (t.has_system && t.has_user)
        s = "The system prompt and the latest message alone need ";
    else if (t.has_user)
        s = "The latest message alone needs ";
    else
        s = "The conversation needs ";
    s += format_count(prompt_tokens) + (prompt_tokens == 1 ? " token" : " tokens");
    if (reply_reserve > 0)
        s += ", plus " + format_count(reply_reserve) + " reserved for the reply";
    s += ", but the context holds " + format_count(context_size) + " tokens.";
    return s;
}

} // namespace

std::string format_count(std::size_t n)
{
    std::string digits = std::to_string(n);
    std::string out;
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0)
            out += ',';
        out += digits[i];
    }
    return out;
}

FitResult fit_to_context(const std::vector<ChatMessage>& messages, const TokenCounter& count_tokens,
                         const ChatStyle& style, std::size_t context_size, std::size_t reply_reserve)
{
    const Turns t = split_turns(messages);
    struct Rendering {
        std::string text;
        std::string notice;
        std::size_t tokens = 0;
    };
    std::map<std::size_t, Rendering> renderings; // dropped turns → the prompt, each rendered and counted once
    const auto rendering = [&](std::size_t dropped) -> const Rendering& {
        auto it = renderings.find(dropped);
        if (it == renderings.end()) {
            Rendering r;
            r.text = render_chat(style, keep_after(messages, t, dropped), true, &r.notice);
            r.tokens = count_tokens(r.text);
            it = renderings.emplace(dropped, std::move(r)).first;
        }
        return it->second;
    };
    const auto prompt_tokens = [&](std::size_t dropped) { return rendering(dropped).tokens; };
    const auto fits = [&](std::size_t dropped) {
        const std::size_t n = prompt_tokens(dropped);
        return n <= context_size && reply_reserve <= context_size - n;
    };
    const auto result = [&](std::size_t dropped, bool fit, std::string notice) {
        const Rendering& r = rendering(dropped);
        FitResult out{keep_after(messages, t, dropped), dropped, r.tokens, fit, std::move(notice)};
        out.prompt = r.text;
        out.prompt_notice = r.notice;
        out.renders = renderings.size();
        return out;
    };

    if (fits(0))
        return result(0, true, {});
    if (!fits(t.count))
        return result(t.count, false, overflow_notice(t, prompt_tokens(t.count), reply_reserve, context_size));

    // Fewest dropped turns that fit: dropping none does not, dropping all does. Each count
    // tokenizes the whole prompt, so search rather than drop one turn at a time.
    std::size_t lo = 0, hi = t.count;
    while (hi - lo > 1) {
        const std::size_t mid = lo + (hi - lo) / 2;
        (fits(mid) ? hi : lo) = mid;
    }
    const std::size_t n = prompt_tokens(hi);
    const std::size_t freed = prompt_tokens(0) > n ? prompt_tokens(0) - n : 0;
    return result(hi, true, drop_notice(hi, freed, context_size, t.has_system));
}

} // namespace engine
