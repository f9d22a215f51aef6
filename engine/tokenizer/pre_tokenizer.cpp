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
// Qwen 3.5: Qwen 2's with combining marks (\p{M}) kept inside words.
const char* const kQwen35 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Mistral's Tekken (Mistral Nemo, Ministral 3) and OpenAI's o200k (GPT-4o; Phi-4-mini, Llama 4): case-
// split words as llama.cpp writes them — "(?=[\p{L}])([^a-z])" for an upper-case letter, so a letter
// outside ASCII counts as both cases there, as in llama.cpp — then single digits (Tekken) or runs of
// up to three (o200k), with o200k's contractions attached to the word.
const char* const kTekken =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kGpt4o =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// DeepSeek LLM (v1/v2): newlines alone, then cased Latin/Greek/Cyrillic/… letter runs, ASCII and
// full-width punctuation runs, trailing whitespace, CJK/Hangul runs, digit runs. The letter class
// lists code point ranges rather than \p{L}, so other scripts' letters stay unsplit here.
// clang-format off
const char* const kDeepseekLlmLetters =
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+";
const char* const kDeepseekPunctuation = "\\s?[!-/:-~！-／：-～‘-‟　-。]+";
const char* const kDeepseekCjk = "[一-龥ࠀ-一가-퟿]+";
// clang-format on

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
    if (pre == "qwen35")
        return {kQwen35};
    if (pre == "tekken")
        return {kTekken};
    if (pre == "gpt-4o" || pre == "llama4" || pre == "kanana2" || pre == "talkie" || pre == "minimax-m2")
        return {kGpt4o};
    if (pre == "deepseek-llm")
        return {"[\r\n]", kDeepseekLlmLetters, kDeepseekPunctuation, R"(\s+$)", kDeepseekCjk, R"(\p{N}+)"};
    if (pre == "deepseek-coder")
        return {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kDeepseekCjk, R"(\p{N})"};
    if (pre == "falcon")
        return {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"};
    // Gemma 4 merges over the whole ▁-escaped text; only newline runs are split off.
    if (pre == "gemma4")
        return {R"([^\n]+|[\n]+)"};
    if (pre == "starcoder" || pre == "refact" || pre == "command-r" || pre == "smollm" || pre == "codeshell" ||
        pre == "exaone" || pre == "minerva-7b")
        return {R"(\p{N})", kGpt2};
    throw UnsupportedError(
        fmt::format("BPE pre-tokenizer '{}' is not supported (supported: default, gpt-2, "
                    "llama-bpe/llama3, qwen2, qwen35, tekken, gpt-4o, smollm/starcoder, deepseek-llm, "
                    "deepseek-coder, falcon, gemma4 and their aliases)",
                    pre));
}

// Length of the non-ASCII White_Space character at text[i] (valid UTF-8), 0 when there is none.
std::size_t non_ascii_space_at(std::string_view text, std::size_t i)
{
    const auto b = [&](std::size_t k) { return i + k < text.size() ? static_cast<unsigned char>(text[i + k]) : 0u; };
    if (b(0) == 0xC2 && (b(1) == 0x85 || b(1) == 0xA0)) // U+0085, U+00A0
        return 2;
    if ((b(0) == 0xE1 && b(1) == 0x9A && b(2) == 0x80) || // U+1680
        (b(0) == 0xE2 && b(1) == 0x80 && (b(2) <= 0x8A || b(2) == 0xA8 || b(2) == 0xA9 || b(2) == 0xAF)) ||
        (b(0) == 0xE2 && b(1) == 0x81 && b(2) == 0x9F) || // U+2000–U+200A, U+2028, U+2029, U+202F; U+205F
        (b(0) == 0xE3 && b(1) == 0x80 && b(2) == 0x80))   // U+3000
        return 3;
    return 0;
}

// llama.cpp's regex engine (std::regex) knows only ASCII whitespace, so llama.cpp shows it every
// other White_Space character as U+000B, and so do we: it decides the split where a pattern names
// one literally (DeepSeek's punctuation class holds U+3000), and for U+0085, which PCRE2's \s
// does not match. Returns false (and builds nothing) when the text has no such character;
// otherwise source[i] is the text offset of shadow byte i, with one entry past the end.
bool whitespace_as_vt(std::string_view text, std::string& shadow, std::vector<uint32_t>& source)
{
    std::size_t i = 0;
    while (i < text.size() && non_ascii_space_at(text, i) == 0)
        ++i;
    if (i == text.size())
        return false;
    shadow.assign(text.substr(0, i));
    for (uint32_t k = 0; k < i; ++k)
        source.push_back(k);
    while (i < text.size()) {
        if (const std::size_t n = non_ascii_space_at(text, i)) {
            shadow += '\v';
            source.push_back(static_cast<uint32_t>(i));
            i += n;
        } else {
            shadow += text[i];
            source.push_back(static_cast<uint32_t>(i++));
        }
    }
    source.push_back(static_cast<uint32_t>(text.size()));
    return true;
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
        // DOLLAR_ENDONLY: `$` (DeepSeek's `\s+$`) matches only at the end of a piece, as in the
        // ECMAScript regexes llama.cpp runs, not also before a final newline as PCRE2's default does.
        c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(),
                                PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &error, &error_offset, nullptr);
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

std::vector<std::pair<uint32_t, uint32_t>> PreTokenizer::split(std::string_view original) const
{
    if (original.empty())
        return {};
    // Invalid UTF-8 cannot go through a UTF-mode regex; it stays one piece and is merged bytewise.
    if (!utf8::is_valid(original))
        return {{0u, static_cast<uint32_t>(original.size())}};
    std::string shadow;
    std::vector<uint32_t> source;
    const bool shadowed = whitespace_as_vt(original, shadow, source);
    const std::string_view text = shadowed ? std::string_view(shadow) : original;
    std::vector<std::pair<uint32_t, uint32_t>> pieces{{0u, static_cast<uint32_t>(text.size())}};

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
    if (shadowed) {
        for (auto& [begin, end] : pieces) {
            begin = source[begin];
            end = source[end];
        }
    }
    return pieces;
}

} // namespace engine
