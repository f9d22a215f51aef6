// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// The run document's JSON spelling, shared by its writer and its parser: numbers JSON cannot spell
// (NaN is null, infinities are "inf" and "-inf"), and a reader that names the field it refuses.

#include "util/error.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace engine::run {

using json = nlohmann::ordered_json;

inline json num(double v)
{
    if (std::isnan(v))
        return nullptr;
    if (std::isinf(v))
        return v > 0 ? "inf" : "-inf";
    return v;
}

// One JSON object of the document and where it is ("stepper.tokens[3]"). Absent keys read as their
// defaults (runs saved before a field existed open); a present key of the wrong type or range is
// refused with its path, before any value reaches a panel.
class Fields {
public:
    Fields(const json& object, std::string path);

    const std::string& path() const { return m_path; }
    std::string at(const char* key) const { return m_path.empty() ? key : m_path + "." + key; }
    bool has(const char* key) const { return m_object.contains(key); }

    int64_t integer(const char* key, int64_t fallback = 0, int64_t lo = std::numeric_limits<int32_t>::min(),
                    int64_t hi = std::numeric_limits<int32_t>::max()) const;
    uint64_t count(const char* key) const; // 0 … 2^63
    double number(const char* key, double fallback = 0.0) const;
    bool boolean(const char* key, bool fallback = false) const;
    std::string string(const char* key) const;
    Fields object(const char* key) const;     // absent: an empty object
    const json& array(const char* key) const; // absent: an empty array

    // The same rules for a value that is not a member (an array's element), named by `path`.
    static int64_t integer_value(const json& v, const std::string& path,
                                 int64_t lo = std::numeric_limits<int32_t>::min(),
                                 int64_t hi = std::numeric_limits<int32_t>::max());
    static double number_value(const json& v, const std::string& path);
    static std::string string_value(const json& v, const std::string& path);
    static const json& array_value(const json& v, const std::string& path, std::size_t min_size = 0);

private:
    const json& m_object;
    std::string m_path;
};

std::vector<int> int_list(const json& array, const std::string& path);
std::vector<double> number_list(const json& array, const std::string& path);
std::vector<std::string> string_list(const json& array, const std::string& path);

[[noreturn]] void refuse(const std::string& path, const std::string& what);

} // namespace engine::run
