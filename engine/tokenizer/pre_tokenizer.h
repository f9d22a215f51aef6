// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace engine {

// The regex stage of byte-level BPE: splits text into pieces that are merged independently.
// Patterns run in sequence, each splitting the pieces of the one before; text between matches
// stays a piece of its own. Regexes are PCRE2 in UTF + UCP mode (Unicode \p{L}, \p{N}, \s).
class PreTokenizer {
public:
    // Throws UnsupportedError for a pre-tokenizer name we do not know.
    static std::unique_ptr<PreTokenizer> for_name(std::string_view pre);
    explicit PreTokenizer(std::vector<std::string> patterns);
    ~PreTokenizer();
    PreTokenizer(const PreTokenizer&) = delete;
    PreTokenizer& operator=(const PreTokenizer&) = delete;

    // Pieces as [begin, end) byte offsets into text.
    std::vector<std::pair<uint32_t, uint32_t>> split(std::string_view text) const;

    const std::vector<std::string>& patterns() const { return m_patterns; }

private:
    struct Compiled;
    std::vector<std::string> m_patterns;
    std::vector<std::unique_ptr<Compiled>> m_compiled;
};

} // namespace engine
