// SPDX-License-Identifier: GPL-3.0-or-later
#include "chat/chat_prompt.h"

#include "model/model.h"

namespace engine {

ChatPrompt build_chat_prompt(const Model& model, const std::vector<ChatMessage>& messages, std::size_t context_size,
                             std::size_t reply_reserve)
{
    ChatPrompt p;
    const auto& tokenizer = model.tokenizer();
    p.style = detect_chat_style(tokenizer.vocab().chat_template, model.config().architecture);
    const auto count = [&](const std::string& text) { return tokenizer.encode_ids(text).size(); };
    p.fit = fit_to_context(messages, count, p.style, context_size, reply_reserve);
    p.text = render_chat(p.style, p.fit.kept, true);
    p.stop_strings = stop_strings(p.style);
    return p;
}

} // namespace engine
