// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// A chat template compiled once and rendered many times: the model's own
// tokenizer.chat_template, run the way Hugging Face and llama.cpp run it (Jinja2 with trim_blocks
// and lstrip_blocks). Parsing and rendering throw TemplateError with a sentence naming the problem
// and where it is (line and column), or the limit a hostile template ran into.

#include "chat/jinja/jinja_ast.h"
#include "chat/jinja/jinja_interpreter.h"

#include <ctime>
#include <memory>
#include <string>
#include <string_view>

namespace engine::jinja {

class Template {
public:
    // Throws TemplateError when the text is not a template we can run.
    static Template parse(std::string_view source);

    // `globals` are the template's variables (messages, add_generation_prompt, bos_token, …);
    // strftime_now() formats `now` in UTC.
    std::string render(const Object& globals, std::time_t now, const RenderLimits& limits = {}) const;

    const std::string& source() const { return *m_source; }

private:
    std::shared_ptr<const std::string> m_source; // normalized (LF newlines, one trailing newline dropped)
    std::shared_ptr<const Body> m_body;
};

} // namespace engine::jinja
