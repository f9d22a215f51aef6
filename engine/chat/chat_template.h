// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace engine {

class ModelTemplate;

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

// How a model is prompted. With `model_template` set, by the model's own Jinja template, as
// llama.cpp's server, LM Studio and Ollama do (engine/chat/model_template.h): whatever the template
// writes — a default system message, a date, <think> handling — is in the prompt. Without it, by
// the family's fixed layout (llama.cpp's built-in formatter), plus the system message a ChatML
// template writes when the conversation has none. Implicit from a format: a fixed layout.
struct ChatStyle {
    ChatFormat format = ChatFormat::Plain; // the family; the fallback layout and the stop strings
    std::string default_system;            // fixed layouts only
    std::shared_ptr<const ModelTemplate> model_template;
    // The tokenizer adds BOS (EOS) itself: a bos_token the template writes first (an eos_token it
    // writes last) is cut from the text, as llama.cpp does, so that the model does not see two.
    bool strip_bos = false;
    bool strip_eos = false;
    // Why the model's own template is not used although it has one: names the construct our
    // interpreter refused and the layout used instead. Empty otherwise.
    std::string notice;

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

// The special-token texts and flags the model's template renders with.
struct TemplateTokens {
    std::string bos, eos; // token texts; empty when the vocabulary has none
    bool add_bos = false, add_eos = false;
};

// How to prompt a model: its own template when it has one our interpreter runs, else
// detect_chat_style's fixed layout (with `notice` saying why when a template was there).
ChatStyle model_chat_style(const std::optional<std::string>& jinja_template, std::string_view architecture,
                           const TemplateTokens& tokens);

// A short description for the model bar, `info` and the JSON outputs: "model template (Jinja;
// ChatML family)" or "chatml (fixed layout)".
std::string chat_style_description(const ChatStyle& style);

// The prompt exactly as llama.cpp's built-in formatter writes it for that format (add_ass =
// add_assistant_prefix), after the style's default system message is put first when the
// conversation has no system message (as the model's Jinja template does). BOS is not part of it:
// the tokenizer adds it. The [INST] families end with "[/INST]" and have no assistant prefix to add,
// as in llama.cpp.
//
// With the model's own template: its rendering (strip_bos/strip_eos applied). When the template
// stops on this conversation (it raises, e.g. "roles must alternate", or passes a limit), the
// fixed layout is used and `*notice` (when given) says what the template said and which layout.
std::string render_chat(const ChatStyle& style, const std::vector<ChatMessage>& messages, bool add_assistant_prefix,
                        std::string* notice = nullptr);

// The text that ends an assistant turn in that format ("<end_of_turn>", "<|im_end|>", …; "\nUser:"
// for Plain), for a StopCondition: a reply stops there even if the marker is not an
// end-of-generation token of the vocabulary.
std::vector<std::string> stop_strings(ChatFormat format);
// A model template of an unrecognised family ends its turns with an end-of-generation token of
// its vocabulary: no stop string (the plain layout's "\nUser:" would cut a real answer).
inline std::vector<std::string> stop_strings(const ChatStyle& style)
{
    if (style.model_template && style.format == ChatFormat::Plain)
        return {};
    return stop_strings(style.format);
}

} // namespace engine
