// SPDX-License-Identifier: GPL-3.0-or-later
#include "sampling/stop_condition.h"

#include <algorithm>
#include <utility>

namespace engine {

StopCondition::StopCondition(std::vector<int32_t> end_of_generation, std::size_t max_tokens,
                             std::vector<std::string> stop_strings)
    : m_end_of_generation(std::move(end_of_generation)), m_max_tokens(max_tokens),
      m_stop_strings(std::move(stop_strings))
{
    std::erase_if(m_stop_strings, [](const std::string& s) { return s.empty(); });
}

StopReason StopCondition::check(int32_t token, std::string_view generated, std::size_t n_generated) const
{
    if (std::find(m_end_of_generation.begin(), m_end_of_generation.end(), token) != m_end_of_generation.end())
        return StopReason::EndOfGeneration;
    if (stop_string_position(generated))
        return StopReason::StopString;
    if (m_max_tokens > 0 && n_generated >= m_max_tokens)
        return StopReason::MaxTokens;
    return StopReason::None;
}

// Searches the whole text each time rather than keeping state between calls: a reply of a few
// thousand tokens is tens of kilobytes, a find over it takes microseconds, far below one forward
// pass, and a stateless check cannot be fooled by a caller that rewinds or edits the text.
std::optional<std::size_t> StopCondition::stop_string_position(std::string_view generated) const
{
    std::optional<std::size_t> earliest;
    for (const auto& stop : m_stop_strings) {
        const std::size_t at = generated.find(stop);
        if (at != std::string_view::npos && (!earliest || at < *earliest))
            earliest = at;
    }
    return earliest;
}

std::size_t StopCondition::safe_prefix_length(std::string_view generated) const
{
    if (const auto at = stop_string_position(generated))
        return *at;
    // The longest tail of the text that some stop string starts with; no complete stop string is
    // in the text, so only proper prefixes can match.
    std::size_t held = 0;
    for (const auto& stop : m_stop_strings) {
        for (std::size_t len = std::min(stop.size() - 1, generated.size()); len > held; --len) {
            if (generated.ends_with(std::string_view(stop).substr(0, len))) {
                held = len;
                break;
            }
        }
    }
    return generated.size() - held;
}

} // namespace engine
