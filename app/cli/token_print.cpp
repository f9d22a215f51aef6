// SPDX-License-Identifier: GPL-3.0-or-later
#include "token_print.h"

#include <spdlog/fmt/fmt.h>

std::string escape_controls(const std::string& s)
{
    std::string out;
    for (unsigned char c : s) {
        if (c == '\n')
            out += "\\n";
        else if (c == '\t')
            out += "\\t";
        else if (c == '\r')
            out += "\\r";
        else if (c < 0x20 || c == 0x7F)
            out += fmt::format("\\x{:02x}", c);
        else
            out += static_cast<char>(c);
    }
    return out;
}
