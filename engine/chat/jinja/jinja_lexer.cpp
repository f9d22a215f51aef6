// SPDX-License-Identifier: GPL-3.0-or-later
#include "chat/jinja/jinja_lexer.h"

#include "chat/jinja/jinja_value.h"
#include "util/utf8.h"

#include <array>

namespace engine::jinja {

namespace {

bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}
bool is_name_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c)
{
    return is_name_start(c) || is_digit(c);
}

} // namespace

std::string normalize_template_source(std::string_view source)
{
    std::string out;
    out.reserve(source.size());
    for (std::size_t i = 0; i < source.size(); ++i) {
        if (source[i] == '\r') {
            out += '\n';
            if (i + 1 < source.size() && source[i + 1] == '\n')
                ++i;
        } else {
            out += source[i];
        }
    }
    if (!out.empty() && out.back() == '\n')
        out.pop_back();
    return out;
}

namespace {

// Longest first, so that "//" is not read as two "/".
constexpr std::array<std::string_view, 28> k_operators{
    "==", "!=", "<=", ">=", "//", "**", "<", ">", "+", "-", "*", "/", "%", "~",
    "|",  ".",  ",",  ":",  "(",  ")",  "[", "]", "{", "}", "=", "!", "?", ";",
};

class Lexer {
public:
    explicit Lexer(std::string_view source) : m_src(source) {}

    std::vector<Token> run()
    {
        // What the previous tag asked of the text after it.
        bool strip_after = false; // it ended with '-'
        bool trim_after = false;  // it was a block or comment tag (trim_blocks)
        std::size_t pos = 0;
        while (pos < m_src.size()) {
            const std::size_t tag = find_tag(pos);
            std::string text(m_src.substr(pos, tag - pos));
            const bool at_template_start = pos == 0;
            if (tag < m_src.size()) {
                const char kind = m_src[tag + 1];
                const bool dash = tag + 2 < m_src.size() && m_src[tag + 2] == '-';
                const bool plus = tag + 2 < m_src.size() && m_src[tag + 2] == '+'; // `{%+`: no lstrip
                if (dash)
                    rstrip(text);
                else if ((kind == '%' || kind == '#') && !plus)
                    lstrip_block(text, at_template_start);
            }
            if (trim_after && !text.empty() && text.front() == '\n')
                text.erase(0, 1);
            if (strip_after)
                lstrip_all(text);
            if (!text.empty())
                m_tokens.push_back({Token::Type::Text, std::move(text), pos});
            if (tag >= m_src.size())
                break;
            pos = read_tag(tag, strip_after, trim_after);
        }
        m_tokens.push_back({Token::Type::End, {}, m_src.size()});
        return std::move(m_tokens);
    }

    [[noreturn]] void fail(const std::string& what, std::size_t offset) const
    {
        throw TemplateError(what + " at " + source_position(m_src, offset));
    }

private:
    std::size_t find_tag(std::size_t from) const
    {
        for (std::size_t i = from; i + 1 < m_src.size(); ++i)
            if (m_src[i] == '{' && (m_src[i + 1] == '{' || m_src[i + 1] == '%' || m_src[i + 1] == '#'))
                return i;
        return m_src.size();
    }

    static void rstrip(std::string& text)
    {
        std::size_t end = text.size();
        while (end > 0 && is_space(text[end - 1]))
            --end;
        text.resize(end);
    }
    static void lstrip_all(std::string& text)
    {
        std::size_t begin = 0;
        while (begin < text.size() && is_space(text[begin]))
            ++begin;
        text.erase(0, begin);
    }
    // Spaces and tabs between the start of the line and the tag.
    static void lstrip_block(std::string& text, bool at_template_start)
    {
        std::size_t end = text.size();
        while (end > 0 && (text[end - 1] == ' ' || text[end - 1] == '\t'))
            --end;
        if ((end > 0 && text[end - 1] == '\n') || (end == 0 && at_template_start))
            text.resize(end);
    }

    // Reads the tag at `start`; returns the offset after it.
    std::size_t read_tag(std::size_t start, bool& strip_after, bool& trim_after)
    {
        const char kind = m_src[start + 1];
        std::size_t pos = start + 2;
        if (pos < m_src.size() && (m_src[pos] == '-' || (m_src[pos] == '+' && kind != '{')))
            ++pos;
        if (kind == '#') {
            const std::size_t close = m_src.find("#}", pos);
            if (close == std::string_view::npos)
                fail("a comment is not closed (missing '#}')", start);
            strip_after = close > pos && m_src[close - 1] == '-';
            trim_after = true;
            return close + 2;
        }
        m_tokens.push_back({kind == '{' ? Token::Type::OpenOutput : Token::Type::OpenBlock, {}, start});
        const char closer = kind == '{' ? '}' : '%';
        int braces = 0; // dict literals inside {{ }}
        while (true) {
            while (pos < m_src.size() && is_space(m_src[pos]))
                ++pos;
            if (pos >= m_src.size())
                fail(kind == '{' ? "an expression is not closed (missing '}}')" : "a tag is not closed (missing '%}')",
                     start);
            // The tag's end, with or without '-'.
            const bool dash =
                m_src[pos] == '-' && pos + 2 < m_src.size() && m_src[pos + 1] == closer && m_src[pos + 2] == '}';
            const bool plus = closer == '%' && m_src[pos] == '+' && pos + 2 < m_src.size() &&
                              m_src[pos + 1] == closer && m_src[pos + 2] == '}'; // `+%}`: no trim_blocks
            if ((dash || plus || (m_src[pos] == closer && pos + 1 < m_src.size() && m_src[pos + 1] == '}')) &&
                (closer == '%' || braces == 0)) {
                m_tokens.push_back({kind == '{' ? Token::Type::CloseOutput : Token::Type::CloseBlock, {}, pos});
                strip_after = dash;
                trim_after = kind == '%' && !plus;
                return pos + (dash || plus ? 3 : 2);
            }
            pos = read_token(pos, braces);
        }
    }

    std::size_t read_token(std::size_t pos, int& braces)
    {
        const char c = m_src[pos];
        if (c == '\'' || c == '"')
            return read_string(pos);
        if (is_digit(c)) {
            std::size_t end = pos;
            while (end < m_src.size() && (is_digit(m_src[end]) || m_src[end] == '_'))
                ++end;
            bool is_float = false;
            if (end + 1 < m_src.size() && m_src[end] == '.' && is_digit(m_src[end + 1])) {
                is_float = true;
                ++end;
                while (end < m_src.size() && is_digit(m_src[end]))
                    ++end;
            }
            std::string digits;
            for (std::size_t i = pos; i < end; ++i)
                if (m_src[i] != '_')
                    digits += m_src[i];
            m_tokens.push_back({is_float ? Token::Type::Float : Token::Type::Int, digits, pos});
            return end;
        }
        if (is_name_start(c)) {
            std::size_t end = pos;
            while (end < m_src.size() && is_name_char(m_src[end]))
                ++end;
            m_tokens.push_back({Token::Type::Name, std::string(m_src.substr(pos, end - pos)), pos});
            return end;
        }
        for (std::string_view op : k_operators) {
            if (m_src.compare(pos, op.size(), op) == 0) {
                if (op == "{")
                    ++braces;
                else if (op == "}")
                    --braces;
                m_tokens.push_back({Token::Type::Operator, std::string(op), pos});
                return pos + op.size();
            }
        }
        fail(std::string("unexpected character '") + c + "'", pos);
    }

    std::size_t read_string(std::size_t start)
    {
        const char quote = m_src[start];
        std::string value;
        std::size_t pos = start + 1;
        while (true) {
            if (pos >= m_src.size())
                fail("a string is not closed", start);
            const char c = m_src[pos++];
            if (c == quote)
                break;
            if (c != '\\') {
                value += c;
                continue;
            }
            if (pos >= m_src.size())
                fail("a string is not closed", start);
            const char e = m_src[pos++];
            switch (e) {
            case 'n':
                value += '\n';
                break;
            case 't':
                value += '\t';
                break;
            case 'r':
                value += '\r';
                break;
            case 'b':
                value += '\b';
                break;
            case 'f':
                value += '\f';
                break;
            case 'v':
                value += '\v';
                break;
            case '\\':
            case '\'':
            case '"':
                value += e;
                break;
            case '\n': // a backslash at the end of a line continues the string
                break;
            case 'x':
            case 'u':
            case 'U': { // Python's \xNN, \uNNNN, \UNNNNNNNN, written as UTF-8
                const std::size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                if (pos + digits > m_src.size())
                    fail("a string escape is cut short", pos - 2);
                std::uint32_t cp = 0;
                for (std::size_t k = 0; k < digits; ++k) {
                    const char h = m_src[pos + k];
                    const int v = h >= '0' && h <= '9'   ? h - '0'
                                  : h >= 'a' && h <= 'f' ? h - 'a' + 10
                                  : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                         : -1;
                    if (v < 0)
                        fail(std::string("a bad hexadecimal digit in '\\") + e + "'", pos - 2);
                    cp = (cp << 4) | static_cast<std::uint32_t>(v);
                }
                pos += digits;
                if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
                    cp = 0xFFFD;
                utf8::append(value, static_cast<char32_t>(cp));
                break;
            }
            default:
                fail(std::string("unknown escape '\\") + e + "' in a string", pos - 2);
            }
        }
        m_tokens.push_back({Token::Type::String, std::move(value), start});
        return pos;
    }

    std::string_view m_src;
    std::vector<Token> m_tokens;
};

} // namespace

std::string source_position(std::string_view source, std::size_t offset)
{
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < offset && i < source.size(); ++i) {
        if (source[i] == '\n') {
            ++line;
            column = 1;
        } else {
            ++column;
        }
    }
    return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

std::vector<Token> tokenize_template(std::string_view normalized_source)
{
    return Lexer(normalized_source).run();
}

} // namespace engine::jinja
