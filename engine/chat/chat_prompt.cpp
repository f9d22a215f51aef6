// SPDX-License-Identifier: GPL-3.0-or-later
#include "chat/chat_prompt.h"

#include "model/model.h"

namespace engine {

ChatStyle model_chat_style(const Model& model)
{
    const Vocab& vocab = model.tokenizer().vocab();
    TemplateTokens tokens;
    if (vocab.bos)
        tokens.bos = vocab.tokens[static_cast<std::size_t>(*vocab.bos)];
    if (vocab.eos)
        tokens.eos = vocab.tokens[static_cast<std::size_t>(*vocab.eos)];
    tokens.add_bos = vocab.add_bos;
    tokens.add_eos = vocab.add_eos;
    return model_chat_style(vocab.chat_template, model.config().architecture, tokens);
}

ChatPrompt build_chat_prompt(const Model& model, const std::vector<ChatMessage>& messages, std::size_t context_size,
                             std::size_t reply_reserve)
{
    ChatPrompt p;
    const auto& tokenizer = model.tokenizer();
    p.style = model_chat_style(model);
    const auto count = [&](const std::string& text) { return tokenizer.encode_ids(text).size(); };
    p.fit = fit_to_context(messages, count, p.style, context_size, reply_reserve);
    p.text = render_chat(p.style, p.fit.kept, true, &p.template_notice);
    if (p.template_notice.empty())
        p.template_notice = p.style.notice;
    p.stop_strings = stop_strings(p.style);
    return p;
}

} // namespace engine
