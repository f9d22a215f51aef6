// SPDX-License-Identifier: GPL-3.0-or-later
#include "run/run_json.h"

#include <spdlog/fmt/fmt.h>

namespace engine::run {

namespace {

const json& empty_array()
{
    static const json a = json::array();
    return a;
}

const char* type_name(const json& v)
{
    return v.type_name();
}

} // namespace

void refuse(const std::string& path, const std::string& what)
{
    throw FormatError("the run's document is not valid at " + path + ": " + what);
}

Fields::Fields(const json& object, std::string path) : m_object(object), m_path(std::move(path))
{
    if (!m_object.is_object())
        refuse(m_path.empty() ? "its top level" : m_path,
               fmt::format("expected an object, found {}", type_name(m_object)));
}

int64_t Fields::integer_value(const json& v, const std::string& path, int64_t lo, int64_t hi)
{
    int64_t x = 0;
    if (v.is_number_integer() && !v.is_number_unsigned()) {
        x = v.get<int64_t>();
    } else if (v.is_number_unsigned()) {
        const uint64_t u = v.get<uint64_t>();
        if (u > uint64_t(std::numeric_limits<int64_t>::max()))
            refuse(path, fmt::format("{} is out of range ({} to {})", u, lo, hi));
        x = int64_t(u);
    } else if (v.is_number_float()) {
        // Earlier writers spelled some counts as doubles; integral values within range are the same number.
        const double d = v.get<double>();
        if (!(d == std::floor(d)) || d < -9.2e18 || d > 9.2e18)
            refuse(path, fmt::format("expected an integer, found {}", d));
        x = int64_t(d);
    } else {
        refuse(path, fmt::format("expected an integer, found {}", type_name(v)));
    }
    if (x < lo || x > hi)
        refuse(path, fmt::format("{} is out of range ({} to {})", x, lo, hi));
    return x;
}

double Fields::number_value(const json& v, const std::string& path)
{
    if (v.is_null())
        return std::numeric_limits<double>::quiet_NaN();
    if (v.is_string()) {
        const auto& s = v.get_ref<const std::string&>();
        if (s == "inf")
            return std::numeric_limits<double>::infinity();
        if (s == "-inf")
            return -std::numeric_limits<double>::infinity();
        refuse(path, "expected a number, found a string that is not \"inf\" or \"-inf\"");
    }
    if (!v.is_number())
        refuse(path, fmt::format("expected a number, found {}", type_name(v)));
    return v.get<double>();
}

std::string Fields::string_value(const json& v, const std::string& path)
{
    if (!v.is_string())
        refuse(path, fmt::format("expected a string, found {}", type_name(v)));
    return v.get<std::string>();
}

const json& Fields::array_value(const json& v, const std::string& path, std::size_t min_size)
{
    if (!v.is_array())
        refuse(path, fmt::format("expected an array, found {}", type_name(v)));
    if (v.size() < min_size)
        refuse(path, fmt::format("expected at least {} elements, found {}", min_size, v.size()));
    return v;
}

int64_t Fields::integer(const char* key, int64_t fallback, int64_t lo, int64_t hi) const
{
    const auto it = m_object.find(key);
    return it == m_object.end() ? fallback : integer_value(*it, at(key), lo, hi);
}

uint64_t Fields::count(const char* key) const
{
    return uint64_t(integer(key, 0, 0, std::numeric_limits<int64_t>::max()));
}

double Fields::number(const char* key, double fallback) const
{
    const auto it = m_object.find(key);
    return it == m_object.end() ? fallback : number_value(*it, at(key));
}

bool Fields::boolean(const char* key, bool fallback) const
{
    const auto it = m_object.find(key);
    if (it == m_object.end())
        return fallback;
    if (!it->is_boolean())
        refuse(at(key), fmt::format("expected true or false, found {}", type_name(*it)));
    return it->get<bool>();
}

std::string Fields::string(const char* key) const
{
    const auto it = m_object.find(key);
    return it == m_object.end() ? std::string() : string_value(*it, at(key));
}

Fields Fields::object(const char* key) const
{
    static const json empty = json::object();
    const auto it = m_object.find(key);
    return Fields(it == m_object.end() ? empty : *it, at(key));
}

const json& Fields::array(const char* key) const
{
    const auto it = m_object.find(key);
    return it == m_object.end() ? empty_array() : array_value(*it, at(key));
}

std::vector<int> int_list(const json& array, const std::string& path)
{
    std::vector<int> out;
    out.reserve(array.size());
    for (std::size_t i = 0; i < array.size(); ++i)
        out.push_back(int(Fields::integer_value(array[i], fmt::format("{}[{}]", path, i))));
    return out;
}

std::vector<double> number_list(const json& array, const std::string& path)
{
    std::vector<double> out;
    out.reserve(array.size());
    for (std::size_t i = 0; i < array.size(); ++i)
        out.push_back(Fields::number_value(array[i], fmt::format("{}[{}]", path, i)));
    return out;
}

std::vector<std::string> string_list(const json& array, const std::string& path)
{
    std::vector<std::string> out;
    out.reserve(array.size());
    for (std::size_t i = 0; i < array.size(); ++i)
        out.push_back(Fields::string_value(array[i], fmt::format("{}[{}]", path, i)));
    return out;
}

} // namespace engine::run
