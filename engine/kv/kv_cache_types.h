// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// What keys and values are stored as, as llama.cpp's --cache-type-k / --cache-type-v set it: F16
// (the default), Q8_0 or Q4_0 (32 values per block with one F16 scale; a head's vector is whole
// blocks, so head_dim must be a multiple of 32). A quantized cache is read by the flash-attention
// path (cpu/flash_attention.h), as llama.cpp reads one only with flash attention on.

#include "quant/ggml_type.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace engine {

struct KvCacheTypes {
    GgmlType k = GgmlType::F16;
    GgmlType v = GgmlType::F16;
    bool quantized() const { return k != GgmlType::F16 || v != GgmlType::F16; }
    friend bool operator==(const KvCacheTypes&, const KvCacheTypes&) = default;
};

// "f16", "q8_0" or "q4_0" (case-insensitive), as llama.cpp's flags take them; nullopt otherwise.
std::optional<GgmlType> parse_kv_cache_type(std::string_view text);
// "F16" when both are F16, else "K Q8_0, V Q4_0" (both named, even when equal).
std::string kv_cache_types_name(KvCacheTypes types);
// kv_cache_types_name's text read back ("F16", "K Q8_0, V Q4_0"); nullopt for anything else.
std::optional<KvCacheTypes> parse_kv_cache_types_name(std::string_view name);
// Bytes of one head's vector of head_dim values in that type.
uint64_t kv_row_bytes(GgmlType type, uint32_t head_dim);
// Throws UnsupportedError naming the problem when the types cannot hold vectors of head_dim values
// (a type other than the three, or a quantized type with head_dim not a multiple of 32).
void check_kv_cache_types(KvCacheTypes types, uint32_t head_dim);

} // namespace engine
