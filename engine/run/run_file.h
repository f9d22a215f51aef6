// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// A saved run ("*.tsrun"): one GGUF v3 file that holds what the panels showed, so that it reopens
// without the model. Its parts (README: "Saved runs"):
//   - general.type = "tokenscope-run" and tokenscope.run.format (the version of this layout);
//   - the model's identity (name, architecture, file size, SHA-256 of the model file);
//   - tokenscope.run.document: a JSON document with every panel's content (the schema is the
//     README's), where bulk numbers name one of the file's tensors instead of being inline;
//   - tensors: attention weights and q/k/v as F16 (only what was recorded), the stepper's last
//     logits as F32;
//   - the model's tokenizer.* keys, so that tokens can be named and re-tokenized;
//   - tokenscope.run.checksum: SHA-256 of the whole file with this value's 64 characters read as
//     '0', so that a truncated, damaged or edited file is refused with a clear message.
// No Qt: the CLI's `trace` writes the same files.

#include "tokenizer/tokenizer.h"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace engine::gguf {
class GgufFile;
}

namespace engine::run {

inline constexpr uint32_t kFormatVersion = 1;        // written by this version
inline constexpr uint32_t kOldestReadableFormat = 1; // the oldest this version opens
inline constexpr std::string_view kFileType = "tokenscope-run";
inline constexpr std::string_view kExtension = ".tsrun";
// The longest document a run holds: the GGUF reader's limit on one string value.
inline constexpr std::size_t kMaxDocumentBytes = std::size_t(16) << 20;

struct ModelIdentity {
    std::string name; // the model file's name
    std::string architecture;
    std::string sha256; // of the model file, lowercase hex
    uint64_t file_size = 0;
};

// Numbers kept as a tensor (row-major, dims outermost first as the document reads them).
struct RunArray {
    std::string name;
    bool f16 = false; // stored as F16: values read back are the F16 roundings
    std::vector<uint64_t> dims;
    std::vector<float> values;
};

struct RunContents {
    ModelIdentity model;
    std::string writer;   // e.g. "Tokenscope 0.1.0 (tokenscope-cli trace)"
    std::string document; // JSON text
    std::vector<RunArray> arrays;
    const RunArray* find(std::string_view name) const;
};

// The exact size write_run_file() will produce (the panels show it before saving). `model_file`
// (may be null) gives the tokenizer keys copied into the run.
uint64_t run_file_size(const RunContents& run, const gguf::GgufFile* model_file);

// Writes atomically (a failed write leaves an older file as it was). Throws Error for contents that
// cannot be stored (an array whose size does not match its dims, a document that is not JSON) and
// IoError for the disk.
void write_run_file(const std::filesystem::path& path, const RunContents& run, const gguf::GgufFile* model_file);

struct OpenedRun {
    RunContents contents;
    uint32_t format = 0;
    uint64_t file_size = 0;
    // The saved vocabulary, or null when the run was written without one (tokens then show by id).
    std::shared_ptr<const Tokenizer> tokenizer;
    // The run file itself (its tokenizer keys, to copy when the run is saved again).
    std::shared_ptr<const gguf::GgufFile> file;
};

// The file's bytes, signed, as write_run_file() stores them.
std::vector<std::byte> run_file_bytes(const RunContents& run, const gguf::GgufFile* model_file);

// Throws FormatError with a message that names the file and what is wrong: not a run, written by a
// newer or an older version (both numbers), truncated or damaged (checksum), a broken document.
OpenedRun read_run_file(const std::filesystem::path& path);
// The same from bytes in memory (the fuzzer's entry point; the bytes must outlive the result).
OpenedRun read_run_bytes(std::span<const std::byte> bytes, const std::string& name);

} // namespace engine::run
