// SPDX-License-Identifier: GPL-3.0-or-later
#include "chat/chat_template.h"

#include "chat/model_template.h"

#include <array>
#include <ctime>
#include <utility>

namespace engine {

namespace {

// ---------------------------------------------------------------------------------------------
// Names
// ---------------------------------------------------------------------------------------------

constexpr std::array<std::pair<ChatFormat, std::string_view>, 15> k_names{{
    {ChatFormat::Plain, "plain"},
    {ChatFormat::ChatML, "chatml"},
    {ChatFormat::Phi4, "phi4"},
    {ChatFormat::Llama2, "llama2"},
    {ChatFormat::Llama2Sys, "llama2-sys"},
    {ChatFormat::Llama2SysBos, "llama2-sys-bos"},
    {ChatFormat::Llama2SysStrip, "llama2-sys-strip"},
    {ChatFormat::MistralV1, "mistral-v1"},
    {ChatFormat::MistralV3, "mistral-v3"},
    {ChatFormat::MistralV3Tekken, "mistral-v3-tekken"},
    {ChatFormat::MistralV7, "mistral-v7"},
    {ChatFormat::MistralV7Tekken, "mistral-v7-tekken"},
    {ChatFormat::Phi3, "phi3"},
    {ChatFormat::Gemma, "gemma"},
    {ChatFormat::Llama3, "llama3"},
}};

// llama.cpp's trim(): ASCII whitespace (C-locale isspace) off both ends.
std::string trim(std::string_view s)
{
    constexpr std::string_view space = " \t\n\v\f\r";
    const auto begin = s.find_first_not_of(space);
    if (begin == std::string_view::npos)
        return {};
    const auto end = s.find_last_not_of(space);
    return std::string(s.substr(begin, end - begin + 1));
}

// ---------------------------------------------------------------------------------------------
// Renderers, one per family, in the order of llm_chat_apply_template
// ---------------------------------------------------------------------------------------------

void render_chatml(const std::vector<ChatMessage>& messages, bool add_ass, std::string& out)
{
    for (const auto& m : messages)
        out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    if (add_ass)
        out += "<|im_start|>assistant\n";
}

void render_phi4(const std::vector<ChatMessage>& messages, bool add_ass, std::string& out)
{
    for (const auto& m : messages)
        out += "<|im_start|>" + m.role + "<|im_sep|>" + m.content + "<|im_end|>";
    if (add_ass)
        out += "<|im_start|>assistant<|im_sep|>";
}

// Mistral v7: system, user and assistant messages each in their own markers, no turn state.
void render_mistral_v7(const std::vector<ChatMessage>& messages, bool tekken, std::string& out)
{
    const std::string_view sp = tekken ? "" : " ";
    for (const auto& m : messages) {
        if (m.role == "system")
            out.append("[SYSTEM_PROMPT]").append(sp).append(m.content).append("[/SYSTEM_PROMPT]");
        else if (m.role == "user")
            out.append("[INST]").append(sp).append(m.content).append("[/INST]");
        else
            out.append(sp).append(m.content).append("</s>");
    }
}

// Mistral v1/v3/v3-tekken: a system message opens the [INST] block it shares with the next user
// message; an assistant message closes the turn.
void render_mistral_v1_v3(const std::vector<ChatMessage>& messages, ChatFormat format, std::string& out)
{
    const std::string_view leading = format == ChatFormat::MistralV1 ? " " : "";
    const std::string_view trailing = format == ChatFormat::MistralV3Tekken ? "" : " ";
    const bool trim_assistant = format == ChatFormat::MistralV3;
    bool inside_turn = false;
    for (const auto& m : messages) {
        if (!inside_turn) {
            out.append(leading).append("[INST]").append(trailing);
            inside_turn = true;
        }
        if (m.role == "system") {
            out.append(m.content).append("\n\n");
        } else if (m.role == "user") {
            out.append(m.content).append(leading).append("[/INST]");
        } else {
            out.append(trailing).append(trim_assistant ? trim(m.content) : m.content).append("</s>");
            inside_turn = false;
        }
    }
}

// Llama 2 and its variants: the prompt opens with "[INST] " (the BOS before it is the
// tokenizer's); later turns reopen it after each "</s>".
void render_llama2(const std::vector<ChatMessage>& messages, ChatFormat format, std::string& out)
{
    const bool system_block = format != ChatFormat::Llama2;
    const bool bos_inside = format == ChatFormat::Llama2SysBos;
    const bool strip = format == ChatFormat::Llama2SysStrip;
    bool inside_turn = true;
    out += "[INST] ";
    for (const auto& m : messages) {
        const std::string content = strip ? trim(m.content) : m.content;
        if (!inside_turn) {
            inside_turn = true;
            out += bos_inside ? "<s>[INST] " : "[INST] ";
        }
        if (m.role == "system") {
            if (system_block)
                out += "<<SYS>>\n" + content + "\n<</SYS>>\n\n";
            else
                out += content + "\n";
        } else if (m.role == "user") {
            out += content + " [/INST]";
        } else {
            out += content + "</s>";
            inside_turn = false;
        }
    }
}

void render_phi3(const std::vector<ChatMessage>& messages, bool add_ass, std::string& out)
{
    for (const auto& m : messages)
        out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
    if (add_ass)
        out += "<|assistant|>\n";
}

// Gemma has no system role: system text (trimmed, concatenated) opens the next user turn,
// followed by a blank line. "assistant" is "model".
void render_gemma(const std::vector<ChatMessage>& messages, bool add_ass, std::string& out)
{
    std::string system_prompt;
    for (const auto& m : messages) {
        if (m.role == "system") {
            system_prompt += trim(m.content);
            continue;
        }
        const std::string role = m.role == "assistant" ? "model" : m.role;
        out += "<start_of_turn>" + role + "\n";
        if (!system_prompt.empty() && role != "model") {
            out += system_prompt + "\n\n";
            system_prompt.clear();
        }
        out += trim(m.content) + "<end_of_turn>\n";
    }
    if (add_ass)
        out += "<start_of_turn>model\n";
}

void render_llama3(const std::vector<ChatMessage>& messages, bool add_ass, std::string& out)
{
    for (const auto& m : messages)
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
    if (add_ass)
        out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

// Ours, for models without a template: one "Role: text" line per message.
void render_plain(const std::vector<ChatMessage>& messages, bool add_ass, std::string& out)
{
    for (const auto& m : messages) {
        std::string role = m.role;
        if (!role.empty() && role[0] >= 'a' && role[0] <= 'z')
            role[0] = static_cast<char>(role[0] - 'a' + 'A');
        out += role + ": " + trim(m.content) + "\n";
    }
    if (add_ass)
        out += "Assistant:";
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------------------------

std::string_view chat_format_name(ChatFormat format)
{
    for (const auto& [f, name] : k_names)
        if (f == format)
            return name;
    return "plain";
}

std::optional<ChatFormat> chat_format_from_name(std::string_view name)
{
    for (const auto& [f, n] : k_names)
        if (n == name)
            return f;
    return std::nullopt;
}

// The branches mirror llm_chat_detect_template one for one, in its order, so that a template
// with markers of two families lands where llama.cpp puts it; families we do not render answer
// nullopt instead of falling through to a later branch.
std::optional<ChatFormat> chat_format_from_template(std::string_view tmpl)
{
    if (auto named = chat_format_from_name(tmpl); named && *named != ChatFormat::Plain)
        return named;
    const auto has = [tmpl](std::string_view s) { return tmpl.find(s) != std::string_view::npos; };
    using F = ChatFormat;

    if (has("<|im_start|>")) {
        if (has("<|im_sep|>"))
            return F::Phi4;
        if (has("<end_of_utterance>"))
            return std::nullopt; // SmolVLM: <|im_start|> is its BOS, not ChatML
        return F::ChatML;
    }
    if (tmpl.starts_with("mistral") || has("[INST]")) {
        if (has("[SYSTEM_PROMPT]"))
            return F::MistralV7;
        if (has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]")) {
            if (has(" [INST]"))
                return F::MistralV1;
            if (has("\"[INST]\""))
                return F::MistralV3Tekken;
            return F::MistralV3;
        }
        if (has("content.strip()"))
            return F::Llama2SysStrip;
        if (has("bos_token + '[INST]"))
            return F::Llama2SysBos;
        if (has("<<SYS>>"))
            return F::Llama2Sys;
        return F::Llama2;
    }
    if (has("<|assistant|>") && has("<|end|>"))
        return F::Phi3;
    if (has("[gMASK]<sop>"))
        return std::nullopt; // ChatGLM 4
    if (has("<|assistant|>") && has("<|user|>"))
        return std::nullopt; // EXAONE MoE, Falcon 3, GLM-Edge
    if (has("<|{{ item['role'] }}|>") && has("<|begin_of_image|>"))
        return std::nullopt; // GLM-Edge
    if (has("<|user|>") && has("<|endoftext|>"))
        return std::nullopt; // Zephyr
    if (has("bos_token + message['role']"))
        return std::nullopt; // Monarch
    if (has("<start_of_turn>"))
        return F::Gemma;
    if (has("'\\n\\nAssistant: ' + eos_token"))
        return std::nullopt; // Orion
    if (has("GPT4 Correct "))
        return std::nullopt; // OpenChat
    if (has("USER: ") && has("ASSISTANT: "))
        return std::nullopt; // Vicuna
    if (has("### Instruction:") && has("<|EOT|>"))
        return std::nullopt; // DeepSeek Coder
    if (has("<|START_OF_TURN_TOKEN|>") && has("<|USER_TOKEN|>"))
        return std::nullopt; // Command-R
    if (has("<|start_header_id|>") && has("<|end_header_id|>"))
        return F::Llama3;
    return std::nullopt; // every later llama.cpp branch is a family we do not render
}

ChatFormat detect_chat_format(const std::optional<std::string>& jinja_template, std::string_view architecture)
{
    if (jinja_template && !jinja_template->empty())
        if (auto format = chat_format_from_template(*jinja_template))
            return *format;
    if (architecture.starts_with("gemma"))
        return ChatFormat::Gemma;
    return ChatFormat::Plain;
}

std::string template_default_system(std::string_view tmpl)
{
    // The literal as it stands inside a Jinja string: the newline is written "\n".
    constexpr std::string_view open = "<|im_start|>system\\n";
    constexpr std::string_view close = "<|im_end|>";
    for (std::size_t at = tmpl.find(open); at != std::string_view::npos; at = tmpl.find(open, at + 1)) {
        const std::size_t begin = at + open.size();
        const std::size_t end = tmpl.find(close, begin);
        if (end == std::string_view::npos)
            break;
        const std::string_view body = tmpl.substr(begin, end - begin);
        // '<|im_start|>system\n' + messages[0]['content'] + … is the branch that uses the caller's
        // system message; only a literal text with no expression in it is a default.
        if (body.empty() || body.find_first_of("'\"{}+") != std::string_view::npos)
            continue;
        std::string text;
        for (std::size_t i = 0; i < body.size(); ++i) {
            if (body[i] == '\\' && i + 1 < body.size()) {
                const char e = body[++i];
                text += e == 'n' ? '\n' : e == 't' ? '\t' : e;
            } else {
                text += body[i];
            }
        }
        return text;
    }
    return {};
}

ChatStyle detect_chat_style(const std::optional<std::string>& jinja_template, std::string_view architecture)
{
    const ChatFormat format = detect_chat_format(jinja_template, architecture);
    if (format == ChatFormat::ChatML && jinja_template)
        return {format, template_default_system(*jinja_template)};
    return format;
}

namespace {

// The system message a ChatML template writes when the conversation has none, as it renders it (a
// literal with real newlines, one built from variables, …): what the chat --json output and a
// fallback to the fixed layout show. Empty for other families or when the template writes none.
std::string rendered_default_system(const ModelTemplate& tmpl, ChatFormat format)
{
    if (format != ChatFormat::ChatML)
        return {};
    constexpr std::string_view open = "<|im_start|>system\n";
    try {
        const std::string text = tmpl.render({{"user", "\x01"}}, false, 0);
        const auto start = text.find(open);
        const auto user = text.find("<|im_start|>user");
        if (start == std::string::npos || (user != std::string::npos && user < start))
            return {};
        const auto end = text.find("<|im_end|>", start);
        return end == std::string::npos ? std::string() : text.substr(start + open.size(), end - start - open.size());
    } catch (const jinja::TemplateError&) {
        return {};
    }
}

} // namespace

ChatStyle model_chat_style(const std::optional<std::string>& jinja_template, std::string_view architecture,
                           const TemplateTokens& tokens)
{
    ChatStyle style = detect_chat_style(jinja_template, architecture);
    if (!jinja_template || jinja_template->empty())
        return style;
    try {
        style.model_template =
            std::make_shared<const ModelTemplate>(ModelTemplate::compile(*jinja_template, tokens.bos, tokens.eos));
        style.default_system = rendered_default_system(*style.model_template, style.format);
        style.strip_bos = tokens.add_bos && !tokens.bos.empty();
        style.strip_eos = tokens.add_eos && !tokens.eos.empty();
    } catch (const jinja::TemplateError& e) {
        style.notice = "The model's chat template cannot be run (" + std::string(e.what()) + "); prompts use the " +
                       std::string(chat_format_name(style.format)) + " layout instead.";
    }
    return style;
}

std::string chat_style_description(const ChatStyle& style)
{
    if (style.model_template) {
        if (style.format == ChatFormat::Plain)
            return "model template (Jinja)";
        return "model template (Jinja; " + std::string(chat_format_name(style.format)) + " family)";
    }
    return std::string(chat_format_name(style.format)) + " (fixed layout)";
}

namespace {

std::string render_fixed(const ChatStyle& style, const std::vector<ChatMessage>& given, bool add_assistant_prefix);

} // namespace

std::string render_chat(const ChatStyle& style, const std::vector<ChatMessage>& given, bool add_assistant_prefix,
                        std::string* notice)
{
    if (style.model_template) {
        try {
            std::string text = style.model_template->render(given, add_assistant_prefix, std::time(nullptr));
            const std::string& bos = style.model_template->bos_token();
            const std::string& eos = style.model_template->eos_token();
            if (style.strip_bos && text.starts_with(bos))
                text.erase(0, bos.size());
            if (style.strip_eos && text.ends_with(eos))
                text.erase(text.size() - eos.size());
            return text;
        } catch (const jinja::TemplateError& e) {
            if (notice)
                *notice = "The model's chat template stopped on this conversation (" + std::string(e.what()) +
                          "); this prompt uses the " + std::string(chat_format_name(style.format)) + " layout instead.";
        }
    }
    return render_fixed(style, given, add_assistant_prefix);
}

namespace {

std::string render_fixed(const ChatStyle& style, const std::vector<ChatMessage>& given, bool add_assistant_prefix)
{
    const ChatFormat format = style.format;
    std::vector<ChatMessage> with_system;
    if (!style.default_system.empty() && (given.empty() || given.front().role != "system")) {
        with_system.reserve(given.size() + 1);
        with_system.push_back({"system", style.default_system});
        with_system.insert(with_system.end(), given.begin(), given.end());
    }
    const std::vector<ChatMessage>& messages = with_system.empty() ? given : with_system;
    std::string out;
    switch (format) {
    case ChatFormat::ChatML:
        render_chatml(messages, add_assistant_prefix, out);
        break;
    case ChatFormat::Phi4:
        render_phi4(messages, add_assistant_prefix, out);
        break;
    case ChatFormat::MistralV7:
    case ChatFormat::MistralV7Tekken:
        render_mistral_v7(messages, format == ChatFormat::MistralV7Tekken, out);
        break;
    case ChatFormat::MistralV1:
    case ChatFormat::MistralV3:
    case ChatFormat::MistralV3Tekken:
        render_mistral_v1_v3(messages, format, out);
        break;
    case ChatFormat::Llama2:
    case ChatFormat::Llama2Sys:
    case ChatFormat::Llama2SysBos:
    case ChatFormat::Llama2SysStrip:
        render_llama2(messages, format, out);
        break;
    case ChatFormat::Phi3:
        render_phi3(messages, add_assistant_prefix, out);
        break;
    case ChatFormat::Gemma:
        render_gemma(messages, add_assistant_prefix, out);
        break;
    case ChatFormat::Llama3:
        render_llama3(messages, add_assistant_prefix, out);
        break;
    case ChatFormat::Plain:
        render_plain(messages, add_assistant_prefix, out);
        break;
    }
    return out;
}

} // namespace

std::vector<std::string> stop_strings(ChatFormat format)
{
    switch (format) {
    case ChatFormat::ChatML:
    case ChatFormat::Phi4:
        return {"<|im_end|>"};
    case ChatFormat::Llama2:
    case ChatFormat::Llama2Sys:
    case ChatFormat::Llama2SysBos:
    case ChatFormat::Llama2SysStrip:
    case ChatFormat::MistralV1:
    case ChatFormat::MistralV3:
    case ChatFormat::MistralV3Tekken:
    case ChatFormat::MistralV7:
    case ChatFormat::MistralV7Tekken:
        return {"</s>"};
    case ChatFormat::Phi3:
        return {"<|end|>"};
    case ChatFormat::Gemma:
        return {"<end_of_turn>"};
    case ChatFormat::Llama3:
        return {"<|eot_id|>"};
    case ChatFormat::Plain:
        return {"\nUser:"};
    }
    return {};
}

} // namespace engine
