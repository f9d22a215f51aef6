// SPDX-License-Identifier: GPL-3.0-or-later
#include "chat/model_template.h"

#include "chat/chat_template.h"
#include "chat/jinja/jinja_strings.h"

namespace engine {

namespace {

using jinja::Array;
using jinja::Object;
using jinja::Value;

Value message_value(const std::string& role, const std::string& content, bool typed)
{
    Object m;
    m.set("role", Value(role));
    if (typed) {
        Object part;
        part.set("type", Value("text"));
        part.set("text", Value(content));
        m.set("content", Value(Array{Value(std::move(part))}));
    } else {
        m.set("content", Value(content));
    }
    return Value(std::move(m));
}

} // namespace

ModelTemplate ModelTemplate::compile(std::string_view source, std::string bos_token, std::string eos_token)
{
    ModelTemplate t;
    t.m_template = jinja::Template::parse(source);
    t.m_bos = std::move(bos_token);
    t.m_eos = std::move(eos_token);
    t.m_keeps_developer = source.find("<|channel|>") != std::string_view::npos;
    t.m_trims_content =
        source.find("You have access to the following functions in JSONSchema format") != std::string_view::npos;

    // What the template does with a message's content: a string that appears in the output is
    // taken as it is; one that does not, where typed content does, means typed content only.
    const std::string marker = "STRING_MARKER";
    const auto shows = [&](const Value& messages, const std::string& needle) {
        try {
            return t.render_raw(messages, true, 0, {}).find(needle) != std::string::npos;
        } catch (const jinja::TemplateError&) {
            return false;
        }
    };
    if (!shows(Value(Array{message_value("user", marker, false)}), marker) &&
        shows(Value(Array{message_value("user", marker, true)}), marker))
        t.m_typed_only = true;
    // A system message whose text never reaches the output (or that makes the template raise).
    const std::string system_text = "System message";
    t.m_system_role = shows(Value(Array{message_value("system", system_text, t.m_typed_only),
                                        message_value("user", "User message", t.m_typed_only)}),
                            system_text);
    return t;
}

Value ModelTemplate::to_messages(const std::vector<ChatMessage>& given) const
{
    std::vector<ChatMessage> messages = given;
    if (m_trims_content)
        for (auto& m : messages)
            m.content = jinja::strip(m.content, jinja::k_python_space, true, true);
    if (!m_keeps_developer)
        for (auto& m : messages)
            if (m.role == "developer")
                m.role = "system";
    if (!m_system_role && !messages.empty() && messages.front().role == "system") {
        if (messages.size() > 1)
            messages[1].content = messages.front().content + "\n" + messages[1].content;
        messages.erase(messages.begin());
    }
    Array out;
    for (const auto& m : messages)
        out.push_back(message_value(m.role, m.content, m_typed_only));
    return Value(std::move(out));
}

std::string ModelTemplate::render_raw(const Value& messages, bool add_generation_prompt, std::time_t now,
                                      const TemplateOptions& options) const
{
    Object globals;
    globals.set("messages", messages);
    globals.set("bos_token", Value(m_bos));
    globals.set("eos_token", Value(m_eos));
    if (options.enable_thinking)
        globals.set("enable_thinking", Value(*options.enable_thinking));
    if (options.preserve_reasoning) {
        const bool keep = *options.preserve_reasoning;
        globals.set("preserve_thinking", Value(keep));
        globals.set("clear_thinking", Value(!keep));
        globals.set("truncate_history_thinking", Value(!keep));
        globals.set("drop_thinking", Value(!keep));
    }
    if (add_generation_prompt)
        globals.set("add_generation_prompt", Value(true));
    globals.set("datetime", Value(jinja::format_time(now, "%b %d %Y")));
    globals.set("date_string", Value(jinja::format_time(now, "%d %b %Y")));
    return m_template->render(globals, now);
}

std::string ModelTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt, std::time_t now,
                                  const TemplateOptions& options) const
{
    return render_raw(to_messages(messages), add_generation_prompt, now, options);
}

} // namespace engine
