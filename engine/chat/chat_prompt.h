// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "chat/chat_template.h"
#include "chat/context_policy.h"
#include "tokenizer/tokenizer.h"

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace engine {

class Model;

// One chat turn as the model receives it: the conversation fitted to the context (oldest turns
// dropped when needed), rendered with the model's chat style, its tokens, and the text that ends
// the reply. The chat panel and `tokenscope-cli chat` both build their prompts here, so a script
// sees exactly what the panel sends.
struct ChatPrompt {
    ChatStyle style;
    FitResult fit;             // fit.fits false: even the latest message does not fit (fit.notice says why)
    std::string text;          // render_chat(style, fit.kept, true); BOS not included
    std::vector<Token> tokens; // text's tokens as the model receives them (BOS where the tokenizer adds one)
    std::vector<std::string> stop_strings;
    // Non-empty when the model's own template could not render this prompt (style.notice, or what
    // the template raised on this conversation) and a fixed layout was used: shown to the user.
    std::string template_notice;

    std::vector<TokenId> ids() const;
};

// The model's chat style: its own template with its vocabulary's BOS/EOS texts and flags
// (model_chat_style), or the fixed layout.
ChatStyle model_chat_style(const Model& model);

ChatPrompt build_chat_prompt(const Model& model, const std::vector<ChatMessage>& messages, std::size_t context_size,
                             std::size_t reply_reserve);

// Chat prompts of one conversation as it grows, for one model: the same conversation asked again
// (the fit check of a draft, then the reply to it) gets the same prompt without rendering or
// tokenizing anything; a changed one is rendered again and tokenized only from the control token
// before the first byte that differs from the last rendering (Tokenizer::encode_after), so typing
// re-tokenizes the draft's turn, not the history. Not thread-safe: one owner.
class ChatPromptBuilder {
public:
    struct Counters {
        std::size_t prompts = 0;         // build() calls
        std::size_t reused = 0;          // …answered with the last prompt unchanged
        std::size_t renders = 0;         // renderings of a whole conversation
        std::size_t tokenizations = 0;   // texts tokenized (each from its first changed control token)
        std::size_t bytes_tokenized = 0; // bytes those tokenizations covered
    };

    std::shared_ptr<const ChatPrompt> build(const Model& model, const std::vector<ChatMessage>& messages,
                                            std::size_t context_size, std::size_t reply_reserve);
    // The same with the tokenizer and style given (the style must stay the same for one tokenizer).
    std::shared_ptr<const ChatPrompt> build(const Tokenizer& tokenizer, const ChatStyle& style,
                                            const std::vector<ChatMessage>& messages, std::size_t context_size,
                                            std::size_t reply_reserve);
    const Counters& counters() const { return m_counters; }
    void clear(); // another model, or a conversation that starts again

private:
    const Tokenizer* m_tokenizer = nullptr;
    std::vector<ChatMessage> m_messages;
    std::size_t m_context_size = 0;
    std::size_t m_reply_reserve = 0;
    std::shared_ptr<const ChatPrompt> m_last;
    std::string m_text; // the last text tokenized, and its tokens
    std::vector<Token> m_tokens;
    Counters m_counters;
};

} // namespace engine
