// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Comparing our logits with llama.cpp fixtures (tests/data/logits/*.gguf): read fixture tensors,
// correlation, top-k and the tie-tolerant top-10 rule shared by the forward-pass suites.
#include "gguf/gguf_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <span>
#include <string>
#include <vector>

namespace testsupport {

template <typename T> std::vector<T> tensor_values(const engine::gguf::GgufFile& f, const std::string& name)
{
    const auto* t = f.find_tensor(name);
    if (!t)
        return {};
    std::vector<T> v(t->n_elements());
    std::memcpy(v.data(), f.tensor_data(*t).data(), v.size() * sizeof(T));
    return v;
}

inline double pearson(std::span<const float> a, std::span<const float> b)
{
    double ma = 0, mb = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        ma += a[i];
        mb += b[i];
    }
    ma /= double(a.size());
    mb /= double(b.size());
    double sab = 0, saa = 0, sbb = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double da = a[i] - ma, db = b[i] - mb;
        sab += da * db;
        saa += da * da;
        sbb += db * db;
    }
    return sab / std::sqrt(saa * sbb);
}

inline std::vector<int32_t> top_ids(std::span<const float> logits, std::size_t k)
{
    std::vector<int32_t> ids(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(k), ids.end(), [&](int32_t a, int32_t b) {
        return logits[std::size_t(a)] > logits[std::size_t(b)] ||
               (logits[std::size_t(a)] == logits[std::size_t(b)] && a < b);
    });
    ids.resize(k);
    return ids;
}

inline int32_t argmax(std::span<const float> logits)
{
    return top_ids(logits, 1)[0];
}

// The same top-10 set, where a token may cross the boundary only if its reference logit is within
// 0.1 of the 10th (a tie at the limit of float rounding, as the ordering rule allows).
inline bool same_top10(std::span<const float> reference, std::span<const float> ours)
{
    const auto ref = top_ids(reference, 10), mine = top_ids(ours, 10);
    const float tenth = reference[std::size_t(ref[9])];
    auto tied = [&](int32_t id) { return std::fabs(reference[std::size_t(id)] - tenth) <= 0.1f; };
    for (int32_t id : ref)
        if (std::find(mine.begin(), mine.end(), id) == mine.end() && !tied(id))
            return false;
    for (int32_t id : mine)
        if (std::find(ref.begin(), ref.end(), id) == ref.end() && !tied(id))
            return false;
    return true;
}

// "p<i>", the prefix of a prompt's entries in the fixture (built without operator+ on a literal,
// which trips a GCC 12 -Wrestrict false positive).
inline std::string prompt_key(int i)
{
    std::string key(1, 'p');
    key.append(std::to_string(i));
    return key;
}

} // namespace testsupport
