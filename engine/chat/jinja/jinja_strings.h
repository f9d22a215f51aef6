// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Python's string operations as the built-ins need them (str.strip, str.split, str.title,
// str.format, …) on UTF-8 text; case changes touch ASCII letters only.

#include "chat/jinja/jinja_value.h"

#include <ctime>
#include <string>
#include <string_view>

namespace engine::jinja {

inline constexpr std::string_view k_python_space = " \t\n\r\v\f";

std::string strip(std::string_view s, std::string_view chars, bool left, bool right);
// sep null: split at runs of whitespace, dropping empty pieces (Python's str.split()).
Value split(const std::string& s, const std::string* sep, std::int64_t max_split, bool from_right);
std::string to_upper(std::string_view s);
std::string to_lower(std::string_view s);
std::string title_case(std::string_view s);
std::string capitalize(std::string_view s);
std::string replace_all(std::string_view s, std::string_view from, std::string_view to, std::int64_t count);
// str.format: {} and {0} positional, {name} keyword, {{ and }} literal braces; format specs ignored.
std::string python_format(std::string_view format, const CallArgs& args);
// strftime of `now` in UTC.
std::string format_time(std::time_t now, const std::string& format);

} // namespace engine::jinja
