// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// One backend against the CPU on the same model (the Vulkan parity suites): last-position logits
// (Pearson, max |Δ|), greedy continuations that may only part where the CPU's two leading candidates
// were within 0.1 logit, attention and residual captures, KV accounting after every step, the KV
// read-back, the logit lens and a truncate-and-recompute.
#include "backend/backend.h"
#include "logit_compare.h"

#include <QTest>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <span>
#include <vector>

namespace testsupport {

// What "agrees" means: the exact arithmetic meets the defaults easily (it is bit-equal); the f32
// path is held to the tolerance criteria (logits Pearson ≥ 0.999 on the real default model, ≥ 0.9999
// on random-weight models; attention weights within 1e-3).
struct ParityBounds {
    double min_pearson = 0.9999; // logits, logit lens and residual stream
    double attention = 1e-4;     // max |Δ| of captured attention weights
};

struct ParityReport {
    double min_pearson = 1.0;
    double max_abs_diff = 0.0;
    int greedy_matched = 0; // steps whose tokens agreed
    int greedy_steps = 0;
    bool diverged_at_tie = false;
    double max_attention_diff = 0.0;
};

inline double max_abs(std::span<const float> a, std::span<const float> b)
{
    double m = 0;
    for (std::size_t i = 0; i < a.size(); ++i)
        m = std::max(m, double(std::fabs(a[i] - b[i])));
    return m;
}

// Leading gap of the logits (top-1 minus top-2).
inline float leading_gap(std::span<const float> logits)
{
    const auto top = top_ids(logits, 2);
    return logits[std::size_t(top[0])] - logits[std::size_t(top[1])];
}

inline void compare_accounting(const engine::KvAccounting& a, const engine::KvAccounting& b)
{
    QCOMPARE(a.tokens_cached, b.tokens_cached);
    QCOMPARE(a.bytes_in_use, b.bytes_in_use);
    QCOMPARE(a.bytes_allocated, b.bytes_allocated);
    QCOMPARE(a.blocks_allocated, b.blocks_allocated);
    QCOMPARE(a.layers.size(), b.layers.size());
    for (std::size_t l = 0; l < a.layers.size(); ++l) {
        QCOMPARE(a.layers[l].tokens_in_use, b.layers[l].tokens_in_use);
        QCOMPARE(a.layers[l].blocks_allocated, b.layers[l].blocks_allocated);
        QCOMPARE(a.layers[l].first_stored, b.layers[l].first_stored);
        QCOMPARE(a.layers[l].bytes_allocated, b.layers[l].bytes_allocated);
    }
}

inline void compare_logits(std::span<const float> cpu, std::span<const float> other, ParityReport& r, const char* what,
                           const ParityBounds& bounds = {})
{
    QCOMPARE(other.size(), cpu.size());
    const double p = pearson(cpu, other);
    r.min_pearson = std::min(r.min_pearson, p);
    r.max_abs_diff = std::max(r.max_abs_diff, max_abs(cpu, other));
    QVERIFY2(p >= bounds.min_pearson, qPrintable(QString("%1: Pearson %2").arg(what).arg(p, 0, 'f', 7)));
}

// prompt through both backends (with captures of every head and the residuals), then `steps` greedy
// tokens, each backend following its own argmax.
inline void run_parity(engine::Backend& cpu, engine::Backend& other, std::span<const engine::TokenId> prompt, int steps,
                       ParityReport& r, const ParityBounds& bounds = {})
{
    using namespace engine;
    CaptureRequest capture;
    capture.all_heads = true;
    capture.residuals = true;
    // the prompt in two forward passes so that the second reads a cache written by the first
    const std::size_t split = prompt.size() / 2;
    ForwardResult c0 = cpu.forward({.tokens = prompt.first(split)});
    ForwardResult o0 = other.forward({.tokens = prompt.first(split)});
    compare_logits(c0.logits, o0.logits, r, "first half of the prompt", bounds);
    compare_accounting(cpu.kv_cache().accounting(), other.kv_cache().accounting());
    ForwardResult c = cpu.forward({.tokens = prompt.subspan(split), .capture = &capture});
    ForwardResult o = other.forward({.tokens = prompt.subspan(split), .capture = &capture});
    compare_logits(c.logits, o.logits, r, "prompt", bounds);
    compare_accounting(cpu.kv_cache().accounting(), other.kv_cache().accounting());

    // captures: the same heads in the same order; weights within 1e-4
    QVERIFY(c.captures && o.captures);
    QCOMPARE(o.captures->attention.size(), c.captures->attention.size());
    for (std::size_t i = 0; i < c.captures->attention.size(); ++i) {
        const AttentionCapture &a = c.captures->attention[i], &b = o.captures->attention[i];
        QCOMPARE(b.layer, a.layer);
        QCOMPARE(b.head, a.head);
        QCOMPARE(b.kv_head, a.kv_head);
        QCOMPARE(b.first_position, a.first_position);
        QCOMPARE(b.n_queries, a.n_queries);
        QCOMPARE(b.n_keys, a.n_keys);
        QCOMPARE(b.head_dim, a.head_dim);
        QCOMPARE(b.scale, a.scale);
        QCOMPARE(b.weights.size(), a.weights.size());
        QCOMPARE(b.q.size(), a.q.size());
        QCOMPARE(b.k.size(), a.k.size());
        QCOMPARE(b.v.size(), a.v.size());
        const double dw = max_abs(a.weights, b.weights);
        if (std::getenv("TOKENSCOPE_PARITY_VERBOSE"))
            qInfo("layer %u head %u: attention weights max |Δ| %.3g, q %.3g", a.layer, a.head, dw, max_abs(a.q, b.q));
        r.max_attention_diff = std::max(r.max_attention_diff, dw);
        QVERIFY2(
            dw <= bounds.attention,
            qPrintable(QString("layer %1 head %2: attention weights differ by %3").arg(a.layer).arg(a.head).arg(dw)));
        // q, k, v are F16 values computed through different summation orders: a few F16 steps apart
        auto close16 = [](std::span<const float> x, std::span<const float> y) {
            double mag = 0;
            for (float v : x)
                mag = std::max(mag, double(std::fabs(v)));
            return max_abs(x, y) <= 0.02 * mag + 1e-3;
        };
        QVERIFY2(close16(a.q, b.q), "captured q differs");
        QVERIFY2(close16(a.k, b.k), "captured k differs");
        QVERIFY2(close16(a.v, b.v), "captured v differs");
    }
    QCOMPARE(o.captures->residuals.size(), c.captures->residuals.size());
    for (std::size_t l = 0; l < c.captures->residuals.size(); ++l) {
        const double p = pearson(c.captures->residuals[l], o.captures->residuals[l]);
        if (std::getenv("TOKENSCOPE_PARITY_VERBOSE"))
            qInfo("residual %zu: Pearson %.9f, max |Δ| %.3g", l, p,
                  max_abs(c.captures->residuals[l], o.captures->residuals[l]));
        QVERIFY2(p >= bounds.min_pearson, qPrintable(QString("residual of layer %1: Pearson %2").arg(l).arg(p)));
    }
    // the logit lens on the last layer's residual gives the forward pass's logits
    {
        const auto& last = o.captures->residuals.back();
        const std::size_t E = last.size() / (prompt.size() - split);
        const auto lens = other.project_to_vocab(std::span<const float>(last).subspan(last.size() - E));
        QCOMPARE(max_abs(lens, o.logits), 0.0);
        const auto& cpu_last = c.captures->residuals.back();
        compare_logits(cpu.project_to_vocab(std::span<const float>(cpu_last).subspan(cpu_last.size() - E)), lens, r,
                       "logit lens", bounds);
    }

    // greedy continuation
    std::vector<float> lc = c.logits, lo = o.logits;
    bool together = true;
    for (int step = 0; step < steps; ++step) {
        const TokenId tc = argmax(lc), to = argmax(lo);
        ++r.greedy_steps;
        if (tc != to) {
            QVERIFY2(leading_gap(lc) < 0.1f,
                     qPrintable(QString("greedy tokens differ at step %1 where the CPU's gap was %2")
                                    .arg(step)
                                    .arg(leading_gap(lc))));
            r.diverged_at_tie = true;
            together = false;
            break;
        }
        ++r.greedy_matched;
        lc = cpu.forward({.tokens = std::span(&tc, 1)}).logits;
        lo = other.forward({.tokens = std::span(&to, 1)}).logits;
        compare_logits(lc, lo, r, "decode step", bounds);
        compare_accounting(cpu.kv_cache().accounting(), other.kv_cache().accounting());
    }
    if (!together)
        return;

    // the KV read-back of every layer and KV head
    const auto& cfg = cpu.kv_cache().config();
    for (uint32_t l = 0; l < cfg.n_layer; ++l)
        for (uint32_t h = 0; h < cfg.n_kv_heads[l]; ++h) {
            const KvReadback a = cpu.read_kv(l, h), b = other.read_kv(l, h);
            QCOMPARE(b.n_positions, a.n_positions);
            QCOMPARE(b.held, a.held);
            double mag = 0;
            for (float v : a.keys)
                mag = std::max(mag, double(std::fabs(v)));
            QVERIFY2(max_abs(a.keys, b.keys) <= 0.02 * mag + 1e-3, qPrintable(QString("layer %1 keys differ").arg(l)));
            QVERIFY2(max_abs(a.values, b.values) <= 0.02 * mag + 1e-3,
                     qPrintable(QString("layer %1 values differ").arg(l)));
        }

    // back to the end of the prompt and one step again: the device cache is overwritten in place
    const uint32_t keep = uint32_t(prompt.size());
    const KvTruncation tc = cpu.kv_cache().truncate(keep), to = other.kv_cache().truncate(keep);
    QCOMPARE(to.recompute, tc.recompute);
    QCOMPARE(to.kept, tc.kept);
    compare_accounting(cpu.kv_cache().accounting(), other.kv_cache().accounting());
    if (!tc.recompute) {
        const TokenId t = prompt[0];
        compare_logits(cpu.forward({.tokens = std::span(&t, 1)}).logits,
                       other.forward({.tokens = std::span(&t, 1)}).logits, r, "after truncate", bounds);
        compare_accounting(cpu.kv_cache().accounting(), other.kv_cache().accounting());
    }
}

} // namespace testsupport
