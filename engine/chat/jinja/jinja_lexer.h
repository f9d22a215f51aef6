// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Splits a chat template into text and the tokens inside its tags, with the whitespace rules chat
// templates are written for: Hugging Face renders them with trim_blocks and lstrip_blocks on, and
// llama.cpp always does (shared/reference/chat-templates.md §1, §3):
//   - CRLF and CR become LF; one trailing newline of the template is dropped;
//   - `{%-`, `{{-`, `{#-` strip all whitespace before the tag, `-%}`, `-}}`, `-#}` all after it;
//   - trim_blocks: the first newline after a block or comment tag is dropped;
//   - lstrip_blocks: spaces and tabs from the start of a line up to a block or comment tag go.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace engine::jinja {

struct Token {
    enum class Type {
        Text,       // template text, whitespace rules applied
        OpenOutput, // {{
        CloseOutput,
        OpenBlock, // {%
        CloseBlock,
        Name,
        String, // text holds the unescaped value
        Int,
        Float,
        Operator, // == != <= >= < > + - * / // % ** ~ | . , : ( ) [ ] { } =
        End,
    };
    Type type;
    std::string text;
    std::size_t offset; // byte offset in the template, for messages
};

// The template as it is lexed: CRLF and CR as LF, one trailing newline dropped. Offsets in tokens
// and messages refer to this text.
std::string normalize_template_source(std::string_view source);

// Throws TemplateError (with line and column) on an unterminated tag, comment or string, an
// unknown string escape or a character no token starts with.
std::vector<Token> tokenize_template(std::string_view normalized_source);

// "line L, column C" of a byte offset, for messages.
std::string source_position(std::string_view source, std::size_t offset);

} // namespace engine::jinja
