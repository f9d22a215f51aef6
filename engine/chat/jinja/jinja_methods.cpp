// SPDX-License-Identifier: GPL-3.0-or-later
// Methods of strings, lists and dicts (`content.strip()`, `messages.append(m)`, `d.items()`) and
// the global functions, with Python's semantics.

#include "chat/jinja/jinja_builtins.h"
#include "chat/jinja/jinja_strings.h"

#include <cstdio>
#include <ctime>

namespace engine::jinja {

namespace {

Value str_method(const std::string& s, std::string_view name, CallArgs& a)
{
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
        const Value chars = a.get(0, "chars");
        const std::string set = chars.is_string() ? chars.as_string() : std::string(k_python_space);
        return Value(strip(s, set, name != "rstrip", name != "lstrip"));
    }
    if (name == "split" || name == "rsplit") {
        const Value sep = a.get(0, "sep");
        const Value max = a.get(1, "maxsplit");
        return split(s, sep.is_string() ? &sep.as_string() : nullptr, max.is_int() ? max.as_int() : -1,
                     name == "rsplit");
    }
    if (name == "upper")
        return Value(to_upper(s));
    if (name == "lower")
        return Value(to_lower(s));
    if (name == "title")
        return Value(title_case(s));
    if (name == "capitalize")
        return Value(capitalize(s));
    if (name == "replace") {
        const Value count = a.get(2, "count");
        return Value(replace_all(s, a.get(0).to_output(), a.get(1).to_output(), count.is_int() ? count.as_int() : -1));
    }
    if (name == "startswith" || name == "endswith") {
        const Value what = a.get(0);
        Array options = what.is_array() ? what.as_array() : Array{what};
        for (const Value& o : options) {
            if (!o.is_string())
                continue;
            const std::string& p = o.as_string();
            if (p.size() <= s.size() && (name == "startswith" ? s.compare(0, p.size(), p) == 0
                                                              : s.compare(s.size() - p.size(), p.size(), p) == 0))
                return Value(true);
        }
        return Value(false);
    }
    if (name == "format")
        return Value(python_format(s, a));
    if (name == "join") {
        const Value items = a.get(0);
        std::string out;
        if (items.is_array())
            for (std::size_t i = 0; i < items.as_array().size(); ++i) {
                if (i)
                    out += s;
                out += items.as_array()[i].to_output();
            }
        return Value(std::move(out));
    }
    if (name == "find" || name == "count") {
        const std::string needle = a.get(0).to_output();
        if (name == "find") {
            const auto pos = s.find(needle);
            return Value(pos == std::string::npos ? std::int64_t{-1}
                                                  : static_cast<std::int64_t>(utf8_length(s.substr(0, pos))));
        }
        std::int64_t n = 0;
        if (needle.empty())
            return Value(static_cast<std::int64_t>(utf8_length(s) + 1));
        for (auto pos = s.find(needle); pos != std::string::npos; pos = s.find(needle, pos + needle.size()))
            ++n;
        return Value(n);
    }
    if (name == "splitlines") {
        Array lines;
        std::string line;
        for (char c : s) {
            if (c == '\n') {
                lines.emplace_back(line);
                line.clear();
            } else {
                line += c;
            }
        }
        if (!line.empty())
            lines.emplace_back(line);
        return Value(std::move(lines));
    }
    if (name == "isdigit" || name == "isalpha" || name == "isspace" || name == "isalnum") {
        if (s.empty())
            return Value(false);
        for (char ch : s) {
            const auto c = static_cast<unsigned char>(ch);
            const bool ok = name == "isdigit"   ? (c >= '0' && c <= '9')
                            : name == "isalpha" ? ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')
                            : name == "isalnum" ? ((c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'))
                                                : k_python_space.find(ch) != std::string_view::npos;
            if (!ok)
                return Value(false);
        }
        return Value(true);
    }
    if (name == "islower" || name == "isupper")
        return Value(s == (name == "islower" ? to_lower(s) : to_upper(s)) &&
                     s != (name == "islower" ? to_upper(s) : to_lower(s)));
    throw TemplateError("strings have no method '" + std::string(name) + "'");
}

Value list_method(Array& list, std::string_view name, CallArgs& a)
{
    if (name == "append") {
        list.push_back(a.get(0));
        return Value::none();
    }
    if (name == "pop") {
        if (list.empty())
            throw TemplateError("pop from an empty list");
        std::int64_t i = a.size() ? a.get(0).as_int() : static_cast<std::int64_t>(list.size()) - 1;
        if (i < 0)
            i += static_cast<std::int64_t>(list.size());
        if (i < 0 || i >= static_cast<std::int64_t>(list.size()))
            throw TemplateError("pop index out of range");
        Value v = list[static_cast<std::size_t>(i)];
        list.erase(list.begin() + i);
        return v;
    }
    if (name == "insert") {
        std::int64_t i = std::clamp<std::int64_t>(a.get(0).as_int(), -static_cast<std::int64_t>(list.size()),
                                                  static_cast<std::int64_t>(list.size()));
        if (i < 0)
            i += static_cast<std::int64_t>(list.size());
        list.insert(list.begin() + i, a.get(1));
        return Value::none();
    }
    if (name == "extend") {
        const Value more = a.get(0);
        if (more.is_array()) {
            const Array copy = more.as_array();
            list.insert(list.end(), copy.begin(), copy.end());
        }
        return Value::none();
    }
    if (name == "index" || name == "count") {
        std::int64_t n = 0;
        for (std::size_t i = 0; i < list.size(); ++i)
            if (values_equal(list[i], a.get(0))) {
                if (name == "index")
                    return Value(static_cast<std::int64_t>(i));
                ++n;
            }
        if (name == "index")
            throw TemplateError("the value is not in the list");
        return Value(n);
    }
    throw TemplateError("lists have no method '" + std::string(name) + "'");
}

Value dict_method(Object& dict, std::string_view name, CallArgs& a)
{
    if (name == "get") {
        const Value key = a.get(0);
        if (const Value* v = dict.find(key.to_output()))
            return *v;
        return a.size() > 1 ? a.get(1) : Value::none();
    }
    if (name == "items") {
        Array items;
        for (const auto& [k, v] : dict.items)
            items.emplace_back(Array{dict.key_value(k), v});
        return Value(std::move(items));
    }
    if (name == "keys" || name == "values") {
        Array items;
        for (const auto& [k, v] : dict.items)
            items.push_back(name == "keys" ? dict.key_value(k) : v);
        return Value(std::move(items));
    }
    if (name == "update") {
        const Value other = a.get(0);
        if (other.is_object())
            for (const auto& [k, v] : Object(other.as_object()).items)
                dict.set(k, v);
        for (const auto& [k, v] : a.keyword)
            dict.set(k, v);
        return Value::none();
    }
    if (name == "pop") {
        const std::string key = a.get(0).to_output();
        if (const Value* v = dict.find(key)) {
            Value out = *v;
            dict.erase(key);
            return out;
        }
        if (a.size() > 1)
            return a.get(1);
        throw TemplateError("the dict has no key '" + key + "'");
    }
    if (name == "setdefault") {
        const std::string key = a.get(0).to_output();
        if (const Value* v = dict.find(key))
            return *v;
        dict.set(key, a.size() > 1 ? a.get(1) : Value::none());
        return *dict.find(key);
    }
    if (name == "copy")
        return Value(Object(dict));
    throw TemplateError("dicts have no method '" + std::string(name) + "'");
}

bool is_method_name(const Value& target, std::string_view name)
{
    static constexpr std::string_view str[] = {"strip",   "lstrip",  "rstrip",     "split",   "rsplit",     "upper",
                                               "lower",   "title",   "capitalize", "replace", "startswith", "endswith",
                                               "format",  "join",    "find",       "count",   "splitlines", "isdigit",
                                               "isalpha", "isspace", "isalnum",    "islower", "isupper"};
    static constexpr std::string_view list[] = {"append", "pop", "insert", "extend", "index", "count"};
    static constexpr std::string_view dict[] = {"get",    "items", "keys",       "values",
                                                "update", "pop",   "setdefault", "copy"};
    const auto in = [&](const auto& names) {
        for (auto n : names)
            if (n == name)
                return true;
        return false;
    };
    return (target.is_string() && in(str)) || (target.is_array() && in(list)) || (target.is_object() && in(dict));
}

// ---- globals -------------------------------------------------------------------------------

Value range_function(CallArgs& a)
{
    std::int64_t start = 0, stop = 0, step = 1;
    if (a.size() == 1) {
        stop = a.get(0).as_int();
    } else if (a.size() >= 2) {
        start = a.get(0).as_int();
        stop = a.get(1).as_int();
        if (a.size() > 2)
            step = a.get(2).as_int();
    }
    if (step == 0)
        throw TemplateError("range() step cannot be zero");
    Array out;
    for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (out.size() >= 1'000'000)
            throw TemplateError("range() of more than 1000000 numbers (the limit)");
        out.emplace_back(i);
    }
    return Value(std::move(out));
}

Value namespace_function(CallArgs& a)
{
    Object ns;
    ns.is_namespace = true;
    const Value first = a.get(0);
    if (first.is_object())
        for (const auto& [k, v] : first.as_object().items)
            ns.set(k, v);
    for (const auto& [k, v] : a.keyword)
        ns.set(k, v);
    return Value(std::move(ns));
}

Value dict_function(CallArgs& a)
{
    Object d;
    const Value first = a.get(0);
    if (first.is_object())
        for (const auto& [k, v] : first.as_object().items)
            d.set(k, v);
    for (const auto& [k, v] : a.keyword)
        d.set(k, v);
    return Value(std::move(d));
}

} // namespace

std::optional<Value> bound_method(const Value& target, std::string_view name)
{
    if (!is_method_name(target, name))
        return std::nullopt;
    const std::string method(name);
    return Value(Callable{method, [target, method](CallArgs& a) -> Value {
                              if (target.is_string())
                                  return str_method(target.as_string(), method, a);
                              if (target.is_array())
                                  return list_method(target.as_array(), method, a);
                              return dict_method(target.as_object(), method, a);
                          }});
}

std::optional<Value> global_function(std::string_view name)
{
    if (name == "range")
        return Value(Callable{"range", range_function});
    if (name == "namespace")
        return Value(Callable{"namespace", namespace_function});
    if (name == "dict")
        return Value(Callable{"dict", dict_function});
    if (name == "raise_exception")
        return Value(Callable{"raise_exception", [](CallArgs& a) -> Value {
                                  throw TemplateError("the template raised an error: " + a.get(0).to_output());
                              }});
    return std::nullopt;
}

} // namespace engine::jinja
