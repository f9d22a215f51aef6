// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <string_view>

namespace gguf {
class GgufFile;
}

namespace engine {

// Whether a model was tuned to follow instructions and answer in turns (an "instruct" or chat model)
// or is a base model that continues text. GGUF has no field for it; the publishers' own naming does
// tell: general.finetune ("Instruct", "Instruct-AWQ", "it", "chat") or, failing that, general.name
// and general.basename, with one of the words instruct, it, chat, sft, rlhf, dpo (case-insensitive,
// split at anything that is not a letter or digit). A file that names none of them is a base model.
enum class ModelKind { Base, Instruct };

ModelKind model_kind(const gguf::GgufFile& file);
// The same rule over the metadata strings themselves (for tests and files already read).
ModelKind model_kind_from_names(std::string_view finetune, std::string_view name, std::string_view basename);

std::string_view model_kind_name(ModelKind kind); // "base" or "instruct"

} // namespace engine
