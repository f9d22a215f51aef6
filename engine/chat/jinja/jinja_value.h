// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The values a chat template computes with: Jinja's (Python's) dynamic types. Lists and dicts are
// shared by reference, as in Python, so that `messages.append(…)` or a namespace's attribute set in
// a loop is seen by every name that holds them. Dicts keep insertion order (the order a message's
// keys were written in is the order `tojson` and `items()` give them back).

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace engine::jinja {

class Value;
struct CallArgs;

using Array = std::vector<Value>;

struct Object {
    std::vector<std::pair<std::string, Value>> items;
    bool is_namespace = false; // namespace(...): the only object `set ns.attr = …` may change
    // Keys written as integers ({0: …, 512: …}): looked up by their text, given back as integers.
    std::vector<std::string> int_keys;

    Value key_value(const std::string& key) const;

    const Value* find(std::string_view key) const;
    Value* find(std::string_view key);
    void set(std::string key, Value value);
    bool erase(std::string_view key);
};

// A built-in function, a bound method or a macro.
struct Callable {
    std::string name;
    std::function<Value(CallArgs&)> call;
};

// A template error: what the author or the template did wrong, as a sentence.
class TemplateError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class Value {
public:
    enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Function };

    Value() = default; // undefined
    static Value none();
    static Value undefined(std::string name = {});
    Value(bool b); // NOLINT(google-explicit-constructor): literal conversions read naturally
    Value(int v) : Value(static_cast<std::int64_t>(v)) {} // NOLINT(google-explicit-constructor)
    Value(std::int64_t i);                                // NOLINT(google-explicit-constructor)
    Value(double f);                                      // NOLINT(google-explicit-constructor)
    Value(std::string s);                                 // NOLINT(google-explicit-constructor)
    Value(const char* s) : Value(std::string(s)) {}       // NOLINT(google-explicit-constructor)
    Value(Array a);                                       // NOLINT(google-explicit-constructor)
    Value(Object o);                                      // NOLINT(google-explicit-constructor)
    Value(Callable c);                                    // NOLINT(google-explicit-constructor)

    Kind kind() const { return m_kind; }
    bool is_undefined() const { return m_kind == Kind::Undefined; }
    bool is_none() const { return m_kind == Kind::None; }
    bool is_bool() const { return m_kind == Kind::Bool; }
    bool is_int() const { return m_kind == Kind::Int; }
    bool is_float() const { return m_kind == Kind::Float; }
    bool is_number() const { return m_kind == Kind::Int || m_kind == Kind::Float; }
    bool is_string() const { return m_kind == Kind::String; }
    bool is_array() const { return m_kind == Kind::List; }
    bool is_object() const { return m_kind == Kind::Dict; }
    bool is_callable() const { return m_kind == Kind::Function; }

    bool as_bool() const { return m_bool; }
    std::int64_t as_int() const { return m_int; }
    double as_number() const { return m_kind == Kind::Float ? m_float : static_cast<double>(m_int); }
    const std::string& as_string() const { return *m_string; }
    Array& as_array() const { return *m_array; }
    Object& as_object() const { return *m_object; }
    const Callable& as_callable() const { return *m_callable; }
    // The name an undefined value was looked up under (for messages).
    const std::string& undefined_name() const;

    // Python truthiness: empty strings, lists and dicts, zero, none and undefined are false.
    bool truthy() const;
    // What `{{ v }}` prints: Python's str() (True, None, [1, 'a'], {'k': 'v'}); undefined prints "".
    std::string to_output() const;
    // Python's repr(): strings quoted with single quotes (double where the text has a single one).
    std::string repr() const;
    // "string", "list", "dict", … for error messages.
    std::string_view type_name() const;
    bool same_object(const Value& other) const;

private:
    Kind m_kind = Kind::Undefined;
    bool m_bool = false;
    std::int64_t m_int = 0;
    double m_float = 0;
    std::shared_ptr<const std::string> m_string; // also an undefined value's name
    std::shared_ptr<Array> m_array;
    std::shared_ptr<Object> m_object;
    std::shared_ptr<const Callable> m_callable;
};

// Python's ==: numbers compare by value (1 == 1.0 == True), lists and dicts element by element.
bool values_equal(const Value& a, const Value& b);
// Python's <, for sort/min/max and the comparison operators: numbers with numbers, strings with
// strings (byte order), lists element by element; anything else is an error.
bool value_less(const Value& a, const Value& b);

// Positional and keyword arguments of a call, and the interpreter's limits the callee may need.
struct CallArgs {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> keyword;

    std::size_t size() const { return positional.size(); }
    // The argument at `index`, else the keyword `name`, else undefined.
    Value get(std::size_t index, std::string_view name = {}) const;
    const Value* keyword_arg(std::string_view name) const;
};

} // namespace engine::jinja
