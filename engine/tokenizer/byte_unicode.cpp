// SPDX-License-Identifier: GPL-3.0-or-later
#include "tokenizer/byte_unicode.h"

#include "util/utf8.h"

#include <array>
#include <unordered_map>

namespace engine::byte_unicode {

namespace {

struct Tables {
    std::array<std::string, 256> encoded;
    std::unordered_map<std::string, unsigned char> decoded;

    Tables()
    {
        char32_t next = 0x100;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            const char32_t cp = printable ? static_cast<char32_t>(b) : next++;
            utf8::append(encoded[static_cast<std::size_t>(b)], cp);
            decoded.emplace(encoded[static_cast<std::size_t>(b)], static_cast<unsigned char>(b));
        }
    }
};

const Tables& tables()
{
    static const Tables t;
    return t;
}

} // namespace

const std::string& encode_byte(unsigned char byte)
{
    return tables().encoded[byte];
}

std::optional<unsigned char> decode_char(std::string_view utf8_char)
{
    const auto& d = tables().decoded;
    auto it = d.find(std::string(utf8_char));
    if (it == d.end())
        return std::nullopt;
    return it->second;
}

} // namespace engine::byte_unicode
