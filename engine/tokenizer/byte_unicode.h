// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace engine::byte_unicode {

// GPT-2's reversible byte → printable code point table: printable Latin-1 bytes map to themselves,
// the other 68 bytes, in order, to U+0100, U+0101, …  (so ' ' → 'Ġ', '\n' → 'Ċ').
const std::string& encode_byte(unsigned char byte); // the code point as UTF-8
// Inverse for one code point given as UTF-8; nullopt when it is not in the table.
std::optional<unsigned char> decode_char(std::string_view utf8_char);

} // namespace engine::byte_unicode
