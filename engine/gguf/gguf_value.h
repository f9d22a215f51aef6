// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace engine::gguf {

// gguf_metadata_value_type (u32 on disk).
enum class ValueType : uint32_t {
    UInt8 = 0,
    Int8 = 1,
    UInt16 = 2,
    Int16 = 3,
    UInt32 = 4,
    Int32 = 5,
    Float32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    UInt64 = 10,
    Int64 = 11,
    Float64 = 12,
};

std::string_view value_type_name(ValueType type);
// Bytes of one element of a fixed-size type; 0 for String and Array.
std::size_t value_type_size(ValueType type);
bool is_integer(ValueType type);
bool is_float(ValueType type);

// An array value. Fixed-size elements stay packed where they lie in the mapped file (a 262K-entry
// score table costs nothing to parse); strings are views into the file; nested arrays are parsed.
struct MetaArray {
    ValueType element_type = ValueType::UInt8;
    uint64_t count = 0;
    std::span<const std::byte> packed;     // fixed-size element types
    std::vector<std::string_view> strings; // element_type == String
    std::vector<MetaArray> arrays;         // element_type == Array

    // Element i converted, or nullopt when the element type does not convert.
    std::optional<int64_t> int_at(uint64_t i) const;
    std::optional<double> float_at(uint64_t i) const;
    // Element i of a Bool array (or an integer one: non-zero), else nullopt.
    std::optional<bool> bool_at(uint64_t i) const;

    // Whole-array conversions; nullopt when the element type does not fit the request.
    std::optional<std::vector<int64_t>> to_ints() const;
    std::optional<std::vector<float>> to_floats() const;
};

// One metadata value: scalars, a string view into the file, or an array.
struct MetaValue {
    ValueType type = ValueType::UInt8;
    std::variant<uint64_t, int64_t, double, bool, std::string_view, MetaArray> data;

    // Any integer type (bool excluded) as int64; nullopt for other types or a uint64 past INT64_MAX.
    std::optional<int64_t> as_int() const;
    // Any float or integer type as double.
    std::optional<double> as_float() const;
    std::optional<bool> as_bool() const;
    std::optional<std::string_view> as_string() const;
    const MetaArray* as_array() const;

    // Short human-readable rendering, arrays abbreviated (for `info`).
    std::string to_display_string(std::size_t max_items = 8) const;
};

} // namespace engine::gguf
