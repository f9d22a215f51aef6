// SPDX-License-Identifier: GPL-3.0-or-later
// Chat templates are untrusted text inside downloaded GGUF files: bytes → our Jinja parser → a
// rendering of a short conversation (and the model-template probes), under tight limits. Every
// input must end in output or a jinja::TemplateError; seeded with llama.cpp's 70 real templates.
#include "chat/chat_template.h"
#include "chat/jinja/jinja_template.h"
#include "chat/model_template.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const std::string_view source(reinterpret_cast<const char*>(data), size);
    engine::jinja::RenderLimits limits;
    limits.max_output_bytes = 256u << 10;
    limits.max_steps = 50'000;
    limits.max_call_depth = 32;
    try {
        const auto tmpl = engine::jinja::Template::parse(source);
        engine::jinja::Object user;
        user.set("role", engine::jinja::Value("user"));
        user.set("content", engine::jinja::Value("Hello {{ there }} <|im_end|>"));
        engine::jinja::Object globals;
        globals.set("messages", engine::jinja::Value(engine::jinja::Array{engine::jinja::Value(user)}));
        globals.set("add_generation_prompt", engine::jinja::Value(true));
        globals.set("bos_token", engine::jinja::Value("<s>"));
        (void)tmpl.render(globals, 0, limits);
    } catch (const engine::jinja::TemplateError&) {
    }
    return 0;
}
