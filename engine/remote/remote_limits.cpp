// SPDX-License-Identifier: GPL-3.0-or-later
#include "remote/remote_limits.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace engine::remote {

namespace {

constexpr uint64_t kMiB = 1024 * 1024;

// The limit's environment variable when set to a positive integer, else `derived`.
uint64_t limit_or_override(Limit which, uint64_t derived)
{
    const char* v = std::getenv(limit_variable(which));
    if (!v || *v < '0' || *v > '9') // unset, empty, or not a count (strtoull would read "-1" as 2^64-1)
        return derived;
    char* end = nullptr;
    const unsigned long long n = std::strtoull(v, &end, 10);
    return end && *end == '\0' && n > 0 ? static_cast<uint64_t>(n) : derived;
}

std::string bytes_text(uint64_t n)
{
    if (n < kMiB)
        return std::to_string(n) + " bytes";
    char text[64];
    std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(n) / static_cast<double>(kMiB));
    return text;
}

} // namespace

const char* limit_variable(Limit which)
{
    switch (which) {
    case Limit::Bytes:
        return "TOKENSCOPE_REMOTE_MAX_BYTES";
    case Limit::Events:
        return "TOKENSCOPE_REMOTE_MAX_EVENTS";
    case Limit::FieldBytes:
        return "TOKENSCOPE_REMOTE_MAX_FIELD_BYTES";
    case Limit::Seconds:
        break;
    }
    return "TOKENSCOPE_REMOTE_MAX_SECONDS";
}

ResponseLimits stream_limits(int max_tokens)
{
    // No limit asked for (-n -1): bounded as a reply of 32,768 tokens would be.
    const uint64_t n = max_tokens > 0 ? static_cast<uint64_t>(max_tokens) : 32768;
    ResponseLimits l;
    l.max_bytes = limit_or_override(Limit::Bytes, 2 * kMiB + 16 * 1024 * n);
    l.max_events = limit_or_override(Limit::Events, 1024 + 2 * n);
    l.max_field_bytes = limit_or_override(Limit::FieldBytes, kMiB + 8 * 1024 * n);
    l.max_seconds = limit_or_override(Limit::Seconds, 600 + 2 * n);
    l.stream_note = "a reply of at most " + std::to_string(n) + (n == 1 ? " token" : " tokens");
    return l;
}

ResponseLimits answer_limits(std::size_t text_bytes)
{
    ResponseLimits l;
    l.max_bytes = limit_or_override(Limit::Bytes, 16 * kMiB + 128 * static_cast<uint64_t>(text_bytes));
    l.max_events = 0;
    l.max_field_bytes = limit_or_override(Limit::FieldBytes, 4 * kMiB);
    l.max_seconds = limit_or_override(Limit::Seconds, 600);
    return l;
}

std::string limit_message(Limit which, const ResponseLimits& l, std::string_view what, std::string_view server)
{
    std::string passed;
    uint64_t value = 0;
    switch (which) {
    case Limit::Bytes:
        value = l.max_bytes;
        passed = "sent more than " + bytes_text(value) + " in all";
        break;
    case Limit::Events:
        value = l.max_events;
        passed = "sent more than " + std::to_string(value) + " events";
        break;
    case Limit::FieldBytes:
        value = l.max_field_bytes;
        passed = "sent one event or field longer than " + bytes_text(value);
        break;
    case Limit::Seconds:
        value = l.max_seconds;
        passed = "had not finished after " + std::to_string(value) + " s (a deadline, however steadily bytes arrive)";
        break;
    }
    const std::string whose = l.stream_note.empty() ? "one answer" : l.stream_note;
    return std::string(what) + " stopped: " + std::string(server) + " " + passed + ", the limit for " + whose +
           " (raise it with " + limit_variable(which) + "=" + std::to_string(value * 4) + " or more)";
}

std::size_t longest_json_string(std::string_view text)
{
    std::size_t longest = 0, start = 0;
    bool in_string = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (!in_string) {
            if (c == '"') {
                in_string = true;
                start = i + 1;
            }
        } else if (c == '\\') {
            ++i; // the escaped character
        } else if (c == '"') {
            in_string = false;
            longest = std::max(longest, i - start);
        }
    }
    if (in_string)
        longest = std::max(longest, text.size() - start);
    return longest;
}

} // namespace engine::remote
