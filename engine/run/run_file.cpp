// SPDX-License-Identifier: GPL-3.0-or-later
#include "run/run_file.h"

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "tokenizer/vocab.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/fp16.h"
#include "util/sha256.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <spdlog/fmt/fmt.h>

namespace engine::run {

namespace {

constexpr std::string_view kChecksumKey = "tokenscope.run.checksum";
const std::string kChecksumPlaceholder(64, '0');

uint64_t element_count(const RunArray& a)
{
    uint64_t n = 1;
    for (auto d : a.dims)
        n *= d;
    return a.dims.empty() ? 0 : n;
}

gguf::GgufWriter build(const RunContents& run, const gguf::GgufFile* model_file)
{
    if (!nlohmann::json::accept(run.document))
        throw Error("the run's document is not valid JSON");
    if (run.document.size() > kMaxDocumentBytes)
        throw Error(fmt::format("the run's document takes {:.1f} MiB, more than the {} MiB a saved run holds (a "
                                "shorter text analysis or fewer steps fit)",
                                double(run.document.size()) / 1048576.0, kMaxDocumentBytes >> 20));
    gguf::GgufWriter w;
    w.set_string("general.type", kFileType);
    w.set_u32("tokenscope.run.format", kFormatVersion);
    w.set_string("tokenscope.run.writer", run.writer);
    w.set_string("tokenscope.run.model.name", run.model.name);
    w.set_string("tokenscope.run.model.architecture", run.model.architecture);
    w.set_string("tokenscope.run.model.sha256", run.model.sha256);
    w.set_u64("tokenscope.run.model.file_size", run.model.file_size);
    w.set_string("tokenscope.run.document", run.document);
    if (model_file)
        for (const auto& e : model_file->metadata())
            if (e.key.starts_with("tokenizer."))
                w.set_value(e.key, e.value);
    for (const RunArray& a : run.arrays) {
        const uint64_t n = element_count(a);
        if (a.dims.empty() || a.dims.size() > 4 || n != a.values.size())
            throw Error(fmt::format("run array '{}' has {} values for a shape of {} dimensions", a.name,
                                    a.values.size(), a.dims.size()));
        // GGUF lists ne0 (the contiguous dimension) first.
        std::vector<uint64_t> ne(a.dims.rbegin(), a.dims.rend());
        std::vector<std::byte> bytes(n * (a.f16 ? 2 : 4));
        if (a.f16) {
            for (uint64_t i = 0; i < n; ++i) {
                const uint16_t h = f32_to_fp16(a.values[i]);
                std::memcpy(bytes.data() + 2 * i, &h, 2);
            }
        } else {
            std::memcpy(bytes.data(), a.values.data(), bytes.size());
        }
        w.add_tensor(a.name, a.f16 ? GgmlType::F16 : GgmlType::F32, ne, std::move(bytes));
    }
    w.set_string(kChecksumKey, kChecksumPlaceholder); // last: easy to find, patched after hashing
    return w;
}

// The checksum value's bytes in a serialized run: the key's last occurrence followed by the
// string type and a length of 64.
std::size_t find_checksum(std::span<const std::byte> bytes)
{
    const auto* begin = reinterpret_cast<const char*>(bytes.data());
    const std::string_view all(begin, bytes.size());
    const std::size_t key = all.rfind(kChecksumKey);
    if (key == std::string_view::npos)
        throw Error("the run's checksum field is missing from its own serialization");
    return key + kChecksumKey.size() + 4 + 8;
}

std::string checksum_with_placeholder(std::span<const std::byte> bytes, std::size_t value_at)
{
    Sha256 h;
    h.update(bytes.first(value_at));
    h.update(std::as_bytes(std::span(kChecksumPlaceholder.data(), kChecksumPlaceholder.size())));
    h.update(bytes.subspan(value_at + kChecksumPlaceholder.size()));
    return h.hex();
}

std::string text_of(const gguf::GgufFile& f, std::string_view key)
{
    const auto v = f.get_string(key);
    return v ? std::string(*v) : std::string();
}

// The checks and the contents common to a run read from a file or from bytes.
OpenedRun opened_from(std::shared_ptr<const gguf::GgufFile> file, const std::string& name)
{
    const auto type = file->get_string("general.type");
    if (!type || *type != kFileType)
        throw FormatError(
            fmt::format("{} is not a saved Tokenscope run{}", name,
                        file->find("general.architecture") ? " (it is a model: open it with File → Open model)" : ""));
    const auto format = file->get_int("tokenscope.run.format");
    if (!format)
        throw FormatError(fmt::format("{} is damaged: it has no format version", name));
    const std::string writer = text_of(*file, "tokenscope.run.writer");
    if (*format > int64_t(kFormatVersion))
        throw FormatError(fmt::format("{} was saved by a newer Tokenscope ({}) in run format {}; this version reads "
                                      "formats {} to {}: update Tokenscope to open it",
                                      name, writer.empty() ? "unknown version" : writer, *format, kOldestReadableFormat,
                                      kFormatVersion));
    if (*format < int64_t(kOldestReadableFormat))
        throw FormatError(fmt::format("{} was saved by an older Tokenscope ({}) in run format {}, which this version "
                                      "no longer reads (formats {} to {})",
                                      name, writer.empty() ? "unknown version" : writer, *format, kOldestReadableFormat,
                                      kFormatVersion));
    const auto stored = file->get_string(kChecksumKey);
    if (!stored || stored->size() != kChecksumPlaceholder.size())
        throw FormatError(fmt::format("{} is damaged: its checksum is missing", name));
    const auto all = file->bytes();
    const auto at = std::size_t(reinterpret_cast<const std::byte*>(stored->data()) - all.data());
    if (checksum_with_placeholder(all, at) != *stored)
        throw FormatError(fmt::format("{} is damaged: its contents do not match the checksum saved with it (the file "
                                      "was changed or cut short after it was saved)",
                                      name));

    OpenedRun out;
    out.format = uint32_t(*format);
    out.file_size = file->file_size();
    RunContents& c = out.contents;
    c.writer = writer;
    c.model.name = text_of(*file, "tokenscope.run.model.name");
    c.model.architecture = text_of(*file, "tokenscope.run.model.architecture");
    c.model.sha256 = text_of(*file, "tokenscope.run.model.sha256");
    c.model.file_size = uint64_t(file->get_int("tokenscope.run.model.file_size").value_or(0));
    c.document = text_of(*file, "tokenscope.run.document"); // parsed, with its errors, by parse_document()
    for (const auto& t : file->tensors()) {
        if (t.type.type != GgmlType::F16 && t.type.type != GgmlType::F32)
            throw FormatError(
                fmt::format("{} is damaged: array '{}' is {}, not F16 or F32", name, t.name, t.type.name));
        RunArray a;
        a.name = t.name;
        a.f16 = t.type.type == GgmlType::F16;
        for (uint32_t d = t.n_dims; d-- > 0;)
            a.dims.push_back(t.ne[d]);
        const auto bytes = file->tensor_data(t);
        a.values.resize(t.n_elements());
        for (uint64_t i = 0; i < t.n_elements(); ++i) {
            if (a.f16) {
                uint16_t h = 0;
                std::memcpy(&h, bytes.data() + 2 * i, 2);
                a.values[i] = fp16_to_f32(h);
            } else {
                std::memcpy(&a.values[i], bytes.data() + 4 * i, 4);
            }
        }
        c.arrays.push_back(std::move(a));
    }
    if (file->find("tokenizer.ggml.tokens")) {
        try {
            out.tokenizer = std::make_shared<const Tokenizer>(Vocab::from_gguf(*file));
        } catch (const Error& e) {
            throw FormatError(fmt::format("{}: the saved vocabulary cannot be read ({})", name, e.what()));
        }
    }
    out.file = std::move(file);
    return out;
}

} // namespace

const RunArray* RunContents::find(std::string_view name) const
{
    for (const auto& a : arrays)
        if (a.name == name)
            return &a;
    return nullptr;
}

uint64_t run_file_size(const RunContents& run, const gguf::GgufFile* model_file)
{
    return build(run, model_file).byte_size();
}

std::vector<std::byte> run_file_bytes(const RunContents& run, const gguf::GgufFile* model_file)
{
    std::vector<std::byte> bytes = build(run, model_file).serialize();
    const std::size_t at = find_checksum(bytes);
    const std::string sum = checksum_with_placeholder(bytes, at);
    std::memcpy(bytes.data() + at, sum.data(), sum.size());
    return bytes;
}

void write_run_file(const std::filesystem::path& path, const RunContents& run, const gguf::GgufFile* model_file)
{
    const std::vector<std::byte> bytes = run_file_bytes(run, model_file);
    write_file_atomically(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

OpenedRun read_run_file(const std::filesystem::path& path)
{
    const std::string name = path.filename().string();
    std::shared_ptr<const gguf::GgufFile> file;
    try {
        file = gguf::GgufFile::open(path);
    } catch (const IoError&) {
        throw;
    } catch (const Error& e) {
        throw FormatError(
            fmt::format("{} is damaged or truncated and cannot be opened as a saved run ({})", name, e.what()));
    }
    return opened_from(std::move(file), name);
}

OpenedRun read_run_bytes(std::span<const std::byte> bytes, const std::string& name)
{
    std::shared_ptr<const gguf::GgufFile> file;
    try {
        file = gguf::GgufFile::parse(bytes, name);
    } catch (const Error& e) {
        throw FormatError(
            fmt::format("{} is damaged or truncated and cannot be opened as a saved run ({})", name, e.what()));
    }
    return opened_from(std::move(file), name);
}

} // namespace engine::run
