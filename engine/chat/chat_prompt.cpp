// SPDX-License-Identifier: GPL-3.0-or-later
#include "chat/chat_prompt.h"

#include "model/model.h"

#include <map>

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

std::vector<TokenId> ChatPrompt::ids() const
{
    std::vector<TokenId> out;
    out.reserve(tokens.size());
    for (const Token& t : tokens)
        out.push_back(t.id);
    return out;
}

ChatPrompt build_chat_prompt(const Model& model, const std::vector<ChatMessage>& messages, std::size_t context_size,
                             std::size_t reply_reserve)
{
    ChatPromptBuilder builder;
    return *builder.build(model, messages, context_size, reply_reserve);
}

namespace {

bool same_messages(const std::vector<ChatMessage>& a, const std::vector<ChatMessage>& b)
{
    if (a.size() != b.size())
        return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i].role != b[i].role || a[i].content != b[i].content)
            return false;
    return true;
}

} // namespace

std::shared_ptr<const ChatPrompt> ChatPromptBuilder::build(const Model& model, const std::vector<ChatMessage>& messages,
                                                           std::size_t context_size, std::size_t reply_reserve)
{
    if (m_tokenizer == &model.tokenizer() && m_last) // the style is the model's: made once per model
        return build(model.tokenizer(), m_last->style, messages, context_size, reply_reserve);
    return build(model.tokenizer(), model_chat_style(model), messages, context_size, reply_reserve);
}

std::shared_ptr<const ChatPrompt> ChatPromptBuilder::build(const Tokenizer& tokenizer, const ChatStyle& style,
                                                           const std::vector<ChatMessage>& messages,
                                                           std::size_t context_size, std::size_t reply_reserve)
{
    ++m_counters.prompts;
    if (m_tokenizer != &tokenizer)
        clear();
    if (m_last && context_size == m_context_size && reply_reserve == m_reply_reserve &&
        same_messages(messages, m_messages)) {
        ++m_counters.reused;
        return m_last;
    }
    // Every text the fit search counts is tokenized from where it differs from the one before, and
    // kept: the prompt it settles on is not tokenized again.
    std::map<std::string, std::vector<Token>> tokenized;
    const auto tokens_of = [&](const std::string& text) -> const std::vector<Token>& {
        auto it = tokenized.find(text);
        if (it != tokenized.end())
            return it->second;
        std::size_t reused = 0;
        std::vector<Token> tokens = tokenizer.encode_after(text, m_text, m_tokens, {}, &reused);
        ++m_counters.tokenizations;
        const std::size_t from = reused > 0 ? m_tokens[reused - 1].byte_end : 0;
        m_counters.bytes_tokenized += text.size() - std::min(text.size(), from);
        m_text = text;
        m_tokens = tokens;
        return tokenized.emplace(text, std::move(tokens)).first->second;
    };

    auto p = std::make_shared<ChatPrompt>();
    p->style = style;
    p->fit = fit_to_context(
        messages, [&](const std::string& text) { return tokens_of(text).size(); }, p->style, context_size,
        reply_reserve);
    m_counters.renders += p->fit.renders;
    p->text = p->fit.prompt;
    p->tokens = tokens_of(p->text);
    p->template_notice = p->fit.prompt_notice.empty() ? p->style.notice : p->fit.prompt_notice;
    p->stop_strings = stop_strings(p->style);
    m_tokenizer = &tokenizer;
    m_messages = messages;
    m_context_size = context_size;
    m_reply_reserve = reply_reserve;
    m_last = p;
    return p;
}

void ChatPromptBuilder::clear()
{
    m_tokenizer = nullptr;
    m_messages.clear();
    m_last.reset();
    m_text.clear();
    m_tokens.clear();
}

} // namespace engine
