// SPDX-License-Identifier: GPL-3.0-or-later
#include "lab/head_classes.h"

#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/rng.h"

#include <algorithm>
#include <cmath>
#include <spdlog/fmt/fmt.h>

namespace engine {

std::string_view head_class_name(HeadClass c)
{
    switch (c) {
    case HeadClass::PreviousToken:
        return "previous-token";
    case HeadClass::Induction:
        return "induction";
    case HeadClass::DuplicateToken:
        return "duplicate-token";
    case HeadClass::FirstToken:
        return "first-token";
    case HeadClass::Self:
        return "self";
    case HeadClass::Mixed:
        return "mixed";
    }
    return "?";
}

HeadProbe make_head_probe(const Tokenizer& tokenizer, uint32_t repeat, uint64_t seed)
{
    const Vocab& vocab = tokenizer.vocab();
    if (repeat < 2)
        throw Error("the head probe needs at least 2 repeated tokens");
    // Ordinary tokens only: control, byte and unused entries would make the probe unlike text.
    std::vector<TokenId> pool;
    for (std::size_t id = 0; id < vocab.tokens.size(); ++id)
        if (vocab.type_of(TokenId(id)) == TokenType::Normal)
            pool.push_back(TokenId(id));
    if (pool.size() < repeat)
        throw Error(fmt::format("the vocabulary has {} ordinary tokens; the probe needs {}", pool.size(), repeat));
    Xoshiro256 rng(seed);
    HeadProbe p;
    p.repeat = repeat;
    if (vocab.bos && vocab.add_bos)
        p.tokens.push_back(*vocab.bos);
    p.offset = uint32_t(p.tokens.size());
    std::vector<TokenId> copy;
    while (copy.size() < repeat) { // distinct tokens, so each second-copy token has one earlier occurrence
        const TokenId t = pool[rng.below(uint32_t(pool.size()))];
        if (std::find(copy.begin(), copy.end(), t) == copy.end())
            copy.push_back(t);
    }
    p.tokens.insert(p.tokens.end(), copy.begin(), copy.end());
    p.tokens.insert(p.tokens.end(), copy.begin(), copy.end());
    return p;
}

HeadScores score_head(std::span<const float> w, uint32_t n, const HeadProbe& probe)
{
    HeadScores s;
    const auto at = [&](uint32_t i, uint32_t j) { return double(w[std::size_t(i) * n + j]); };
    double prev = 0, first = 0, self = 0, entropy = 0;
    uint32_t rows = 0;
    for (uint32_t i = 1; i < n; ++i) {
        prev += at(i, i - 1);
        first += at(i, 0);
        self += at(i, i);
        double h = 0;
        for (uint32_t j = 0; j <= i; ++j)
            if (at(i, j) > 0)
                h -= at(i, j) * std::log(at(i, j));
        entropy += h / std::log(double(i + 1));
        ++rows;
    }
    double induction = 0, duplicate = 0;
    uint32_t second = 0;
    const uint32_t R = probe.repeat, start = probe.offset + R;
    for (uint32_t i = start; i < std::min<uint32_t>(n, start + R); ++i) {
        induction += at(i, i - R + 1);
        duplicate += at(i, i - R);
        ++second;
    }
    const double rn = std::max(1u, rows), sn = std::max(1u, second);
    s.score = {prev / rn, induction / sn, duplicate / sn, first / rn, self / rn};
    s.entropy = entropy / rn;
    const auto best = std::max_element(s.score.begin(), s.score.end());
    s.cls = *best >= kClassThreshold ? HeadClass(best - s.score.begin()) : HeadClass::Mixed;
    return s;
}

std::vector<HeadScores> classify_heads(Backend& backend, const HeadProbe& probe)
{
    CaptureRequest capture;
    capture.all_heads = true;
    const LabRun run = run_fresh(backend, probe.tokens, &capture);
    const auto n = uint32_t(probe.tokens.size());
    std::vector<HeadScores> out;
    for (const AttentionCapture& a : run.captures->attention) {
        HeadScores s = score_head(a.weights, n, probe);
        s.layer = a.layer;
        s.head = a.head;
        out.push_back(s);
    }
    std::sort(out.begin(), out.end(), [](const HeadScores& a, const HeadScores& b) {
        return std::tie(a.layer, a.head) < std::tie(b.layer, b.head);
    });
    return out;
}

double second_copy_loss(Backend& backend, const HeadProbe& probe, std::span<const Intervention> interventions)
{
    backend.kv_cache().clear();
    ForwardRequest r;
    r.tokens = probe.tokens;
    r.all_logits = true;
    r.interventions = interventions;
    const ForwardResult out = backend.forward(r);
    backend.kv_cache().clear();
    const uint32_t V = out.n_vocab, R = probe.repeat, start = probe.offset + R;
    // position i − 1 predicts token i, for every token of the second copy but its first
    double loss = 0;
    for (uint32_t i = start + 1; i < start + R; ++i) {
        const std::span<const float> row(out.logits.data() + std::size_t(i - 1) * V, V);
        loss -= double(row[std::size_t(probe.tokens[i])]) - log_sum_exp(row);
    }
    return loss / double(R - 1);
}

} // namespace engine
