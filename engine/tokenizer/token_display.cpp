// SPDX-License-Identifier: GPL-3.0-or-later
#include "tokenizer/token_display.h"

#include "tokenizer/tokenizer.h"
#include "util/utf8.h"

#include <spdlog/fmt/fmt.h>

namespace engine {

std::string token_display_text(const Tokenizer& tokenizer, int32_t id)
{
    const Vocab& vocab = tokenizer.vocab();
    if (id < 0 || std::size_t(id) >= vocab.size())
        return fmt::format("<{}?>", id);
    const TokenType type = vocab.type_of(id);
    if (type == TokenType::Control || type == TokenType::Byte || type == TokenType::Unknown)
        return vocab.tokens[std::size_t(id)];
    const std::string piece = tokenizer.token_to_piece(id);
    std::string out;
    if (!utf8::is_valid(piece)) {
        for (unsigned char b : piece)
            out += fmt::format("<0x{:02X}>", b);
        return out;
    }
    for (char c : piece) {
        if (c == ' ')
            out += "\u00B7";
        else if (c == '\t')
            out += "\u2192";
        else if (c == '\n')
            out += "\u23CE";
        else
            out += c;
    }
    return out;
}

} // namespace engine
