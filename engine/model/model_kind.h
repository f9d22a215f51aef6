// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <string>
#include <string_view>

namespace engine {

namespace gguf {
class GgufFile;
}

// Whether a model was tuned to follow instructions and answer in turns (an "instruct" or chat model)
// or is a base model that continues text. GGUF has no field for it; the publishers' naming and the
// chat template tell. The rules, in order (words are case-insensitive, split at anything that is not
// a letter or digit):
//   1. general.finetune, general.name or general.basename has one of the words instruct, it, chat,
//      sft, rlhf, dpo ("Instruct-AWQ", "gemma-3-it")          → instruct;
//   2. general.finetune or general.name has the word base ("Base"; Qwen2.5 base GGUFs carry a chat
//      template too)                                           → base;
//   3. tokenizer.chat_template is not empty (publishers ship a template with the models they tuned
//      to answer, whatever the name says)                      → instruct;
//   4. otherwise                                               → base.
enum class ModelKind { Base, Instruct };

// The kind and the rule that decided it, as a clause a label can show:
// "general.finetune says \"Instruct-AWQ\"", "it has a chat template",
// "no chat template, and its name does not say instruct".
struct ModelKindVerdict {
    ModelKind kind = ModelKind::Base;
    std::string reason;
};

// The metadata the rules read.
struct ModelKindFacts {
    std::string_view finetune;  // general.finetune
    std::string_view name;      // general.name
    std::string_view basename;  // general.basename
    bool chat_template = false; // tokenizer.chat_template is present and not empty
};

ModelKindVerdict model_kind_verdict(const gguf::GgufFile& file);
ModelKindVerdict model_kind_verdict(const ModelKindFacts& facts);
// model_kind_verdict(file).kind.
ModelKind model_kind(const gguf::GgufFile& file);

std::string_view model_kind_name(ModelKind kind); // "base" or "instruct"

} // namespace engine
