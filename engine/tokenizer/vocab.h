// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace engine {
namespace gguf {
class GgufFile;
}

using TokenId = int32_t;

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
    Undefined = 0,
    Normal = 1,
    Unknown = 2,
    Control = 3,
    UserDefined = 4,
    Unused = 5,
    Byte = 6,
};
std::string_view token_type_name(TokenType type);

enum class TokenizerModel { Spm, Bpe };

constexpr uint8_t kStripLeft = 1;
constexpr uint8_t kStripRight = 2;

// Everything a tokenizer needs, read from GGUF metadata (tokenizer.* keys, see
// shared/reference/tokenizers.md). Loading reads only metadata, never tensor data, so a
// vocabulary-only load of any GGUF is fast.
struct Vocab {
    TokenizerModel model = TokenizerModel::Spm;
    std::string model_name; // tokenizer.ggml.model as written
    std::string pre;        // tokenizer.ggml.pre (BPE), "default" when absent

    std::vector<std::string> tokens;
    std::vector<float> scores;
    std::vector<TokenType> types;
    std::unordered_map<std::string, TokenId> token_to_id;
    std::unordered_map<std::string, int32_t> merge_rank; // key "left right" as stored (BPE)

    std::optional<TokenId> bos, eos, eot, eom, unk, pad;
    std::vector<TokenId> end_of_generation; // eos/eot/eom and recognised end-of-turn tokens
    bool add_bos = false;
    bool add_eos = false;
    bool add_space_prefix = false;
    bool ignore_merges = false; // BPE: a piece that is already a token skips merging
    // BPE: pieces are merged in GPT-2's byte alphabet (true) or as raw UTF-8 with <0xXX> byte
    // tokens as the fallback (false: Gemma 4's SentencePiece-style BPE).
    bool byte_encode = true;
    bool escape_whitespaces = false; // BPE: ' ' becomes U+2581 before pre-tokenizing (Gemma 4)
    bool whole_newline_runs = false; // BPE: a run of newlines that is a token is emitted whole (Gemma 4)
    bool clean_spaces = false;       // BPE detokenizer cleanup (not used by decode(), see Tokenizer)
    std::optional<std::string> chat_template;
    // Per token: kStripLeft / kStripRight when the token, split out of a text as a special token,
    // swallows the ASCII whitespace on that side (llama.cpp's LSTRIP/RSTRIP attributes).
    std::vector<uint8_t> strip;

    std::size_t size() const { return tokens.size(); }
    std::optional<TokenId> find(std::string_view text) const;
    TokenType type_of(TokenId id) const { return types[static_cast<std::size_t>(id)]; }

    // Throws FormatError / UnsupportedError naming the file and the key at fault.
    static Vocab from_gguf(const gguf::GgufFile& file);
};

} // namespace engine
