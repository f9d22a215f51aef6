// SPDX-License-Identifier: GPL-3.0-or-later
// The paged KV cache: accounting at every step against an independent count, sliding-window
// freeing with a reserve, truncation (cheap inside the reserve, a recompute beyond it), and on the
// real model a 700-token run checked at every step, plus prefix reuse across turns.
#include "backend/backend.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "session/session.h"
#include "test_paths.h"
#include "util/error.h"

#include <QTest>
#include <cmath>
#include <random>

using namespace engine;

namespace {

KvCacheConfig small_config()
{
    KvCacheConfig c;
    c.n_layer = 3;
    c.n_kv_heads = {2, 1, 2};
    c.head_dim = 16;
    c.window = {0, 64, 0};
    c.n_ctx = 1024;
    c.block_tokens = 32;
    c.reserve_blocks = 2;
    return c;
}

// bytes in use = 2 · kv_heads · head_dim · 2 bytes · Σ over layers of min(cached, window)
uint64_t expected_in_use(const KvCacheConfig& c, uint32_t n)
{
    uint64_t total = 0;
    for (uint32_t l = 0; l < c.n_layer; ++l)
        total += 2ull * c.n_kv_heads[l] * c.head_dim * 2 * (c.window[l] ? std::min(n, c.window[l]) : n);
    return total;
}

// Blocks the cache really holds, found by probing every block (independent of its counters).
uint64_t probed_allocated_bytes(const KvCache& kv)
{
    const auto& c = kv.config();
    uint64_t total = 0;
    for (uint32_t l = 0; l < c.n_layer; ++l)
        for (uint32_t b = 0; b * c.block_tokens < kv.n_cached(); ++b)
            if (kv.holds(l, b * c.block_tokens))
                total += 2ull * c.n_kv_heads[l] * c.block_tokens * c.head_dim * 2;
    return total;
}

} // namespace

class TestKvCache : public QObject {
    Q_OBJECT
private slots:
    void accountingAtEveryStep();
    void slidingWindowKeepsWindowPlusReserve();
    void truncationInsideAndBeyondTheReserve();
    void contextFullIsAnError();
    void realModel700TokenRun();
    void chatModelAccounting();
    void prefixReuseAcrossTurns();
};

void TestKvCache::accountingAtEveryStep()
{
    KvCache kv(small_config());
    for (uint32_t n = 1; n <= 700; ++n) {
        kv.reserve_until(n);
        kv.commit(n);
        const KvAccounting a = kv.accounting();
        QCOMPARE(a.tokens_cached, n);
        QCOMPARE(a.bytes_in_use, expected_in_use(kv.config(), n));
        QCOMPARE(a.bytes_allocated, probed_allocated_bytes(kv));
        uint64_t blocks = 0;
        for (const auto& l : a.layers)
            blocks += l.blocks_allocated;
        QCOMPARE(uint64_t(a.blocks_allocated), blocks);
        QVERIFY(a.bytes_allocated >= a.bytes_in_use);
    }
}

void TestKvCache::slidingWindowKeepsWindowPlusReserve()
{
    KvCache kv(small_config());
    kv.reserve_until(700);
    kv.commit(700);
    const auto a = kv.accounting();
    QCOMPARE(a.layers[0].blocks_allocated, 22u); // ceil(700/32): full attention keeps everything
    // Window 64 at 700 positions needs positions 636… (block 19); two reserve blocks stay behind.
    QCOMPARE(a.layers[1].first_stored, 17u * 32);
    QCOMPARE(a.layers[1].blocks_allocated, 22u - 17u);
    QCOMPARE(a.layers[1].tokens_in_use, 64u);
    QVERIFY(!kv.holds(1, 17 * 32 - 1));
    QVERIFY(kv.holds(1, 17 * 32));
}

void TestKvCache::truncationInsideAndBeyondTheReserve()
{
    KvCache kv(small_config());
    kv.reserve_until(700);
    kv.commit(700);
    KvTruncation t = kv.truncate(650); // needs 586… — held thanks to the reserve
    QVERIFY(!t.recompute);
    QCOMPARE(t.kept, 650u);
    QCOMPARE(kv.n_cached(), 650u);
    QCOMPARE(kv.accounting().bytes_in_use, expected_in_use(kv.config(), 650));
    t = kv.truncate(600); // needs 536…: block 16 was freed
    QVERIFY(t.recompute);
    QCOMPARE(*t.first_layer_short, 1u);
    QCOMPARE(kv.n_cached(), 0u);
    QCOMPARE(kv.accounting().bytes_allocated, uint64_t(0));
}

void TestKvCache::contextFullIsAnError()
{
    KvCache kv(small_config());
    QVERIFY_THROWS_EXCEPTION(Error, kv.reserve_until(1025));
    QCOMPARE(kv.n_cached(), 0u);
}

void TestKvCache::realModel700TokenRun()
{
    REQUIRE_DEFAULT_MODEL(path);
    const auto model = Model::load(path);
    Session session(model, make_cpu_backend(model, {.threads = 0, .n_ctx = 1024}));
    const auto& c = model->config();
    std::mt19937 rng(3);
    std::uniform_int_distribution<int32_t> pick(1000, 200000);
    std::vector<TokenId> prompt(600);
    for (auto& t : prompt)
        t = pick(rng);
    auto check = [&](uint32_t n) {
        const KvAccounting a = session.backend().kv_cache().accounting();
        uint64_t in_use = 0;
        for (uint32_t l = 0; l < c.n_layer; ++l)
            in_use +=
                2ull * c.n_head_kv[l] * c.head_dim_k * 2 * (c.layer_is_swa[l] ? std::min(n, c.sliding_window) : n);
        QCOMPARE(a.tokens_cached, n);
        QCOMPARE(a.bytes_in_use, in_use);
        QCOMPARE(a.bytes_allocated, probed_allocated_bytes(session.backend().kv_cache()));
    };
    session.prefill(prompt);
    check(600);
    for (uint32_t n = 601; n <= 700; ++n) {
        session.decode(pick(rng));
        check(n);
    }
    // 15 sliding-window layers stay capped at 512 tokens: in use = 2·1·256·2·(3·700 + 15·512)
    QCOMPARE(session.backend().kv_cache().accounting().bytes_in_use, uint64_t(2 * 256 * 2) * (3 * 700 + 15 * 512));
}

void TestKvCache::prefixReuseAcrossTurns()
{
    REQUIRE_DEFAULT_MODEL(path);
    const auto model = Model::load(path);
    Session session(model, make_cpu_backend(model, {.threads = 0, .n_ctx = 1024}));
    const auto& tok = model->tokenizer();
    const auto turn1 = tok.encode_ids("<start_of_turn>user\nName three rivers.<end_of_turn>\n<start_of_turn>model\n");
    auto turn2 = turn1;
    for (TokenId t : tok.encode_ids("The Nile.<end_of_turn>\n<start_of_turn>user\nAnd a lake?", {.add_special = false}))
        turn2.push_back(t);
    const PrefillReport first = session.prefill(turn1);
    QCOMPARE(first.reused, 0u);
    QCOMPARE(first.computed, uint32_t(turn1.size()));
    const std::vector<float> logits_after_turn1(session.logits().begin(), session.logits().end());
    const PrefillReport second = session.prefill(turn2);
    QCOMPARE(second.reused, uint32_t(turn1.size())); // the whole history is re-sent; only the new part is computed
    QCOMPARE(second.computed, uint32_t(turn2.size() - turn1.size()));
    // Back to the end of turn 1 (a what-if): the cache is truncated, not rebuilt, and the last kept
    // token is re-evaluated in the summation order of its original batch: the same logits, bit for bit.
    const PrefillReport back = session.truncate(uint32_t(turn1.size()));
    QCOMPARE(back.reused, uint32_t(turn1.size() - 1));
    QCOMPARE(back.computed, 1u);
    QCOMPARE(session.tokens().size(), turn1.size());
    QVERIFY(std::equal(logits_after_turn1.begin(), logits_after_turn1.end(), session.logits().begin()));
}

// The chat model's cache: 24 layers × 2 KV heads × 64 dimensions, keys and values in F16, no
// sliding window: 2 × 24 × 2 × 64 × 2 B = 12,288 bytes per cached token, at every step.
void TestKvCache::chatModelAccounting()
{
    REQUIRE_CHAT_MODEL(path);
    const auto model = Model::load(path);
    const auto& c = model->config();
    QCOMPARE(c.n_layer, 24u);
    for (uint32_t l = 0; l < c.n_layer; ++l) {
        QCOMPARE(c.n_head_kv[l], 2u);
        QVERIFY(!c.layer_is_swa[l]);
    }
    QCOMPARE(c.head_dim_k, 64u);
    QCOMPARE(c.head_dim_v, 64u);
    Session session(model, make_cpu_backend(model, {.threads = 0, .n_ctx = 1024}));
    const auto check = [&](uint32_t n) {
        const KvAccounting a = session.backend().kv_cache().accounting();
        QCOMPARE(a.tokens_cached, n);
        QCOMPARE(a.bytes_in_use, uint64_t(12288) * n);
        QCOMPARE(a.bytes_allocated, probed_allocated_bytes(session.backend().kv_cache()));
        QVERIFY(a.bytes_allocated >= a.bytes_in_use);
    };
    const auto prompt = model->tokenizer().encode_ids("The quick brown fox jumps over the lazy dog, and then it");
    session.prefill(prompt);
    check(uint32_t(prompt.size()));
    for (uint32_t n = uint32_t(prompt.size()) + 1; n <= 200; ++n) {
        session.decode(TokenId(1000 + n));
        check(n);
    }
    session.truncate(50);
    check(50);
}

QTEST_GUILESS_MAIN(TestKvCache)
#include "test_kv_cache.moc"
