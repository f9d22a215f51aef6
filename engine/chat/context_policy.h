// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "chat/chat_template.h"

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace engine {

// Tokens of a whole rendered prompt, counted as the model will see it (BOS added, control-token
// strings parsed), e.g. Tokenizer::encode_ids(text).size().
using TokenCounter = std::function<std::size_t(const std::string&)>;

struct FitResult {
    std::vector<ChatMessage> kept; // the messages to render, in their original order
    std::size_t dropped_turns = 0; // oldest user/assistant turns left out
    std::size_t prompt_tokens = 0; // of render_chat(format, kept, true)
    bool fits = false;             // prompt_tokens + reply reserve <= context size
    // A sentence for the user, empty when nothing was dropped and everything fits, e.g. "Dropped
    // the 2 oldest turns (340 tokens) to fit the 2,048-token context; the system prompt is kept."
    std::string notice;
    // render_chat(style, kept, true) as it was counted, and what that rendering said of itself (a
    // template that failed and the fixed layout used instead); renders: how many the search made.
    std::string prompt;
    std::string prompt_notice;
    std::size_t renders = 0;
};

// Which messages of a conversation to send so that the prompt (rendered with the assistant
// prefix) plus reply_reserve tokens fit in context_size tokens. Policy: system messages and the
// latest user message (with anything after it) are always kept; the oldest turns — a user
// message and the replies that follow it — are dropped whole, as few as possible. When even the
// kept minimum does not fit, the result holds that minimum with fits = false and a notice naming
// what it needs and what the context holds.
FitResult fit_to_context(const std::vector<ChatMessage>& messages, const TokenCounter& count_tokens,
                         const ChatStyle& style, std::size_t context_size, std::size_t reply_reserve);

// 2048 → "2,048": how notices write token counts.
std::string format_count(std::size_t n);

} // namespace engine
