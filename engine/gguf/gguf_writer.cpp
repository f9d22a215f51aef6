// SPDX-License-Identifier: GPL-3.0-or-later
// GGUF layout: shared/reference/gguf.md. Everything is little-endian; like the reader, this
// assumes a little-endian host and copies values with memcpy.
#include "gguf/gguf_writer.h"

#include "util/error.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <spdlog/fmt/fmt.h>
#include <unistd.h>

namespace engine::gguf {

namespace {

constexpr uint32_t kMagic = 0x46554747; // "GGUF" little-endian
constexpr uint32_t kVersion = 3;
constexpr uint32_t kDefaultAlignment = 32;
constexpr std::size_t kMaxNameLength = 63; // ggml: GGML_MAX_NAME (64) including the NUL
constexpr std::size_t kMaxKeyLength = 65535;

template <typename T> void put(std::vector<std::byte>& out, T v)
{
    const auto at = out.size();
    out.resize(at + sizeof(T));
    std::memcpy(out.data() + at, &v, sizeof(T));
}

void put_string(std::vector<std::byte>& out, std::string_view s)
{
    put<uint64_t>(out, s.size());
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    out.insert(out.end(), p, p + s.size());
}

std::vector<std::byte> scalar(ValueType type, const void* value, std::size_t size)
{
    std::vector<std::byte> out(4 + size);
    const auto id = static_cast<uint32_t>(type);
    std::memcpy(out.data(), &id, 4);
    std::memcpy(out.data() + 4, value, size);
    return out;
}

template <typename T> std::vector<std::byte> scalar(ValueType type, T v)
{
    return scalar(type, &v, sizeof(T));
}

// Appends an array's body (element type, count, elements) without the leading ARRAY type id.
void put_array_body(std::vector<std::byte>& out, const MetaArray& a, std::string_view key)
{
    put<uint32_t>(out, static_cast<uint32_t>(a.element_type));
    put<uint64_t>(out, a.count);
    if (a.element_type == ValueType::String) {
        if (a.strings.size() != a.count)
            throw Error(fmt::format("metadata '{}': string array holds {} strings but claims {}", key, a.strings.size(),
                                    a.count));
        for (auto s : a.strings)
            put_string(out, s);
    } else if (a.element_type == ValueType::Array) {
        if (a.arrays.size() != a.count)
            throw Error(fmt::format("metadata '{}': nested array holds {} arrays but claims {}", key, a.arrays.size(),
                                    a.count));
        for (const auto& inner : a.arrays)
            put_array_body(out, inner, key);
    } else {
        if (a.packed.size() != a.count * value_type_size(a.element_type))
            throw Error(fmt::format("metadata '{}': {} bytes do not hold {} elements of type {}", key, a.packed.size(),
                                    a.count, value_type_name(a.element_type)));
        out.insert(out.end(), a.packed.begin(), a.packed.end());
    }
}

uint64_t align_up(uint64_t x, uint64_t a)
{
    return x + (a - x % a) % a;
}

// Writes all of `bytes` to fd; throws IoError naming `path` on failure.
void write_all(int fd, const void* bytes, std::size_t n, const std::filesystem::path& path)
{
    const auto* p = static_cast<const char*>(bytes);
    while (n > 0) {
        const ssize_t w = ::write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            throw IoError(fmt::format("{}: cannot write: {}", path.string(), std::strerror(errno)));
        }
        p += w;
        n -= static_cast<std::size_t>(w);
    }
}

// Owns the temporary file until it is renamed into place; removes it on any failure.
class TempFile {
public:
    explicit TempFile(const std::filesystem::path& target)
    {
        // Same directory as the target so that rename() is atomic (never across file systems).
        static std::atomic<uint64_t> counter{0};
        const auto dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
        for (int attempt = 0; attempt < 100; ++attempt) {
            m_path = dir / fmt::format(".{}.tmp-{}-{}", target.filename().string(), ::getpid(), counter++);
            m_fd = ::open(m_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
            if (m_fd >= 0 || errno != EEXIST)
                break;
        }
        if (m_fd < 0)
            throw IoError(fmt::format("{}: cannot create a temporary file in {}: {}", target.string(), dir.string(),
                                      std::strerror(errno)));
    }
    ~TempFile()
    {
        if (m_fd >= 0)
            ::close(m_fd);
        if (!m_committed)
            ::unlink(m_path.c_str());
    }
    TempFile(const TempFile&) = delete;
    TempFile& operator=(const TempFile&) = delete;

    int fd() const { return m_fd; }
    const std::filesystem::path& path() const { return m_path; }

    void commit(const std::filesystem::path& target)
    {
        if (::fsync(m_fd) != 0)
            throw IoError(fmt::format("{}: cannot flush to disk: {}", m_path.string(), std::strerror(errno)));
        const int rc = ::close(m_fd);
        m_fd = -1;
        if (rc != 0)
            throw IoError(fmt::format("{}: cannot close: {}", m_path.string(), std::strerror(errno)));
        if (::rename(m_path.c_str(), target.c_str()) != 0)
            throw IoError(
                fmt::format("cannot rename {} to {}: {}", m_path.string(), target.string(), std::strerror(errno)));
        m_committed = true;
    }

private:
    std::filesystem::path m_path;
    int m_fd = -1;
    bool m_committed = false;
};

} // namespace

// ---- metadata ------------------------------------------------------------------------------

void GgufWriter::set_encoded(std::string_view key, std::vector<std::byte> encoded)
{
    if (key.empty() || key.size() > kMaxKeyLength)
        throw Error(
            fmt::format("metadata key of {} bytes: keys must be 1 to {} bytes long", key.size(), kMaxKeyLength));
    for (auto& kv : m_kvs) {
        if (kv.key == key) {
            kv.encoded = std::move(encoded);
            return;
        }
    }
    m_kvs.push_back({std::string(key), std::move(encoded)});
}

void GgufWriter::set_u8(std::string_view key, uint8_t v)
{
    set_encoded(key, scalar(ValueType::UInt8, v));
}
void GgufWriter::set_i8(std::string_view key, int8_t v)
{
    set_encoded(key, scalar(ValueType::Int8, v));
}
void GgufWriter::set_u16(std::string_view key, uint16_t v)
{
    set_encoded(key, scalar(ValueType::UInt16, v));
}
void GgufWriter::set_i16(std::string_view key, int16_t v)
{
    set_encoded(key, scalar(ValueType::Int16, v));
}
void GgufWriter::set_u32(std::string_view key, uint32_t v)
{
    set_encoded(key, scalar(ValueType::UInt32, v));
}
void GgufWriter::set_i32(std::string_view key, int32_t v)
{
    set_encoded(key, scalar(ValueType::Int32, v));
}
void GgufWriter::set_u64(std::string_view key, uint64_t v)
{
    set_encoded(key, scalar(ValueType::UInt64, v));
}
void GgufWriter::set_i64(std::string_view key, int64_t v)
{
    set_encoded(key, scalar(ValueType::Int64, v));
}
void GgufWriter::set_f32(std::string_view key, float v)
{
    set_encoded(key, scalar(ValueType::Float32, v));
}
void GgufWriter::set_f64(std::string_view key, double v)
{
    set_encoded(key, scalar(ValueType::Float64, v));
}
void GgufWriter::set_bool(std::string_view key, bool v)
{
    set_encoded(key, scalar(ValueType::Bool, static_cast<uint8_t>(v ? 1 : 0)));
}

void GgufWriter::set_string(std::string_view key, std::string_view v)
{
    std::vector<std::byte> out;
    put<uint32_t>(out, static_cast<uint32_t>(ValueType::String));
    put_string(out, v);
    set_encoded(key, std::move(out));
}

namespace {
template <typename S> std::vector<std::byte> string_array(std::span<const S> items)
{
    std::vector<std::byte> out;
    put<uint32_t>(out, static_cast<uint32_t>(ValueType::Array));
    put<uint32_t>(out, static_cast<uint32_t>(ValueType::String));
    put<uint64_t>(out, items.size());
    for (const auto& s : items)
        put_string(out, s);
    return out;
}
} // namespace

void GgufWriter::set_string_array(std::string_view key, std::span<const std::string> items)
{
    set_encoded(key, string_array(items));
}

void GgufWriter::set_string_array(std::string_view key, std::span<const std::string_view> items)
{
    set_encoded(key, string_array(items));
}

void GgufWriter::set_packed_array(std::string_view key, ValueType element_type, uint64_t count,
                                  std::span<const std::byte> packed)
{
    const std::size_t size = value_type_size(element_type);
    if (size == 0)
        throw Error(fmt::format("metadata '{}': {} arrays need set_string_array or set_value", key,
                                value_type_name(element_type)));
    if (packed.size() != count * size)
        throw Error(fmt::format("metadata '{}': {} bytes do not hold {} elements of type {}", key, packed.size(), count,
                                value_type_name(element_type)));
    std::vector<std::byte> out;
    out.reserve(16 + packed.size());
    put<uint32_t>(out, static_cast<uint32_t>(ValueType::Array));
    put<uint32_t>(out, static_cast<uint32_t>(element_type));
    put<uint64_t>(out, count);
    out.insert(out.end(), packed.begin(), packed.end());
    set_encoded(key, std::move(out));
}

void GgufWriter::set_i32_array(std::string_view key, std::span<const int32_t> items)
{
    set_packed_array(key, ValueType::Int32, items.size(), std::as_bytes(items));
}

void GgufWriter::set_u32_array(std::string_view key, std::span<const uint32_t> items)
{
    set_packed_array(key, ValueType::UInt32, items.size(), std::as_bytes(items));
}

void GgufWriter::set_f32_array(std::string_view key, std::span<const float> items)
{
    set_packed_array(key, ValueType::Float32, items.size(), std::as_bytes(items));
}

void GgufWriter::set_value(std::string_view key, const MetaValue& value)
{
    const auto wrong = [&] {
        return Error(
            fmt::format("metadata '{}': value of type {} holds no such value", key, value_type_name(value.type)));
    };
    // MetaValue widens scalars (u8..u64 → uint64_t, f32 → double); narrow back to the stored type,
    // which is exact because the value was read from that type.
    const auto u = [&]() -> uint64_t {
        if (const auto* v = std::get_if<uint64_t>(&value.data))
            return *v;
        throw wrong();
    };
    const auto i = [&]() -> int64_t {
        if (const auto* v = std::get_if<int64_t>(&value.data))
            return *v;
        throw wrong();
    };
    const auto f = [&]() -> double {
        if (const auto* v = std::get_if<double>(&value.data))
            return *v;
        throw wrong();
    };
    switch (value.type) {
    case ValueType::UInt8:
        set_u8(key, static_cast<uint8_t>(u()));
        return;
    case ValueType::UInt16:
        set_u16(key, static_cast<uint16_t>(u()));
        return;
    case ValueType::UInt32:
        set_u32(key, static_cast<uint32_t>(u()));
        return;
    case ValueType::UInt64:
        set_u64(key, u());
        return;
    case ValueType::Int8:
        set_i8(key, static_cast<int8_t>(i()));
        return;
    case ValueType::Int16:
        set_i16(key, static_cast<int16_t>(i()));
        return;
    case ValueType::Int32:
        set_i32(key, static_cast<int32_t>(i()));
        return;
    case ValueType::Int64:
        set_i64(key, i());
        return;
    case ValueType::Float32:
        set_f32(key, static_cast<float>(f()));
        return;
    case ValueType::Float64:
        set_f64(key, f());
        return;
    case ValueType::Bool: {
        const auto* v = std::get_if<bool>(&value.data);
        if (!v)
            throw wrong();
        set_bool(key, *v);
        return;
    }
    case ValueType::String: {
        const auto* v = std::get_if<std::string_view>(&value.data);
        if (!v)
            throw wrong();
        set_string(key, *v);
        return;
    }
    case ValueType::Array: {
        const auto* a = std::get_if<MetaArray>(&value.data);
        if (!a)
            throw wrong();
        std::vector<std::byte> out;
        put<uint32_t>(out, static_cast<uint32_t>(ValueType::Array));
        put_array_body(out, *a, key);
        set_encoded(key, std::move(out));
        return;
    }
    }
    throw wrong();
}

bool GgufWriter::has(std::string_view key) const
{
    return std::any_of(m_kvs.begin(), m_kvs.end(), [&](const Kv& kv) { return kv.key == key; });
}

bool GgufWriter::remove(std::string_view key)
{
    const auto it = std::find_if(m_kvs.begin(), m_kvs.end(), [&](const Kv& kv) { return kv.key == key; });
    if (it == m_kvs.end())
        return false;
    m_kvs.erase(it);
    return true;
}

uint32_t GgufWriter::alignment() const
{
    for (const auto& kv : m_kvs) {
        if (kv.key != "general.alignment")
            continue;
        uint32_t type = 0, value = 0;
        std::memcpy(&type, kv.encoded.data(), 4);
        if (type != static_cast<uint32_t>(ValueType::UInt32))
            throw Error("metadata 'general.alignment' must be a UINT32 (ggml rejects other types)");
        std::memcpy(&value, kv.encoded.data() + 4, 4);
        if (value == 0 || (value & (value - 1)) != 0)
            throw Error(fmt::format("metadata 'general.alignment' is {}, not a power of two", value));
        return value;
    }
    return kDefaultAlignment;
}

// ---- tensors -------------------------------------------------------------------------------

GgufWriter::Tensor& GgufWriter::new_tensor(std::string_view name, GgmlType type, std::span<const uint64_t> dims)
{
    if (name.empty() || name.size() > kMaxNameLength)
        throw Error(fmt::format("tensor name '{}' has {} bytes; names must be 1 to {} bytes long", name, name.size(),
                                kMaxNameLength));
    if (std::any_of(m_tensors.begin(), m_tensors.end(), [&](const Tensor& t) { return t.name == name; }))
        throw Error(fmt::format("tensor '{}' is added twice", name));
    if (dims.empty() || dims.size() > 4)
        throw Error(fmt::format("tensor '{}' has {} dimensions; GGUF tensors have 1 to 4", name, dims.size()));
    const auto traits = ggml_type_traits(type);
    uint64_t elements = 1;
    for (auto d : dims) {
        if (d == 0)
            throw Error(fmt::format("tensor '{}' has a zero dimension", name));
        elements *= d;
    }
    if (dims[0] % traits.block_elements != 0)
        throw Error(fmt::format("tensor '{}': ne0 = {} is not a multiple of the {} block size {}", name, dims[0],
                                traits.name, traits.block_elements));
    Tensor& t = m_tensors.emplace_back();
    t.name = std::string(name);
    t.type = type;
    t.dims.assign(dims.begin(), dims.end());
    t.n_bytes = ggml_row_bytes(traits, elements);
    return t;
}

void GgufWriter::add_tensor(std::string_view name, GgmlType type, std::span<const uint64_t> dims,
                            std::vector<std::byte> data)
{
    Tensor& t = new_tensor(name, type, dims);
    if (data.size() != t.n_bytes) {
        const auto expected = t.n_bytes;
        m_tensors.pop_back();
        throw Error(
            fmt::format("tensor '{}': {} bytes given, its shape and type need {}", name, data.size(), expected));
    }
    t.data = std::move(data);
}

void GgufWriter::add_tensor(std::string_view name, GgmlType type, std::span<const uint64_t> dims, TensorFill fill)
{
    if (!fill)
        throw Error(fmt::format("tensor '{}': no fill function", name));
    new_tensor(name, type, dims).fill = std::move(fill);
}

// ---- file ----------------------------------------------------------------------------------

std::vector<std::byte> GgufWriter::head(std::vector<uint64_t>& offsets, uint64_t& data_bytes) const
{
    const uint64_t align = alignment();
    // Header, metadata and tensor records are small: build them in memory.
    std::vector<std::byte> head;
    put<uint32_t>(head, kMagic);
    put<uint32_t>(head, kVersion);
    put<uint64_t>(head, m_tensors.size());
    put<uint64_t>(head, m_kvs.size());
    for (const auto& kv : m_kvs) {
        put_string(head, kv.key);
        head.insert(head.end(), kv.encoded.begin(), kv.encoded.end());
    }
    uint64_t offset = 0;
    offsets.clear();
    for (const auto& t : m_tensors) {
        put_string(head, t.name);
        put<uint32_t>(head, static_cast<uint32_t>(t.dims.size()));
        for (auto d : t.dims)
            put<uint64_t>(head, d);
        put<uint32_t>(head, static_cast<uint32_t>(t.type));
        put<uint64_t>(head, offset);
        offsets.push_back(offset);
        offset = align_up(offset + t.n_bytes, align);
    }
    // ggml seeks to the aligned data start only when there are tensors; padding a tensor-less
    // file is harmless either way, but keep it minimal.
    if (!m_tensors.empty())
        head.resize(align_up(head.size(), align), std::byte{0});
    data_bytes = offset;
    return head;
}

uint64_t GgufWriter::byte_size() const
{
    std::vector<uint64_t> offsets;
    uint64_t data_bytes = 0;
    return head(offsets, data_bytes).size() + data_bytes;
}

namespace {

// Calls `sink` with the tensors' bytes and padding in file order.
template <typename Tensors, typename Sink>
void emit_data(const Tensors& tensors, const std::vector<uint64_t>& offsets, uint64_t end, Sink sink)
{
    std::vector<std::byte> buffer;
    const std::byte zeros[256] = {};
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        const auto& t = tensors[i];
        std::span<const std::byte> bytes;
        if (t.fill) {
            buffer.assign(t.n_bytes, std::byte{0});
            t.fill(buffer);
            bytes = buffer;
        } else {
            bytes = t.data;
        }
        sink(bytes.data(), bytes.size());
        // Pad up to the next tensor's offset; the last one too, as ggml and gguf-py do (ggml's
        // reader, when it loads the data section, expects every tensor padded).
        const uint64_t next = i + 1 < tensors.size() ? offsets[i + 1] : end;
        for (uint64_t pad = next - offsets[i] - t.n_bytes; pad > 0;) {
            const auto n = std::min<uint64_t>(pad, sizeof(zeros));
            sink(zeros, n);
            pad -= n;
        }
    }
}

} // namespace

void GgufWriter::write(const std::filesystem::path& path) const
{
    std::vector<uint64_t> offsets;
    uint64_t data_bytes = 0;
    const std::vector<std::byte> header = head(offsets, data_bytes);
    TempFile tmp(path);
    write_all(tmp.fd(), header.data(), header.size(), tmp.path());
    emit_data(m_tensors, offsets, data_bytes,
              [&](const std::byte* p, std::size_t n) { write_all(tmp.fd(), p, n, tmp.path()); });
    tmp.commit(path);
}

std::vector<std::byte> GgufWriter::serialize() const
{
    std::vector<uint64_t> offsets;
    uint64_t data_bytes = 0;
    std::vector<std::byte> out = head(offsets, data_bytes);
    out.reserve(out.size() + data_bytes);
    emit_data(m_tensors, offsets, data_bytes,
              [&](const std::byte* p, std::size_t n) { out.insert(out.end(), p, p + n); });
    return out;
}

} // namespace engine::gguf
