// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace engine::utf8 {

// Length of the UTF-8 sequence a lead byte announces, judged from its high nibble only
// (continuation and invalid bytes count as 1), the way llama.cpp splits symbols.
inline std::size_t sequence_length(unsigned char lead)
{
    static constexpr std::size_t by_high_nibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return by_high_nibble[lead >> 4];
}

// Appends the UTF-8 encoding of a code point.
void append(std::string& out, char32_t cp);

// True when the text is well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
bool is_valid(std::string_view text);

} // namespace engine::utf8
