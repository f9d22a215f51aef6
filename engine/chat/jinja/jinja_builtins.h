// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// What chat templates call: filters (`x | trim`), tests (`x is string`), methods (`s.strip()`,
// `messages.append(m)`, `d.items()`), global functions (`raise_exception`, `namespace`, `range`,
// `strftime_now`, `dict`) and `tojson` in Python's json.dumps format. The set is the one Hugging
// Face's renderer and llama.cpp's give templates (shared/reference/chat-templates.md §1, §3).

#include "chat/jinja/jinja_value.h"

#include <optional>
#include <string>
#include <string_view>

namespace engine::jinja {

class Interpreter;

// nullopt when no filter has that name.
std::optional<Value> apply_filter(Interpreter& in, std::string_view name, const Value& input, CallArgs& args,
                                  std::size_t offset);
// nullopt when no test has that name.
std::optional<bool> apply_test(Interpreter& in, std::string_view name, const Value& input, CallArgs& args,
                               std::size_t offset);
// `target.name` where it names a method of strings, lists or dicts: a callable bound to `target`.
std::optional<Value> bound_method(const Value& target, std::string_view name);
// A global function (`range`, `namespace`, …), or nullopt.
std::optional<Value> global_function(std::string_view name);

struct JsonOptions {
    int indent = -1; // < 0: one line
    bool ensure_ascii = false;
    std::string item_separator; // empty: Python's default for the indent
    std::string key_separator = ": ";
    bool sort_keys = false;
};
std::string to_json(const Value& value, const JsonOptions& options);

// Length in Unicode code points (Python's len() of a str); malformed bytes count one each.
std::size_t utf8_length(std::string_view s);
// The byte offset of each code point of `s`, and s.size() at the end.
std::vector<std::size_t> utf8_offsets(std::string_view s);

// A string this long would pass the output limit: stop before building it.
void check_string_size(Interpreter& in, std::size_t bytes, std::size_t offset);

} // namespace engine::jinja
