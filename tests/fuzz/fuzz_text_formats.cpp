// SPDX-License-Identifier: GPL-3.0-or-later
// The text formats a user or a model file hands us: the chat-template reader (classification and
// the default system message of any template text, then every format rendering messages made from
// the input) and the .tiktoken rank-file parser (and an encoder built from what parses). Every input
// must end in a result or a typed engine::Error.
#include "chat/chat_template.h"
#include "tokenizer/tiktoken.h"
#include "util/error.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    if (size == 0)
        return 0;
    const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
    try {
        if (data[0] & 1) {
            const auto ranks = engine::parse_tiktoken_ranks(input, "fuzz.tiktoken");
            if (const auto* spec = engine::find_tiktoken_encoding("cl100k_base")) {
                const engine::TiktokenEncoder encoder(*spec, ranks, "fuzz.tiktoken");
                (void)encoder.encode_ordinary("Hello, world! 123 ünïcödé 🙂");
            }
        } else {
            const std::optional<std::string> tmpl{std::string(input)};
            const engine::ChatStyle style = engine::detect_chat_style(tmpl, data[0] & 2 ? "gemma3" : "qwen2");
            (void)engine::template_default_system(input);
            const std::size_t cut = input.size() / 3;
            const std::vector<engine::ChatMessage> messages{{"system", std::string(input.substr(0, cut))},
                                                            {"user", std::string(input.substr(cut, cut))},
                                                            {"assistant", std::string(input.substr(2 * cut))}};
            for (const auto& name :
                 {"plain", "chatml", "phi4", "llama2", "llama2-sys", "llama2-sys-bos", "llama2-sys-strip", "mistral-v1",
                  "mistral-v3", "mistral-v3-tekken", "mistral-v7", "mistral-v7-tekken", "phi3", "gemma", "llama3"})
                if (auto f = engine::chat_format_from_name(name))
                    (void)engine::render_chat(engine::ChatStyle(*f, style.default_system), messages, true);
        }
    } catch (const engine::Error&) {
    }
    return 0;
}
