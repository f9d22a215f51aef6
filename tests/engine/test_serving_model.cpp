// SPDX-License-Identifier: GPL-3.0-or-later
// The serving lab's pass on the chat model (Qwen2.5-Coder 0.5B Q4_K_M, in llama.cpp's repacked order
// as the app runs it): sixteen requests of sixteen real tokens in one pass of 256 tokens, then eight
// decode steps of all sixteen at once — in deterministic mode every logit vector is bit for bit the
// one of the request served alone.
#include "backend/backend.h"
#include "kv/kv_block_pool.h"
#include "kv/kv_sizing.h"
#include "kv/pooled_sequence.h"
#include "model/model.h"
#include "session/session.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

#include <QTest>
#include <cstring>

using namespace engine;

class TestServingModel : public QObject {
    Q_OBJECT
private slots:
    void sixteenRequestsInOnePassAreEachTheirOwn();
};

void TestServingModel::sixteenRequestsInOnePassAreEachTheirOwn()
{
    REQUIRE_CHAT_MODEL(path);
    const auto model = Model::load(path);
    constexpr int kRequests = 16, kPrompt = 16, kSteps = 8;
    const std::vector<TokenId> text = model->tokenizer().encode_ids(
        "Write a function that returns the n-th Fibonacci number. Explain how a hash map resolves collisions. "
        "What does the keyword volatile mean in C? Sort a list of tuples by their second element in Python. "
        "How do I read a file line by line in Rust? Convert a date string to a timestamp in JavaScript. "
        "Why is my SQL query slow when it joins three tables? Describe the difference between a process and a "
        "thread. Show a binary search in Go, and say what happens when the slice is empty.",
        {.add_special = false});
    QVERIFY(text.size() >= kRequests + kPrompt);
    std::vector<std::vector<TokenId>> prompts;
    for (int i = 0; i < kRequests; ++i)
        prompts.emplace_back(text.begin() + i, text.begin() + i + kPrompt); // 16 different windows of real text

    const CpuBackendOptions options{.threads = 2, .n_ctx = 64, .order = WeightOrder::LlamaCppDefault};
    // each request alone: its prompt, then its own greedy tokens
    std::vector<std::vector<std::vector<float>>> alone(kRequests);
    std::vector<std::vector<TokenId>> fed(kRequests);
    for (int i = 0; i < kRequests; ++i) {
        Session s(model, make_cpu_backend(model, options), 512);
        s.set_batch_invariant(true);
        s.prefill(prompts[std::size_t(i)]);
        alone[std::size_t(i)].emplace_back(s.logits().begin(), s.logits().end());
        for (int k = 0; k < kSteps; ++k) {
            const auto logits = s.logits();
            fed[std::size_t(i)].push_back(TokenId(std::max_element(logits.begin(), logits.end()) - logits.begin()));
            s.decode(fed[std::size_t(i)].back());
            alone[std::size_t(i)].emplace_back(s.logits().begin(), s.logits().end());
        }
    }

    auto backend = make_cpu_backend(model, options);
    KvCacheConfig layout = kv_cache_config_for(model->config(), 64);
    layout.block_tokens = 16;
    KvBlockPool pool(layout, kRequests * 2);
    std::vector<std::unique_ptr<PooledSequence>> seqs;
    for (int i = 0; i < kRequests; ++i)
        seqs.push_back(std::make_unique<PooledSequence>(pool, uint32_t(i), 64));
    int compared = 0;
    for (int step = 0; step <= kSteps; ++step) {
        BatchRequest batch;
        batch.batch_invariant = true;
        std::vector<std::vector<TokenId>> tokens(kRequests);
        for (int i = 0; i < kRequests; ++i) {
            tokens[std::size_t(i)] =
                step == 0 ? prompts[std::size_t(i)] : std::vector<TokenId>{fed[std::size_t(i)][std::size_t(step - 1)]};
            batch.sequences.push_back({seqs[std::size_t(i)].get(), tokens[std::size_t(i)], true});
        }
        const BatchResult r = backend->forward_batch(batch);
        for (int i = 0; i < kRequests; ++i) {
            const auto& want = alone[std::size_t(i)][std::size_t(step)];
            QVERIFY2(r.logits[std::size_t(i)].size() == want.size() &&
                         std::memcmp(r.logits[std::size_t(i)].data(), want.data(), want.size() * sizeof(float)) == 0,
                     qPrintable(QString("request %1, %2: not the bits of the request alone")
                                    .arg(i)
                                    .arg(step == 0 ? QString("the prompt") : QString("decode step %1").arg(step))));
            ++compared;
        }
    }
    QCOMPARE(compared, kRequests * (kSteps + 1));
    QCOMPARE(pool.n_held(), uint32_t(kRequests * 2)); // 24 positions each: two blocks of 16
}

QTEST_GUILESS_MAIN(TestServingModel)
#include "test_serving_model.moc"
