// SPDX-License-Identifier: GPL-3.0-or-later
// Special-token partition, SentencePiece-style and byte-level BPE merging, and decoding, following
// llama.cpp's llama-vocab.cpp behaviour (shared/reference/tokenizers.md §2–§5) so that ids match it.
#include "tokenizer/tokenizer.h"

#include "tokenizer/byte_unicode.h"
#include "tokenizer/pre_tokenizer.h"
#include "util/utf8.h"

#include <algorithm>
#include <queue>
#include <spdlog/fmt/fmt.h>
#include <unordered_map>

namespace engine {

namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81"; // U+2581 '▁'

// C's isspace in the "C" locale, which llama.cpp's strip attributes use.
bool is_ascii_space(char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

// A symbol of the merge loops: a byte range of the working string in a doubly linked list.
struct Symbol {
    int prev;
    int next;
    uint32_t start;
    uint32_t n; // 0 once merged into its left neighbour
};

std::vector<Symbol> split_chars(std::string_view s)
{
    std::vector<Symbol> symbols;
    uint32_t offset = 0;
    while (offset < s.size()) {
        const auto len = static_cast<uint32_t>(
            std::min<std::size_t>(utf8::sequence_length(static_cast<unsigned char>(s[offset])), s.size() - offset));
        const int index = static_cast<int>(symbols.size());
        symbols.push_back({index - 1, offset + len == s.size() ? -1 : index + 1, offset, len});
        offset += len;
    }
    return symbols;
}

// Maps bytes of a working string (after ▁-escaping or byte-encoding) back to the input.
struct OffsetMap {
    std::vector<uint32_t> source; // source[i] = input offset of working byte i
    uint32_t end = 0;             // input offset just past the fragment

    uint32_t at(std::size_t i) const { return i < source.size() ? source[i] : end; }
};

// BPE merging of one word by rank: split into characters, then repeatedly merge the adjacent
// pair of lowest merge rank (leftmost on ties). Returns the symbol list; live symbols have n > 0
// and are chained from index 0 by next.
std::vector<Symbol> merge_by_rank(const Vocab& vocab, const std::string& word)
{
    struct Bigram {
        int left, right;
        int32_t rank;
        std::string text;
    };
    auto lower_priority = [](const Bigram& a, const Bigram& b) {
        return a.rank > b.rank || (a.rank == b.rank && a.left > b.left); // lowest rank, then leftmost
    };
    std::vector<Symbol> symbols = split_chars(word);
    std::priority_queue<Bigram, std::vector<Bigram>, decltype(lower_priority)> queue(lower_priority);
    std::string key;
    auto try_add = [&](int left, int right) {
        if (left == -1 || right == -1)
            return;
        const Symbol& l = symbols[static_cast<std::size_t>(left)];
        const Symbol& r = symbols[static_cast<std::size_t>(right)];
        key.assign(word, l.start, l.n);
        key += ' ';
        key.append(word, r.start, r.n);
        auto it = vocab.merge_rank.find(key);
        if (it == vocab.merge_rank.end())
            return;
        queue.push({left, right, it->second, word.substr(l.start, l.n + r.n)});
    };
    for (int i = 1; i < static_cast<int>(symbols.size()); ++i)
        try_add(i - 1, i);
    while (!queue.empty()) {
        const Bigram b = queue.top();
        queue.pop();
        Symbol& l = symbols[static_cast<std::size_t>(b.left)];
        Symbol& r = symbols[static_cast<std::size_t>(b.right)];
        if (l.n == 0 || r.n == 0 || l.n + r.n != b.text.size() ||
            std::string_view(word).substr(l.start, l.n + r.n) != b.text)
            continue; // outdated
        l.n += r.n;
        r.n = 0;
        l.next = r.next;
        if (r.next >= 0)
            symbols[static_cast<std::size_t>(r.next)].prev = b.left;
        try_add(l.prev, b.left);
        try_add(b.left, l.next);
    }
    return symbols;
}

} // namespace

Tokenizer::Tokenizer(Vocab vocab) : m_vocab(std::move(vocab))
{
    for (std::size_t id = 0; id < m_vocab.size(); ++id) {
        const TokenType t = m_vocab.types[id];
        if (t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown)
            m_special_by_length.push_back(static_cast<TokenId>(id));
    }
    std::stable_sort(m_special_by_length.begin(), m_special_by_length.end(), [&](TokenId a, TokenId b) {
        return m_vocab.tokens[static_cast<std::size_t>(a)].size() > m_vocab.tokens[static_cast<std::size_t>(b)].size();
    });
    if (m_vocab.model == TokenizerModel::Bpe)
        m_pre = PreTokenizer::for_name(m_vocab.pre);
}

Tokenizer::~Tokenizer() = default;

// ---- special tokens ---------------------------------------------------------------------------

std::vector<Tokenizer::Fragment> Tokenizer::partition_special(std::string_view text, bool parse_special) const
{
    std::vector<Fragment> fragments;
    if (text.empty())
        return fragments;
    fragments.push_back({false, 0, 0, static_cast<uint32_t>(text.size())});
    std::vector<Fragment> next;
    for (const TokenId id : m_special_by_length) {
        const TokenType type = m_vocab.type_of(id);
        if (!parse_special && (type == TokenType::Control || type == TokenType::Unknown))
            continue; // user-defined tokens are split out even then, as in llama.cpp
        const std::string& special = m_vocab.tokens[static_cast<std::size_t>(id)];
        const uint8_t strip = m_vocab.strip.empty() ? 0 : m_vocab.strip[static_cast<std::size_t>(id)];
        bool found = false;
        for (const auto& f : fragments) {
            if (f.is_token || f.end - f.begin < special.size() ||
                text.substr(f.begin, f.end - f.begin).find(special) == std::string_view::npos)
                continue;
            found = true;
            break;
        }
        if (!found)
            continue;
        next.clear();
        for (const auto& f : fragments) {
            if (f.is_token) {
                next.push_back(f);
                continue;
            }
            uint32_t pos = f.begin;
            while (pos < f.end) {
                const std::size_t match = text.substr(0, f.end).find(special, pos);
                if (match == std::string_view::npos)
                    break;
                // A token with a strip attribute swallows the ASCII whitespace beside it; its span
                // covers that whitespace so that the spans still tile the text.
                auto left = static_cast<uint32_t>(match);
                if (strip & kStripLeft)
                    while (left > pos && is_ascii_space(text[left - 1]))
                        --left;
                if (left > pos)
                    next.push_back({false, 0, pos, left});
                auto right = static_cast<uint32_t>(match + special.size());
                if (strip & kStripRight)
                    while (right < f.end && is_ascii_space(text[right]))
                        ++right;
                next.push_back({true, id, left, right});
                pos = right;
            }
            if (pos < f.end)
                next.push_back({false, 0, pos, f.end});
        }
        fragments.swap(next);
    }
    return fragments;
}

// ---- encode -----------------------------------------------------------------------------------

void Tokenizer::encode_from(std::string_view text, uint32_t from, bool parse_special, std::vector<Token>& out) const
{
    bool after_special = true; // SentencePiece prefixes a space at the start and after special tokens
    for (const auto& f : partition_special(text.substr(from), parse_special)) {
        const uint32_t begin = from + f.begin;
        const uint32_t end = from + f.end;
        if (f.is_token) {
            out.push_back({f.id, begin, end});
            after_special = true;
            continue;
        }
        const std::string_view piece = text.substr(begin, end - begin);
        if (m_vocab.model == TokenizerModel::Spm)
            encode_spm(piece, begin, after_special, out);
        else
            encode_bpe(piece, begin, out);
        after_special = false;
    }
}

void Tokenizer::append_eos(std::string_view text, const EncodeOptions& options, std::vector<Token>& out) const
{
    if (options.add_special && m_vocab.add_eos && m_vocab.eos) {
        const auto end = static_cast<uint32_t>(text.size());
        out.push_back({*m_vocab.eos, end, end});
    }
}

std::vector<Token> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const
{
    std::vector<Token> out;
    if (options.add_special && m_vocab.add_bos && m_vocab.bos)
        out.push_back({*m_vocab.bos, 0, 0});
    encode_from(text, 0, options.parse_special, out);
    append_eos(text, options, out);
    return out;
}

bool Tokenizer::special_straddles(std::string_view text, uint32_t at, bool parse_special) const
{
    for (const TokenId id : m_special_by_length) {
        const TokenType type = m_vocab.type_of(id);
        if (!parse_special && (type == TokenType::Control || type == TokenType::Unknown))
            continue;
        const std::string& special = m_vocab.tokens[static_cast<std::size_t>(id)];
        if (special.size() < 2)
            continue;
        const std::size_t lo = at >= special.size() - 1 ? at - (special.size() - 1) : 0;
        const std::string_view window = text.substr(lo, special.size() - 1 + (at - lo));
        for (std::size_t q = window.find(special); q != std::string_view::npos; q = window.find(special, q + 1))
            if (lo + q < at && lo + q + special.size() > at)
                return true;
    }
    return false;
}

std::vector<Token> Tokenizer::encode_after(std::string_view text, std::string_view earlier_text,
                                           const std::vector<Token>& earlier, const EncodeOptions& options,
                                           std::size_t* reused) const
{
    if (text == earlier_text) {
        if (reused)
            *reused = earlier.size();
        return earlier;
    }
    if (reused)
        *reused = 0;
    const std::size_t n = std::min(text.size(), earlier_text.size());
    std::size_t differ = 0;
    while (differ < n && text[differ] == earlier_text[differ])
        ++differ;
    // The last control token of the earlier encoding that ends at or before the first difference.
    std::size_t keep = 0;
    uint32_t resume = 0;
    for (std::size_t i = 0; i < earlier.size(); ++i) {
        const Token& t = earlier[i];
        if (t.byte_end > differ)
            break;
        const TokenType type = m_vocab.type_of(t.id);
        const bool split_out =
            type == TokenType::Control || type == TokenType::UserDefined || type == TokenType::Unknown;
        const uint8_t strip = m_vocab.strip.empty() ? 0 : m_vocab.strip[static_cast<std::size_t>(t.id)];
        if (split_out && strip == 0 && t.byte_end > t.byte_begin &&
            earlier_text.substr(t.byte_begin, t.byte_end - t.byte_begin) ==
                m_vocab.tokens[static_cast<std::size_t>(t.id)]) {
            keep = i + 1;
            resume = t.byte_end;
        }
    }
    if (keep == 0 || special_straddles(text, resume, options.parse_special))
        return encode(text, options);
    std::vector<Token> out(earlier.begin(), earlier.begin() + static_cast<std::ptrdiff_t>(keep));
    encode_from(text, resume, options.parse_special, out);
    append_eos(text, options, out);
    if (reused)
        *reused = keep;
    return out;
}

std::vector<TokenId> Tokenizer::encode_ids(std::string_view text, const EncodeOptions& options) const
{
    std::vector<TokenId> ids;
    for (const Token& t : encode(text, options))
        ids.push_back(t.id);
    return ids;
}

TokenId Tokenizer::byte_token(unsigned char byte) const
{
    if (auto id = m_vocab.find(fmt::format("<0x{:02X}>", byte)))
        return *id;
    if (auto id = m_vocab.find(std::string(1, static_cast<char>(byte))))
        return *id;
    return m_vocab.unk.value_or(0);
}

void Tokenizer::encode_spm(std::string_view text, uint32_t offset, bool after_special, std::vector<Token>& out) const
{
    // Escape spaces as ▁, remembering where each working byte came from.
    std::string s;
    OffsetMap map;
    map.end = offset + static_cast<uint32_t>(text.size());
    if (m_vocab.add_space_prefix && after_special) {
        s += kSpmSpace;
        map.source.insert(map.source.end(), kSpmSpace.size(), offset);
    }
    for (uint32_t i = 0; i < text.size(); ++i) {
        if (text[i] == ' ') {
            s += kSpmSpace;
            map.source.insert(map.source.end(), kSpmSpace.size(), offset + i);
        } else {
            s += text[i];
            map.source.push_back(offset + i);
        }
    }

    std::vector<Symbol> symbols = split_chars(s);
    struct Bigram {
        int left, right;
        float score;
        uint32_t size;
    };
    auto lower_priority = [](const Bigram& a, const Bigram& b) {
        return a.score < b.score || (a.score == b.score && a.left > b.left); // highest score, then leftmost
    };
    std::priority_queue<Bigram, std::vector<Bigram>, decltype(lower_priority)> queue(lower_priority);
    std::unordered_map<std::string, std::pair<int, int>> rev_merge;

    auto try_add = [&](int left, int right) {
        if (left == -1 || right == -1)
            return;
        const Symbol& l = symbols[static_cast<std::size_t>(left)];
        const Symbol& r = symbols[static_cast<std::size_t>(right)];
        const std::string pair = s.substr(l.start, l.n + r.n);
        const auto id = m_vocab.find(pair);
        if (!id)
            return;
        queue.push({left, right, m_vocab.scores[static_cast<std::size_t>(*id)], static_cast<uint32_t>(pair.size())});
        rev_merge[pair] = {left, right};
    };

    for (int i = 1; i < static_cast<int>(symbols.size()); ++i)
        try_add(i - 1, i);
    while (!queue.empty()) {
        const Bigram b = queue.top();
        queue.pop();
        Symbol& l = symbols[static_cast<std::size_t>(b.left)];
        Symbol& r = symbols[static_cast<std::size_t>(b.right)];
        if (l.n == 0 || r.n == 0 || l.n + r.n != b.size)
            continue; // stale: one side was merged since
        l.n += r.n;
        r.n = 0;
        l.next = r.next;
        if (r.next >= 0)
            symbols[static_cast<std::size_t>(r.next)].prev = b.left;
        try_add(l.prev, b.left);
        try_add(b.left, l.next);
    }

    // Emit tokens; a symbol that is not a token is split back along its merges or into bytes.
    auto emit = [&](auto&& self, const Symbol& sym) -> void {
        const std::string_view piece(s.data() + sym.start, sym.n);
        if (auto id = m_vocab.find(piece)) {
            out.push_back({*id, map.at(sym.start), map.at(sym.start + sym.n)});
            return;
        }
        if (auto it = rev_merge.find(std::string(piece)); it != rev_merge.end()) {
            self(self, symbols[static_cast<std::size_t>(it->second.first)]);
            self(self, symbols[static_cast<std::size_t>(it->second.second)]);
            return;
        }
        // Byte fallback: every byte of the character carries the character's span.
        for (uint32_t j = 0; j < sym.n; ++j)
            out.push_back(
                {byte_token(static_cast<unsigned char>(piece[j])), map.at(sym.start), map.at(sym.start + sym.n)});
    };
    for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[static_cast<std::size_t>(i)].next)
        emit(emit, symbols[static_cast<std::size_t>(i)]);
}

void Tokenizer::encode_bpe(std::string_view text, uint32_t offset, std::vector<Token>& out) const
{
    // Gemma 4 escapes spaces as ▁ before anything else; pieces and merges then see that string.
    std::string escaped;
    OffsetMap escaped_map;
    std::string_view work = text;
    if (m_vocab.escape_whitespaces) {
        escaped_map.end = offset + static_cast<uint32_t>(text.size());
        for (uint32_t i = 0; i < text.size(); ++i) {
            const std::string_view c = text[i] == ' ' ? kSpmSpace : text.substr(i, 1);
            escaped += c;
            escaped_map.source.insert(escaped_map.source.end(), c.size(), offset + i);
        }
        work = escaped;
    }
    auto source = [&](uint32_t i) { return m_vocab.escape_whitespaces ? escaped_map.at(i) : offset + i; };

    for (const auto& [begin, end] : m_pre->split(work)) {
        // The word to merge: the piece in GPT-2's byte alphabet, or its raw UTF-8 (Gemma 4).
        std::string word;
        OffsetMap map;
        map.end = source(end);
        for (uint32_t i = begin; i < end; ++i) {
            const std::string_view enc =
                m_vocab.byte_encode ? std::string_view(byte_unicode::encode_byte(static_cast<unsigned char>(work[i])))
                                    : work.substr(i, 1);
            word += enc;
            map.source.insert(map.source.end(), enc.size(), source(i));
        }

        const bool whole =
            m_vocab.ignore_merges || (m_vocab.whole_newline_runs && word.find_first_not_of('\n') == std::string::npos);
        if (whole) {
            if (auto id = m_vocab.find(word)) {
                out.push_back({*id, source(begin), source(end)});
                continue;
            }
        }

        const std::vector<Symbol> symbols = merge_by_rank(m_vocab, word);
        for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[static_cast<std::size_t>(i)].next) {
            const Symbol& sym = symbols[static_cast<std::size_t>(i)];
            const std::string_view piece(word.data() + sym.start, sym.n);
            if (auto id = m_vocab.find(piece)) {
                out.push_back({*id, map.at(sym.start), map.at(sym.start + sym.n)});
                continue;
            }
            // llama.cpp's fallback: each byte of the symbol looked up alone (as a byte-alphabet
            // character, or as <0xXX> for raw UTF-8), missing ones dropped.
            for (uint32_t j = 0; j < sym.n; ++j) {
                const auto byte = static_cast<unsigned char>(piece[j]);
                const auto id = m_vocab.byte_encode ? m_vocab.find(piece.substr(j, 1))
                                                    : m_vocab.find(fmt::format("<0x{:02X}>", byte));
                if (!id)
                    continue;
                const uint32_t b = map.at(sym.start + j);
                out.push_back({*id, b, m_vocab.byte_encode ? b + 1 : map.at(sym.start + j + 1)});
            }
        }
    }
}

// ---- decode -----------------------------------------------------------------------------------

std::string Tokenizer::token_to_piece(TokenId id, bool render_special) const
{
    if (id < 0 || static_cast<std::size_t>(id) >= m_vocab.size())
        return {};
    const std::string& text = m_vocab.tokens[static_cast<std::size_t>(id)];
    switch (m_vocab.type_of(id)) {
    case TokenType::Control:
    case TokenType::Unknown:
        return render_special ? text : std::string();
    case TokenType::UserDefined:
        return text;
    case TokenType::Byte:
        if ((m_vocab.model == TokenizerModel::Spm || !m_vocab.byte_encode) && text.size() == 6 &&
            text.starts_with("<0x") && text.back() == '>') {
            // A vocabulary is untrusted input: "<0xZZ>" is not a byte and reads as its text.
            const auto hex = [](char c) {
                return c >= '0' && c <= '9'   ? c - '0'
                       : c >= 'a' && c <= 'f' ? c - 'a' + 10
                       : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                              : -1;
            };
            const int hi = hex(text[3]), lo = hex(text[4]);
            if (hi >= 0 && lo >= 0)
                return std::string(1, static_cast<char>(hi * 16 + lo));
            return text;
        }
        break;
    default:
        break;
    }
    std::string piece;
    if (m_vocab.model == TokenizerModel::Spm || m_vocab.escape_whitespaces) {
        for (std::size_t i = 0; i < text.size();) {
            if (text.compare(i, kSpmSpace.size(), kSpmSpace) == 0) {
                piece += ' ';
                i += kSpmSpace.size();
            } else {
                piece += text[i++];
            }
        }
        return piece;
    }
    if (!m_vocab.byte_encode)
        return text;
    for (std::size_t i = 0; i < text.size();) {
        const std::size_t len = std::min(utf8::sequence_length(static_cast<unsigned char>(text[i])), text.size() - i);
        const std::string_view ch(text.data() + i, len);
        if (auto b = byte_unicode::decode_char(ch))
            piece += static_cast<char>(*b);
        else
            piece += ch; // not in the byte alphabet: keep the character itself
        i += len;
    }
    return piece;
}

std::string Tokenizer::decode(const std::vector<TokenId>& ids, const DecodeOptions& options) const
{
    std::string out;
    bool text_start = true; // where encode prefixed a space (start of text, after a special token)
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const TokenId id = ids[i];
        if (options.remove_special) {
            if (i == 0 && m_vocab.add_bos && m_vocab.bos && id == *m_vocab.bos)
                continue;
            if (i + 1 == ids.size() && m_vocab.add_eos && m_vocab.eos && id == *m_vocab.eos)
                continue;
        }
        if (id < 0 || static_cast<std::size_t>(id) >= m_vocab.size())
            continue;
        const TokenType type = m_vocab.type_of(id);
        std::string piece = token_to_piece(id, options.render_special);
        if (type == TokenType::Control || type == TokenType::Unknown || type == TokenType::UserDefined) {
            out += piece;
            text_start = true;
            continue;
        }
        if (m_vocab.add_space_prefix && text_start && !piece.empty() && piece[0] == ' ')
            piece.erase(0, 1);
        text_start = false;
        out += piece;
    }
    return out;
}

} // namespace engine
