// SPDX-License-Identifier: GPL-3.0-or-later
#include "model/model_kind.h"

#include "gguf/gguf_file.h"

#include <array>
#include <cctype>
#include <initializer_list>
#include <string>

namespace engine {

namespace {

// Whether `text`, split into lower-case words at anything that is not a letter or digit, has one of
// `words` ("Instruct-AWQ" → instruct, awq; "gemma-3-it" → gemma, 3, it).
bool has_word(std::string_view text, std::initializer_list<std::string_view> words)
{
    std::string word;
    const auto matches = [&] {
        for (auto w : words)
            if (word == w)
                return true;
        return false;
    };
    for (std::size_t i = 0; i <= text.size(); ++i) {
        const unsigned char c = i < text.size() ? static_cast<unsigned char>(text[i]) : 0;
        if (std::isalnum(c)) {
            word += static_cast<char>(std::tolower(c));
            continue;
        }
        if (matches())
            return true;
        word.clear();
    }
    return false;
}

bool names_instruct(std::string_view text)
{
    return has_word(text, {"instruct", "it", "chat", "sft", "rlhf", "dpo"});
}

bool names_base(std::string_view text)
{
    return has_word(text, {"base"});
}

std::string says(std::string_view key, std::string_view value)
{
    return std::string(key) + " says \"" + std::string(value) + "\"";
}

} // namespace

ModelKindVerdict model_kind_verdict(const ModelKindFacts& facts)
{
    const std::array<std::pair<std::string_view, std::string_view>, 3> names{{
        {"general.finetune", facts.finetune},
        {"general.name", facts.name},
        {"general.basename", facts.basename},
    }};
    for (const auto& [key, value] : names)
        if (names_instruct(value))
            return {ModelKind::Instruct, says(key, value)};
    for (const auto& [key, value] : {names[0], names[1]}) // the basename names the family, not the tuning
        if (names_base(value))
            return {ModelKind::Base, says(key, value)};
    if (facts.chat_template)
        return {ModelKind::Instruct, "it has a chat template"};
    return {ModelKind::Base, "no chat template, and its name does not say instruct"};
}

ModelKindVerdict model_kind_verdict(const gguf::GgufFile& file)
{
    const auto get = [&](std::string_view key) { return file.get_string(key).value_or(std::string_view()); };
    return model_kind_verdict(ModelKindFacts{.finetune = get("general.finetune"),
                                             .name = get("general.name"),
                                             .basename = get("general.basename"),
                                             .chat_template = !get("tokenizer.chat_template").empty()});
}

ModelKind model_kind(const gguf::GgufFile& file)
{
    return model_kind_verdict(file).kind;
}

std::string_view model_kind_name(ModelKind kind)
{
    return kind == ModelKind::Instruct ? "instruct" : "base";
}

} // namespace engine
