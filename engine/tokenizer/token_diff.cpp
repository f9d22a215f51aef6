// SPDX-License-Identifier: GPL-3.0-or-later
// Token-level diff of two tokenizations. The alignment is Myers' greedy O(ND) algorithm
// (E. W. Myers, "An O(ND) Difference Algorithm and Its Variations", Algorithmica 1, 1986).
#include "tokenizer/token_diff.h"

#include <algorithm>
#include <optional>
#include <utility>

namespace engine {

namespace {

// Beyond this many inserted + deleted tokens (after trimming the common prefix and suffix) the
// texts are unrelated for the purpose of the view, and the O(D²) memory of the trace is not spent.
constexpr int kMaxDifferences = 2000;

// A token reduced to what makes it "the same": its id and the bytes it covers.
struct Key {
    TokenId id;
    std::string_view bytes;
    bool operator==(const Key&) const = default;
};

std::vector<Key> keys_of(std::string_view text, std::span<const Token> tokens)
{
    std::vector<Key> keys;
    keys.reserve(tokens.size());
    for (const Token& t : tokens) {
        // Clamped, so spans that do not belong to the text cannot read past it.
        const std::size_t begin = std::min<std::size_t>(t.byte_begin, text.size());
        const std::size_t end = std::clamp<std::size_t>(t.byte_end, begin, text.size());
        keys.push_back({t.id, text.substr(begin, end - begin)});
    }
    return keys;
}

// Pairs (i, j) of a longest common subsequence of a and b, in order; nullopt past kMaxDifferences.
std::optional<std::vector<std::pair<uint32_t, uint32_t>>> common_subsequence(std::span<const Key> a,
                                                                             std::span<const Key> b)
{
    const int n = static_cast<int>(a.size());
    const int m = static_cast<int>(b.size());
    const int max_d = std::min(n + m, kMaxDifferences);
    // trace[d] holds the furthest x on each diagonal k = x - y for k = -d, -d+2, ..., d (index (k+d)/2).
    std::vector<std::vector<int>> trace;
    std::vector<int> v(static_cast<std::size_t>(2 * max_d + 3), 0); // furthest x by diagonal, k + max_d + 1
    auto at = [&](int k) -> int& { return v[static_cast<std::size_t>(k + max_d + 1)]; };
    int found_d = -1;
    for (int d = 0; d <= max_d && found_d < 0; ++d) {
        std::vector<int> row(static_cast<std::size_t>(d + 1));
        for (int k = -d; k <= d; k += 2) {
            int x = (k == -d || (k != d && at(k - 1) < at(k + 1))) ? at(k + 1) : at(k - 1) + 1;
            int y = x - k;
            while (x < n && y < m && a[static_cast<std::size_t>(x)] == b[static_cast<std::size_t>(y)]) {
                ++x;
                ++y;
            }
            at(k) = x;
            row[static_cast<std::size_t>((k + d) / 2)] = x;
            if (x >= n && y >= m)
                found_d = d;
        }
        trace.push_back(std::move(row));
    }
    if (found_d < 0)
        return std::nullopt;

    // Walk back from (n, m): each step of d is one insertion or deletion followed by a diagonal.
    std::vector<std::pair<uint32_t, uint32_t>> pairs;
    int x = n, y = m;
    for (int d = found_d; d > 0; --d) {
        const int k = x - y;
        const auto& prev = trace[static_cast<std::size_t>(d - 1)];
        auto prev_x = [&](int pk) { return prev[static_cast<std::size_t>((pk + d - 1) / 2)]; };
        const bool down = k == -d || (k != d && prev_x(k - 1) < prev_x(k + 1)); // came by an insertion
        const int pk = down ? k + 1 : k - 1;
        const int px = prev_x(pk);
        const int snake_x = down ? px : px + 1; // where the diagonal after the edit starts
        while (x > snake_x) {
            --x;
            --y;
            pairs.emplace_back(static_cast<uint32_t>(x), static_cast<uint32_t>(y));
        }
        x = px;
        y = px - pk;
    }
    while (x > 0 && y > 0) {
        --x;
        --y;
        pairs.emplace_back(static_cast<uint32_t>(x), static_cast<uint32_t>(y));
    }
    std::reverse(pairs.begin(), pairs.end());
    return pairs;
}

TokenChangeKind kind_of(uint32_t old_count, uint32_t new_count)
{
    if (old_count == 0)
        return TokenChangeKind::Inserted;
    if (new_count == 0)
        return TokenChangeKind::Deleted;
    if (old_count == 1 && new_count >= 2)
        return TokenChangeKind::Split;
    if (old_count >= 2 && new_count == 1)
        return TokenChangeKind::Merged;
    return TokenChangeKind::Replaced;
}

} // namespace

TokenDiff diff_tokens(std::string_view old_text, std::span<const Token> old_tokens, std::string_view new_text,
                      std::span<const Token> new_tokens)
{
    TokenDiff diff;
    diff.count_delta = static_cast<int64_t>(new_tokens.size()) - static_cast<int64_t>(old_tokens.size());
    const std::vector<Key> a = keys_of(old_text, old_tokens);
    const std::vector<Key> b = keys_of(new_text, new_tokens);

    // Common prefix and suffix: the usual edit touches a few tokens in the middle.
    std::size_t prefix = 0;
    while (prefix < a.size() && prefix < b.size() && a[prefix] == b[prefix])
        ++prefix;
    std::size_t suffix = 0;
    while (suffix < a.size() - prefix && suffix < b.size() - prefix &&
           a[a.size() - 1 - suffix] == b[b.size() - 1 - suffix])
        ++suffix;
    const std::span<const Key> old_mid = std::span(a).subspan(prefix, a.size() - prefix - suffix);
    const std::span<const Key> new_mid = std::span(b).subspan(prefix, b.size() - prefix - suffix);
    if (old_mid.empty() && new_mid.empty())
        return diff;

    auto add = [&](std::size_t old_first, std::size_t old_end, std::size_t new_first, std::size_t new_end) {
        if (old_first == old_end && new_first == new_end)
            return;
        const auto old_count = static_cast<uint32_t>(old_end - old_first);
        const auto new_count = static_cast<uint32_t>(new_end - new_first);
        diff.changes.push_back({kind_of(old_count, new_count), static_cast<uint32_t>(prefix + old_first), old_count,
                                static_cast<uint32_t>(prefix + new_first), new_count});
    };

    const auto pairs = common_subsequence(old_mid, new_mid);
    if (!pairs) {
        add(0, old_mid.size(), 0, new_mid.size());
        return diff;
    }
    std::size_t x = 0, y = 0; // first old / new token not yet accounted for
    for (const auto& [i, j] : *pairs) {
        add(x, i, y, j);
        x = i + 1;
        y = j + 1;
    }
    add(x, old_mid.size(), y, new_mid.size());
    return diff;
}

std::string_view token_change_kind_name(TokenChangeKind kind)
{
    switch (kind) {
    case TokenChangeKind::Inserted:
        return "inserted";
    case TokenChangeKind::Deleted:
        return "deleted";
    case TokenChangeKind::Split:
        return "split";
    case TokenChangeKind::Merged:
        return "merged";
    case TokenChangeKind::Replaced:
        return "replaced";
    }
    return "?";
}

} // namespace engine
