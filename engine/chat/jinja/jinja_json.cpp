// SPDX-License-Identifier: GPL-3.0-or-later
// `tojson` as Hugging Face's renderer writes it: Python's json.dumps with ensure_ascii, indent,
// separators and sort_keys; and the UTF-8 helpers the string built-ins count code points with.

#include "chat/jinja/jinja_builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace engine::jinja {

std::vector<std::size_t> utf8_offsets(std::string_view s)
{
    std::vector<std::size_t> offsets;
    offsets.reserve(s.size() + 1);
    std::size_t i = 0;
    while (i < s.size()) {
        offsets.push_back(i);
        const auto c = static_cast<unsigned char>(s[i]);
        std::size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
        if (i + len > s.size())
            len = 1;
        for (std::size_t k = 1; k < len; ++k)
            if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) {
                len = 1;
                break;
            }
        i += len;
    }
    offsets.push_back(s.size());
    return offsets;
}

std::size_t utf8_length(std::string_view s)
{
    return utf8_offsets(s).size() - 1;
}

namespace {

// The code point at s[i..i+len), or U+FFFD for a malformed sequence.
std::uint32_t decode_at(std::string_view s, std::size_t i, std::size_t len)
{
    const auto c = static_cast<unsigned char>(s[i]);
    if (len == 1)
        return c < 0x80 ? c : 0xFFFD;
    std::uint32_t cp = c & (0x7F >> len);
    for (std::size_t k = 1; k < len; ++k)
        cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    return cp;
}

void append_u_escape(std::string& out, unsigned v)
{
    char buf[16];
    std::snprintf(buf, sizeof buf, "\\u%04x", v & 0xFFFFu);
    out += buf;
}

void append_json_string(std::string& out, std::string_view s, bool ensure_ascii)
{
    out += '"';
    const auto offsets = utf8_offsets(s);
    for (std::size_t k = 0; k + 1 < offsets.size(); ++k) {
        const std::size_t i = offsets[k];
        const std::size_t len = offsets[k + 1] - i;
        const auto c = static_cast<unsigned char>(s[i]);
        if (len == 1 && c < 0x80) {
            switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            case '\b':
                out += "\\b";
                break;
            case '\f':
                out += "\\f";
                break;
            default:
                if (c < 0x20 || (ensure_ascii && c == 0x7F))
                    append_u_escape(out, c);
                else
                    out += static_cast<char>(c);
            }
            continue;
        }
        if (!ensure_ascii) {
            out.append(s, i, len);
            continue;
        }
        const std::uint32_t cp = decode_at(s, i, len);
        if (cp >= 0x10000) {
            const std::uint32_t v = cp - 0x10000;
            append_u_escape(out, 0xD800 + (v >> 10));
            append_u_escape(out, 0xDC00 + (v & 0x3FF));
        } else {
            append_u_escape(out, cp);
        }
    }
    out += '"';
}

std::string json_float(double f)
{
    if (std::isnan(f))
        return "NaN";
    if (std::isinf(f))
        return f > 0 ? "Infinity" : "-Infinity";
    return Value(f).to_output();
}

void append_json(std::string& out, const Value& v, const JsonOptions& o, int depth)
{
    if (depth > 200)
        throw TemplateError("tojson: the value nests deeper than 200 levels");
    const std::string item_sep = !o.item_separator.empty() ? o.item_separator : (o.indent >= 0 ? "," : ", ");
    const auto newline = [&](int level) {
        if (o.indent < 0)
            return;
        out += '\n';
        out.append(static_cast<std::size_t>(o.indent) * static_cast<std::size_t>(level), ' ');
    };
    switch (v.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None:
        out += "null";
        return;
    case Value::Kind::Bool:
        out += v.as_bool() ? "true" : "false";
        return;
    case Value::Kind::Int:
        out += std::to_string(v.as_int());
        return;
    case Value::Kind::Float:
        out += json_float(v.as_number());
        return;
    case Value::Kind::String:
        append_json_string(out, v.as_string(), o.ensure_ascii);
        return;
    case Value::Kind::Function:
        throw TemplateError("tojson: a function cannot be written as JSON");
    case Value::Kind::List: {
        const Array& items = v.as_array();
        if (items.empty()) {
            out += "[]";
            return;
        }
        out += '[';
        for (std::size_t i = 0; i < items.size(); ++i) {
            if (i)
                out += item_sep;
            newline(depth + 1);
            append_json(out, items[i], o, depth + 1);
        }
        newline(depth);
        out += ']';
        return;
    }
    case Value::Kind::Dict: {
        std::vector<const std::pair<std::string, Value>*> items;
        for (const auto& item : v.as_object().items)
            items.push_back(&item);
        if (items.empty()) {
            out += "{}";
            return;
        }
        if (o.sort_keys)
            std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
        out += '{';
        for (std::size_t i = 0; i < items.size(); ++i) {
            if (i)
                out += item_sep;
            newline(depth + 1);
            append_json_string(out, items[i]->first, o.ensure_ascii);
            out += o.key_separator;
            append_json(out, items[i]->second, o, depth + 1);
        }
        newline(depth);
        out += '}';
        return;
    }
    }
}

} // namespace

std::string to_json(const Value& value, const JsonOptions& options)
{
    std::string out;
    append_json(out, value, options, 0);
    return out;
}

} // namespace engine::jinja
