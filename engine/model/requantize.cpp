// SPDX-License-Identifier: GPL-3.0-or-later
#include "model/requantize.h"

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "quant/dequant.h"
#include "quant/quantize.h"
#include "util/error.h"

#include <cstring>
#include <spdlog/fmt/fmt.h>

namespace engine {

namespace {

// llama.cpp's llama_ftype for the whole file.
int32_t file_type_of(GgmlType type)
{
    return type == GgmlType::Q8_0 ? 7 : 2; // LLAMA_FTYPE_MOSTLY_Q8_0, LLAMA_FTYPE_MOSTLY_Q4_0
}

} // namespace

RequantizeReport requantize_model(const std::filesystem::path& in, const std::filesystem::path& out, GgmlType type,
                                  const std::function<void(uint32_t, uint32_t)>& progress)
{
    if (!can_quantize_to(type))
        throw UnsupportedError("requantizing writes Q8_0 or Q4_0");
    std::error_code ec;
    if (std::filesystem::equivalent(in, out, ec))
        throw Error("the output would overwrite the model being read: choose another file name");
    const auto file = gguf::GgufFile::open(in);
    gguf::GgufWriter w;
    for (const auto& e : file->metadata())
        w.set_value(e.key, e.value);
    w.set_u32("general.file_type", uint32_t(file_type_of(type)));
    RequantizeReport report;
    const GgmlTypeTraits target = ggml_type_traits(type);
    const auto total = uint32_t(file->tensors().size());
    uint32_t done = 0;
    for (const auto& t : file->tensors()) {
        std::vector<uint64_t> dims(t.ne.begin(), t.ne.begin() + t.n_dims);
        report.bytes_before += t.n_bytes;
        const bool matrix = t.n_dims >= 2 && t.ne[0] % 32 == 0 && t.type.type != type;
        if (!matrix) {
            const auto bytes = file->tensor_data(t);
            w.add_tensor(t.name, t.type.type, dims, std::vector<std::byte>(bytes.begin(), bytes.end()));
            report.bytes_after += t.n_bytes;
            ++report.tensors_kept;
        } else {
            const uint64_t cols = t.ne[0], rows = t.n_rows();
            const uint64_t in_row = t.n_bytes / rows, out_row = cols / target.block_elements * target.block_bytes;
            const std::span<const std::byte> src = file->tensor_data(t);
            const std::string name = t.name;
            const GgmlType from = t.type.type;
            // filled at write time, row by row: the model is never held twice
            w.add_tensor(t.name, type, dims,
                         [src, cols, rows, in_row, out_row, from, type, name](std::span<std::byte> o) {
                             std::vector<float> row(cols);
                             for (uint64_t r = 0; r < rows; ++r) {
                                 dequantize_row(from, src.data() + r * in_row, row.data(), int64_t(cols), name);
                                 quantize_row(type, row.data(), o.data() + r * out_row, int64_t(cols));
                             }
                         });
            report.bytes_after += rows * out_row;
            ++report.tensors_requantized;
        }
        if (progress)
            progress(++done, total);
    }
    // the source must stay mapped while the writer fills the tensors
    w.write(out);
    return report;
}

} // namespace engine
