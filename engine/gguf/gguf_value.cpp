// SPDX-License-Identifier: GPL-3.0-or-later
#include "gguf/gguf_value.h"

#include <cstring>
#include <limits>
#include <spdlog/fmt/fmt.h>

namespace engine::gguf {

std::string_view value_type_name(ValueType type)
{
    switch (type) {
    case ValueType::UInt8:
        return "u8";
    case ValueType::Int8:
        return "i8";
    case ValueType::UInt16:
        return "u16";
    case ValueType::Int16:
        return "i16";
    case ValueType::UInt32:
        return "u32";
    case ValueType::Int32:
        return "i32";
    case ValueType::Float32:
        return "f32";
    case ValueType::Bool:
        return "bool";
    case ValueType::String:
        return "string";
    case ValueType::Array:
        return "array";
    case ValueType::UInt64:
        return "u64";
    case ValueType::Int64:
        return "i64";
    case ValueType::Float64:
        return "f64";
    }
    return "?";
}

std::size_t value_type_size(ValueType type)
{
    switch (type) {
    case ValueType::UInt8:
    case ValueType::Int8:
    case ValueType::Bool:
        return 1;
    case ValueType::UInt16:
    case ValueType::Int16:
        return 2;
    case ValueType::UInt32:
    case ValueType::Int32:
    case ValueType::Float32:
        return 4;
    case ValueType::UInt64:
    case ValueType::Int64:
    case ValueType::Float64:
        return 8;
    case ValueType::String:
    case ValueType::Array:
        return 0;
    }
    return 0;
}

bool is_integer(ValueType t)
{
    switch (t) {
    case ValueType::UInt8:
    case ValueType::Int8:
    case ValueType::UInt16:
    case ValueType::Int16:
    case ValueType::UInt32:
    case ValueType::Int32:
    case ValueType::UInt64:
    case ValueType::Int64:
        return true;
    default:
        return false;
    }
}

bool is_float(ValueType t)
{
    return t == ValueType::Float32 || t == ValueType::Float64;
}

namespace {

template <typename T> T load(const std::byte* p)
{
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}

std::optional<int64_t> packed_int(ValueType t, const std::byte* p)
{
    switch (t) {
    case ValueType::UInt8:
        return load<uint8_t>(p);
    case ValueType::Int8:
        return load<int8_t>(p);
    case ValueType::UInt16:
        return load<uint16_t>(p);
    case ValueType::Int16:
        return load<int16_t>(p);
    case ValueType::UInt32:
        return load<uint32_t>(p);
    case ValueType::Int32:
        return load<int32_t>(p);
    case ValueType::Int64:
        return load<int64_t>(p);
    case ValueType::UInt64: {
        const auto v = load<uint64_t>(p);
        if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
            return std::nullopt;
        return static_cast<int64_t>(v);
    }
    default:
        return std::nullopt;
    }
}

std::optional<double> packed_float(ValueType t, const std::byte* p)
{
    if (t == ValueType::Float32)
        return load<float>(p);
    if (t == ValueType::Float64)
        return load<double>(p);
    if (auto i = packed_int(t, p))
        return static_cast<double>(*i);
    return std::nullopt;
}

} // namespace

std::optional<int64_t> MetaArray::int_at(uint64_t i) const
{
    const std::size_t size = value_type_size(element_type);
    if (i >= count || size == 0)
        return std::nullopt;
    return packed_int(element_type, packed.data() + i * size);
}

std::optional<double> MetaArray::float_at(uint64_t i) const
{
    const std::size_t size = value_type_size(element_type);
    if (i >= count || size == 0)
        return std::nullopt;
    return packed_float(element_type, packed.data() + i * size);
}

std::optional<bool> MetaArray::bool_at(uint64_t i) const
{
    if (element_type == ValueType::Bool) {
        if (i >= count || packed.size() < count)
            return std::nullopt;
        return std::to_integer<uint8_t>(packed[i]) != 0;
    }
    if (auto v = int_at(i))
        return *v != 0;
    return std::nullopt;
}

std::optional<std::vector<int64_t>> MetaArray::to_ints() const
{
    if (!is_integer(element_type))
        return std::nullopt;
    std::vector<int64_t> out;
    out.reserve(count);
    for (uint64_t i = 0; i < count; ++i) {
        auto v = int_at(i);
        if (!v)
            return std::nullopt;
        out.push_back(*v);
    }
    return out;
}

std::optional<std::vector<float>> MetaArray::to_floats() const
{
    if (!is_integer(element_type) && !is_float(element_type))
        return std::nullopt;
    std::vector<float> out;
    out.reserve(count);
    for (uint64_t i = 0; i < count; ++i)
        out.push_back(static_cast<float>(*float_at(i)));
    return out;
}

std::optional<int64_t> MetaValue::as_int() const
{
    if (const auto* u = std::get_if<uint64_t>(&data)) {
        if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
            return std::nullopt;
        return static_cast<int64_t>(*u);
    }
    if (const auto* i = std::get_if<int64_t>(&data))
        return *i;
    return std::nullopt;
}

std::optional<double> MetaValue::as_float() const
{
    if (const auto* d = std::get_if<double>(&data))
        return *d;
    if (auto i = as_int())
        return static_cast<double>(*i);
    return std::nullopt;
}

std::optional<bool> MetaValue::as_bool() const
{
    if (const auto* b = std::get_if<bool>(&data))
        return *b;
    return std::nullopt;
}

std::optional<std::string_view> MetaValue::as_string() const
{
    if (const auto* s = std::get_if<std::string_view>(&data))
        return *s;
    return std::nullopt;
}

const MetaArray* MetaValue::as_array() const
{
    return std::get_if<MetaArray>(&data);
}

namespace {

std::string quoted(std::string_view s, std::size_t max_chars = 60)
{
    std::string out = "\"";
    for (std::size_t i = 0; i < s.size() && i < max_chars; ++i) {
        const char c = s[i];
        if (c == '\n')
            out += "\\n";
        else if (c == '\t')
            out += "\\t";
        else if (c == '"')
            out += "\\\"";
        else if (static_cast<unsigned char>(c) < 0x20)
            out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
        else
            out += c;
    }
    if (s.size() > max_chars)
        out += "…";
    out += "\"";
    return out;
}

std::string array_display(const MetaArray& a, std::size_t max_items)
{
    std::string out = fmt::format("[{} × {}: ", a.count, value_type_name(a.element_type));
    const uint64_t shown = std::min<uint64_t>(a.count, max_items);
    for (uint64_t i = 0; i < shown; ++i) {
        if (i)
            out += ", ";
        if (a.element_type == ValueType::String)
            out += quoted(a.strings[i], 24);
        else if (a.element_type == ValueType::Array)
            out += array_display(a.arrays[i], max_items);
        else if (a.element_type == ValueType::Bool)
            out += a.packed[i] != std::byte{0} ? "true" : "false";
        else if (is_float(a.element_type))
            out += fmt::format("{:g}", *a.float_at(i));
        else if (auto v = a.int_at(i))
            out += std::to_string(*v);
        else
            out += "?";
    }
    if (a.count > shown)
        out += ", …";
    return out + "]";
}

} // namespace

std::string MetaValue::to_display_string(std::size_t max_items) const
{
    return std::visit(
        [&](const auto& v) -> std::string {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::string_view>)
                return quoted(v);
            else if constexpr (std::is_same_v<T, MetaArray>)
                return array_display(v, max_items);
            else if constexpr (std::is_same_v<T, bool>)
                return v ? "true" : "false";
            else if constexpr (std::is_same_v<T, double>)
                return fmt::format("{:g}", v);
            else
                return std::to_string(v);
        },
        data);
}

} // namespace engine::gguf
