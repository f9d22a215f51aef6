// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "tokenizer/tokenizer.h"

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace engine {

// How a run of tokens changed: none before (Inserted), none after (Deleted), one became several
// (Split), several became one (Merged), anything else (Replaced).
enum class TokenChangeKind { Inserted, Deleted, Split, Merged, Replaced };

struct TokenChange {
    TokenChangeKind kind;
    uint32_t old_first = 0, old_count = 0; // range in the old token list
    uint32_t new_first = 0, new_count = 0; // range in the new token list
};

struct TokenDiff {
    std::vector<TokenChange> changes; // in order; tokens outside them are unchanged
    int64_t count_delta = 0;          // new.size() - old.size()
};

// Aligns two tokenizations of two versions of a text: a token is unchanged when it has the same id
// and covers the same bytes (compare the token's bytes, not offsets, since an edit shifts offsets).
// The common prefix and suffix are trimmed, the rest is aligned by a longest common subsequence
// (Myers' O(ND) diff); each maximal run between unchanged tokens becomes one change. Beyond a few
// thousand differences the middle is reported as one Replaced change instead.
TokenDiff diff_tokens(std::string_view old_text, std::span<const Token> old_tokens, std::string_view new_text,
                      std::span<const Token> new_tokens);

// "inserted", "deleted", "split", "merged", "replaced".
std::string_view token_change_kind_name(TokenChangeKind kind);

} // namespace engine
