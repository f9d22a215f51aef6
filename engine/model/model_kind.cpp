// SPDX-License-Identifier: GPL-3.0-or-later
#include "model/model_kind.h"

#include "gguf/gguf_file.h"

#include <array>
#include <cctype>
#include <string>

namespace engine {

namespace {

bool names_instruct(std::string_view text)
{
    constexpr std::array<std::string_view, 6> kWords{"instruct", "it", "chat", "sft", "rlhf", "dpo"};
    std::string word;
    const auto matches = [&] {
        for (auto w : kWords)
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

} // namespace

ModelKind model_kind_from_names(std::string_view finetune, std::string_view name, std::string_view basename)
{
    for (auto text : {finetune, name, basename})
        if (names_instruct(text))
            return ModelKind::Instruct;
    return ModelKind::Base;
}

ModelKind model_kind(const gguf::GgufFile& file)
{
    const auto get = [&](std::string_view key) { return file.get_string(key).value_or(std::string_view()); };
    return model_kind_from_names(get("general.finetune"), get("general.name"), get("general.basename"));
}

std::string_view model_kind_name(ModelKind kind)
{
    return kind == ModelKind::Instruct ? "instruct" : "base";
}

} // namespace engine
