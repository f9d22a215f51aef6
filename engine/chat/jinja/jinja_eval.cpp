// SPDX-License-Identifier: GPL-3.0-or-later
// Expressions: the Interpreter's eval() and what it needs (operators, attribute and item access,
// slices, filter and test calls). Where Python's Jinja2 and llama.cpp's renderer differ, we follow
// llama.cpp, whose renderings the tests compare with (shared/reference/chat-templates.md §3):
// attributes of undefined values are undefined, and none or undefined concatenated with a string
// reads as "".

#include "chat/jinja/jinja_builtins.h"
#include "chat/jinja/jinja_interpreter.h"

#include <cmath>

namespace engine::jinja {

namespace {

std::int64_t wrap_add(std::int64_t a, std::int64_t b)
{
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
}
std::int64_t wrap_sub(std::int64_t a, std::int64_t b)
{
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) - static_cast<std::uint64_t>(b));
}
std::int64_t wrap_mul(std::int64_t a, std::int64_t b)
{
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b));
}

bool is_nullish(const Value& v)
{
    return v.is_none() || v.is_undefined();
}

// Python's `x in container`.
bool contains(const Value& container, const Value& item)
{
    if (container.is_string())
        return item.is_string() && container.as_string().find(item.as_string()) != std::string::npos;
    if (container.is_array()) {
        for (const Value& v : container.as_array())
            if (values_equal(v, item))
                return true;
        return false;
    }
    if (container.is_object())
        return (item.is_string() || item.is_int()) && container.as_object().find(item.to_output()) != nullptr;
    return false;
}

// Python's floor division and modulo (the result takes the divisor's sign).
std::int64_t floor_div(std::int64_t a, std::int64_t b)
{
    std::int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        --q;
    return q;
}

} // namespace

Value Interpreter::eval(const Expr& e)
{
    switch (e.kind) {
    case Expr::Kind::Literal:
        return e.value;
    case Expr::Kind::Name: {
        if (const Value* v = lookup(e.name))
            return *v;
        if (auto f = global_function(e.name))
            return *f;
        return Value::undefined(e.name);
    }
    case Expr::Kind::List:
    case Expr::Kind::Tuple: {
        Array items;
        for (const auto& item : e.items)
            items.push_back(eval(*item));
        return Value(std::move(items));
    }
    case Expr::Kind::Dict: {
        Object dict;
        for (std::size_t i = 0; i + 1 < e.items.size(); i += 2) {
            const Value key = eval(*e.items[i]);
            if (!key.is_string() && !key.is_number() && !key.is_bool())
                fail("a " + std::string(key.type_name()) + " cannot be a dict key", e.items[i]->offset);
            dict.set(key.to_output(), eval(*e.items[i + 1]));
            if (key.is_int())
                dict.int_keys.push_back(key.to_output());
        }
        return Value(std::move(dict));
    }
    case Expr::Kind::Attribute:
        return eval_attribute(eval(*e.a), e.name);
    case Expr::Kind::Index:
        return eval_index(eval(*e.a), eval(*e.b));
    case Expr::Kind::Slice:
        return eval_slice(e);
    case Expr::Kind::Call: {
        const Value callee = eval(*e.a);
        CallArgs args = eval_arguments(e);
        count_step(e.offset);
        return call(callee, args, e.offset);
    }
    case Expr::Kind::Filter:
        return eval_filter(e, nullptr);
    case Expr::Kind::Test: {
        const Value input = eval(*e.a);
        CallArgs args = eval_arguments(e);
        const auto result = apply_test(*this, e.name, input, args, e.offset);
        if (!result)
            fail("unknown test '" + e.name + "'", e.offset);
        return Value(e.negated ? !*result : *result);
    }
    case Expr::Kind::Unary: {
        const Value v = eval(*e.a);
        if (e.name == "not")
            return Value(!v.truthy());
        if (v.is_int() || v.is_bool())
            return Value(e.name == "-" ? wrap_sub(0, v.as_int()) : v.as_int());
        if (v.is_float())
            return Value(e.name == "-" ? -v.as_number() : v.as_number());
        fail("cannot apply unary '" + e.name + "' to a " + std::string(v.type_name()), e.offset);
    }
    case Expr::Kind::Binary:
        return eval_binary(e);
    case Expr::Kind::Conditional:
        if (eval(*e.b).truthy())
            return eval(*e.a);
        return e.c ? eval(*e.c) : Value::undefined();
    }
    return {};
}

CallArgs Interpreter::eval_arguments(const Expr& e)
{
    CallArgs args;
    for (const auto& item : e.items)
        args.positional.push_back(eval(*item));
    for (const auto& k : e.keywords)
        args.keyword.emplace_back(k.name, eval(*k.value));
    return args;
}

Value Interpreter::eval_filter(const Expr& e, const Value* block_input)
{
    const Value input = e.a ? eval(*e.a) : (block_input ? *block_input : Value());
    CallArgs args = eval_arguments(e);
    count_step(e.offset);
    auto result = apply_filter(*this, e.name, input, args, e.offset);
    if (!result)
        fail("unknown filter '" + e.name + "'", e.offset);
    return std::move(*result);
}

Value Interpreter::eval_binary(const Expr& e)
{
    const std::string& op = e.name;
    const Value a = eval(*e.a);
    if (op == "and")
        return a.truthy() ? eval(*e.b) : a;
    if (op == "or")
        return a.truthy() ? a : eval(*e.b);
    const Value b = eval(*e.b);
    if (op == "==")
        return Value(values_equal(a, b));
    if (op == "!=")
        return Value(!values_equal(a, b));
    if (op == "in")
        return Value(contains(b, a));
    if (op == "not in")
        return Value(!contains(b, a));
    if (op == "~") {
        // llama.cpp reads none next to a string as "" (Jinja2 writes "None").
        const bool none_beside_string = (a.is_none() && b.is_string()) || (a.is_string() && b.is_none());
        std::string s = none_beside_string && a.is_none() ? std::string() : a.to_output();
        const std::string t = none_beside_string && b.is_none() ? std::string() : b.to_output();
        check_string_size(*this, s.size() + t.size(), e.offset);
        return Value(s + t);
    }
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
        try {
            if (op == "<")
                return Value(value_less(a, b));
            if (op == ">")
                return Value(value_less(b, a));
            if (op == "<=")
                return Value(!value_less(b, a));
            return Value(!value_less(a, b));
        } catch (const TemplateError& err) {
            fail(err.what(), e.offset);
        }
    }
    const bool a_num = a.is_number() || a.is_bool();
    const bool b_num = b.is_number() || b.is_bool();
    if (op == "+") {
        if (a.is_string() && b.is_string()) {
            check_string_size(*this, a.as_string().size() + b.as_string().size(), e.offset);
            return Value(a.as_string() + b.as_string());
        }
        if ((a.is_string() && is_nullish(b)) || (is_nullish(a) && b.is_string())) // llama.cpp's leniency
            return Value((a.is_string() ? a.as_string() : std::string()) +
                         (b.is_string() ? b.as_string() : std::string()));
        if (a.is_array() && b.is_array()) {
            Array joined = a.as_array();
            joined.insert(joined.end(), b.as_array().begin(), b.as_array().end());
            count_step(e.offset);
            return Value(std::move(joined));
        }
    }
    if (op == "*" && ((a.is_string() && b.is_int()) || (a.is_int() && b.is_string()))) {
        const std::string& s = a.is_string() ? a.as_string() : b.as_string();
        const std::int64_t n = a.is_int() ? a.as_int() : b.as_int();
        if (n <= 0 || s.empty())
            return Value(std::string());
        check_string_size(*this, static_cast<std::size_t>(std::min<std::int64_t>(n, 1LL << 40)) * s.size(), e.offset);
        std::string out;
        for (std::int64_t i = 0; i < n; ++i)
            out += s;
        return Value(std::move(out));
    }
    if (!a_num || !b_num)
        fail("cannot apply '" + op + "' to a " + std::string(a.type_name()) + " and a " + std::string(b.type_name()),
             e.offset);
    const bool floats = a.is_float() || b.is_float();
    const double x = a.as_number(), y = b.as_number();
    if (op == "/") {
        if (y == 0)
            fail("division by zero", e.offset);
        return Value(x / y);
    }
    if (op == "**")
        return floats || b.as_int() < 0 ? Value(std::pow(x, y)) : Value(static_cast<std::int64_t>(std::pow(x, y)));
    if (floats) {
        if (op == "+")
            return Value(x + y);
        if (op == "-")
            return Value(x - y);
        if (op == "*")
            return Value(x * y);
        if (y == 0)
            fail("division by zero", e.offset);
        if (op == "//")
            return Value(std::floor(x / y));
        return Value(x - y * std::floor(x / y)); // %
    }
    const std::int64_t i = a.as_int(), j = b.as_int();
    if (op == "+")
        return Value(wrap_add(i, j));
    if (op == "-")
        return Value(wrap_sub(i, j));
    if (op == "*")
        return Value(wrap_mul(i, j));
    if (j == 0)
        fail("division by zero", e.offset);
    if (j == -1) // INT64_MIN / -1 overflows
        return Value(op == "//" ? wrap_sub(0, i) : std::int64_t{0});
    const std::int64_t q = floor_div(i, j);
    return Value(op == "//" ? q : wrap_sub(i, wrap_mul(q, j)));
}

Value Interpreter::eval_attribute(const Value& target, const std::string& name)
{
    if (target.is_object()) {
        if (const Value* v = target.as_object().find(name))
            return *v;
    }
    if (auto method = bound_method(target, name))
        return *method;
    return Value::undefined(name);
}

Value Interpreter::eval_index(const Value& target, const Value& index)
{
    if (target.is_object()) {
        if (const Value* v = target.as_object().find(index.to_output()))
            return *v;
        if (index.is_string())
            if (auto method = bound_method(target, index.as_string()))
                return *method;
        return Value::undefined(index.to_output());
    }
    if ((target.is_array() || target.is_string()) && (index.is_int() || index.is_bool())) {
        std::int64_t i = index.as_int();
        if (target.is_array()) {
            const auto n = static_cast<std::int64_t>(target.as_array().size());
            if (i < 0)
                i += n;
            if (i < 0 || i >= n)
                return Value::undefined("index " + std::to_string(index.as_int()));
            return target.as_array()[static_cast<std::size_t>(i)];
        }
        const std::string& s = target.as_string();
        const auto offsets = utf8_offsets(s);
        const auto n = static_cast<std::int64_t>(offsets.size()) - 1;
        if (i < 0)
            i += n;
        if (i < 0 || i >= n)
            return Value::undefined("index " + std::to_string(index.as_int()));
        const auto k = static_cast<std::size_t>(i);
        return Value(s.substr(offsets[k], offsets[k + 1] - offsets[k]));
    }
    if (index.is_string())
        return eval_attribute(target, index.as_string());
    return Value::undefined();
}

Value Interpreter::eval_slice(const Expr& e)
{
    const Value target = eval(*e.a);
    std::int64_t bounds[3] = {0, 0, 1};
    bool given[3] = {false, false, false};
    for (int k = 0; k < 3; ++k) {
        if (!e.items[static_cast<std::size_t>(k)])
            continue;
        const Value v = eval(*e.items[static_cast<std::size_t>(k)]);
        if (v.is_none())
            continue;
        if (!v.is_int())
            fail("slice bounds must be integers", e.offset);
        bounds[k] = v.as_int();
        given[k] = true;
    }
    const std::int64_t step = bounds[2];
    if (step == 0)
        fail("a slice step cannot be zero", e.offset);
    std::vector<std::size_t> offsets;
    std::int64_t n = 0;
    if (target.is_array())
        n = static_cast<std::int64_t>(target.as_array().size());
    else if (target.is_string()) {
        offsets = utf8_offsets(target.as_string());
        n = static_cast<std::int64_t>(offsets.size()) - 1;
    } else if (target.is_undefined() || target.is_none()) {
        return Value::undefined();
    } else {
        fail("cannot slice a " + std::string(target.type_name()), e.offset);
    }
    // Python's slice.indices().
    const auto clamp = [&](std::int64_t v, bool is_given, std::int64_t dflt) {
        if (!is_given)
            return dflt;
        if (v < 0)
            v += n;
        if (step > 0)
            return std::clamp<std::int64_t>(v, 0, n);
        return std::clamp<std::int64_t>(v, -1, n - 1);
    };
    const std::int64_t start = clamp(bounds[0], given[0], step > 0 ? 0 : n - 1);
    const std::int64_t stop = clamp(bounds[1], given[1], step > 0 ? n : -1);
    std::vector<std::size_t> picked;
    for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
        picked.push_back(static_cast<std::size_t>(i));
    if (target.is_array()) {
        Array out;
        for (std::size_t i : picked)
            out.push_back(target.as_array()[i]);
        return Value(std::move(out));
    }
    const std::string& s = target.as_string();
    std::string out;
    for (std::size_t i : picked)
        out.append(s, offsets[i], offsets[i + 1] - offsets[i]);
    return Value(std::move(out));
}

} // namespace engine::jinja
