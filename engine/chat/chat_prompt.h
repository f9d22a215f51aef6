// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "chat/chat_template.h"
#include "chat/context_policy.h"

#include <cstddef>
#include <string>
#include <vector>

namespace engine {

class Model;

// One chat turn as the model receives it: the conversation fitted to the context (oldest turns
// dropped when needed), rendered with the model's chat style, and the text that ends the reply.
// The chat panel and `tokenscope-cli chat` both build their prompts here, so a script sees exactly
// what the panel sends.
struct ChatPrompt {
    ChatStyle style;
    FitResult fit;    // fit.fits false: even the latest message does not fit (fit.notice says why)
    std::string text; // render_chat(style, fit.kept, true); BOS not included
    std::vector<std::string> stop_strings;
    // Non-empty when the model's own template could not render this prompt (style.notice, or what
    // the template raised on this conversation) and a fixed layout was used: shown to the user.
    std::string template_notice;
};

// The model's chat style: its own template with its vocabulary's BOS/EOS texts and flags
// (model_chat_style), or the fixed layout.
ChatStyle model_chat_style(const Model& model);

ChatPrompt build_chat_prompt(const Model& model, const std::vector<ChatMessage>& messages, std::size_t context_size,
                             std::size_t reply_reserve);

} // namespace engine
