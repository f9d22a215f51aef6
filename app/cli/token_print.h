// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <string>

// How `tokenize` prints a token, on this machine or from a server.

// Control characters escaped (\n, \t, \r, \xNN), so that a piece prints on one line.
std::string escape_controls(const std::string& s);

// Ids as "[1, 2, 3]" (the form llama-tokenize --ids prints).
template <typename Tokens, typename Id> std::string ids_list(const Tokens& tokens, Id id_of)
{
    std::string out = "[";
    bool first = true;
    for (const auto& t : tokens) {
        out += (first ? "" : ", ") + std::to_string(id_of(t));
        first = false;
    }
    return out + "]";
}
