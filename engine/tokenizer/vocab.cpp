// SPDX-License-Identifier: GPL-3.0-or-later
// Defaults and overrides follow llama.cpp's vocabulary loader (shared/reference/tokenizers.md §1).
#include "tokenizer/vocab.h"

#include "gguf/gguf_file.h"
#include "tokenizer/special_tokens.h"
#include "util/error.h"

#include <algorithm>
#include <array>
#include <limits>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

namespace engine {

std::string_view token_type_name(TokenType type)
{
    switch (type) {
    case TokenType::Undefined:
        return "undefined";
    case TokenType::Normal:
        return "normal";
    case TokenType::Unknown:
        return "unknown";
    case TokenType::Control:
        return "control";
    case TokenType::UserDefined:
        return "user-defined";
    case TokenType::Unused:
        return "unused";
    case TokenType::Byte:
        return "byte";
    }
    return "?";
}

std::optional<TokenId> Vocab::find(std::string_view text) const
{
    auto it = token_to_id.find(std::string(text));
    if (it == token_to_id.end())
        return std::nullopt;
    return it->second;
}

namespace {

// Pre-tokenizer names whose BPE skips merging for pieces that are whole tokens and adds BOS.
bool is_llama3_family(std::string_view pre)
{
    return pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" || pre == "falcon3" || pre == "pixtral";
}

// Why a tokenizer model is refused, in words a user can act on.
std::string unsupported_model_message(const std::string& file, std::string_view model)
{
    std::string_view kind;
    if (model == "bert")
        kind = "WordPiece, the tokenizer of BERT-style encoder (embedding) models";
    else if (model == "t5")
        kind = "Unigram, the tokenizer of T5 and XLM-RoBERTa-style models";
    else if (model == "rwkv")
        kind = "RWKV's trie tokenizer";
    else if (model == "plamo2")
        kind = "PLaMo 2's Aho-Corasick tokenizer";
    else if (model == "no_vocab" || model == "none")
        kind = "the file carries no vocabulary";
    else
        kind = "a tokenizer model Tokenscope does not know";
    return fmt::format("{}: tokenizer model '{}' ({}) is not supported; Tokenscope reads 'llama' "
                       "(SentencePiece), 'gpt2' (byte-level BPE) and 'gemma4' (Gemma 4's BPE)",
                       file, model, kind);
}

} // namespace

Vocab Vocab::from_gguf(const gguf::GgufFile& file)
{
    auto fail = [&](const std::string& what) -> FormatError {
        return FormatError(fmt::format("{}: tokenizer: {}", file.name(), what));
    };

    Vocab v;
    const auto model = file.get_string("tokenizer.ggml.model");
    if (!model)
        throw fail("the file has no tokenizer (tokenizer.ggml.model is missing)");
    v.model_name = std::string(*model);
    if (v.model_name == "llama") {
        v.model = TokenizerModel::Spm;
        v.bos = 1;
        v.eos = 2;
        v.unk = 0;
        v.add_bos = true;
        v.add_space_prefix = true;
    } else if (v.model_name == "gpt2") {
        v.model = TokenizerModel::Bpe;
        v.bos = 11;
        v.eos = 11;
        v.clean_spaces = true;
    } else if (v.model_name == "gemma4") {
        // BPE over ▁-escaped UTF-8 (no byte alphabet); the special ids come from the file only.
        v.model = TokenizerModel::Bpe;
        v.clean_spaces = true;
    } else {
        throw UnsupportedError(unsupported_model_message(file.name(), v.model_name));
    }

    if (v.model == TokenizerModel::Bpe) {
        // Gemma 4's tokenizer has one pre-tokenizer whatever tokenizer.ggml.pre says, as in llama.cpp.
        v.pre = v.model_name == "gemma4" ? std::string("gemma4")
                                         : std::string(file.get_string("tokenizer.ggml.pre").value_or("default"));
        if (is_llama3_family(v.pre) || v.pre == "tekken") {
            v.ignore_merges = true;
            v.add_bos = true;
        }
        if (v.pre == "qwen2" || v.pre == "qwen35" || v.pre == "deepseek-r1-qwen" || v.pre == "megrez" ||
            v.pre == "stablelm2" || v.pre == "deepseek-llm" || v.pre == "deepseek-coder" || v.pre == "command-r" ||
            v.pre == "tekken" || v.pre == "gpt-4o" || v.pre == "llama4" || v.pre == "kanana2" || v.pre == "talkie" ||
            v.pre == "minimax-m2" || v.pre == "smollm")
            v.clean_spaces = false;
        if (v.pre == "gemma4") {
            v.byte_encode = false;
            v.escape_whitespaces = true;
            // The merges cannot rebuild some long newline runs that are tokens (llama.cpp PR 21343).
            v.whole_newline_runs = true;
        }
    }

    // ---- tokens, scores, types ------------------------------------------------------------------
    const gguf::MetaArray* tokens = file.get_array("tokenizer.ggml.tokens");
    if (!tokens || tokens->element_type != gguf::ValueType::String)
        throw fail("tokenizer.ggml.tokens is missing or is not an array of strings");
    const std::size_t n = tokens->strings.size();
    if (n == 0)
        throw fail("the vocabulary is empty");
    if (n > static_cast<std::size_t>(std::numeric_limits<TokenId>::max()))
        throw fail(fmt::format("the vocabulary has {} tokens, more than a token id can hold", n));

    v.tokens.reserve(n);
    v.token_to_id.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
        std::string text(tokens->strings[i]);
        if (text.empty())
            text = "[EMPTY_" + std::to_string(i) + "]"; // as llama.cpp does, so ids stay unique
        if (!v.token_to_id.emplace(text, static_cast<TokenId>(i)).second)
            throw fail(fmt::format("token {} duplicates the text of token {}", i, v.token_to_id.at(text)));
        v.tokens.push_back(std::move(text));
    }

    v.scores.assign(n, 0.0f);
    if (const gguf::MetaArray* scores = file.get_array("tokenizer.ggml.scores")) {
        if (scores->element_type != gguf::ValueType::Float32 && scores->element_type != gguf::ValueType::Int32)
            throw fail("tokenizer.ggml.scores must be an array of f32 or i32");
        if (scores->count < n)
            throw fail(fmt::format("tokenizer.ggml.scores has {} entries for {} tokens", scores->count, n));
        for (std::size_t i = 0; i < n; ++i)
            v.scores[i] = static_cast<float>(*scores->float_at(i));
    }

    v.types.assign(n, TokenType::Normal);
    if (const gguf::MetaArray* types = file.get_array("tokenizer.ggml.token_type")) {
        if (types->element_type != gguf::ValueType::Int32)
            throw fail("tokenizer.ggml.token_type must be an array of i32");
        if (types->count < n)
            throw fail(fmt::format("tokenizer.ggml.token_type has {} entries for {} tokens", types->count, n));
        for (std::size_t i = 0; i < n; ++i) {
            const int64_t t = *types->int_at(i);
            v.types[i] = (t >= 0 && t <= 6) ? static_cast<TokenType>(t) : TokenType::Undefined;
        }
    }

    // ---- merges (BPE) ---------------------------------------------------------------------------
    if (v.model == TokenizerModel::Bpe) {
        const gguf::MetaArray* merges = file.get_array("tokenizer.ggml.merges");
        if (!merges || merges->element_type != gguf::ValueType::String)
            throw fail("a BPE tokenizer needs tokenizer.ggml.merges (an array of strings)");
        v.merge_rank.reserve(merges->strings.size());
        for (std::size_t i = 0; i < merges->strings.size(); ++i) {
            const std::string_view m = merges->strings[i];
            const std::size_t space = m.find(' ', 1);
            if (space == std::string_view::npos)
                continue; // unusable, as in llama.cpp
            v.merge_rank.try_emplace(std::string(m), static_cast<int32_t>(i));
        }
    }

    // ---- special ids and flags ------------------------------------------------------------------
    // An id the file names must be a token of this vocabulary: one outside it is refused by name
    // rather than quietly replaced by a default (which would end generation on an ordinary token).
    // The unknown and padding ids are never generated or stopped on: one out of range is dropped
    // with a warning, as some converters write -1 there.
    auto special = [&](const char* key, std::optional<TokenId>& slot, bool required_in_range) {
        if (slot && static_cast<std::size_t>(*slot) >= n)
            slot.reset();
        if (!file.find(key))
            return;
        const auto id = file.get_int(key);
        if (!id || *id < 0 || static_cast<uint64_t>(*id) >= n) {
            const std::string what = fmt::format("{} is {}, outside the vocabulary of {} tokens", key,
                                                 id ? std::to_string(*id) : std::string("not an integer"), n);
            if (required_in_range)
                throw fail(what);
            spdlog::warn("{}: tokenizer: {} (ignored)", file.name(), what);
            slot.reset();
            return;
        }
        slot = static_cast<TokenId>(*id);
    };
    special("tokenizer.ggml.bos_token_id", v.bos, true);
    special("tokenizer.ggml.eos_token_id", v.eos, true);
    special("tokenizer.ggml.eot_token_id", v.eot, true);
    special("tokenizer.ggml.eom_token_id", v.eom, true);
    special("tokenizer.ggml.unknown_token_id", v.unk, false);
    special("tokenizer.ggml.padding_token_id", v.pad, false);

    if (auto b = file.get_bool("tokenizer.ggml.add_bos_token"))
        v.add_bos = *b;
    if (auto b = file.get_bool("tokenizer.ggml.add_eos_token"))
        v.add_eos = *b;
    if (v.model == TokenizerModel::Spm)
        if (auto b = file.get_bool("tokenizer.ggml.add_space_prefix"))
            v.add_space_prefix = *b;
    if (v.pre == "gemma4")
        v.add_bos = true; // Gemma 4 GGUFs that say false were converted wrongly (llama.cpp PR 21500)
    if (v.add_bos && !v.bos)
        throw fail("tokenizer.ggml.add_bos_token is set but the vocabulary has no BOS token");
    if (auto t = file.get_string("tokenizer.chat_template"))
        v.chat_template = std::string(*t);

    recognise_special_tokens(v, file);
    return v;
}

} // namespace engine
