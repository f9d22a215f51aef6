// SPDX-License-Identifier: GPL-3.0-or-later
#include "gguf_builder.h"

#include <filesystem>
#include <fstream>

namespace testsupport {

std::vector<uint8_t> GgufBuilder::str(const std::string& s)
{
    std::vector<uint8_t> b = pod<uint64_t>(s.size());
    b.resize(8 + s.size());
    if (!s.empty())
        std::memcpy(b.data() + 8, s.data(), s.size());
    return b;
}

void GgufBuilder::add_raw(const std::string& key, uint32_t type, std::vector<uint8_t> value_bytes)
{
    m_kvs.push_back({key, type, std::move(value_bytes)});
}

void GgufBuilder::add_string_array(const std::string& key, const std::vector<std::string>& items)
{
    std::vector<uint8_t> v = pod<uint32_t>(8);
    auto n = pod<uint64_t>(items.size());
    v.insert(v.end(), n.begin(), n.end());
    for (const auto& s : items) {
        auto e = str(s);
        v.insert(v.end(), e.begin(), e.end());
    }
    add_raw(key, 9, std::move(v));
}

void GgufBuilder::add_f32_array(const std::string& key, const std::vector<float>& items)
{
    add_raw(key, 9, pod_array(6, items));
}

void GgufBuilder::add_i32_array(const std::string& key, const std::vector<int32_t>& items)
{
    add_raw(key, 9, pod_array(5, items));
}

std::vector<uint8_t> GgufBuilder::build(std::map<std::string, std::size_t>* marks) const
{
    std::vector<uint8_t> out;
    auto mark = [&](const std::string& name) {
        if (marks)
            (*marks)[name] = out.size();
    };
    auto put = [&](const std::vector<uint8_t>& b) { out.insert(out.end(), b.begin(), b.end()); };

    mark("magic");
    put(pod(magic));
    mark("version");
    put(pod(version));
    mark("tensor_count");
    put(pod<uint64_t>(m_tensors.size()));
    mark("kv_count");
    put(pod<uint64_t>(m_kvs.size()));
    for (std::size_t i = 0; i < m_kvs.size(); ++i) {
        const std::string p = "kv" + std::to_string(i);
        mark(p);
        put(str(m_kvs[i].key));
        mark(p + ".type");
        put(pod(m_kvs[i].type));
        mark(p + ".value");
        put(m_kvs[i].value);
    }
    // Sequential placement for tensors without an explicit offset.
    std::vector<uint64_t> offsets;
    uint64_t next = 0;
    for (const auto& t : m_tensors) {
        if (t.offset >= 0) {
            offsets.push_back(static_cast<uint64_t>(t.offset));
        } else {
            offsets.push_back(next);
            next += (t.data.size() + alignment - 1) / alignment * alignment;
        }
    }
    for (std::size_t i = 0; i < m_tensors.size(); ++i) {
        const auto& t = m_tensors[i];
        const std::string p = "tensor" + std::to_string(i);
        mark(p);
        put(str(t.name));
        mark(p + ".ndims");
        put(pod<uint32_t>(static_cast<uint32_t>(t.dims.size())));
        mark(p + ".dims");
        for (uint64_t d : t.dims)
            put(pod(d));
        mark(p + ".type");
        put(pod(t.type));
        mark(p + ".offset");
        put(pod(offsets[i]));
    }
    mark("padding");
    while (out.size() % alignment)
        out.push_back(0);
    const std::size_t data_start = out.size();
    mark("data");
    for (std::size_t i = 0; i < m_tensors.size(); ++i) {
        const std::size_t at = data_start + offsets[i];
        if (out.size() < at + m_tensors[i].data.size())
            out.resize(at + m_tensors[i].data.size(), 0);
        if (!m_tensors[i].data.empty())
            std::memcpy(out.data() + at, m_tensors[i].data.data(), m_tensors[i].data.size());
        if (marks)
            (*marks)["tensor" + std::to_string(i) + ".data"] = at;
    }
    mark("end");
    return out;
}

bool write_file(const std::string& path, const std::vector<uint8_t>& bytes)
{
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return static_cast<bool>(f);
}

bool write_gguf_with_long_name(const std::string& path, uint64_t name_length)
{
    GgufBuilder b;
    b.add_string("general.architecture", "llama");
    b.add_string("general.name", "");
    std::map<std::string, std::size_t> marks;
    std::vector<uint8_t> bytes = b.build(&marks);
    // The empty name is the file's last value: its length field is the last 8 bytes before the
    // (empty) tensor data; the name's bytes then run to the end of the file.
    bytes.resize(marks.at("kv1.value") + 8);
    patch<uint64_t>(bytes, marks.at("kv1.value"), name_length);
    if (!write_file(path, bytes))
        return false;
    std::error_code ec;
    std::filesystem::resize_file(path, bytes.size() + name_length, ec);
    return !ec;
}

} // namespace testsupport
