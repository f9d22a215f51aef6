// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "tokenizer/tokenizer.h"

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace engine {

// A tokenizer shown beside the loaded model's: another GGUF's vocabulary (read without weights)
// or an OpenAI .tiktoken rank file.
//
// encode() counts the text alone, so that tokenizers compare fairly: no BOS/EOS is added and
// control-token strings in the text ("<|endoftext|>", "<start_of_turn>") are ordinary text, as
// tiktoken's encode_ordinary does. (A GGUF vocabulary's user-defined tokens still split out, as
// they do in the model's own tokenizer.) Spans are as engine::Tokenizer makes them: consecutive,
// except that byte-fallback tokens of one character each carry that character's span.
// Immutable after open(); safe to share between threads.
class ComparisonTokenizer {
public:
    virtual ~ComparisonTokenizer() = default;
    // Opens by content/extension: a GGUF file (vocabulary only; tensor data is never read) or a
    // .tiktoken rank file (encoding chosen by file name stem: cl100k_base or o200k_base; any other
    // stem throws UnsupportedError naming the two supported ones). Throws engine errors (see
    // engine/util/error.h) with a clear message naming the file for bad/truncated/empty input.
    static std::unique_ptr<ComparisonTokenizer> open(const std::string& path);
    virtual std::string
    name() const = 0; // short label, e.g. "Llama-3.2-1B (BPE llama-bpe)" or "cl100k_base (tiktoken)"
    virtual std::string kind() const = 0; // "SentencePiece", "BPE", "tiktoken"
    virtual std::size_t vocab_size() const = 0;
    virtual std::vector<Token>
    encode(std::string_view text) const = 0; // Token from tokenizer/tokenizer.h: id + byte span; spans tile the input
    virtual std::string piece(TokenId id) const = 0; // raw bytes of the token
};

// The vocabulary of a GGUF file: metadata only, the file is unmapped again before this returns.
// Named by general.name (else the file stem) and the tokenizer kind.
std::unique_ptr<ComparisonTokenizer> make_gguf_comparison(const std::string& path);
// A .tiktoken rank file; the encoding (regex, special tokens) comes from the file name's stem.
std::unique_ptr<ComparisonTokenizer> make_tiktoken_comparison(const std::string& path); // encoding from stem

} // namespace engine
