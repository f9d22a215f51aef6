// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <cstdint>
#include <string>

namespace engine {

class Tokenizer;

// A token as the panels show it (UTF-8): whitespace made visible (space ·, tab →, newline ⏎),
// control, byte and unknown tokens as their vocabulary entry, a piece that is part of a multi-byte
// character as its bytes (<0xE2><0x80>), an id outside the vocabulary as <id?>. The app and the
// CLI's saved runs name tokens with it.
std::string token_display_text(const Tokenizer& tokenizer, int32_t id);

} // namespace engine
