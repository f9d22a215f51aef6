// SPDX-License-Identifier: GPL-3.0-or-later
#include "kv/kv_cache_types.h"

#include "util/error.h"

#include <spdlog/fmt/fmt.h>

namespace engine {

namespace {

bool storable(GgmlType t)
{
    return t == GgmlType::F16 || t == GgmlType::Q8_0 || t == GgmlType::Q4_0;
}

} // namespace

std::optional<GgmlType> parse_kv_cache_type(std::string_view text)
{
    const auto t = ggml_type_from_name(text);
    if (!t || !storable(*t))
        return std::nullopt;
    return t;
}

std::string kv_cache_types_name(KvCacheTypes types)
{
    if (!types.quantized())
        return "F16";
    return fmt::format("K {}, V {}", ggml_type_name(types.k), ggml_type_name(types.v));
}

std::optional<KvCacheTypes> parse_kv_cache_types_name(std::string_view name)
{
    if (name == "F16")
        return KvCacheTypes{};
    const std::size_t comma = name.find(", V ");
    if (!name.starts_with("K ") || comma == std::string_view::npos)
        return std::nullopt;
    const auto k = parse_kv_cache_type(name.substr(2, comma - 2));
    const auto v = parse_kv_cache_type(name.substr(comma + 4));
    if (!k || !v || kv_cache_types_name({*k, *v}) != name)
        return std::nullopt;
    return KvCacheTypes{*k, *v};
}

uint64_t kv_row_bytes(GgmlType type, uint32_t head_dim)
{
    return ggml_row_bytes(ggml_type_traits(type), head_dim);
}

void check_kv_cache_types(KvCacheTypes types, uint32_t head_dim)
{
    for (const auto& [which, t] : {std::pair{"keys", types.k}, std::pair{"values", types.v}}) {
        if (!storable(t))
            throw UnsupportedError(
                fmt::format("a KV cache of {} {} is not supported (f16, q8_0 or q4_0)", ggml_type_name(t), which));
        if (t != GgmlType::F16 && head_dim % 32 != 0)
            throw UnsupportedError(fmt::format("{} {} need head vectors of whole 32-value blocks; this model's "
                                               "heads have {} values (use an f16 cache)",
                                               ggml_type_name(t), which, head_dim));
    }
}

} // namespace engine
