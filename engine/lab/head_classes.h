// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// What kind of head each attention head is, read off its attention on a probe of repeated random
// tokens (BOS, then R random tokens, then the same R again; seeded): the classic scores of the
// interpretability literature (see interpretability.md).
//  - previous-token: mean weight of query i on key i − 1;
//  - induction: in the second copy, mean weight of query i on the token after the earlier
//    occurrence of its own token (i − R + 1);
//  - duplicate-token: in the second copy, mean weight on the earlier occurrence itself (i − R);
//  - first-token (sink): mean weight on position 0;
//  - self: mean weight of query i on itself;
//  - entropy: mean row entropy over log(keys visible), 0 (one key) … 1 (uniform).

#include "lab/lab_run.h"

#include <array>
#include <string_view>

namespace engine {

enum class HeadClass : uint8_t { PreviousToken, Induction, DuplicateToken, FirstToken, Self, Mixed };
inline constexpr std::size_t kHeadScoreCount = 5; // the classes before Mixed
std::string_view head_class_name(HeadClass c);

struct HeadScores {
    uint32_t layer = 0, head = 0;
    std::array<double, kHeadScoreCount> score{}; // by HeadClass, PreviousToken … Self
    double entropy = 0.0;
    HeadClass cls = HeadClass::Mixed; // the highest score when it reaches kClassThreshold
};
inline constexpr double kClassThreshold = 0.4;

// The probe: BOS (when the model has one) + R random ids (seeded, from ids that are ordinary
// tokens), then the same R again.
struct HeadProbe {
    std::vector<TokenId> tokens;
    uint32_t repeat = 0; // R
    uint32_t offset = 0; // position of the first copy's first token (1 with a BOS)
};
HeadProbe make_head_probe(const Tokenizer& tokenizer, uint32_t repeat, uint64_t seed);

// The scores of one head from its attention weights [n][n] (row i: query i) on the probe.
HeadScores score_head(std::span<const float> weights, uint32_t n, const HeadProbe& probe);

// Every head of the model on the probe (one forward pass capturing all heads).
std::vector<HeadScores> classify_heads(Backend& backend, const HeadProbe& probe);

// Mean cross-entropy (nats) of predicting each token of the probe's second copy, with
// `interventions` (e.g. ablated heads): induction heads lower it.
double second_copy_loss(Backend& backend, const HeadProbe& probe, std::span<const Intervention> interventions = {});

} // namespace engine
