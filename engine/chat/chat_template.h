// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace engine {

// The prompt formats llama.cpp's built-in formatter renders (src/llama-chat.cpp,
// llm_chat_apply_template; shared/reference/tokenizers.md §6) that we render the same way, plus a
// plain-text fallback for models without a recognised template. llama.cpp does not run the Jinja
// template either: it classifies it by substrings and renders the family's fixed layout.
enum class ChatFormat {
    Plain,           // ours: "System: …\nUser: …\nAssistant:"
    ChatML,          // <|im_start|>{role}\n{content}<|im_end|>\n
    Phi4,            // <|im_start|>{role}<|im_sep|>{content}<|im_end|>
    Llama2,          // [INST] … [/INST]; a system message is inlined without <<SYS>>
    Llama2Sys,       // … with <<SYS>>\n{system}\n<</SYS>>\n\n
    Llama2SysBos,    // … and <s> before each later [INST]
    Llama2SysStrip,  // … and every message trimmed
    MistralV1,       // " [INST] {system}\n\n{user} [/INST] {assistant}</s>"
    MistralV3,       // "[INST] {system}\n\n{user}[/INST] {trimmed assistant}</s>"
    MistralV3Tekken, // "[INST]{system}\n\n{user}[/INST]{assistant}</s>"
    MistralV7,       // "[SYSTEM_PROMPT] …[/SYSTEM_PROMPT][INST] …[/INST] …</s>"
    MistralV7Tekken, // the same without the spaces
    Phi3,            // <|{role}|>\n{content}<|end|>\n
    Gemma,           // <start_of_turn>{user|model}\n{trimmed content}<end_of_turn>\n
    Llama3,          // <|start_header_id|>{role}<|end_header_id|>\n\n{trimmed content}<|eot_id|>
};

// How a model is prompted: the family's fixed layout, plus the system message its own template
// writes when the conversation has none (Qwen 2.5's templates add "You are Qwen, created by Alibaba
// Cloud. You are a helpful assistant."; llama.cpp's built-in ChatML formatter leaves it out, its
// Jinja path and the model's authors put it in). Implicit from a format: no default system message.
struct ChatStyle {
    ChatFormat format = ChatFormat::Plain;
    std::string default_system;

    ChatStyle() = default;
    ChatStyle(ChatFormat f) : format(f) {} // NOLINT(google-explicit-constructor): a format is a style
    ChatStyle(ChatFormat f, std::string system) : format(f), default_system(std::move(system)) {}
};

struct ChatMessage {
    std::string role; // "system", "user" or "assistant" (other roles pass through where llama.cpp lets them)
    std::string content;
};

// llama.cpp's name of the format ("chatml", "llama2-sys", "mistral-v7-tekken", "gemma", …);
// "plain" for ours.
std::string_view chat_format_name(ChatFormat format);
// The inverse, for llama.cpp's built-in names (and "plain"); nullopt for any other string.
std::optional<ChatFormat> chat_format_from_name(std::string_view name);

// llama.cpp's classification of a tokenizer.chat_template (llm_chat_detect_template): a built-in
// name, else the first family whose marker substrings the template contains, in llama.cpp's order.
// nullopt when llama.cpp finds no family or one we do not render (Zephyr, Vicuna, Command-R, …).
std::optional<ChatFormat> chat_format_from_template(std::string_view jinja_template);

// The format to prompt a model with: its template's classification when there is one we render,
// else by architecture — every Gemma ("gemma", "gemma2", "gemma3", …) uses the Gemma turn
// markers, base models without a template included, since their vocabulary has <start_of_turn> —
// else Plain.
ChatFormat detect_chat_format(const std::optional<std::string>& jinja_template, std::string_view architecture);

// The system message a ChatML template writes when the conversation starts without one: the text of
// its literal '<|im_start|>system\n…<|im_end|>\n' (Jinja string escapes undone), or empty when the
// template has none. Read from the model's own template, never assumed from its name.
std::string template_default_system(std::string_view jinja_template);

// detect_chat_format, with the template's default system message where the format has one.
ChatStyle detect_chat_style(const std::optional<std::string>& jinja_template, std::string_view architecture);

// The prompt exactly as llama.cpp's built-in formatter writes it for that format (add_ass =
// add_assistant_prefix), after the style's default system message is put first when the
// conversation has no system message (as the model's Jinja template does). BOS is not part of it:
// the tokenizer adds it. The [INST] families end with "[/INST]" and have no assistant prefix to add,
// as in llama.cpp.
std::string render_chat(const ChatStyle& style, const std::vector<ChatMessage>& messages, bool add_assistant_prefix);

// The text that ends an assistant turn in that format ("<end_of_turn>", "<|im_end|>", …; "\nUser:"
// for Plain), for a StopCondition: a reply stops there even if the marker is not an
// end-of-generation token of the vocabulary.
std::vector<std::string> stop_strings(ChatFormat format);
inline std::vector<std::string> stop_strings(const ChatStyle& style)
{
    return stop_strings(style.format);
}

} // namespace engine
