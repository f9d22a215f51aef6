// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "chat/chat_template.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace engine {

// The context-window fill simulator: a chat re-sends its whole history with every request, so the
// input grows turn by turn until the window overflows and a policy decides what is left out. All
// counts are tokens, from the real tokenizer (or given for synthetic turns).

enum class OverflowPolicy {
    DropOldest,       // drop the oldest turns, the system prompt included, until it fits
    KeepSystemPrompt, // as above, but the system prompt stays
    SlidingWindow,    // keep the newest tokens: the oldest kept turn may be cut part-way
};
std::string_view overflow_policy_name(OverflowPolicy policy);

struct SimTurn {
    std::string role;    // system | user | assistant
    uint32_t tokens = 0; // as rendered by the chat template, markers included
};

struct SimRequest {
    uint32_t turn = 0;                    // the user turn that triggers it
    std::vector<uint32_t> kept;           // turns sent, oldest first
    std::vector<uint32_t> kept_tokens;    // their tokens as sent (sliding window: the first may be cut)
    uint32_t input_tokens = 0;            // prompt re-sent: the kept turns
    uint32_t output_tokens = 0;           // the reply (the assistant turn after it; 0 when there is none yet)
    uint32_t dropped_turns = 0;           // turns the policy left out
    uint32_t cut_tokens = 0;              // tokens cut from the oldest kept turn (sliding window)
    bool overflow = false;                // the policy had to act
    bool fits = true;                     // false when even the newest turn with its reply exceeds the window
    uint32_t recomputed_tokens = 0;       // input tokens a prefix cache could not reuse from the previous request
    uint64_t processed_without_cache = 0; // cumulative over requests: Σ input tokens
    uint64_t processed_with_cache = 0;    // cumulative: Σ recomputed tokens
};

// One request per user turn; the reply reserved in the window is the assistant turn that follows
// (its real length). A request's cache holds its input and reply, so the next request reuses the
// longest run of identical turns at the front.
std::vector<SimRequest> simulate_context(const std::vector<SimTurn>& turns, uint32_t window, OverflowPolicy policy);

class Tokenizer;
// One message's tokens as the chat template renders it on its own (turn markers included, BOS not).
uint32_t count_turn_tokens(const Tokenizer& tokenizer, ChatFormat format, const ChatMessage& message);
// Each message's tokens as the model's own chat style renders the conversation: with the model's
// template, what the conversation grows by when the message is added (so the first one carries what
// the template writes before it, a default system message included); a template that stops on a
// part of the conversation, and the fixed layouts, count each message on its own as above.
std::vector<uint32_t> count_turn_tokens(const Tokenizer& tokenizer, const ChatStyle& style,
                                        const std::vector<ChatMessage>& messages);

} // namespace engine
