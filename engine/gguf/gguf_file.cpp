// SPDX-License-Identifier: GPL-3.0-or-later
// GGUF layout: shared/reference/gguf.md. The parser never trusts a count or length: each is checked
// against the bytes that remain before a loop runs or memory is reserved.
#include "gguf/gguf_file.h"

#include "util/error.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <spdlog/fmt/fmt.h>

namespace engine::gguf {

namespace {

constexpr uint32_t kMagic = 0x46554747; // "GGUF" little-endian
constexpr uint64_t kMaxNameLength = 63; // ggml: GGML_MAX_NAME (64) including the NUL
constexpr uint32_t kMaxDims = 4;
constexpr int kMaxArrayDepth = 8; // nesting deeper than this is hostile, not a model
constexpr uint64_t kMaxKeyLength = 65535;
// A single metadata string (a name, a chat template, one token) longer than this is hostile, not a
// model: chat templates run to tens of KiB. Refused before anything copies it.
constexpr uint64_t kMaxStringValue = 16ull << 20;

// Bounds-checked little-endian reader over the mapped file.
class Cursor {
public:
    Cursor(std::span<const std::byte> bytes, const std::string& name) : m_bytes(bytes), m_name(name) {}

    uint64_t offset() const { return m_pos; }
    uint64_t remaining() const { return m_bytes.size() - m_pos; }

    [[noreturn]] void fail(uint64_t at, const std::string& what) const
    {
        throw FormatError(fmt::format("{}: offset {}: {}", m_name, at, what));
    }

    void need(uint64_t n, std::string_view what) const
    {
        if (n > remaining())
            fail(m_pos, fmt::format("file is truncated: {} needs {} bytes but only {} remain", what, n, remaining()));
    }

    template <typename T> T read(std::string_view what)
    {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, m_bytes.data() + m_pos, sizeof(T));
        m_pos += sizeof(T);
        return v;
    }

    std::span<const std::byte> take(uint64_t n, std::string_view what)
    {
        need(n, what);
        auto s = m_bytes.subspan(m_pos, n);
        m_pos += n;
        return s;
    }

    std::string_view read_string(std::string_view what, uint64_t max_length = std::numeric_limits<uint64_t>::max())
    {
        const uint64_t at = m_pos;
        const auto len = read<uint64_t>(what);
        if (len > max_length)
            fail(at, fmt::format("{} has length {}, more than the limit of {}", what, len, max_length));
        need(len, what);
        auto s = take(len, what);
        return {reinterpret_cast<const char*>(s.data()), s.size()};
    }

private:
    std::span<const std::byte> m_bytes;
    const std::string& m_name;
    uint64_t m_pos = 0;
};

bool valid_value_type(uint32_t t)
{
    return t <= static_cast<uint32_t>(ValueType::Float64);
}

// Smallest number of bytes one element of this type can occupy (strings: the u64 length;
// arrays: element type + count), so that a count can be checked before anything is allocated.
uint64_t min_element_bytes(ValueType t)
{
    if (t == ValueType::String)
        return 8;
    if (t == ValueType::Array)
        return 12;
    return value_type_size(t);
}

MetaArray read_array(Cursor& in, const std::string& key, int depth);

MetaValue read_scalar(Cursor& in, ValueType type, const std::string& key)
{
    MetaValue v;
    v.type = type;
    const uint64_t at = in.offset();
    switch (type) {
    case ValueType::UInt8:
        v.data = uint64_t{in.read<uint8_t>(key)};
        break;
    case ValueType::UInt16:
        v.data = uint64_t{in.read<uint16_t>(key)};
        break;
    case ValueType::UInt32:
        v.data = uint64_t{in.read<uint32_t>(key)};
        break;
    case ValueType::UInt64:
        v.data = in.read<uint64_t>(key);
        break;
    case ValueType::Int8:
        v.data = int64_t{in.read<int8_t>(key)};
        break;
    case ValueType::Int16:
        v.data = int64_t{in.read<int16_t>(key)};
        break;
    case ValueType::Int32:
        v.data = int64_t{in.read<int32_t>(key)};
        break;
    case ValueType::Int64:
        v.data = in.read<int64_t>(key);
        break;
    case ValueType::Float32:
        v.data = double{in.read<float>(key)};
        break;
    case ValueType::Float64:
        v.data = in.read<double>(key);
        break;
    case ValueType::Bool: {
        const auto b = in.read<uint8_t>(key);
        if (b > 1)
            in.fail(at, fmt::format("metadata '{}' is a bool with invalid value {}", key, b));
        v.data = b == 1;
        break;
    }
    case ValueType::String:
        v.data = in.read_string(fmt::format("string value of '{}'", key), kMaxStringValue);
        break;
    case ValueType::Array:
        v.data = read_array(in, key, 0);
        break;
    }
    return v;
}

MetaArray read_array(Cursor& in, const std::string& key, int depth)
{
    const uint64_t at = in.offset();
    if (depth >= kMaxArrayDepth)
        in.fail(at, fmt::format("metadata '{}' nests arrays deeper than {} levels", key, kMaxArrayDepth));
    const auto raw_type = in.read<uint32_t>("array element type");
    if (!valid_value_type(raw_type))
        in.fail(at, fmt::format("metadata '{}' is an array of unknown value type {}", key, raw_type));
    MetaArray a;
    a.element_type = static_cast<ValueType>(raw_type);
    const uint64_t count_at = in.offset();
    a.count = in.read<uint64_t>("array length");
    const uint64_t min_bytes = min_element_bytes(a.element_type);
    if (a.count > in.remaining() / min_bytes)
        in.fail(count_at, fmt::format("metadata '{}' claims {} array elements of type {}, more than the {} "
                                      "bytes left in the file can hold",
                                      key, a.count, value_type_name(a.element_type), in.remaining()));
    if (a.element_type == ValueType::String) {
        a.strings.reserve(a.count);
        for (uint64_t i = 0; i < a.count; ++i)
            a.strings.push_back(in.read_string(fmt::format("element {} of '{}'", i, key), kMaxStringValue));
    } else if (a.element_type == ValueType::Array) {
        a.arrays.reserve(a.count);
        for (uint64_t i = 0; i < a.count; ++i)
            a.arrays.push_back(read_array(in, key, depth + 1));
    } else {
        a.packed = in.take(a.count * min_bytes, fmt::format("elements of '{}'", key));
        if (a.element_type == ValueType::Bool) {
            for (uint64_t i = 0; i < a.count; ++i)
                if (static_cast<uint8_t>(a.packed[i]) > 1)
                    in.fail(count_at + 8 + i, fmt::format("metadata '{}' holds an invalid bool", key));
        }
    }
    return a;
}

} // namespace

std::string TensorInfo::shape_string() const
{
    std::string s;
    for (uint32_t i = 0; i < std::max<uint32_t>(n_dims, 1); ++i)
        s += (i ? " × " : "") + std::to_string(ne[i]);
    return s;
}

std::shared_ptr<const GgufFile> GgufFile::open(const std::filesystem::path& path)
{
    auto file = std::shared_ptr<GgufFile>(new GgufFile());
    file->m_mapping = std::make_unique<MappedFile>(path);
    file->m_bytes = file->m_mapping->bytes();
    file->m_name = path.string();
    file->parse_all();
    return file;
}

std::shared_ptr<const GgufFile> GgufFile::parse(std::span<const std::byte> bytes, std::string name)
{
    auto file = std::shared_ptr<GgufFile>(new GgufFile());
    file->m_bytes = bytes;
    file->m_name = std::move(name);
    file->parse_all();
    return file;
}

void GgufFile::parse_all()
{
    Cursor in(m_bytes, m_name);

    // ---- header -------------------------------------------------------------------------------
    if (m_bytes.size() < 4)
        in.fail(0, fmt::format("not a GGUF file: it is only {} bytes long", m_bytes.size()));
    const auto magic = in.read<uint32_t>("magic");
    if (magic != kMagic)
        in.fail(0, "not a GGUF file: the magic bytes are not 'GGUF'");
    m_version = in.read<uint32_t>("version");
    if ((m_version & 0xFFFF) == 0 && m_version != 0)
        in.fail(4, "the file is a big-endian (byte-swapped) GGUF, which is not supported");
    if (m_version == 1)
        in.fail(4, "GGUF version 1 is no longer supported; convert the model to version 3");
    if (m_version != 2 && m_version != 3)
        in.fail(4, fmt::format("unsupported GGUF version {} (versions 2 and 3 are supported)", m_version));
    const uint64_t tensor_count_at = in.offset();
    const auto tensor_count = in.read<uint64_t>("tensor count");
    const uint64_t kv_count_at = in.offset();
    const auto kv_count = in.read<uint64_t>("metadata count");
    // Smallest possible records: key (8) + type (4) + 1 byte value; name (8) + dims (4) + 1 dim + type + offset.
    if (kv_count > in.remaining() / 13)
        in.fail(kv_count_at,
                fmt::format("metadata count {} is larger than the file could hold: file is truncated or corrupt",
                            kv_count));
    if (tensor_count > in.remaining() / 32)
        in.fail(tensor_count_at,
                fmt::format("tensor count {} is larger than the file could hold: file is truncated or corrupt",
                            tensor_count));

    // ---- metadata -----------------------------------------------------------------------------
    m_metadata.reserve(kv_count);
    for (uint64_t i = 0; i < kv_count; ++i) {
        const uint64_t at = in.offset();
        const std::string key(in.read_string(fmt::format("key of metadata entry {}", i), kMaxKeyLength));
        if (key.empty())
            in.fail(at, fmt::format("metadata entry {} has an empty key", i));
        if (m_meta_index.contains(key))
            in.fail(at, fmt::format("metadata key '{}' appears twice", key));
        const uint64_t type_at = in.offset();
        const auto raw_type = in.read<uint32_t>(fmt::format("value type of '{}'", key));
        if (!valid_value_type(raw_type))
            in.fail(type_at, fmt::format("metadata '{}' has unknown value type {}", key, raw_type));
        MetaValue value = read_scalar(in, static_cast<ValueType>(raw_type), key);
        m_meta_index.emplace(key, m_metadata.size());
        m_metadata.push_back({key, std::move(value)});
    }

    if (const MetaValue* a = find("general.alignment")) {
        const auto v = a->as_int();
        if (a->type != ValueType::UInt32 || !v || *v == 0 || (*v & (*v - 1)) != 0)
            in.fail(0, fmt::format("general.alignment must be a u32 power of two, found {} {}",
                                   value_type_name(a->type), a->to_display_string()));
        m_alignment = static_cast<uint32_t>(*v);
    }

    // ---- tensor infos -------------------------------------------------------------------------
    m_tensors.reserve(tensor_count);
    for (uint64_t i = 0; i < tensor_count; ++i) {
        TensorInfo t{.name = {}, .type = ggml_type_traits(GgmlType::F32)};
        t.record_offset = in.offset();
        t.name = std::string(in.read_string(fmt::format("name of tensor {}", i), kMaxNameLength));
        if (t.name.empty())
            in.fail(t.record_offset, fmt::format("tensor {} has an empty name", i));
        if (m_tensor_index.contains(t.name))
            in.fail(t.record_offset, fmt::format("tensor name '{}' appears twice", t.name));
        const uint64_t dims_at = in.offset();
        t.n_dims = in.read<uint32_t>("dimension count");
        if (t.n_dims > kMaxDims)
            in.fail(dims_at,
                    fmt::format("tensor '{}' has {} dimensions (at most {} allowed)", t.name, t.n_dims, kMaxDims));
        uint64_t elements = 1;
        for (uint32_t d = 0; d < t.n_dims; ++d) {
            const uint64_t at = in.offset();
            t.ne[d] = in.read<uint64_t>("tensor dimension");
            if (t.ne[d] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
                (t.ne[d] != 0 && elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / t.ne[d]))
                in.fail(at, fmt::format("tensor '{}' has an absurd shape (dimension {} is {})", t.name, d, t.ne[d]));
            elements *= t.ne[d];
        }
        const uint64_t type_at = in.offset();
        const auto type_id = in.read<uint32_t>("tensor type");
        const auto traits = ggml_type_traits(type_id);
        if (!traits)
            in.fail(type_at, fmt::format("tensor '{}' has unknown type id {}", t.name, type_id));
        t.type = *traits;
        if (t.ne[0] % t.type.block_elements != 0)
            in.fail(dims_at, fmt::format("tensor '{}': row length {} is not a multiple of the {} block size {}", t.name,
                                         t.ne[0], t.type.name, t.type.block_elements));
        const uint64_t offset_at = in.offset();
        t.offset = in.read<uint64_t>("tensor data offset");
        if (t.offset % m_alignment != 0)
            in.fail(offset_at, fmt::format("tensor '{}' data offset {} is not a multiple of the alignment {}", t.name,
                                           t.offset, m_alignment));
        const uint64_t blocks = elements / t.type.block_elements;
        if (blocks > std::numeric_limits<uint64_t>::max() / t.type.block_bytes)
            in.fail(dims_at, fmt::format("tensor '{}' is absurdly large", t.name));
        t.n_bytes = blocks * t.type.block_bytes;
        m_tensor_index.emplace(t.name, m_tensors.size());
        m_tensors.push_back(std::move(t));
    }

    // ---- data section -------------------------------------------------------------------------
    const uint64_t end_of_infos = in.offset();
    m_data_offset = end_of_infos + (m_alignment - end_of_infos % m_alignment) % m_alignment;
    if (!m_tensors.empty() && m_data_offset > m_bytes.size())
        in.fail(end_of_infos, fmt::format("file is truncated: the data section should start at offset {} "
                                          "but the file is {} bytes long",
                                          m_data_offset, m_bytes.size()));
    const uint64_t data_size = m_tensors.empty() ? 0 : m_bytes.size() - m_data_offset;
    for (const auto& t : m_tensors) {
        if (t.offset > data_size || t.n_bytes > data_size - t.offset)
            in.fail(m_data_offset + std::min(t.offset, data_size),
                    fmt::format("tensor '{}' ({} bytes at data offset {}) extends past the end of the file "
                                "(data section is {} bytes): file is truncated or corrupt",
                                t.name, t.n_bytes, t.offset, data_size));
    }
    std::vector<const TensorInfo*> by_offset;
    by_offset.reserve(m_tensors.size());
    for (const auto& t : m_tensors)
        if (t.n_bytes > 0)
            by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
    for (std::size_t i = 1; i < by_offset.size(); ++i) {
        const TensorInfo* prev = by_offset[i - 1];
        const TensorInfo* cur = by_offset[i];
        if (cur->offset < prev->offset + prev->n_bytes)
            in.fail(m_data_offset + cur->offset,
                    fmt::format("tensor '{}' data overlaps tensor '{}'", cur->name, prev->name));
    }
}

const MetaValue* GgufFile::find(std::string_view key) const
{
    auto it = m_meta_index.find(key);
    return it == m_meta_index.end() ? nullptr : &m_metadata[it->second].value;
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const
{
    const MetaValue* v = find(key);
    return v ? v->as_int() : std::nullopt;
}

std::optional<double> GgufFile::get_float(std::string_view key) const
{
    const MetaValue* v = find(key);
    return v ? v->as_float() : std::nullopt;
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const
{
    const MetaValue* v = find(key);
    return v ? v->as_bool() : std::nullopt;
}

std::optional<std::string_view> GgufFile::get_string(std::string_view key) const
{
    const MetaValue* v = find(key);
    return v ? v->as_string() : std::nullopt;
}

const MetaArray* GgufFile::get_array(std::string_view key) const
{
    const MetaValue* v = find(key);
    return v ? v->as_array() : nullptr;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const
{
    auto it = m_tensor_index.find(name);
    return it == m_tensor_index.end() ? nullptr : &m_tensors[it->second];
}

bool GgufFile::move_to_huge_pages(std::string* why_not) const
{
    if (m_mapping)
        return m_mapping->move_to_huge_pages(why_not);
    if (why_not)
        *why_not = "the bytes were not mapped from a file";
    return false;
}

std::span<const std::byte> GgufFile::tensor_data(const TensorInfo& tensor) const
{
    return m_bytes.subspan(m_data_offset + tensor.offset, tensor.n_bytes);
}

} // namespace engine::gguf
