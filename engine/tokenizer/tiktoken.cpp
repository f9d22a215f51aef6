// SPDX-License-Identifier: GPL-3.0-or-later
// OpenAI's tiktoken encodings cl100k_base and o200k_base: the rank-file format, the byte-level BPE
// over ranks, and the encodings' regexes and special tokens. Facts from tiktoken's public source
// (github.com/openai/tiktoken, tiktoken_ext/openai_public.py and tiktoken/load.py, version 0.14.0).
#include "tokenizer/tiktoken.h"

#include "tokenizer/pre_tokenizer.h"
#include "util/error.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <optional>
#include <queue>
#include <spdlog/fmt/fmt.h>

namespace engine {

namespace {

// ---- the encodings ------------------------------------------------------------------------------

// The pat_str of each encoding exactly as tiktoken 0.14.0 writes it; pcre2_form() below adapts it.
const TiktokenEncodingSpec kCl100k{
    "cl100k_base",
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s)",
    {{"<|endoftext|>", 100257},
     {"<|fim_prefix|>", 100258},
     {"<|fim_middle|>", 100259},
     {"<|fim_suffix|>", 100260},
     {"<|endofprompt|>", 100276}},
};

// o200k_base's pat_str: tiktoken joins these seven alternatives with '|'.
const TiktokenEncodingSpec kO200k{
    "o200k_base",
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    "|"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    "|"
    R"(\p{N}{1,3})"
    "|"
    R"( ?[^\s\p{L}\p{N}]+[\r\n/]*)"
    "|"
    R"(\s*[\r\n]+)"
    "|"
    R"(\s+(?!\S))"
    "|"
    R"(\s+)",
    {{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}},
};

// tiktoken runs its patterns with Rust's fancy-regex; PCRE2 (UTF + UCP) reads two things
// differently, so the pattern is rewritten before it is compiled:
//  * `$` is the end of the text in Rust (no multi-line flag); PCRE2's `$` also matches before a
//    final newline, so it becomes `\z`.
//  * `\s` is Unicode White_Space in Rust; PCRE2's UCP `\s` (and \p{Xps}) add U+180E MONGOLIAN
//    VOWEL SEPARATOR, a format character since Unicode 6.3, through its \h list. So `\s` becomes
//    the White_Space code points themselves (Unicode's PropList.txt), and `\S` their complement.
constexpr std::string_view kWhiteSpace =
    R"(\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

std::string pcre2_form(std::string_view pattern)
{
    std::string out;
    bool in_class = false;
    for (std::size_t i = 0; i < pattern.size();) {
        const char c = pattern[i];
        if (c == '\\' && i + 1 < pattern.size()) {
            const char e = pattern[i + 1];
            if (e == 's')
                out += in_class ? std::string(kWhiteSpace) : fmt::format("[{}]", kWhiteSpace);
            else if (e == 'S' && !in_class)
                out += fmt::format("[^{}]", kWhiteSpace);
            else if (e == 'S')
                throw Error("tiktoken pattern: \\S inside a character class is not supported");
            else
                out += pattern.substr(i, 2);
            i += 2;
            continue;
        }
        ++i;
        if (in_class) {
            in_class = c != ']';
            out += c;
        } else if (c == '[') {
            in_class = true;
            out += c;
            if (i < pattern.size() && pattern[i] == '^')
                out += pattern[i++];
            if (i < pattern.size() && pattern[i] == ']') // a ']' first in a class is literal
                out += pattern[i++];
        } else if (c == '$') {
            out += "\\z";
        } else {
            out += c;
        }
    }
    return out;
}

// ---- base64 (RFC 4648, standard alphabet, padded) ---------------------------------------------

int base64_value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

// Decodes strictly; nullopt for a length that is not a multiple of 4, a character outside the
// alphabet, or padding anywhere but the last one or two places.
std::optional<std::string> base64_decode(std::string_view in)
{
    if (in.empty() || in.size() % 4 != 0)
        return std::nullopt;
    std::size_t padding = 0;
    if (in.back() == '=')
        padding = in[in.size() - 2] == '=' ? 2 : 1;
    std::string out;
    out.reserve(in.size() / 4 * 3);
    for (std::size_t i = 0; i < in.size(); i += 4) {
        const bool last = i + 4 == in.size();
        uint32_t group = 0;
        for (std::size_t j = 0; j < 4; ++j) {
            const char c = in[i + j];
            int v = 0;
            if (c == '=') {
                if (!last || j < 4 - padding)
                    return std::nullopt;
            } else {
                v = base64_value(c);
                if (v < 0)
                    return std::nullopt;
            }
            group = group << 6 | static_cast<uint32_t>(v);
        }
        const std::size_t n = last ? 3 - padding : 3;
        for (std::size_t j = 0; j < n; ++j)
            out += static_cast<char>((group >> (16 - 8 * j)) & 0xFF);
    }
    return out;
}

std::string printable(std::string_view s)
{
    std::string out;
    for (const char c : s.substr(0, 40)) {
        const auto u = static_cast<unsigned char>(c);
        out += (u >= 0x20 && u < 0x7F) ? std::string(1, c) : fmt::format("\\x{:02X}", u);
    }
    return s.size() > 40 ? out + "…" : out;
}

} // namespace

const TiktokenEncodingSpec* find_tiktoken_encoding(std::string_view name)
{
    if (name == kCl100k.name)
        return &kCl100k;
    if (name == kO200k.name)
        return &kO200k;
    return nullptr;
}

std::string supported_tiktoken_encodings()
{
    return fmt::format("{}, {}", kCl100k.name, kO200k.name);
}

// ---- the rank file ----------------------------------------------------------------------------

std::vector<std::string> parse_tiktoken_ranks(std::string_view contents, const std::string& name)
{
    struct Entry {
        std::string bytes;
        uint32_t rank;
        std::size_t line;
    };
    std::vector<Entry> entries;
    std::unordered_map<std::string, std::size_t> line_of_token;
    std::unordered_map<uint32_t, std::size_t> line_of_rank;
    auto fail = [&](std::size_t line, const std::string& what) {
        return FormatError(fmt::format("{}: line {}: {}", name, line, what));
    };

    std::size_t line_no = 0;
    std::size_t pos = 0;
    while (pos < contents.size()) {
        std::size_t eol = contents.find('\n', pos);
        if (eol == std::string_view::npos)
            eol = contents.size();
        std::string_view line = contents.substr(pos, eol - pos);
        pos = eol + 1;
        ++line_no;
        if (!line.empty() && line.back() == '\r')
            line.remove_suffix(1);
        if (line.empty())
            continue;

        const std::size_t space = line.find(' ');
        if (space == std::string_view::npos)
            throw fail(line_no, "expected '<base64 token> <rank>' but the rank is missing");
        const std::string_view b64 = line.substr(0, space);
        const std::string_view rank_text = line.substr(space + 1);
        auto bytes = base64_decode(b64);
        if (!bytes)
            throw fail(line_no, fmt::format("'{}' is not valid base64", printable(b64)));
        uint32_t rank = 0;
        const auto [end, ec] = std::from_chars(rank_text.data(), rank_text.data() + rank_text.size(), rank);
        if (rank_text.empty() || ec != std::errc() || end != rank_text.data() + rank_text.size() ||
            rank > static_cast<uint32_t>(std::numeric_limits<TokenId>::max()))
            throw fail(line_no, fmt::format("'{}' is not a rank (a non-negative integer)", printable(rank_text)));
        if (auto [it, fresh] = line_of_token.emplace(*bytes, line_no); !fresh)
            throw fail(line_no, fmt::format("token '{}' duplicates the token on line {}", printable(b64), it->second));
        if (auto [it, fresh] = line_of_rank.emplace(rank, line_no); !fresh)
            throw fail(line_no, fmt::format("rank {} is already given on line {}", rank, it->second));
        entries.push_back({std::move(*bytes), rank, line_no});
    }
    if (entries.empty())
        throw FormatError(fmt::format("{}: the rank file is empty (expected lines '<base64 token> <rank>')", name));

    // Ranks are unique, so all of them below n means exactly 0..n-1.
    std::vector<std::string> by_rank(entries.size());
    for (auto& e : entries) {
        if (e.rank >= entries.size())
            throw fail(e.line, fmt::format("rank {} leaves a gap: the {} tokens of the file must have the ranks "
                                           "0..{} exactly",
                                           e.rank, entries.size(), entries.size() - 1));
        by_rank[e.rank] = std::move(e.bytes);
    }
    for (unsigned b = 0; b < 256; ++b)
        if (!line_of_token.contains(std::string(1, static_cast<char>(b))))
            throw FormatError(fmt::format("{}: the rank file has no token for the byte 0x{:02X} (byte-level BPE "
                                          "needs a rank for each of the 256 bytes)",
                                          name, b));
    return by_rank;
}

// ---- the encoder ------------------------------------------------------------------------------

TiktokenEncoder::TiktokenEncoder(const TiktokenEncodingSpec& spec, std::vector<std::string> token_bytes,
                                 const std::string& name)
    : m_spec(spec)
{
    if (token_bytes.empty())
        throw FormatError(fmt::format("{}: the rank file is empty", name));
    TokenId first_special = std::numeric_limits<TokenId>::max();
    TokenId last_special = 0;
    for (const auto& [text, id] : m_spec.special_tokens) {
        first_special = std::min(first_special, id);
        last_special = std::max(last_special, id);
    }
    if (token_bytes.size() > static_cast<std::size_t>(first_special))
        throw FormatError(fmt::format("{}: the file has {} ranks, but the ids from {} on belong to {}'s special "
                                      "tokens",
                                      name, token_bytes.size(), first_special, m_spec.name));
    m_n_vocab = m_spec.special_tokens.empty() ? token_bytes.size() : static_cast<std::size_t>(last_special) + 1;

    std::size_t total = 0;
    for (const auto& t : token_bytes)
        total += t.size();
    m_arena.reserve(total);
    m_offsets.reserve(token_bytes.size() + 1);
    for (const auto& t : token_bytes) {
        m_offsets.push_back(static_cast<uint32_t>(m_arena.size()));
        m_arena += t;
    }
    m_offsets.push_back(static_cast<uint32_t>(m_arena.size()));
    m_rank.reserve(token_bytes.size());
    for (uint32_t r = 0; r + 1 < m_offsets.size(); ++r)
        m_rank.emplace(bytes_of(r), r);
    m_pre = std::make_unique<PreTokenizer>(std::vector<std::string>{pcre2_form(m_spec.pattern)});
}

TiktokenEncoder::~TiktokenEncoder() = default;

std::optional<uint32_t> TiktokenEncoder::rank_of(std::string_view bytes) const
{
    auto it = m_rank.find(bytes);
    if (it == m_rank.end())
        return std::nullopt;
    return it->second;
}

std::string TiktokenEncoder::piece(TokenId id) const
{
    if (id >= 0 && static_cast<std::size_t>(id) < n_ranks())
        return std::string(bytes_of(static_cast<uint32_t>(id)));
    for (const auto& [text, special] : m_spec.special_tokens)
        if (special == id)
            return std::string(text);
    return {};
}

std::vector<Token> TiktokenEncoder::encode_ordinary(std::string_view text) const
{
    std::vector<Token> out;
    out.reserve(text.size() / 3 + 1);
    for (const auto& [begin, end] : m_pre->split(text))
        encode_piece(text, begin, end, out);
    return out;
}

void TiktokenEncoder::encode_piece(std::string_view text, uint32_t begin, uint32_t end, std::vector<Token>& out) const
{
    const std::string_view piece = text.substr(begin, end - begin);
    if (piece.empty())
        return;
    if (auto r = rank_of(piece)) {
        out.push_back({static_cast<TokenId>(*r), begin, end});
        return;
    }

    // Parts of the piece, as a linked list over byte ranges; a merge absorbs the right part.
    struct Part {
        uint32_t start, len; // len 0 once merged into its left neighbour
        int prev, next;
    };
    std::vector<Part> parts(piece.size());
    for (std::size_t i = 0; i < piece.size(); ++i)
        parts[i] = {static_cast<uint32_t>(i), 1, static_cast<int>(i) - 1,
                    i + 1 < piece.size() ? static_cast<int>(i) + 1 : -1};

    struct Candidate {
        uint32_t rank;
        int left;
        uint32_t len; // bytes of the merged pair; a candidate whose parts changed size is stale
    };
    auto later = [](const Candidate& a, const Candidate& b) {
        return a.rank > b.rank || (a.rank == b.rank && a.left > b.left); // lowest rank, then leftmost
    };
    std::priority_queue<Candidate, std::vector<Candidate>, decltype(later)> queue(later);
    auto consider = [&](int left) {
        if (left < 0)
            return;
        const Part& l = parts[static_cast<std::size_t>(left)];
        if (l.next < 0)
            return;
        const Part& r = parts[static_cast<std::size_t>(l.next)];
        if (auto rank = rank_of(piece.substr(l.start, l.len + r.len)))
            queue.push({*rank, left, l.len + r.len});
    };
    for (int i = 0; i + 1 < static_cast<int>(parts.size()); ++i)
        consider(i);

    while (!queue.empty()) {
        const Candidate c = queue.top();
        queue.pop();
        Part& l = parts[static_cast<std::size_t>(c.left)];
        if (l.len == 0 || l.next < 0)
            continue;
        Part& r = parts[static_cast<std::size_t>(l.next)];
        // The left part's start never moves, so the same total length means the same bytes.
        if (l.len + r.len != c.len)
            continue;
        l.len += r.len;
        r.len = 0;
        l.next = r.next;
        if (l.next >= 0)
            parts[static_cast<std::size_t>(l.next)].prev = c.left;
        consider(l.prev);
        consider(c.left);
    }

    for (int i = 0; i >= 0; i = parts[static_cast<std::size_t>(i)].next) {
        const Part& p = parts[static_cast<std::size_t>(i)];
        // Every part is a single byte (all 256 have ranks, checked on load) or a merged token.
        const auto rank = rank_of(piece.substr(p.start, p.len));
        out.push_back({static_cast<TokenId>(rank.value_or(0)), begin + p.start, begin + p.start + p.len});
    }
}

} // namespace engine
