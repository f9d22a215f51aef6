// SPDX-License-Identifier: GPL-3.0-or-later
// Filters (`x | trim`, `items | selectattr('role', 'equalto', 'user')`) and tests (`x is string`),
// as Jinja2 defines them.

#include "chat/jinja/jinja_builtins.h"
#include "chat/jinja/jinja_interpreter.h"
#include "chat/jinja/jinja_strings.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace engine::jinja {

void check_string_size(Interpreter& in, std::size_t bytes, std::size_t offset)
{
    if (bytes > in.limits().max_output_bytes)
        in.fail("the template built a string of more than " + std::to_string(in.limits().max_output_bytes >> 20) +
                    " MiB (the output limit)",
                offset);
}

namespace {

Array as_items(const Value& v)
{
    if (v.is_array())
        return v.as_array();
    Array out;
    if (v.is_object())
        for (const auto& [k, unused] : v.as_object().items)
            out.push_back(v.as_object().key_value(k));
    else if (v.is_string()) {
        const auto offsets = utf8_offsets(v.as_string());
        for (std::size_t i = 0; i + 1 < offsets.size(); ++i)
            out.emplace_back(v.as_string().substr(offsets[i], offsets[i + 1] - offsets[i]));
    }
    return out;
}

// `a.b.c` on a value, for the attribute= arguments of map, sort, selectattr, join, …
Value attribute_path(const Value& v, const std::string& path)
{
    Value cur = v;
    std::size_t start = 0;
    while (start <= path.size()) {
        const auto dot = path.find('.', start);
        const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        if (cur.is_object()) {
            const Value* found = cur.as_object().find(part);
            cur = found ? *found : Value::undefined(part);
        } else if (cur.is_array() && !part.empty() && part.find_first_not_of("0123456789") == std::string::npos) {
            const auto i = std::stoul(part.substr(0, 9));
            cur = i < cur.as_array().size() ? cur.as_array()[i] : Value::undefined(part);
        } else {
            cur = Value::undefined(part);
        }
        if (dot == std::string::npos)
            break;
        start = dot + 1;
    }
    return cur;
}

std::string html_escape(std::string_view s)
{
    std::string out;
    for (char c : s) {
        switch (c) {
        case '&':
            out += "&amp;";
            break;
        case '<':
            out += "&lt;";
            break;
        case '>':
            out += "&gt;";
            break;
        case '"':
            out += "&#34;";
            break;
        case '\'':
            out += "&#39;";
            break;
        default:
            out += c;
        }
    }
    return out;
}

std::string indent_text(const std::string& s, const std::string& pad, bool first, bool blank)
{
    std::string out;
    std::size_t start = 0;
    bool is_first = true;
    while (start <= s.size()) {
        const auto nl = s.find('\n', start);
        const std::string line = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
        if (!is_first)
            out += '\n';
        const bool indent = (is_first ? first : true) && (blank || !strip(line, k_python_space, true, true).empty());
        if (indent)
            out += pad;
        out += line;
        is_first = false;
        if (nl == std::string::npos)
            break;
        start = nl + 1;
    }
    return out;
}

// select/reject/selectattr/rejectattr: the test named by args[first] (truthiness when none).
Value filter_by_test(Interpreter& in, const Value& input, CallArgs& a, bool by_attribute, bool keep, std::size_t offset)
{
    std::string attribute;
    std::size_t test_at = 0;
    if (by_attribute) {
        attribute = a.get(0).to_output();
        test_at = 1;
    }
    const Value test_name = a.get(test_at);
    CallArgs test_args;
    for (std::size_t i = test_at + 1; i < a.positional.size(); ++i)
        test_args.positional.push_back(a.positional[i]);
    Array out;
    for (const Value& item : as_items(input)) {
        in.count_step(offset);
        const Value subject = by_attribute ? attribute_path(item, attribute) : item;
        bool passed;
        if (test_name.is_undefined()) {
            passed = subject.truthy();
        } else {
            CallArgs copy = test_args;
            const auto r = apply_test(in, test_name.to_output(), subject, copy, offset);
            if (!r)
                in.fail("unknown test '" + test_name.to_output() + "'", offset);
            passed = *r;
        }
        if (passed == keep)
            out.push_back(item);
    }
    return Value(std::move(out));
}

Value sort_items(Interpreter& in, const Value& input, CallArgs& a, std::size_t offset)
{
    Array items = as_items(input);
    const bool reverse = a.get(0, "reverse").truthy();
    const bool case_sensitive = a.get(1, "case_sensitive").truthy();
    const Value attribute = a.get(2, "attribute");
    const auto key = [&](const Value& v) {
        Value k = attribute.is_string() ? attribute_path(v, attribute.as_string()) : v;
        if (!case_sensitive && k.is_string())
            k = Value(to_lower(k.as_string()));
        return k;
    };
    try {
        std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
            return reverse ? value_less(key(y), key(x)) : value_less(key(x), key(y));
        });
    } catch (const TemplateError& e) {
        in.fail(std::string("sort: ") + e.what(), offset);
    }
    return Value(std::move(items));
}

Value min_max(Interpreter& in, const Value& input, bool want_max, std::size_t offset)
{
    const Array items = as_items(input);
    if (items.empty())
        return Value::undefined();
    Value best = items[0];
    try {
        for (const Value& v : items)
            if (want_max ? value_less(best, v) : value_less(v, best))
                best = v;
    } catch (const TemplateError& e) {
        in.fail(e.what(), offset);
    }
    return best;
}

Value to_int(const Value& v, const Value& fallback)
{
    if (v.is_int() || v.is_bool())
        return Value(v.as_int());
    if (v.is_float())
        return Value(static_cast<std::int64_t>(v.as_number()));
    if (v.is_string()) {
        const std::string s = strip(v.as_string(), k_python_space, true, true);
        char* end = nullptr;
        const long long n = std::strtoll(s.c_str(), &end, 10);
        if (!s.empty() && end && *end == '\0')
            return Value(static_cast<std::int64_t>(n));
        const double d = std::strtod(s.c_str(), &end);
        if (!s.empty() && end && *end == '\0' && std::isfinite(d))
            return Value(static_cast<std::int64_t>(d));
    }
    return fallback.is_undefined() ? Value(0) : fallback;
}

Value to_float(const Value& v, const Value& fallback)
{
    if (v.is_number() || v.is_bool())
        return Value(v.as_number());
    if (v.is_string()) {
        const std::string s = strip(v.as_string(), k_python_space, true, true);
        char* end = nullptr;
        const double d = std::strtod(s.c_str(), &end);
        if (!s.empty() && end && *end == '\0')
            return Value(d);
    }
    return fallback.is_undefined() ? Value(0.0) : fallback;
}

Value string_filter(std::string_view name, const std::string& s, CallArgs& a)
{
    // The string methods of the same name, with the filter's input as the string.
    if (auto m = bound_method(Value(s), name))
        return m->as_callable().call(a);
    return {};
}

} // namespace

std::optional<Value> apply_filter(Interpreter& in, std::string_view name, const Value& input, CallArgs& a,
                                  std::size_t offset)
{
    if (name == "d")
        name = "default";
    if (name == "count")
        name = "length";
    if (name == "e")
        name = "escape";
    if (name == "trim")
        name = "strip";

    if (name == "default") {
        const bool use_default = a.get(1, "boolean").truthy() ? !input.truthy() : input.is_undefined();
        return use_default ? (a.size() || a.keyword_arg("default_value") ? a.get(0, "default_value") : Value(""))
                           : input;
    }
    if (name == "length") {
        if (input.is_string())
            return Value(static_cast<std::int64_t>(utf8_length(input.as_string())));
        if (input.is_array())
            return Value(static_cast<std::int64_t>(input.as_array().size()));
        if (input.is_object())
            return Value(static_cast<std::int64_t>(input.as_object().items.size()));
        if (input.is_undefined() || input.is_none())
            return Value(0);
        in.fail("a " + std::string(input.type_name()) + " has no length", offset);
    }
    if (name == "string")
        return Value(input.to_output());
    if (name == "safe")
        return input;
    if (name == "escape")
        return Value(html_escape(input.to_output()));
    if (name == "tojson") {
        JsonOptions o;
        const Value indent = a.get(0, "indent");
        if (indent.is_int())
            o.indent = static_cast<int>(std::clamp<std::int64_t>(indent.as_int(), 0, 64));
        o.ensure_ascii = a.keyword_arg("ensure_ascii") && a.keyword_arg("ensure_ascii")->truthy();
        o.sort_keys = a.keyword_arg("sort_keys") && a.keyword_arg("sort_keys")->truthy();
        if (const Value* seps = a.keyword_arg("separators"); seps && seps->is_array() && seps->as_array().size() == 2) {
            o.item_separator = seps->as_array()[0].to_output();
            o.key_separator = seps->as_array()[1].to_output();
        }
        try {
            std::string json = to_json(input, o);
            check_string_size(in, json.size(), offset);
            return Value(std::move(json));
        } catch (const TemplateError& e) {
            in.fail(e.what(), offset);
        }
    }
    if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" || name == "strip" ||
        name == "lstrip" || name == "rstrip" || name == "replace" || name == "split" || name == "rsplit" ||
        name == "startswith" || name == "endswith" || name == "format") {
        if (input.is_undefined())
            return Value(std::string());
        try {
            return string_filter(name, input.to_output(), a);
        } catch (const TemplateError& e) {
            in.fail(e.what(), offset);
        }
    }
    if (name == "int")
        return to_int(input, a.get(0, "default"));
    if (name == "float")
        return to_float(input, a.get(0, "default"));
    if (name == "abs") {
        if (input.is_float())
            return Value(std::fabs(input.as_number()));
        if (input.is_int() || input.is_bool())
            return Value(input.as_int() < 0 ? -input.as_int() : input.as_int());
        in.fail("abs of a " + std::string(input.type_name()), offset);
    }
    if (name == "round") {
        const double factor = std::pow(10.0, static_cast<double>(a.get(0, "precision").as_int()));
        const std::string method = a.get(1, "method").is_string() ? a.get(1, "method").as_string() : "common";
        const double x = input.as_number() * factor;
        const double r = method == "floor" ? std::floor(x) : method == "ceil" ? std::ceil(x) : std::round(x);
        return Value(r / factor);
    }
    if (name == "list")
        return Value(as_items(input));
    if (name == "first" || name == "last") {
        const Array items = as_items(input);
        if (items.empty())
            return Value::undefined();
        return name == "first" ? items.front() : items.back();
    }
    if (name == "reverse") {
        if (input.is_string()) {
            Array chars = as_items(input);
            std::string out;
            for (auto it = chars.rbegin(); it != chars.rend(); ++it)
                out += it->as_string();
            return Value(std::move(out));
        }
        Array items = as_items(input);
        std::reverse(items.begin(), items.end());
        return Value(std::move(items));
    }
    if (name == "join") {
        const std::string sep = a.get(0, "d").is_undefined() ? std::string() : a.get(0, "d").to_output();
        const Value attribute = a.get(1, "attribute");
        std::string out;
        bool first = true;
        for (const Value& item : as_items(input)) {
            if (!first)
                out += sep;
            first = false;
            out += (attribute.is_string() ? attribute_path(item, attribute.as_string()) : item).to_output();
            check_string_size(in, out.size(), offset);
        }
        return Value(std::move(out));
    }
    if (name == "sort")
        return sort_items(in, input, a, offset);
    if (name == "unique") {
        Array out;
        for (const Value& item : as_items(input)) {
            in.count_step(offset);
            if (std::none_of(out.begin(), out.end(), [&](const Value& v) { return values_equal(v, item); }))
                out.push_back(item);
        }
        return Value(std::move(out));
    }
    if (name == "min" || name == "max")
        return min_max(in, input, name == "max", offset);
    if (name == "sum") {
        const Value attribute = a.get(0, "attribute");
        Value total = a.get(1, "start").is_undefined() ? Value(0) : a.get(1, "start");
        for (const Value& item : as_items(input)) {
            const Value v = attribute.is_string() ? attribute_path(item, attribute.as_string()) : item;
            if (!v.is_number() && !v.is_bool())
                in.fail("sum of a " + std::string(v.type_name()), offset);
            total = total.is_float() || v.is_float() ? Value(total.as_number() + v.as_number())
                                                     : Value(total.as_int() + v.as_int());
        }
        return total;
    }
    if (name == "items" || name == "dictsort") {
        if (!input.is_object())
            return input.is_undefined() ? Value(Array{}) : Value(as_items(input));
        Array items;
        for (const auto& [k, v] : input.as_object().items)
            items.emplace_back(Array{input.as_object().key_value(k), v});
        if (name == "dictsort")
            std::stable_sort(items.begin(), items.end(), [](const Value& x, const Value& y) {
                const Value& kx = x.as_array()[0];
                const Value& ky = y.as_array()[0];
                if (kx.is_string() && ky.is_string())
                    return to_lower(kx.as_string()) < to_lower(ky.as_string());
                return value_less(kx, ky);
            });
        return Value(std::move(items));
    }
    if (name == "map") {
        Array out;
        const Value attribute = a.keyword_arg("attribute") ? *a.keyword_arg("attribute") : Value();
        for (const Value& item : as_items(input)) {
            in.count_step(offset);
            if (attribute.is_string()) {
                Value v = attribute_path(item, attribute.as_string());
                if (v.is_undefined() && a.keyword_arg("default"))
                    v = *a.keyword_arg("default");
                out.push_back(v);
                continue;
            }
            CallArgs rest;
            for (std::size_t i = 1; i < a.positional.size(); ++i)
                rest.positional.push_back(a.positional[i]);
            auto r = apply_filter(in, a.get(0).to_output(), item, rest, offset);
            if (!r)
                in.fail("unknown filter '" + a.get(0).to_output() + "'", offset);
            out.push_back(*r);
        }
        return Value(std::move(out));
    }
    if (name == "select" || name == "reject")
        return filter_by_test(in, input, a, false, name == "select", offset);
    if (name == "selectattr" || name == "rejectattr")
        return filter_by_test(in, input, a, true, name == "selectattr", offset);
    if (name == "attr")
        return attribute_path(input, a.get(0).to_output());
    if (name == "indent") {
        const Value width = a.get(0, "width");
        const std::string pad = width.is_string() ? width.as_string()
                                                  : std::string(static_cast<std::size_t>(std::clamp<std::int64_t>(
                                                                    width.is_undefined() ? 4 : width.as_int(), 0, 256)),
                                                                ' ');
        return Value(indent_text(input.to_output(), pad, a.get(1, "first").truthy(), a.get(2, "blank").truthy()));
    }
    if (name == "wordcount") {
        const Value words = split(input.to_output(), nullptr, -1, false);
        return Value(static_cast<std::int64_t>(words.as_array().size()));
    }
    if (name == "center") {
        const std::string s = input.to_output();
        const std::int64_t width = a.get(0, "width").is_undefined() ? 80 : a.get(0, "width").as_int();
        const auto n = static_cast<std::int64_t>(utf8_length(s));
        if (width <= n || width > 1'000'000)
            return Value(s);
        const std::int64_t left = (width - n) / 2;
        return Value(std::string(static_cast<std::size_t>(left), ' ') + s +
                     std::string(static_cast<std::size_t>(width - n - left), ' '));
    }
    if (name == "truncate") {
        const std::string s = input.to_output();
        const std::int64_t length = a.get(0, "length").is_undefined() ? 255 : a.get(0, "length").as_int();
        const auto offsets = utf8_offsets(s);
        if (static_cast<std::int64_t>(offsets.size()) - 1 <= length || length < 0)
            return Value(s);
        const std::string end = a.get(2, "end").is_string() ? a.get(2, "end").as_string() : "...";
        return Value(s.substr(0, offsets[static_cast<std::size_t>(length)]) + end);
    }
    return std::nullopt;
}

std::optional<bool> apply_test(Interpreter& in, std::string_view name, const Value& v, CallArgs& a, std::size_t offset)
{
    const Value other = a.get(0);
    if (name == "defined")
        return !v.is_undefined();
    if (name == "undefined")
        return v.is_undefined();
    if (name == "none")
        return v.is_none();
    if (name == "boolean")
        return v.is_bool();
    if (name == "true")
        return v.is_bool() && v.as_bool();
    if (name == "false")
        return v.is_bool() && !v.as_bool();
    if (name == "string")
        return v.is_string();
    if (name == "number")
        return v.is_number();
    if (name == "integer")
        return v.is_int();
    if (name == "float")
        return v.is_float();
    if (name == "mapping")
        return v.is_object();
    if (name == "iterable")
        return v.is_array() || v.is_object() || v.is_string();
    if (name == "sequence")
        return v.is_array() || v.is_string() || v.is_object();
    if (name == "callable")
        return v.is_callable();
    if (name == "odd" || name == "even" || name == "divisibleby") {
        if (!v.is_int() && !v.is_bool())
            in.fail("'" + std::string(name) + "' needs an integer, not a " + std::string(v.type_name()), offset);
        if (name == "divisibleby") {
            if (other.as_int() == 0)
                in.fail("divisibleby(0)", offset);
            return v.as_int() % other.as_int() == 0;
        }
        return (v.as_int() % 2 != 0) == (name == "odd");
    }
    if (name == "eq" || name == "equalto" || name == "==")
        return values_equal(v, other);
    if (name == "ne" || name == "!=")
        return !values_equal(v, other);
    try {
        if (name == "lt" || name == "lessthan" || name == "<")
            return value_less(v, other);
        if (name == "gt" || name == "greaterthan" || name == ">")
            return value_less(other, v);
        if (name == "le" || name == "<=")
            return !value_less(other, v);
        if (name == "ge" || name == ">=")
            return !value_less(v, other);
    } catch (const TemplateError& e) {
        in.fail(e.what(), offset);
    }
    if (name == "in") {
        if (other.is_string())
            return v.is_string() && other.as_string().find(v.as_string()) != std::string::npos;
        for (const Value& item : as_items(other))
            if (values_equal(item, v))
                return true;
        return false;
    }
    if (name == "sameas")
        return v.same_object(other) && v.kind() == other.kind();
    if (name == "lower")
        return v.is_string() && to_lower(v.as_string()) == v.as_string();
    if (name == "upper")
        return v.is_string() && to_upper(v.as_string()) == v.as_string();
    if (name == "filter" || name == "test") {
        CallArgs none;
        const std::string n = v.to_output();
        if (name == "test")
            return n == "defined" || n == "string" || apply_test(in, n, Value(), none, offset).has_value();
        return n == "default" || n == "length";
    }
    return std::nullopt;
}

} // namespace engine::jinja
