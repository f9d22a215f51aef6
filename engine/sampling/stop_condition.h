// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace engine {

enum class StopReason {
    None,
    EndOfGeneration, // the token is one of the end-of-generation tokens
    MaxTokens,       // the token budget is used up
    StopString,      // the generated text now contains a stop string
    ContextFull,     // the context holds no further token (generation without a token limit)
};

// When the decode loop stops, and how much of the text it may show meanwhile. Stop strings are
// matched on the generated text, not on tokens, because a stop string can span several tokens
// ("</", "answer", ">") or end inside one.
class StopCondition {
public:
    // max_tokens == 0 means no limit; empty stop strings are ignored.
    StopCondition(std::vector<int32_t> end_of_generation, std::size_t max_tokens,
                  std::vector<std::string> stop_strings);

    // After each sampled token: generated is all text generated so far, this token's included,
    // and n_generated counts this token. End of generation wins over a stop string, which wins
    // over the token budget: the reason says why the text ends where it does.
    StopReason check(int32_t token, std::string_view generated, std::size_t n_generated) const;

    // Byte offset of the earliest stop string in generated: the text to keep ends there.
    std::optional<std::size_t> stop_string_position(std::string_view generated) const;

    // How many bytes of generated may be shown now: everything before a complete stop string,
    // else everything but a tail that is a proper prefix of some stop string (it may still
    // become one with the next token, and shown text cannot be taken back).
    std::size_t safe_prefix_length(std::string_view generated) const;

    const std::vector<int32_t>& end_of_generation() const { return m_end_of_generation; }
    std::size_t max_tokens() const { return m_max_tokens; }
    const std::vector<std::string>& stop_strings() const { return m_stop_strings; }

private:
    std::vector<int32_t> m_end_of_generation;
    std::size_t m_max_tokens = 0;
    std::vector<std::string> m_stop_strings;
};

} // namespace engine
