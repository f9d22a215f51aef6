// SPDX-License-Identifier: GPL-3.0-or-later
// Regexes per pre-tokenizer name, verbatim from llama.cpp (shared/reference/tokenizers.md §4).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pre_tokenizer.h"

#include "util/error.h"
#include "util/utf8.h"

#include <pcre2.h>
#include <spdlog/fmt/fmt.h>

namespace engine {

namespace {

const char* const kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
const char* const kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::vector<std::string> patterns_for(std::string_view pre)
{
    if (pre == "default")
        return {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"};
    if (pre == "gpt-2" || pre == "gpt2" || pre == "phi-2" || pre == "mpt" || pre == "olmo" || pre == "jina-es" ||
        pre == "jina-de" || pre == "gigachat" || pre == "jina-v2-es" || pre == "jina-v2-de" || pre == "mellum" ||
        pre == "modern-bert" || pre == "jais" || pre == "trillion")
        return {kGpt2};
    if (pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" || pre == "falcon3" || pre == "pixtral" ||
        pre == "dbrx" || pre == "smaug-bpe" || pre == "lfm2")
        return {kLlama3};
    if (pre == "qwen2" || pre == "deepseek-r1-qwen" || pre == "megrez" || pre == "stablelm2" || pre == "hunyuan")
        return {kQwen2};
    if (pre == "starcoder" || pre == "refact" || pre == "command-r" || pre == "smollm" || pre == "codeshell" ||
        pre == "exaone" || pre == "minerva-7b")
        return {R"(\p{N})", kGpt2};
    throw UnsupportedError(fmt::format("BPE pre-tokenizer '{}' is not supported (supported: default, gpt-2, "
                                       "llama-bpe/llama3, qwen2, smollm/starcoder and their aliases)",
                                       pre));
}

} // namespace

struct PreTokenizer::Compiled {
    pcre2_code* code = nullptr;
    ~Compiled() { pcre2_code_free(code); }
};

std::unique_ptr<PreTokenizer> PreTokenizer::for_name(std::string_view pre)
{
    return std::make_unique<PreTokenizer>(patterns_for(pre));
}

PreTokenizer::PreTokenizer(std::vector<std::string> patterns) : m_patterns(std::move(patterns))
{
    for (const auto& p : m_patterns) {
        int error = 0;
        PCRE2_SIZE error_offset = 0;
        auto c = std::make_unique<Compiled>();
        c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(), PCRE2_UTF | PCRE2_UCP, &error,
                                &error_offset, nullptr);
        if (!c->code) {
            PCRE2_UCHAR message[256];
            pcre2_get_error_message(error, message, sizeof message);
            throw Error(fmt::format("pre-tokenizer regex '{}' does not compile at {}: {}", p, error_offset,
                                    reinterpret_cast<const char*>(message)));
        }
        pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE); // falls back to the interpreter if JIT is unavailable
        m_compiled.push_back(std::move(c));
    }
}

PreTokenizer::~PreTokenizer() = default;

std::vector<std::pair<uint32_t, uint32_t>> PreTokenizer::split(std::string_view text) const
{
    std::vector<std::pair<uint32_t, uint32_t>> pieces{{0u, static_cast<uint32_t>(text.size())}};
    if (text.empty())
        return {};
    // Invalid UTF-8 cannot go through a UTF-mode regex; it stays one piece and is merged bytewise.
    if (!utf8::is_valid(text))
        return pieces;

    pcre2_match_data* match = nullptr;
    for (const auto& compiled : m_compiled) {
        if (!match)
            match = pcre2_match_data_create_from_pattern(compiled->code, nullptr);
        std::vector<std::pair<uint32_t, uint32_t>> next;
        for (const auto& [begin, end] : pieces) {
            const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data() + begin);
            const PCRE2_SIZE length = end - begin;
            PCRE2_SIZE pos = 0, last = 0;
            while (pos < length) {
                const int rc = pcre2_match(compiled->code, subject, length, pos, PCRE2_NO_UTF_CHECK, match, nullptr);
                if (rc < 0)
                    break;
                const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match);
                if (ov[1] == ov[0]) { // empty match: step one character
                    pos = ov[0] + 1;
                    while (pos < length && (subject[pos] & 0xC0) == 0x80)
                        ++pos;
                    continue;
                }
                if (ov[0] > last)
                    next.emplace_back(begin + static_cast<uint32_t>(last), begin + static_cast<uint32_t>(ov[0]));
                next.emplace_back(begin + static_cast<uint32_t>(ov[0]), begin + static_cast<uint32_t>(ov[1]));
                last = pos = ov[1];
            }
            if (last < length)
                next.emplace_back(begin + static_cast<uint32_t>(last), end);
        }
        pieces = std::move(next);
    }
    pcre2_match_data_free(match);
    return pieces;
}

} // namespace engine
