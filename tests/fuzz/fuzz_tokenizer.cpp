// SPDX-License-Identifier: GPL-3.0-or-later
// The tokenizers on arbitrary bytes (invalid UTF-8, control-token strings, huge runs): a byte-level
// BPE vocabulary and a SentencePiece one from tests/data, with special-token parsing on and off,
// then decode. Every input must end in tokens whose byte spans tile the text, or a typed Error.
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

#include <cstddef>
#include <cstdint>
#include <memory>

namespace {
const engine::Tokenizer& tokenizer(int which)
{
    static const std::unique_ptr<engine::Tokenizer> bpe = std::make_unique<engine::Tokenizer>(
        engine::Vocab::from_gguf(*engine::gguf::GgufFile::open(TOKENSCOPE_TEST_DATA_DIR "/tokenizer/bpe-qwen2.gguf")));
    static const std::unique_ptr<engine::Tokenizer> gpt2 = std::make_unique<engine::Tokenizer>(
        engine::Vocab::from_gguf(*engine::gguf::GgufFile::open(TOKENSCOPE_TEST_DATA_DIR "/tokenizer/bpe-gpt2.gguf")));
    return which ? *gpt2 : *bpe;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    if (size == 0)
        return 0;
    const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
    try {
        const engine::Tokenizer& t = tokenizer(data[0] & 1);
        const bool parse_special = data[0] & 2;
        const auto tokens = t.encode(text, {.add_special = bool(data[0] & 4), .parse_special = parse_special});
        std::size_t end = 0;
        for (const auto& tok : tokens) {
            if (tok.byte_begin < end && tok.byte_end > tok.byte_begin)
                __builtin_trap(); // spans must not go backwards
            end = std::max<std::size_t>(end, tok.byte_end);
            if (tok.byte_end > text.size())
                __builtin_trap();
        }
        std::vector<engine::TokenId> ids;
        for (const auto& tok : tokens)
            ids.push_back(tok.id);
        (void)t.decode(ids);
    } catch (const engine::Error&) {
    }
    return 0;
}
