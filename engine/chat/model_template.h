// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The model's own chat template (tokenizer.chat_template), run by our Jinja interpreter the way
// llama.cpp's server runs it (`llama-server --jinja`, POST /apply-template; shared/reference/
// chat-templates.md §4), so that a prompt shown here is the prompt llama.cpp, LM Studio or Ollama
// would send:
//   - the variables: messages, bos_token, eos_token, add_generation_prompt (only when true),
//     datetime ("%b %d %Y") and date_string ("%d %b %Y"); enable_thinking only when asked for (left
//     undefined, a template does what its authors made the default, as Hugging Face renders it:
//     Qwen3 thinks, Apertus does not);
//   - the message rewrites: role "developer" becomes "system" (except in gpt-oss templates); a
//     template that never reads a system message's content gets it merged into the next message
//     (system + "\n" + content), or dropped when it is alone; a template that only takes typed
//     content ([{"type": "text", "text": …}]) gets it that way; StepFun's templates get every
//     message's content trimmed (llama.cpp's workaround for them: leftover whitespace sends that
//     model into reasoning loops).

#include "chat/jinja/jinja_template.h"

#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace engine {

struct ChatMessage;

// Variables a server may set for templates that read them; unset, a template does what its authors
// made the default.
struct TemplateOptions {
    std::optional<bool> enable_thinking;
    // llama-server's default for templates that can keep earlier replies' reasoning: sets
    // preserve_thinking, and clear_thinking / truncate_history_thinking / drop_thinking to the opposite.
    std::optional<bool> preserve_reasoning;
};

class ModelTemplate {
public:
    // Parses the template and probes what it accepts. Throws jinja::TemplateError naming the
    // construct it cannot run.
    static ModelTemplate compile(std::string_view source, std::string bos_token, std::string eos_token);

    // Throws jinja::TemplateError when the template raises (e.g. "Conversation roles must
    // alternate user/assistant") or passes a limit.
    std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt, std::time_t now,
                       const TemplateOptions& options = {}) const;

    bool supports_system_role() const { return m_system_role; }
    bool typed_content_only() const { return m_typed_only; }
    const std::string& bos_token() const { return m_bos; }
    const std::string& eos_token() const { return m_eos; }

private:
    std::string render_raw(const jinja::Value& messages, bool add_generation_prompt, std::time_t now,
                           const TemplateOptions& options) const;
    jinja::Value to_messages(const std::vector<ChatMessage>& messages) const;

    std::optional<jinja::Template> m_template;
    std::string m_bos, m_eos;
    bool m_system_role = true;
    bool m_typed_only = false;
    bool m_keeps_developer = false; // gpt-oss templates know the developer role
    bool m_trims_content = false;   // StepFun
};

} // namespace engine
