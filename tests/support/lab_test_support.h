// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// Shared by the lab suites (test_interventions, test_head_lab): one whole pass from an empty cache
// with every position's logits, bit equality, and seeded random prompts.
#include "backend/backend.h"

#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <vector>

namespace testsupport {

// The logits of every position of `tokens` evaluated from an empty cache (left empty after), with
// `interventions`; the captures go to `captures` when given.
inline std::vector<float> all_logits(engine::Backend& b, std::span<const engine::TokenId> tokens,
                                     const engine::CaptureRequest* capture = nullptr,
                                     std::span<const engine::Intervention> interventions = {},
                                     std::shared_ptr<engine::ForwardCaptures>* captures = nullptr)
{
    b.kv_cache().clear();
    engine::ForwardRequest r;
    r.tokens = tokens;
    r.all_logits = true;
    r.capture = capture;
    r.interventions = interventions;
    engine::ForwardResult out = b.forward(r);
    b.kv_cache().clear();
    if (captures)
        *captures = out.captures;
    return std::move(out.logits);
}

inline bool same_bits(std::span<const float> a, std::span<const float> b)
{
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

inline std::vector<engine::TokenId> random_tokens(uint32_t n_vocab, std::size_t n, uint32_t seed)
{
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> pick(0, int32_t(n_vocab) - 1);
    std::vector<engine::TokenId> t(n);
    for (auto& x : t)
        x = pick(rng);
    return t;
}

} // namespace testsupport
