// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "chat/jinja/jinja_ast.h"
#include "chat/jinja/jinja_lexer.h"

#include <string_view>

namespace engine::jinja {

// Deepest nesting of expressions and blocks a template may have: templates nest a few levels; a
// hostile one nesting thousands would otherwise exhaust the stack.
inline constexpr int k_max_nesting = 256;

// Parses the tokens of `source` (the normalized template) into statements. Throws TemplateError
// naming the construct and its position: an unknown tag (`include`, `extends`, …), a block left
// open, an unexpected token.
Body parse_template(const std::vector<Token>& tokens, std::string_view source);

} // namespace engine::jinja
