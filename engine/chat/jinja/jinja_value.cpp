// SPDX-License-Identifier: GPL-3.0-or-later
#include "chat/jinja/jinja_value.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace engine::jinja {

const Value* Object::find(std::string_view key) const
{
    for (const auto& [k, v] : items)
        if (k == key)
            return &v;
    return nullptr;
}

Value* Object::find(std::string_view key)
{
    for (auto& [k, v] : items)
        if (k == key)
            return &v;
    return nullptr;
}

void Object::set(std::string key, Value value)
{
    if (Value* existing = find(key)) {
        *existing = std::move(value);
        return;
    }
    items.emplace_back(std::move(key), std::move(value));
}

Value Object::key_value(const std::string& key) const
{
    for (const auto& k : int_keys)
        if (k == key)
            return Value(static_cast<std::int64_t>(std::strtoll(key.c_str(), nullptr, 10)));
    return Value(key);
}

bool Object::erase(std::string_view key)
{
    for (auto it = items.begin(); it != items.end(); ++it)
        if (it->first == key) {
            items.erase(it);
            return true;
        }
    return false;
}

Value Value::none()
{
    Value v;
    v.m_kind = Kind::None;
    return v;
}

Value Value::undefined(std::string name)
{
    Value v;
    if (!name.empty())
        v.m_string = std::make_shared<const std::string>(std::move(name));
    return v;
}

Value::Value(bool b) : m_kind(Kind::Bool), m_bool(b), m_int(b ? 1 : 0) {}
Value::Value(std::int64_t i) : m_kind(Kind::Int), m_int(i) {}
Value::Value(double f) : m_kind(Kind::Float), m_float(f) {}
Value::Value(std::string s) : m_kind(Kind::String), m_string(std::make_shared<const std::string>(std::move(s))) {}
Value::Value(Array a) : m_kind(Kind::List), m_array(std::make_shared<Array>(std::move(a))) {}
Value::Value(Object o) : m_kind(Kind::Dict), m_object(std::make_shared<Object>(std::move(o))) {}
Value::Value(Callable c) : m_kind(Kind::Function), m_callable(std::make_shared<const Callable>(std::move(c))) {}

const std::string& Value::undefined_name() const
{
    static const std::string empty;
    return m_kind == Kind::Undefined && m_string ? *m_string : empty;
}

bool Value::truthy() const
{
    switch (m_kind) {
    case Kind::Undefined:
    case Kind::None:
        return false;
    case Kind::Bool:
        return m_bool;
    case Kind::Int:
        return m_int != 0;
    case Kind::Float:
        return m_float != 0.0;
    case Kind::String:
        return !m_string->empty();
    case Kind::List:
        return !m_array->empty();
    case Kind::Dict:
        return !m_object->items.empty();
    case Kind::Function:
        return true;
    }
    return false;
}

namespace {

// Python's float str(): the shortest text that reads back to the same double, with ".0" on whole
// numbers ("1.0", "0.1", "1e+20").
std::string float_text(double f)
{
    if (std::isnan(f))
        return "nan";
    if (std::isinf(f))
        return f > 0 ? "inf" : "-inf";
    char buf[40];
    for (int precision = 1; precision <= 17; ++precision) {
        std::snprintf(buf, sizeof buf, "%.*g", precision, f);
        if (std::strtod(buf, nullptr) == f)
            break;
    }
    std::string s = buf;
    if (s.find_first_of(".eEn") == std::string::npos)
        s += ".0";
    return s;
}

} // namespace

std::string Value::to_output() const
{
    switch (m_kind) {
    case Kind::Undefined:
        return {};
    case Kind::None:
        return "None";
    case Kind::Bool:
        return m_bool ? "True" : "False";
    case Kind::Int:
        return std::to_string(m_int);
    case Kind::Float:
        return float_text(m_float);
    case Kind::String:
        return *m_string;
    case Kind::List: {
        std::string out = "[";
        for (std::size_t i = 0; i < m_array->size(); ++i) {
            if (i)
                out += ", ";
            out += (*m_array)[i].repr();
        }
        return out + "]";
    }
    case Kind::Dict: {
        std::string out = "{";
        bool first = true;
        for (const auto& [k, v] : m_object->items) {
            if (!first)
                out += ", ";
            first = false;
            out += m_object->key_value(k).repr() + ": " + v.repr();
        }
        return out + "}";
    }
    case Kind::Function:
        return "<function " + m_callable->name + ">";
    }
    return {};
}

std::string Value::repr() const
{
    if (m_kind != Kind::String)
        return to_output();
    const std::string& s = *m_string;
    const char quote = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
    std::string out(1, quote);
    for (char c : s) {
        switch (c) {
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
        default:
            if (c == quote)
                out += '\\';
            out += c;
        }
    }
    return out + quote;
}

std::string_view Value::type_name() const
{
    switch (m_kind) {
    case Kind::Undefined:
        return "undefined";
    case Kind::None:
        return "none";
    case Kind::Bool:
        return "boolean";
    case Kind::Int:
        return "integer";
    case Kind::Float:
        return "float";
    case Kind::String:
        return "string";
    case Kind::List:
        return "list";
    case Kind::Dict:
        return "dict";
    case Kind::Function:
        return "function";
    }
    return "value";
}

bool Value::same_object(const Value& other) const
{
    if (m_kind != other.m_kind)
        return false;
    switch (m_kind) {
    case Kind::List:
        return m_array == other.m_array;
    case Kind::Dict:
        return m_object == other.m_object;
    case Kind::Function:
        return m_callable == other.m_callable;
    default:
        return values_equal(*this, other);
    }
}

bool values_equal(const Value& a, const Value& b)
{
    using K = Value::Kind;
    const bool a_num = a.is_number() || a.is_bool();
    const bool b_num = b.is_number() || b.is_bool();
    if (a_num && b_num) {
        if (a.is_float() || b.is_float())
            return a.as_number() == b.as_number();
        return a.as_int() == b.as_int();
    }
    if (a.kind() != b.kind())
        return false;
    switch (a.kind()) {
    case K::Undefined:
    case K::None:
        return true;
    case K::String:
        return a.as_string() == b.as_string();
    case K::List: {
        const Array& x = a.as_array();
        const Array& y = b.as_array();
        if (x.size() != y.size())
            return false;
        for (std::size_t i = 0; i < x.size(); ++i)
            if (!values_equal(x[i], y[i]))
                return false;
        return true;
    }
    case K::Dict: {
        const Object& x = a.as_object();
        const Object& y = b.as_object();
        if (x.items.size() != y.items.size())
            return false;
        for (const auto& [k, v] : x.items) {
            const Value* w = y.find(k);
            if (!w || !values_equal(v, *w))
                return false;
        }
        return true;
    }
    case K::Function:
        return a.same_object(b);
    default:
        return false;
    }
}

bool value_less(const Value& a, const Value& b)
{
    const bool a_num = a.is_number() || a.is_bool();
    const bool b_num = b.is_number() || b.is_bool();
    if (a_num && b_num)
        return a.as_number() < b.as_number();
    if (a.is_string() && b.is_string())
        return a.as_string() < b.as_string();
    if (a.is_array() && b.is_array()) {
        const Array& x = a.as_array();
        const Array& y = b.as_array();
        for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
            if (value_less(x[i], y[i]))
                return true;
            if (value_less(y[i], x[i]))
                return false;
        }
        return x.size() < y.size();
    }
    throw TemplateError("cannot compare " + std::string(a.type_name()) + " with " + std::string(b.type_name()));
}

Value CallArgs::get(std::size_t index, std::string_view name) const
{
    if (index < positional.size())
        return positional[index];
    if (!name.empty())
        if (const Value* v = keyword_arg(name))
            return *v;
    return {};
}

const Value* CallArgs::keyword_arg(std::string_view name) const
{
    for (const auto& [k, v] : keyword)
        if (k == name)
            return &v;
    return nullptr;
}

} // namespace engine::jinja
