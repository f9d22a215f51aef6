// SPDX-License-Identifier: GPL-3.0-or-later
// Special tokens found by text, as llama.cpp's vocabulary loader finds them (llama-vocab.cpp, this
// version): they decide which texts split out as tokens when special tokens are not parsed, and
// where a generation ends. GGUF files do not carry these facts, so the lists are by name.
#include "tokenizer/special_tokens.h"

#include "gguf/gguf_file.h"
#include "tokenizer/vocab.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace engine {

namespace {

// Texts that end a generation, as llama.cpp's list (this version) recognises them; it also forces
// them to CONTROL, which keeps their text from being split out as a token when special tokens are
// not parsed. The first end-of-turn one found becomes the end-of-turn id.
struct EndOfGenerationText {
    const char* text;
    bool ends_turn; // false: ends a message, a tool call or a sequence, not a turn
};
constexpr std::array<EndOfGenerationText, 22> kEndOfGenerationTexts = {{
    {"<|eot_id|>", true},
    {"<|im_end|>", true},
    {"<|end|>", true},
    {"<end_of_turn>", true},
    {"<|endoftext|>", true},
    {"<|eom_id|>", false},
    {"<EOT>", true},
    {"_<EOT>", true},
    {"<|end_of_text|>", true},
    {"<end_of_utterance>", true},
    {"<turn|>", true},                // Gemma 4
    {"<eos>", false},                 // Gemma 4
    {"<|tool_response>", false},      // Gemma 4
    {"<|return|>", false},            // gpt-oss (o200k_harmony)
    {"<|call|>", false},              // gpt-oss
    {"<|flush|>", false},             // Solar Open
    {"<|calls|>", false},             // Solar Open
    {"</s>", false},                  // PaddleOCR
    {"[EOT]", true},                  // Kimi K2
    {"[EOS]", false},                 // Kimi K2
    {"<｜end▁of▁sentence｜>", false}, // DeepSeek OCR
    {"[e~[", false},                  // MiniMax M2
}};

// Fill-in-the-middle tokens: the GGUF key that names each, and the texts that stand for it when
// the key is absent. Pad, repository and file-separator tokens also end a generation.
struct FimKind {
    std::initializer_list<const char*> keys;
    std::initializer_list<const char*> texts;
    bool ends_generation;
};
const std::array<FimKind, 6> kFimKinds = {{
    {{"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"},
     {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>",
      "<|prefix|>"},
     false},
    {{"tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"},
     {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>",
      "<|suffix|>"},
     false},
    {{"tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"},
     {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>",
      "<|middle|>"},
     false},
    {{"tokenizer.ggml.fim_pad_token_id"}, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}, true},
    {{"tokenizer.ggml.fim_rep_token_id"},
     {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"},
     true},
    {{"tokenizer.ggml.fim_sep_token_id"}, {"<|file_sep|>"}, true},
}};

// Each FIM token the file names, or else the first one found by text (forced to CONTROL, as
// llama.cpp does for a token it recognises that way). Returns those that end a generation.
std::vector<TokenId> find_fim_tokens(Vocab& v, const gguf::GgufFile& file)
{
    std::vector<TokenId> ends_generation;
    for (const FimKind& kind : kFimKinds) {
        std::optional<TokenId> id;
        for (const char* key : kind.keys)
            if (auto k = file.get_int(key); k && *k >= 0 && static_cast<uint64_t>(*k) < v.size())
                id = static_cast<TokenId>(*k);
        for (auto text = kind.texts.begin(); !id && text != kind.texts.end(); ++text)
            if ((id = v.find(*text)))
                v.types[static_cast<std::size_t>(*id)] = TokenType::Control;
        if (id && kind.ends_generation)
            ends_generation.push_back(*id);
    }
    return ends_generation;
}

bool contains_any(std::string_view s, std::initializer_list<std::string_view> parts)
{
    return std::any_of(parts.begin(), parts.end(), [&](std::string_view p) { return s.find(p) != s.npos; });
}

// The end-of-generation set as llama.cpp builds it: tokens recognised by text (forced to CONTROL),
// the eos/eot/eom ids, FIM pad/repo/separator tokens, and its per-family corrections.
void find_end_of_generation(Vocab& v, const std::vector<TokenId>& fim_ends)
{
    auto& eog = v.end_of_generation;
    auto in_eog = [&](TokenId id) { return std::find(eog.begin(), eog.end(), id) != eog.end(); };
    auto set_type = [&](TokenId id, TokenType t) { v.types[static_cast<std::size_t>(id)] = t; };
    for (const auto& [text, ends_turn] : kEndOfGenerationTexts) {
        if (auto id = v.find(text)) {
            if (!v.eot && ends_turn)
                v.eot = *id;
            set_type(*id, TokenType::Control);
            eog.push_back(*id);
        }
    }
    for (const auto& id : {v.eos, v.eot, v.eom})
        if (id && !in_eog(*id))
            eog.push_back(*id);
    for (const TokenId id : fim_ends)
        if (!in_eog(id))
            eog.push_back(id);

    // gpt-oss's message framing tokens are always written out, like user-defined ones.
    for (const char* text : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})
        if (auto id = v.find(text))
            set_type(*id, TokenType::UserDefined);
    auto eog_text = [&](std::string_view text) -> std::optional<TokenId> {
        auto id = v.find(text);
        return id && in_eog(*id) ? id : std::nullopt;
    };
    auto remove = [&](TokenId id, TokenType type) {
        eog.erase(std::find(eog.begin(), eog.end(), id));
        set_type(id, type);
        if (v.eot == id)
            v.eot.reset();
    };
    // gpt-oss and Solar Open end a turn with <|return|> or a tool call; their <|end|> only closes
    // a message within the turn.
    const bool has_call = eog_text("<|call|>") || eog_text("<|calls|>");
    if (auto end = eog_text("<|end|>"); end && has_call && (eog_text("<|return|>") || eog_text("<|flush|>")))
        remove(*end, TokenType::UserDefined);
    // Gemma 4 and PLaMo 2 have an ordinary </s> token (PaddleOCR's ends a generation).
    if (auto s = eog_text("</s>"); s && (eog_text("<|tool_response>") || eog_text("<|plamo:eos|>")))
        remove(*s, TokenType::Normal);
}

// Special tokens that swallow the ASCII whitespace beside them when split out of a text. GGUF does
// not carry these attributes; llama.cpp sets them by model name, and so do we.
void set_strip_attributes(Vocab& v, const gguf::GgufFile& file)
{
    v.strip.assign(v.size(), 0);
    auto set = [&](std::string_view text, uint8_t flag, bool on) {
        if (auto id = v.find(text)) {
            auto& s = v.strip[static_cast<std::size_t>(*id)];
            s = on ? (s | flag) : (s & ~flag);
        }
    };
    std::string name(file.get_string("general.name").value_or(""));
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    const std::string_view pre = file.get_string("tokenizer.ggml.pre").value_or("");
    const std::string_view arch = file.get_string("general.architecture").value_or("");
    if (contains_any(pre, {"jina-v2-de", "jina-v2-es", "jina-v2-code"}) ||
        contains_any(arch, {"nomic-bert-moe", "jina-bert-v3"})) {
        set("<mask>", kStripLeft, true);
    } else if (contains_any(name, {"phi-3", "phi3"})) {
        // Phi-3 drops the whitespace after its chat tokens (the newline after "<|user|>").
        for (std::size_t id = 0; id < v.size(); ++id) {
            const TokenType t = v.types[id];
            if (t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown)
                v.strip[id] |= kStripRight;
        }
        set("</s>", kStripRight, true);
        for (const char* text : {"<unk>", "<s>", "<|endoftext|>"})
            set(text, kStripRight, false);
    } else if (contains_any(name, {"modern-bert"})) {
        set("[MASK]", kStripLeft, true);
    }
}

} // namespace

void recognise_special_tokens(Vocab& v, const gguf::GgufFile& file)
{
    const std::vector<TokenId> fim_ends = find_fim_tokens(v, file);
    find_end_of_generation(v, fim_ends);
    set_strip_attributes(v, file);
}

} // namespace engine
