// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "gguf/gguf_value.h"
#include "quant/ggml_type.h"
#include "util/mapped_file.h"

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace engine::gguf {

struct TensorInfo {
    std::string name;
    GgmlTypeTraits type;
    uint32_t n_dims = 0;
    std::array<uint64_t, 4> ne{1, 1, 1, 1}; // ne[0] is the contiguous dimension
    uint64_t offset = 0;                    // relative to the data section
    uint64_t n_bytes = 0;
    uint64_t record_offset = 0; // where its record starts in the file (for messages)

    uint64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
    uint64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
    std::string shape_string() const;
};

struct MetaEntry {
    std::string key;
    MetaValue value;
};

// A GGUF file (versions 2 and 3), memory-mapped and fully validated on open: every read is
// bounds-checked, counts are checked against the bytes that remain before anything is allocated,
// and tensor data must be aligned, inside the data section and free of overlaps.
class GgufFile {
public:
    // Throws FormatError ("<file>: offset N: what is wrong") or IoError.
    static std::shared_ptr<const GgufFile> open(const std::filesystem::path& path);
    // Parses bytes already in memory (the fuzzer's entry point); `name` stands in for the path in
    // messages. The bytes must outlive the returned object.
    static std::shared_ptr<const GgufFile> parse(std::span<const std::byte> bytes, std::string name);

    const std::string& name() const { return m_name; }
    uint32_t version() const { return m_version; }
    uint64_t file_size() const { return m_bytes.size(); }
    uint32_t alignment() const { return m_alignment; }
    uint64_t data_offset() const { return m_data_offset; }
    // Every byte of the file (the mapping); string values and tensor data are views into it.
    std::span<const std::byte> bytes() const { return m_bytes; }

    const std::vector<MetaEntry>& metadata() const { return m_metadata; }
    const MetaValue* find(std::string_view key) const;
    std::optional<int64_t> get_int(std::string_view key) const;
    std::optional<double> get_float(std::string_view key) const;
    std::optional<bool> get_bool(std::string_view key) const;
    std::optional<std::string_view> get_string(std::string_view key) const;
    const MetaArray* get_array(std::string_view key) const;

    const std::vector<TensorInfo>& tensors() const { return m_tensors; }
    const TensorInfo* find_tensor(std::string_view name) const;
    // The tensor's bytes inside the mapping (always in range: checked on open).
    std::span<const std::byte> tensor_data(const TensorInfo& tensor) const;
    // The mapping's bytes moved onto 2 MiB pages, views unchanged (MappedFile::move_to_huge_pages): for
    // a backend that streams the weights from host memory. False with `why_not` for parsed bytes.
    bool move_to_huge_pages(std::string* why_not = nullptr) const;
    bool in_huge_page_memory() const { return m_mapping && m_mapping->in_huge_page_memory(); }

private:
    GgufFile() = default;
    void parse_all();

    std::unique_ptr<MappedFile> m_mapping; // null when parsing caller-owned bytes
    std::span<const std::byte> m_bytes;
    std::string m_name;
    uint32_t m_version = 0;
    uint32_t m_alignment = 32;
    uint64_t m_data_offset = 0;
    std::vector<MetaEntry> m_metadata;
    std::map<std::string, std::size_t, std::less<>> m_meta_index;
    std::vector<TensorInfo> m_tensors;
    std::map<std::string, std::size_t, std::less<>> m_tensor_index;
};

} // namespace engine::gguf
