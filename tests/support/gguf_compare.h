// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "gguf/gguf_file.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace testsupport {

// Exact equality of two metadata arrays as stored: element type, count and every element's bytes.
inline bool same_array(const engine::gguf::MetaArray& a, const engine::gguf::MetaArray& b)
{
    if (a.element_type != b.element_type || a.count != b.count || a.strings != b.strings ||
        a.arrays.size() != b.arrays.size() || a.packed.size() != b.packed.size())
        return false;
    if (!std::equal(a.packed.begin(), a.packed.end(), b.packed.begin()))
        return false;
    for (std::size_t i = 0; i < a.arrays.size(); ++i)
        if (!same_array(a.arrays[i], b.arrays[i]))
            return false;
    return true;
}

// Exact equality of two metadata values: same stored type and same value (floats bit for bit, as
// they were widened from the same stored bytes).
inline bool same_value(const engine::gguf::MetaValue& a, const engine::gguf::MetaValue& b)
{
    if (a.type != b.type || a.data.index() != b.data.index())
        return false;
    if (const auto* x = std::get_if<engine::gguf::MetaArray>(&a.data))
        return same_array(*x, std::get<engine::gguf::MetaArray>(b.data));
    if (const auto* x = std::get_if<double>(&a.data)) {
        const double y = std::get<double>(b.data);
        return std::memcmp(x, &y, sizeof y) == 0;
    }
    if (const auto* x = std::get_if<uint64_t>(&a.data))
        return *x == std::get<uint64_t>(b.data);
    if (const auto* x = std::get_if<int64_t>(&a.data))
        return *x == std::get<int64_t>(b.data);
    if (const auto* x = std::get_if<bool>(&a.data))
        return *x == std::get<bool>(b.data);
    return std::get<std::string_view>(a.data) == std::get<std::string_view>(b.data);
}

} // namespace testsupport
