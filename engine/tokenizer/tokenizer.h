// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "tokenizer/vocab.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace engine {

class PreTokenizer;

// One token of an encoded text with the bytes of the input it came from. Tokens the tokenizer
// adds (BOS/EOS) have an empty span at their position; byte-fallback tokens of one character
// each cover that character's bytes.
struct Token {
    TokenId id = 0;
    uint32_t byte_begin = 0;
    uint32_t byte_end = 0;
};

struct EncodeOptions {
    bool add_special = true;   // BOS/EOS as the vocabulary's metadata asks
    bool parse_special = true; // control-token strings in the text become control tokens
};

struct DecodeOptions {
    bool remove_special = false; // drop a leading BOS / trailing EOS the encoder added
    bool render_special = false; // write control tokens' text instead of nothing
};

// Text ⇄ token ids for a vocabulary read from GGUF: SentencePiece-style (score merges with
// <0xNN> byte fallback) or GPT-2 byte-level BPE (rank merges after a regex pre-tokenizer), or
// Gemma 4's BPE (rank merges over ▁-escaped UTF-8 with <0xNN> byte fallback).
// Immutable after construction; safe to share between threads.
class Tokenizer {
public:
    explicit Tokenizer(Vocab vocab); // throws UnsupportedError for an unknown BPE pre-tokenizer
    ~Tokenizer();
    Tokenizer(const Tokenizer&) = delete;
    Tokenizer& operator=(const Tokenizer&) = delete;

    const Vocab& vocab() const { return m_vocab; }

    std::vector<Token> encode(std::string_view text, const EncodeOptions& options = {}) const;
    std::vector<TokenId> encode_ids(std::string_view text, const EncodeOptions& options = {}) const;
    // encode(text), reusing `earlier`, the encoding of `earlier_text` with the same options: its tokens
    // up to the last control token that ends before the first byte where the texts differ are kept
    // (text between control tokens is encoded on its own, so they stand), the rest is encoded again.
    // The result equals encode(text). `reused`, when given, receives how many tokens were kept.
    std::vector<Token> encode_after(std::string_view text, std::string_view earlier_text,
                                    const std::vector<Token>& earlier, const EncodeOptions& options = {},
                                    std::size_t* reused = nullptr) const;

    // Inverse of encode: decode(encode(text)) == text, byte fallback included. Differences are by
    // design only: control-token strings that were parsed as control tokens come back only with
    // render_special, and SentencePiece turns a literal U+2581 into a space.
    std::string decode(const std::vector<TokenId>& ids, const DecodeOptions& options = {}) const;

    // The raw bytes one token stands for (▁ shown as a space, byte tokens as their byte).
    std::string token_to_piece(TokenId id, bool render_special = true) const;

private:
    struct Fragment {
        bool is_token;
        TokenId id;
        uint32_t begin, end; // byte span in the input
    };
    std::vector<Fragment> partition_special(std::string_view text, bool parse_special) const;
    // text[from…] as encode does (without BOS/EOS), `from` being the text's start or the end of a
    // control token.
    void encode_from(std::string_view text, uint32_t from, bool parse_special, std::vector<Token>& out) const;
    // The EOS the vocabulary's metadata asks for at the end of `text`, if it does.
    void append_eos(std::string_view text, const EncodeOptions& options, std::vector<Token>& out) const;
    // Whether some special token's text covers both sides of byte `at` (then text cannot be split there).
    bool special_straddles(std::string_view text, uint32_t at, bool parse_special) const;
    void encode_spm(std::string_view text, uint32_t offset, bool after_special, std::vector<Token>& out) const;
    void encode_bpe(std::string_view text, uint32_t offset, std::vector<Token>& out) const;
    TokenId byte_token(unsigned char byte) const;

    Vocab m_vocab;
    std::vector<TokenId> m_special_by_length; // control/user-defined/unknown, longest text first
    std::unique_ptr<PreTokenizer> m_pre;
};

} // namespace engine
