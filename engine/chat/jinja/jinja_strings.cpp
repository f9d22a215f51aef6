// SPDX-License-Identifier: GPL-3.0-or-later
#include "chat/jinja/jinja_strings.h"

#include <algorithm>

namespace engine::jinja {

std::string strip(std::string_view s, std::string_view chars, bool left, bool right)
{
    std::size_t begin = 0, end = s.size();
    if (left)
        while (begin < end && chars.find(s[begin]) != std::string_view::npos)
            ++begin;
    if (right)
        while (end > begin && chars.find(s[end - 1]) != std::string_view::npos)
            --end;
    return std::string(s.substr(begin, end - begin));
}

Value split(const std::string& s, const std::string* sep, std::int64_t max_split, bool from_right)
{
    std::vector<std::string> parts;
    if (sep && sep->empty())
        throw TemplateError("split: empty separator");
    if (!sep) {
        // Whitespace runs; with a limit, the rest keeps its inner whitespace.
        std::string_view rest = s;
        const auto is_space = [](char c) { return k_python_space.find(c) != std::string_view::npos; };
        if (!from_right) {
            while (true) {
                std::size_t b = 0;
                while (b < rest.size() && is_space(rest[b]))
                    ++b;
                rest.remove_prefix(b);
                if (rest.empty())
                    break;
                if (max_split >= 0 && static_cast<std::int64_t>(parts.size()) == max_split) {
                    parts.emplace_back(rest);
                    break;
                }
                std::size_t e = 0;
                while (e < rest.size() && !is_space(rest[e]))
                    ++e;
                parts.emplace_back(rest.substr(0, e));
                rest.remove_prefix(e);
            }
        } else {
            while (true) {
                std::size_t e = rest.size();
                while (e > 0 && is_space(rest[e - 1]))
                    --e;
                rest = rest.substr(0, e);
                if (rest.empty())
                    break;
                if (max_split >= 0 && static_cast<std::int64_t>(parts.size()) == max_split) {
                    parts.emplace_back(rest);
                    break;
                }
                std::size_t b = rest.size();
                while (b > 0 && !is_space(rest[b - 1]))
                    --b;
                parts.emplace_back(rest.substr(b));
                rest = rest.substr(0, b);
            }
            std::reverse(parts.begin(), parts.end());
        }
    } else if (!from_right) {
        std::size_t start = 0;
        while (true) {
            const auto pos = s.find(*sep, start);
            if (pos == std::string::npos || (max_split >= 0 && static_cast<std::int64_t>(parts.size()) == max_split)) {
                parts.push_back(s.substr(start));
                break;
            }
            parts.push_back(s.substr(start, pos - start));
            start = pos + sep->size();
        }
    } else {
        std::size_t end = s.size();
        while (true) {
            const auto pos = end >= sep->size() ? s.rfind(*sep, end - sep->size()) : std::string::npos;
            if (pos == std::string::npos || (max_split >= 0 && static_cast<std::int64_t>(parts.size()) == max_split)) {
                parts.push_back(s.substr(0, end));
                break;
            }
            parts.push_back(s.substr(pos + sep->size(), end - pos - sep->size()));
            end = pos;
        }
        std::reverse(parts.begin(), parts.end());
    }
    Array out;
    for (auto& p : parts)
        out.emplace_back(std::move(p));
    return Value(std::move(out));
}

std::string to_upper(std::string_view s)
{
    std::string out(s);
    for (char& c : out)
        if (c >= 'a' && c <= 'z')
            c = static_cast<char>(c - 'a' + 'A');
    return out;
}

std::string to_lower(std::string_view s)
{
    std::string out(s);
    for (char& c : out)
        if (c >= 'A' && c <= 'Z')
            c = static_cast<char>(c - 'A' + 'a');
    return out;
}

namespace {
bool is_ascii_letter(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
} // namespace

std::string title_case(std::string_view s)
{
    std::string out(s);
    bool previous_cased = false;
    for (char& c : out) {
        if (is_ascii_letter(c)) {
            c = previous_cased ? to_lower(std::string(1, c))[0] : to_upper(std::string(1, c))[0];
            previous_cased = true;
        } else {
            previous_cased = false;
        }
    }
    return out;
}

std::string capitalize(std::string_view s)
{
    std::string out = to_lower(s);
    if (!out.empty() && out[0] >= 'a' && out[0] <= 'z')
        out[0] = static_cast<char>(out[0] - 'a' + 'A');
    return out;
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to, std::int64_t count)
{
    std::string out;
    std::int64_t done = 0;
    if (from.empty()) { // Python inserts `to` around every character
        for (std::size_t i = 0; i <= s.size(); ++i) {
            if (count < 0 || done < count) {
                out += to;
                ++done;
            }
            if (i < s.size())
                out += s[i];
        }
        return out;
    }
    std::size_t start = 0;
    while (count < 0 || done < count) {
        const auto pos = s.find(from, start);
        if (pos == std::string_view::npos)
            break;
        out.append(s.substr(start, pos - start));
        out.append(to);
        start = pos + from.size();
        ++done;
    }
    out.append(s.substr(start));
    return out;
}

std::string python_format(std::string_view format, const CallArgs& args)
{
    std::string out;
    std::size_t next_auto = 0;
    for (std::size_t i = 0; i < format.size(); ++i) {
        const char c = format[i];
        if (c == '}' && i + 1 < format.size() && format[i + 1] == '}') {
            out += '}';
            ++i;
            continue;
        }
        if (c != '{') {
            out += c;
            continue;
        }
        if (i + 1 < format.size() && format[i + 1] == '{') {
            out += '{';
            ++i;
            continue;
        }
        const auto close = format.find('}', i);
        if (close == std::string_view::npos)
            throw TemplateError("format: a '{' is not closed");
        std::string_view field = format.substr(i + 1, close - i - 1);
        field = field.substr(0, std::min(field.find(':'), field.find('!')));
        Value v;
        if (field.empty()) {
            v = args.get(next_auto++);
        } else if (field.find_first_not_of("0123456789") == std::string_view::npos) {
            v = args.get(static_cast<std::size_t>(std::stoul(std::string(field.substr(0, 9)))));
        } else if (const Value* k = args.keyword_arg(field)) {
            v = *k;
        } else {
            throw TemplateError("format: no argument named '" + std::string(field) + "'");
        }
        out += v.to_output();
        i = close;
    }
    return out;
}

std::string format_time(std::time_t now, const std::string& format)
{
    std::tm tm{};
    gmtime_r(&now, &tm);
    if (format.empty() || format.size() > 256)
        return {};
    char buf[1024];
    const std::size_t n = std::strftime(buf, sizeof buf, format.c_str(), &tm);
    return std::string(buf, n);
}

} // namespace engine::jinja
