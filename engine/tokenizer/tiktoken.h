// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "tokenizer/tokenizer.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace engine {

// One of OpenAI's encodings as tiktoken defines it: the rank file is data the user supplies, the
// pre-tokenizer regex and the special tokens are facts from tiktoken's tiktoken_ext/openai_public.py.
struct TiktokenEncodingSpec {
    std::string_view name; // "cl100k_base", "o200k_base"
    std::string pattern;   // pat_str, verbatim (the encoder adapts it to PCRE2, see tiktoken.cpp)
    std::vector<std::pair<std::string_view, TokenId>> special_tokens;
};

// The specification of a supported encoding, or null (supported: cl100k_base, o200k_base).
const TiktokenEncodingSpec* find_tiktoken_encoding(std::string_view name);
// "cl100k_base, o200k_base", for messages.
std::string supported_tiktoken_encodings();

// Parses a .tiktoken rank file: one "<base64 token bytes> <rank>" per line (empty lines skipped).
// Returns the bytes of each token indexed by rank. Throws FormatError "<name>: line N: ..." for bad
// base64, a missing or malformed rank, a duplicate token or rank, ranks that are not exactly
// 0..n-1, or a missing single-byte token (byte-level BPE needs all 256), and for an empty file.
std::vector<std::string> parse_tiktoken_ranks(std::string_view contents, const std::string& name);

// tiktoken's byte-level BPE: the regex splits the text into pieces; a piece that is a token is
// emitted as it is, any other starts as single bytes and repeatedly merges the adjacent pair whose
// concatenated bytes has the lowest rank (the leftmost on a tie) until no pair is a token.
// Special-token strings in the text are ordinary text (tiktoken's encode_ordinary); ids of the
// special tokens exist only for piece() and vocab_size(). Text that is not valid UTF-8 is not split
// by the regex (one piece, merged bytewise); characters assigned after the Unicode version of the
// system's PCRE2 tables may be classed differently than by tiktoken. Immutable; safe to share
// between threads.
class TiktokenEncoder {
public:
    // Throws FormatError when a rank reaches the ids of the special tokens.
    TiktokenEncoder(const TiktokenEncodingSpec& spec, std::vector<std::string> token_bytes, const std::string& name);
    ~TiktokenEncoder();
    TiktokenEncoder(const TiktokenEncoder&) = delete;
    TiktokenEncoder& operator=(const TiktokenEncoder&) = delete;

    const TiktokenEncodingSpec& spec() const { return m_spec; }
    std::size_t n_ranks() const { return m_offsets.size() - 1; }
    std::size_t n_vocab() const { return m_n_vocab; } // highest id + 1, as tiktoken's n_vocab

    // Tokens with byte spans tiling the text (a token may end inside a multi-byte character).
    std::vector<Token> encode_ordinary(std::string_view text) const;
    // Raw bytes of a token; a special token's text; empty for an id that names nothing.
    std::string piece(TokenId id) const;
    std::optional<uint32_t> rank_of(std::string_view bytes) const;

private:
    void encode_piece(std::string_view text, uint32_t begin, uint32_t end, std::vector<Token>& out) const;
    std::string_view bytes_of(uint32_t rank) const
    {
        return std::string_view(m_arena).substr(m_offsets[rank], m_offsets[rank + 1] - m_offsets[rank]);
    }

    const TiktokenEncodingSpec& m_spec;
    std::string m_arena;             // every token's bytes, concatenated in rank order
    std::vector<uint32_t> m_offsets; // (n_ranks + 1) token r is m_arena[m_offsets[r], m_offsets[r + 1])
    std::unordered_map<std::string_view, uint32_t> m_rank; // keys view m_arena, which never changes
    std::size_t m_n_vocab = 0;
    std::unique_ptr<PreTokenizer> m_pre;
};

} // namespace engine
