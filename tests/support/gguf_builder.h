// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace testsupport {

// Writes GGUF files byte by byte for tests: valid ones of any shape, and, through the marks it
// records (where each structural field starts), the raw material of the malformed corpus.
class GgufBuilder {
public:
    struct Tensor {
        std::string name;
        uint32_t type;
        std::vector<uint64_t> dims;
        std::vector<uint8_t> data;
        int64_t offset = -1; // -1: placed sequentially, aligned
    };

    uint32_t magic = 0x46554747;
    uint32_t version = 3;
    uint32_t alignment = 32;

    // Metadata values are stored pre-encoded (type id + value bytes).
    void add_u8(const std::string& key, uint8_t v) { add_raw(key, 0, pod(v)); }
    void add_i8(const std::string& key, int8_t v) { add_raw(key, 1, pod(v)); }
    void add_u16(const std::string& key, uint16_t v) { add_raw(key, 2, pod(v)); }
    void add_i16(const std::string& key, int16_t v) { add_raw(key, 3, pod(v)); }
    void add_u32(const std::string& key, uint32_t v) { add_raw(key, 4, pod(v)); }
    void add_i32(const std::string& key, int32_t v) { add_raw(key, 5, pod(v)); }
    void add_f32(const std::string& key, float v) { add_raw(key, 6, pod(v)); }
    void add_bool(const std::string& key, bool v) { add_raw(key, 7, pod(static_cast<uint8_t>(v))); }
    void add_string(const std::string& key, const std::string& v) { add_raw(key, 8, str(v)); }
    void add_u64(const std::string& key, uint64_t v) { add_raw(key, 10, pod(v)); }
    void add_i64(const std::string& key, int64_t v) { add_raw(key, 11, pod(v)); }
    void add_f64(const std::string& key, double v) { add_raw(key, 12, pod(v)); }
    void add_string_array(const std::string& key, const std::vector<std::string>& items);
    void add_f32_array(const std::string& key, const std::vector<float>& items);
    void add_i32_array(const std::string& key, const std::vector<int32_t>& items);
    // A value whose bytes the caller encodes (type id, then the value as it lies on disk).
    void add_raw(const std::string& key, uint32_t type, std::vector<uint8_t> value_bytes);

    void add_tensor(Tensor t) { m_tensors.push_back(std::move(t)); }

    // The file's bytes; `marks` receives the offset of every named field.
    std::vector<uint8_t> build(std::map<std::string, std::size_t>* marks = nullptr) const;

    template <typename T> static std::vector<uint8_t> pod(T v)
    {
        std::vector<uint8_t> b(sizeof(T));
        std::memcpy(b.data(), &v, sizeof(T));
        return b;
    }
    static std::vector<uint8_t> str(const std::string& s);
    // An array value: element type id, count, then the packed elements.
    template <typename T> static std::vector<uint8_t> pod_array(uint32_t element_type, const std::vector<T>& items)
    {
        std::vector<uint8_t> v = pod(element_type);
        const auto n = pod<uint64_t>(items.size());
        v.insert(v.end(), n.begin(), n.end());
        for (const T& item : items) {
            const auto e = pod(item);
            v.insert(v.end(), e.begin(), e.end());
        }
        return v;
    }

private:
    struct Kv {
        std::string key;
        uint32_t type;
        std::vector<uint8_t> value;
    };
    std::vector<Kv> m_kvs;
    std::vector<Tensor> m_tensors;
};

// Patches `value` into bytes at `offset` (little-endian, as GGUF stores it).
template <typename T> void patch(std::vector<uint8_t>& bytes, std::size_t offset, T value)
{
    std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

// Writes bytes to a file; returns false on failure.
bool write_file(const std::string& path, const std::vector<uint8_t>& bytes);

// A GGUF whose general.name really is `name_length` bytes long (after general.architecture =
// "llama"), the name's bytes a hole in a sparse file, so that a 1 GiB name costs no disk or memory
// to write. The file ends with the name. Returns false on failure.
bool write_gguf_with_long_name(const std::string& path, uint64_t name_length);

} // namespace testsupport
