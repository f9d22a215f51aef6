// SPDX-License-Identifier: GPL-3.0-or-later
// libFuzzer entry point for the GGUF reader and the metadata consumers behind it (tokenizer
// vocabulary, hyperparameters). Any input must end in a parsed file or a typed engine::Error.
#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    try {
        const auto file = engine::gguf::GgufFile::parse({reinterpret_cast<const std::byte*>(data), size}, "fuzz.gguf");
        for (const auto& e : file->metadata())
            (void)e.value.to_display_string();
        try {
            (void)engine::ModelConfig::from_gguf(*file);
        } catch (const engine::Error&) {
        }
        try {
            engine::require_supported_tensor_types(*file);
        } catch (const engine::Error&) {
        }
        try {
            const engine::Tokenizer tokenizer(engine::Vocab::from_gguf(*file));
            const auto ids = tokenizer.encode_ids("Hello <s> wörld 123 🤖", {});
            (void)tokenizer.decode(ids);
        } catch (const engine::Error&) {
        }
    } catch (const engine::Error&) {
    }
    return 0;
}
