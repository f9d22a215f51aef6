// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "gguf/gguf_value.h"
#include "quant/ggml_type.h"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace engine::gguf {

// Builds a GGUF v3 file (shared/reference/gguf.md) and writes it atomically. Metadata values are
// encoded as they are set, so values borrowed from another file (MetaValue holds views into its
// mapping) may be copied and the source closed afterwards. Setting a key that already exists
// replaces its value in place: clone a file's metadata, then override a few keys.
// Tensor data is written in the order tensors were added, each start aligned, which is the only
// layout ggml's reader accepts.
class GgufWriter {
public:
    // Fills a tensor's bytes at write time, so that a large model is never held in memory whole.
    // `out` has exactly the tensor's byte size.
    using TensorFill = std::function<void(std::span<std::byte> out)>;

    // ---- metadata --------------------------------------------------------------------------
    void set_u8(std::string_view key, uint8_t v);
    void set_i8(std::string_view key, int8_t v);
    void set_u16(std::string_view key, uint16_t v);
    void set_i16(std::string_view key, int16_t v);
    void set_u32(std::string_view key, uint32_t v);
    void set_i32(std::string_view key, int32_t v);
    void set_u64(std::string_view key, uint64_t v);
    void set_i64(std::string_view key, int64_t v);
    void set_f32(std::string_view key, float v);
    void set_f64(std::string_view key, double v);
    void set_bool(std::string_view key, bool v);
    void set_string(std::string_view key, std::string_view v);
    void set_string_array(std::string_view key, std::span<const std::string> items);
    void set_string_array(std::string_view key, std::span<const std::string_view> items);
    void set_i32_array(std::string_view key, std::span<const int32_t> items);
    void set_u32_array(std::string_view key, std::span<const uint32_t> items);
    void set_f32_array(std::string_view key, std::span<const float> items);
    // A fixed-size-element array given as its packed little-endian bytes (count elements of
    // element_type); throws Error when the byte count does not match or the type is not fixed-size.
    void set_packed_array(std::string_view key, ValueType element_type, uint64_t count,
                          std::span<const std::byte> packed);
    // Any value read by GgufFile, nested arrays included.
    void set_value(std::string_view key, const MetaValue& value);

    bool has(std::string_view key) const;
    // Removes a key if present; returns whether it was.
    bool remove(std::string_view key);
    std::size_t metadata_count() const { return m_kvs.size(); }

    // ---- tensors ---------------------------------------------------------------------------
    // dims are ne0 first (ne0 is contiguous), 1 to 4 of them. Throws Error for a duplicate or
    // over-long name, a bad rank, an ne0 that is not a multiple of the type's block size, or (for
    // the bytes overload) a byte count that differs from the shape's.
    void add_tensor(std::string_view name, GgmlType type, std::span<const uint64_t> dims, std::vector<std::byte> data);
    void add_tensor(std::string_view name, GgmlType type, std::span<const uint64_t> dims, TensorFill fill);
    std::size_t tensor_count() const { return m_tensors.size(); }

    // Alignment the file will use: general.alignment when set (must be a UINT32 power of two),
    // else 32.
    uint32_t alignment() const;

    // Writes the file: into a temporary file in the same directory, flushed to disk, then renamed
    // over `path`, so that readers never see a half-written model. Throws IoError (the temporary
    // is removed) or Error for an invalid general.alignment.
    void write(const std::filesystem::path& path) const;
    // The whole file in memory, byte for byte what write() puts on disk (for small files that are
    // patched or hashed before they are written).
    std::vector<std::byte> serialize() const;
    // The size write() and serialize() produce.
    uint64_t byte_size() const;

private:
    struct Kv {
        std::string key;
        std::vector<std::byte> encoded; // value type (u32) followed by the value, as on disk
    };
    struct Tensor {
        std::string name;
        GgmlType type;
        std::vector<uint64_t> dims;
        uint64_t n_bytes = 0;
        std::vector<std::byte> data; // used when fill is empty
        TensorFill fill;
    };

    void set_encoded(std::string_view key, std::vector<std::byte> encoded);
    // Header, metadata and tensor records, padded to the data section; `offsets` gets each
    // tensor's data offset and `data_bytes` the data section's size.
    std::vector<std::byte> head(std::vector<uint64_t>& offsets, uint64_t& data_bytes) const;
    Tensor& new_tensor(std::string_view name, GgmlType type, std::span<const uint64_t> dims);

    std::vector<Kv> m_kvs;
    std::vector<Tensor> m_tensors;
};

} // namespace engine::gguf
