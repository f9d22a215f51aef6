// SPDX-License-Identifier: GPL-3.0-or-later
// The serving lab's engine on generated small models: multi-sequence passes (Backend::forward_batch)
// give each sequence the logits of its single-sequence run — bit for bit in deterministic mode, within
// the tolerance criteria otherwise — with prompt chunks of 1, 7 and 64 and decode steps mixed in one
// batch of 2, 5 or 16 sequences; the block pool shares prefixes (computed once, counted), copies a
// shared block before a write (copy on write) and never lets a sequence change another's cache; the
// scheduler's preemption, by both policies, loses no request and resumes to identical output; the
// three batching modes give the same replies.
#include "backend/backend.h"
#include "backend/vulkan/vulkan_backend.h"
#include "kv/kv_block_pool.h"
#include "kv/kv_sizing.h"
#include "kv/pooled_sequence.h"
#include "logit_compare.h"
#include "model/test_model.h"
#include "serve/remote_serve.h"
#include "serve/serve_run.h"
#include "serve/serving_engine.h"
#include "serve/workload.h"
#include "session/session.h"
#include "util/error.h"

#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <cstring>
#include <set>

using namespace engine;

namespace {

constexpr uint32_t kBlock = 16;
constexpr uint32_t kCtx = 512;

std::vector<TokenId> random_tokens(const Model& model, std::size_t n, uint32_t seed)
{
    std::vector<TokenId> ids;
    uint32_t x = seed * 2654435761u + 12345;
    for (std::size_t i = 0; i < n; ++i) {
        x = x * 1664525u + 1013904223u;
        ids.push_back(TokenId(1 + (x >> 8) % (model.config().n_vocab - 1)));
    }
    return ids;
}

bool bit_equal(std::span<const float> a, std::span<const float> b)
{
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TokenId argmax(std::span<const float> logits)
{
    return TokenId(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// One sequence alone: the prompt in one prefill, then `steps` greedy tokens; the logits after the
// prompt and after each step.
struct Solo {
    std::vector<std::vector<float>> logits;
    std::vector<TokenId> fed; // the greedy tokens fed after the prompt
};

Solo solo_run(const std::shared_ptr<const Model>& model, std::span<const TokenId> prompt, int steps, bool invariant)
{
    Session s(model, make_cpu_backend(model, {.threads = 2, .n_ctx = kCtx}), 512);
    s.set_batch_invariant(invariant);
    Solo r;
    s.prefill(prompt);
    r.logits.emplace_back(s.logits().begin(), s.logits().end());
    for (int i = 0; i < steps; ++i) {
        r.fed.push_back(argmax(r.logits.back()));
        s.decode(r.fed.back());
        r.logits.emplace_back(s.logits().begin(), s.logits().end());
    }
    return r;
}

KvCacheConfig pool_layout(const Model& model)
{
    KvCacheConfig layout = kv_cache_config_for(model.config(), kCtx);
    layout.block_tokens = kBlock;
    return layout;
}

// Every written position of a sequence's cache (all layers and KV heads) as one hash.
uint64_t cache_hash(const Model& model, const KvStore& kv, uint32_t n)
{
    const ModelConfig& c = model.config();
    uint64_t h = 1469598103934665603ull;
    for (uint32_t il = 0; il < c.n_layer; ++il)
        for (uint32_t p = 0; p < n; ++p)
            for (uint32_t kvh = 0; kvh < c.n_head_kv[il]; ++kvh)
                for (const uint16_t* v : {kv.key(il, p, kvh), kv.value(il, p, kvh)})
                    for (uint32_t i = 0; i < c.head_dim_k; ++i) {
                        h ^= v[i];
                        h *= 1099511628211ull;
                    }
    return h;
}

// The engine's options in these tests: blocks of kBlock positions, sequences of at most kCtx.
ServingOptions test_options(uint32_t pool_blocks, bool deterministic)
{
    ServingOptions options;
    options.block_tokens = kBlock;
    options.pool_blocks = pool_blocks;
    options.deterministic = deterministic;
    options.n_ctx = kCtx;
    return options;
}

// Runs a request list to the end on a virtual clock (the passes' own time, idle gaps skipped).
void run_to_end(ServingEngine& engine, const std::function<void(const ServeStep&)>& after_step = {})
{
    double now = 0;
    for (int guard = 0; !engine.done(); ++guard) {
        if (guard > 100000)
            qFatal("the serving engine did not finish");
        if (auto rec = engine.step(now)) {
            now = rec->end_s;
            if (after_step)
                after_step(*rec);
        } else if (auto next = engine.next_arrival(now)) {
            now = *next;
        } else {
            qFatal("the serving engine is stuck: nothing runs and nothing arrives");
        }
    }
}

std::vector<std::vector<TokenId>> outputs(const ServingEngine& engine)
{
    std::vector<std::vector<TokenId>> out;
    for (const RequestState& r : engine.requests())
        out.push_back(r.output);
    return out;
}

} // namespace

class TestServing : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { QVERIFY(m_dir.isValid()); }
    void batchedSequencesGetTheirOwnLogits_data();
    void batchedSequencesGetTheirOwnLogits();
    void sharedPrefixIsComputedOnce();
    void copyOnWriteKeepsEverySequenceItsOwn();
    void preemptionLosesNothing_data();
    void preemptionLosesNothing();
    void batchingModesGiveTheSameReplies();
    void badRequestsAreRefusedByName();
    void otherBackendsRefuseIt();
    void workloadsAreWhatTheSettingsSay();
    void percentilesAreNearestRank();
    void serverWorkloadsAndTheirFigures();

private:
    std::shared_ptr<const Model> model_of(const QString& arch);
    QTemporaryDir m_dir;
};

std::shared_ptr<const Model> TestServing::model_of(const QString& arch)
{
    const std::string path = m_dir.filePath(arch + ".gguf").toStdString();
    if (!QFile::exists(QString::fromStdString(path)))
        make_test_model(arch.toStdString(), 7, {}).write(path);
    return Model::load(path);
}

void TestServing::batchedSequencesGetTheirOwnLogits_data()
{
    QTest::addColumn<QString>("arch");
    QTest::addColumn<int>("n_seq");
    QTest::addColumn<bool>("invariant");
    // llama (the test model's quant mix), gemma3 (sliding-window layers, pre-scaled queries), qwen2
    // (biases); batches of 2, 5 and 16 sequences; deterministic and default mode
    for (const char* arch : {"llama", "gemma3", "qwen2"})
        for (const int n : {2, 5, 16})
            for (const bool invariant : {true, false})
                QTest::addRow("%s %d %s", arch, n, invariant ? "deterministic" : "default")
                    << QString(arch) << n << invariant;
}

// Sequences of different lengths start at different steps; each feeds its prompt in chunks of 1, 7 or
// 64 while the others decode, all in one pass per step. Every logit vector a sequence gets must be its
// solo run's (deterministic: the same bits).
void TestServing::batchedSequencesGetTheirOwnLogits()
{
    QFETCH(QString, arch);
    QFETCH(int, n_seq);
    QFETCH(bool, invariant);
    const auto model = model_of(arch);
    constexpr int kSteps = 4;
    const uint32_t chunks[] = {1, 7, 64};

    struct Seq {
        std::vector<TokenId> prompt;
        Solo solo;
        uint32_t chunk = 1, start = 0, fed_prompt = 0, fed_steps = 0;
        std::vector<std::vector<float>> logits;
        std::unique_ptr<PooledSequence> kv;
    };
    auto backend = make_cpu_backend(model, {.threads = 2, .n_ctx = kCtx});
    KvBlockPool pool(pool_layout(*model), 256);
    std::vector<Seq> seqs(static_cast<std::size_t>(n_seq));
    for (int i = 0; i < n_seq; ++i) {
        Seq& s = seqs[std::size_t(i)];
        s.prompt = random_tokens(*model, 3 + std::size_t(i * 13) % 70, uint32_t(i));
        s.solo = solo_run(model, s.prompt, kSteps, invariant);
        s.chunk = chunks[i % 3];
        s.start = uint32_t(i % 4);
        s.kv = std::make_unique<PooledSequence>(pool, uint32_t(i), kCtx);
    }
    for (uint32_t step = 0;; ++step) {
        BatchRequest batch;
        batch.batch_invariant = invariant;
        std::vector<std::size_t> in_batch;
        std::vector<std::vector<TokenId>> fed(seqs.size());
        for (std::size_t i = 0; i < seqs.size(); ++i) {
            Seq& s = seqs[i];
            if (step < s.start || s.fed_steps == kSteps)
                continue;
            if (s.fed_prompt < s.prompt.size()) {
                const auto n = std::min<std::size_t>(s.chunk, s.prompt.size() - s.fed_prompt);
                fed[i].assign(s.prompt.begin() + s.fed_prompt, s.prompt.begin() + std::ptrdiff_t(s.fed_prompt + n));
                s.fed_prompt += uint32_t(n);
            } else {
                fed[i] = {s.solo.fed[s.fed_steps++]}; // the solo run's greedy token: both runs read the same input
            }
            batch.sequences.push_back({s.kv.get(), fed[i], s.fed_prompt == s.prompt.size()});
            in_batch.push_back(i);
        }
        if (batch.sequences.empty())
            break;
        const BatchResult result = backend->forward_batch(batch);
        for (std::size_t k = 0; k < in_batch.size(); ++k)
            if (batch.sequences[k].logits)
                seqs[in_batch[k]].logits.push_back(result.logits[k]);
    }
    double worst_pearson = 1.0, worst_abs = 0.0;
    int differing = 0;
    for (std::size_t i = 0; i < seqs.size(); ++i) {
        const Seq& s = seqs[i];
        QCOMPARE(s.logits.size(), s.solo.logits.size());
        for (std::size_t k = 0; k < s.logits.size(); ++k) {
            const QString where = QString("sequence %1 (prompt of %2 in chunks of %3), %4")
                                      .arg(i)
                                      .arg(s.prompt.size())
                                      .arg(s.chunk)
                                      .arg(k == 0 ? QString("after the prompt") : QString("decode step %1").arg(k));
            const bool same = bit_equal(s.logits[k], s.solo.logits[k]);
            differing += !same;
            if (invariant) {
                QVERIFY2(same, qPrintable(where + ": not the bits of the sequence alone"));
                continue;
            }
            const double p = testsupport::pearson(s.logits[k], s.solo.logits[k]);
            worst_pearson = std::min(worst_pearson, p);
            for (std::size_t v = 0; v < s.logits[k].size(); ++v)
                worst_abs = std::max(worst_abs, double(std::fabs(s.logits[k][v] - s.solo.logits[k][v])));
            // the tolerance criteria: the sums follow the batch's size, as llama.cpp's do (a solo run
            // cut into other batches moves as far), so Pearson ≥ 0.999 and the same greedy token
            // unless the solo run's two leading candidates were within 0.1
            QVERIFY2(p >= 0.999, qPrintable(where + QString(": Pearson %1").arg(p, 0, 'f', 7)));
            const auto top = testsupport::top_ids(s.solo.logits[k], 2);
            const float gap = s.solo.logits[k][std::size_t(top[0])] - s.solo.logits[k][std::size_t(top[1])];
            QVERIFY2(argmax(s.logits[k]) == top[0] || gap < 0.1f, qPrintable(where + ": another greedy token"));
        }
    }
    if (!invariant) // reported, not hidden: the default mode sums as llama.cpp does, by batch size
        qInfo("default mode: %d logit vectors differ from the solo runs' bits; worst Pearson %.7f, max |Δ| %g",
              differing, worst_pearson, worst_abs);
}

// A common 48-token system prompt (3 blocks) before each request's own words: the first request
// computes it, the later ones take its blocks (counted) and reply exactly as they do alone.
void TestServing::sharedPrefixIsComputedOnce()
{
    const auto model = model_of("llama");
    auto backend = make_cpu_backend(model, {.threads = 2, .n_ctx = kCtx});
    const std::vector<TokenId> system = random_tokens(*model, 3 * kBlock, 99);
    ServingOptions options = test_options(128, true);
    ServingEngine engine(*backend, options);
    std::vector<ServeRequest> asked;
    for (uint32_t i = 0; i < 4; ++i) {
        ServeRequest r;
        r.prompt = system;
        const auto own = random_tokens(*model, 5 + i * 7, 200 + i);
        r.prompt.insert(r.prompt.end(), own.begin(), own.end());
        r.max_new_tokens = 6;
        r.sampling.temperature = 0; // greedy
        r.stop_at_end_of_generation = false;
        r.arrival_s = i == 0 ? 0.0 : 1000.0; // the others after the first has computed the prefix
        asked.push_back(r);
        engine.submit(r);
    }
    run_to_end(engine);
    const auto& done = engine.requests();
    QCOMPARE(done[0].reused_tokens, 0u);
    QCOMPARE(done[0].computed_tokens, uint32_t(done[0].request.prompt.size() + 5)); // 6 sampled, 5 fed back
    for (std::size_t i = 1; i < done.size(); ++i) {
        QCOMPARE(done[i].reused_tokens, 3 * kBlock);
        QCOMPARE(done[i].computed_tokens, uint32_t(done[i].request.prompt.size() - 3 * kBlock + 5));
    }
    QCOMPARE(engine.pool().counters().prefix_hits, uint64_t(3 * 3));

    // each reply is the reply of the request served alone, with no prefix cache
    for (std::size_t i = 0; i < asked.size(); ++i) {
        ServingOptions alone = options;
        alone.prefix_caching = false;
        ServingEngine single(*backend, alone);
        ServeRequest r = asked[i];
        r.arrival_s = 0;
        single.submit(r);
        run_to_end(single);
        QCOMPARE(single.requests()[0].reused_tokens, 0u);
        QCOMPARE(single.requests()[0].output, done[i].output);
    }
}

// Parallel sampling: three replies to one prompt share its blocks; the two that write into the shared
// last block first copy it (copy on write). After every step no sequence's written positions have
// changed, and at the end every sequence's cache is bit for bit the cache of its tokens computed alone.
void TestServing::copyOnWriteKeepsEverySequenceItsOwn()
{
    const auto model = model_of("llama");
    auto backend = make_cpu_backend(model, {.threads = 2, .n_ctx = kCtx});
    ServingOptions options = test_options(64, true);
    ServingEngine engine(*backend, options);
    ServeRequest r;
    r.prompt = random_tokens(*model, 2 * kBlock + 5, 5); // the last block is shared half-full
    r.max_new_tokens = 2 * kBlock;
    r.samples = 3;
    r.sampling.temperature = 1.5f;
    r.sampling.top_k = 0;
    r.sampling.top_p = 1.0f;
    r.sampling.min_p = 0.0f;
    r.sampling.seed = 11;
    r.stop_at_end_of_generation = false;
    engine.submit(r);
    ServeRequest other; // a second prompt in the same pool, never shared
    other.prompt = random_tokens(*model, 9, 6);
    other.max_new_tokens = 20;
    other.sampling.temperature = 0;
    other.stop_at_end_of_generation = false;
    engine.submit(other);

    // Hashes of what each sequence had written before a step, checked after it; and once per sequence,
    // one step before its last, its whole cache against the cache of its tokens computed alone.
    const auto alone_hash = [&](std::vector<TokenId> tokens) {
        KvBlockPool pool(pool_layout(*model), 64);
        PooledSequence alone(pool, 0, kCtx);
        backend->forward_batch({.sequences = {{&alone, tokens, true}}, .batch_invariant = true});
        return cache_hash(*model, alone, uint32_t(tokens.size()));
    };
    std::map<uint32_t, std::pair<uint32_t, uint64_t>> before;
    std::set<uint32_t> rebuilt;
    int checked = 0;
    double now = 0;
    while (!engine.done()) {
        before.clear();
        for (const RequestState& s : engine.requests())
            if (const KvStore* kv = engine.sequence(s.id))
                before[s.id] = {s.n_computed, cache_hash(*model, *kv, s.n_computed)};
        auto rec = engine.step(now);
        QVERIFY(rec);
        now = rec->end_s;
        for (const auto& [id, seen] : before)
            if (const KvStore* kv = engine.sequence(id)) {
                QVERIFY2(cache_hash(*model, *kv, seen.first) == seen.second,
                         qPrintable(QString("step %1 changed what sequence %2 had written").arg(rec->index).arg(id)));
                ++checked;
            }
        for (const RequestState& s : engine.requests())
            if (s.phase == RequestPhase::Decode && s.output.size() + 1 == s.request.max_new_tokens &&
                rebuilt.insert(s.id).second) {
                std::vector<TokenId> tokens = s.tokens();
                tokens.pop_back(); // the last sampled token is fed by the next step
                QCOMPARE(s.n_computed, uint32_t(tokens.size()));
                QVERIFY2(cache_hash(*model, *engine.sequence(s.id), s.n_computed) == alone_hash(tokens),
                         qPrintable(QString("sequence %1's cache is not the cache of its tokens alone").arg(s.id)));
            }
    }
    QVERIFY(checked > 20);
    QCOMPARE(rebuilt.size(), std::size_t(4));
    QCOMPARE(engine.requests().size(), std::size_t(4)); // two forked replies
    QCOMPARE(engine.pool().counters().cow_copies, uint64_t(2));
    std::set<std::vector<TokenId>> replies;
    for (const RequestState& s : engine.requests())
        if (s.request.prompt == r.prompt)
            replies.insert(s.output);
    QVERIFY2(replies.size() == 3, "the three sampled replies should differ (their seeds do)");
}

void TestServing::preemptionLosesNothing_data()
{
    QTest::addColumn<QString>("policy");
    QTest::newRow("recompute") << "recompute";
    QTest::newRow("swap") << "swap";
}

// A pool too small for every request at once: requests are preempted (by the chosen policy) and
// resume; every request finishes with the reply it gets in a pool large enough for all.
void TestServing::preemptionLosesNothing()
{
    QFETCH(QString, policy);
    const auto model = model_of("qwen2");
    auto backend = make_cpu_backend(model, {.threads = 2, .n_ctx = kCtx});
    std::vector<ServeRequest> asked;
    for (uint32_t i = 0; i < 6; ++i) {
        ServeRequest r;
        r.prompt = random_tokens(*model, 10 + i * 5, 300 + i);
        r.max_new_tokens = 24;
        r.sampling.temperature = 0.9f;
        r.sampling.seed = 1000 + i;
        r.stop_at_end_of_generation = false;
        r.arrival_s = 0.0;
        asked.push_back(r);
    }
    const auto serve = [&](uint32_t blocks, PreemptionPolicy p) {
        ServingOptions options = test_options(blocks, true);
        options.preemption = p;
        options.step_tokens = 32;
        auto engine = std::make_unique<ServingEngine>(*backend, options);
        for (const ServeRequest& r : asked)
            engine->submit(r);
        run_to_end(*engine, [&](const ServeStep& rec) {
            if (qEnvironmentVariableIsSet("DEBUG_SERVE")) {
                QString line = QString("step %1 held %2:").arg(rec.index).arg(rec.blocks_held);
                for (const auto& sl : rec.slices)
                    line += QString(" r%1+%2").arg(sl.request).arg(sl.n_tokens);
                for (const auto& e : rec.events)
                    line += QString(" [%1 %2]").arg(QString::fromUtf8(serve_event_name(e.kind).data())).arg(e.request);
                qInfo("%s", qPrintable(line));
            }
        });
        return engine;
    };
    const auto roomy = serve(256, PreemptionPolicy::Recompute);
    for (const RequestState& r : roomy->requests())
        QCOMPARE(r.preemptions, 0u);
    const auto tight = serve(8, parse_preemption(policy.toStdString()));
    uint32_t preemptions = 0, swaps = 0;
    for (const RequestState& r : tight->requests()) {
        QCOMPARE(r.phase, RequestPhase::Done);
        QCOMPARE(r.finish_reason, std::string("length"));
        preemptions += r.preemptions;
        swaps += r.swaps;
    }
    QVERIFY2(preemptions > 0, "the pool of 8 blocks should have forced preemptions");
    if (policy == "swap")
        QCOMPARE(swaps, preemptions);
    else
        QCOMPARE(swaps, 0u);
    QCOMPARE(outputs(*tight), outputs(*roomy));
    QCOMPARE(tight->host_store_bytes(), uint64_t(0)); // everything swapped out came back
    qInfo("%s: %u preemptions, every reply identical", qPrintable(policy), preemptions);
}

// One at a time, static batches and continuous batching serve the same workload to the same replies
// (deterministic mode); one at a time never runs two requests in a pass, static never admits while a
// batch runs, and continuous batching takes fewer passes than one at a time.
void TestServing::batchingModesGiveTheSameReplies()
{
    const auto model = model_of("gemma3");
    auto backend = make_cpu_backend(model, {.threads = 2, .n_ctx = kCtx});
    std::vector<ServeRequest> asked;
    for (uint32_t i = 0; i < 5; ++i) {
        ServeRequest r;
        r.prompt = random_tokens(*model, 6 + i * 9, 400 + i);
        r.max_new_tokens = 5 + i * 3;
        r.sampling.temperature = 0;
        r.stop_at_end_of_generation = false;
        r.arrival_s = 0.001 * i;
        asked.push_back(r);
    }
    std::map<BatchingMode, std::vector<std::vector<TokenId>>> replies;
    std::map<BatchingMode, int> passes;
    for (const BatchingMode mode : {BatchingMode::OneAtATime, BatchingMode::Static, BatchingMode::Continuous}) {
        ServingOptions options = test_options(256, true);
        options.mode = mode;
        options.max_running = 3;
        ServingEngine engine(*backend, options);
        for (const ServeRequest& r : asked)
            engine.submit(r);
        bool static_running = false; // a static batch held requests after the previous step
        run_to_end(engine, [&](const ServeStep& rec) {
            ++passes[mode];
            std::set<uint32_t> in_pass;
            for (const ServeSlice& s : rec.slices)
                in_pass.insert(s.request);
            QVERIFY(in_pass.size() <= 3);
            if (mode == BatchingMode::OneAtATime)
                QVERIFY(in_pass.size() <= 1);
            if (mode == BatchingMode::Static)
                for (const ServeEvent& e : rec.events)
                    if (e.kind == ServeEvent::Kind::Admitted)
                        QVERIFY2(!static_running, "static batching admitted while a batch ran");
            static_running = rec.running > 0;
        });
        for (const RequestState& r : engine.requests())
            QCOMPARE(r.output.size(), std::size_t(r.request.max_new_tokens));
        replies[mode] = outputs(engine);
    }
    QCOMPARE(replies[BatchingMode::Static], replies[BatchingMode::OneAtATime]);
    QCOMPARE(replies[BatchingMode::Continuous], replies[BatchingMode::OneAtATime]);
    QVERIFY(passes[BatchingMode::Continuous] < passes[BatchingMode::OneAtATime]);
}

void TestServing::badRequestsAreRefusedByName()
{
    const auto model = model_of("llama");
    auto backend = make_cpu_backend(model, {.threads = 2, .n_ctx = kCtx});
    ServingOptions options = test_options(4, false);
    ServingEngine engine(*backend, options);
    const auto refused = [&](ServeRequest r, const char* words) {
        try {
            engine.submit(std::move(r));
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains(words), e.what());
            return;
        }
        QFAIL(qPrintable(QString("accepted a request that should say '%1'").arg(words)));
    };
    refused({}, "empty prompt");
    refused({.prompt = random_tokens(*model, 70, 1)}, "KV blocks even alone");
    refused({.prompt = random_tokens(*model, 500, 1), .max_new_tokens = 100}, "a sequence holds at most 512");
    refused({.prompt = {TokenId(model->config().n_vocab)}}, "outside the vocabulary");
    QVERIFY(engine.done()); // nothing was queued
    QVERIFY(!engine.step(0.0));

    // a pass whose sequence appears twice, or an empty batch
    KvBlockPool pool(pool_layout(*model), 8);
    PooledSequence seq(pool, 0, kCtx);
    const std::vector<TokenId> t{5, 6};
    QVERIFY_THROWS_EXCEPTION(Error, backend->forward_batch({.sequences = {{&seq, t, true}, {&seq, t, true}}}));
    QVERIFY_THROWS_EXCEPTION(Error, backend->forward_batch({}));
    QCOMPARE(seq.n_cached(), 0u);
}

void TestServing::otherBackendsRefuseIt()
{
#ifdef TOKENSCOPE_HAVE_VULKAN
    bool device = false;
    for (const auto& d : list_vulkan_devices())
        device |= d.usable;
    if (!device)
        QSKIP("no usable Vulkan device here: the refusal is checked where one is (lavapipe in CI)");
    const auto model = model_of("llama");
    auto vulkan = make_vulkan_backend(model, {.device = -1, .n_ctx = 64});
    QVERIFY(!vulkan->multi_sequence_capable());
    try {
        ServingEngine engine(*vulkan, {});
        QFAIL("the Vulkan backend took the serving engine");
    } catch (const UnsupportedError& e) {
        QVERIFY2(QString(e.what()).contains("CPU backend only"), e.what());
    }
    KvBlockPool pool(pool_layout(*model), 8);
    PooledSequence seq(pool, 0, kCtx);
    const std::vector<TokenId> t{5};
    QVERIFY_THROWS_EXCEPTION(UnsupportedError, vulkan->forward_batch({.sequences = {{&seq, t, true}}}));
#else
    QSKIP("built without Vulkan");
#endif
}

// Simulated clients: the same seed gives the same requests; lengths within their ranges; a share of 1
// puts the same system prompt first in every prompt, a share of 0 in none; arrivals in order, all at 0
// when the rate is 0; bad settings named.
void TestServing::workloadsAreWhatTheSettingsSay()
{
    const auto model = model_of("llama");
    const Tokenizer& tok = model->tokenizer();
    WorkloadSpec spec;
    spec.clients = 40;
    spec.arrival_rate = 5;
    spec.prompt_min = 10;
    spec.prompt_max = 30;
    spec.output_min = 4;
    spec.output_max = 9;
    spec.shared_fraction = 1.0;
    spec.shared_tokens = 20;
    const auto a = make_workload(spec, tok), b = make_workload(spec, tok);
    QCOMPARE(a.size(), std::size_t(40));
    const std::size_t bos = tok.vocab().add_bos && tok.vocab().bos ? 1 : 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        QCOMPARE(a[i].prompt, b[i].prompt);
        QCOMPARE(a[i].arrival_s, b[i].arrival_s);
        const std::size_t own = a[i].prompt.size() - bos - 20;
        QVERIFY2(own >= 10 && own <= 30, qPrintable(QString("request %1: %2 own prompt tokens").arg(i).arg(own)));
        QVERIFY(a[i].max_new_tokens >= 4 && a[i].max_new_tokens <= 9);
        QVERIFY(std::equal(a[0].prompt.begin(), a[0].prompt.begin() + std::ptrdiff_t(bos + 20), a[i].prompt.begin()));
        if (i > 0)
            QVERIFY(a[i].arrival_s >= a[i - 1].arrival_s);
    }
    QVERIFY(a.back().arrival_s > 2.0 && a.back().arrival_s < 20.0); // 39 gaps of 1/5 s on average
    spec.shared_fraction = 0;
    spec.arrival_rate = 0;
    spec.seed = 2;
    const auto c = make_workload(spec, tok);
    int same_start = 0;
    for (const ServeRequest& r : c) {
        QCOMPARE(r.arrival_s, 0.0);
        same_start += std::equal(c[0].prompt.begin(), c[0].prompt.begin() + std::ptrdiff_t(bos + 8), r.prompt.begin());
    }
    QVERIFY2(same_start < 10, "without the system prompt, prompts should begin differently");
    spec.prompts = {"Why is the sky blue?", "Name three prime numbers."};
    const auto d = make_workload(spec, tok);
    QCOMPARE(d[2].prompt, d[0].prompt); // cycled
    QVERIFY(d[1].prompt != d[0].prompt);
    for (const auto& [bad, words] : std::vector<std::pair<WorkloadSpec, const char*>>{
             {WorkloadSpec{.clients = 0}, "0 clients"},
             {WorkloadSpec{.prompt_min = 9, .prompt_max = 3}, "prompt lengths 9"},
             {WorkloadSpec{.output_min = 0}, "reply lengths 0"},
             {WorkloadSpec{.shared_fraction = 1.5}, "between 0 and 1"},
             {WorkloadSpec{.arrival_rate = -1}, "arrival rate"}}) {
        try {
            validate_workload(bad);
            QFAIL(qPrintable(QString("accepted a workload that should say '%1'").arg(words)));
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains(words), e.what());
        }
    }
}

// The workload a server gets: the same arrivals, reply lengths and seeds as the local one, prompts as
// words, a reply per sample; the limits refuse by name; the figures from what came back.
void TestServing::serverWorkloadsAndTheirFigures()
{
    const auto model = model_of("llama");
    WorkloadSpec spec;
    spec.clients = 12;
    spec.arrival_rate = 4;
    spec.prompt_min = 5;
    spec.prompt_max = 9;
    spec.shared_fraction = 0.5;
    spec.shared_tokens = 6;
    spec.samples = 2;
    const auto local = make_workload(spec, model->tokenizer());
    const auto text = make_text_workload(spec);
    QCOMPARE(text.size(), local.size() * 2);
    int shared = 0;
    for (std::size_t i = 0; i < local.size(); ++i) {
        for (std::size_t k = 0; k < 2; ++k) {
            const TextRequest& t = text[2 * i + k];
            QCOMPARE(t.arrival_s, local[i].arrival_s);
            QCOMPARE(t.max_new_tokens, local[i].max_new_tokens);
            QCOMPARE(t.seed, local[i].sampling.seed + k);
            QCOMPARE(t.prompt, text[2 * i].prompt); // the samples share the prompt
        }
        const bool with_system = text[2 * i].prompt.find("\n\n") != std::string::npos;
        shared += with_system;
        const uint32_t own = text[2 * i].prompt_words - (with_system ? 6 : 0);
        QVERIFY2(own >= 5 && own <= 9, qPrintable(QString("%1 words: %2").arg(own).arg(text[2 * i].prompt.c_str())));
    }
    QVERIFY(shared > 0 && shared < 12);

    RemoteServeLimits limits{.max_concurrent = 4, .max_requests = 20};
    try {
        check_remote_workload(text, limits);
        QFAIL("24 requests passed a limit of 20");
    } catch (const Error& e) {
        QVERIFY2(QString(e.what()).contains("24 requests") && QString(e.what()).contains("at most 20"), e.what());
    }
    limits.max_requests = 24;
    check_remote_workload(text, limits);
    QVERIFY_THROWS_EXCEPTION(Error, check_remote_workload(text, RemoteServeLimits{.max_concurrent = 0}));
    QVERIFY_THROWS_EXCEPTION(Error, check_remote_workload({}, limits));

    RemoteServeResult run;
    run.requests = {text[0], text[1], text[2]};
    run.requests[0].arrival_s = 0.0;
    run.requests[1].arrival_s = 0.5;
    run.requests[2].arrival_s = 1.0;
    run.results.resize(3);
    run.results[0] = {.sent_s = 0.0, .first_token_s = 0.2, .done_s = 0.5, .token_s = {0.2, 0.3, 0.5}, .tokens = 3};
    run.results[1] = {.sent_s = 0.5, .first_token_s = 0.9, .done_s = 1.0, .token_s = {0.9, 1.0}, .tokens = 2};
    run.results[2] = {.sent_s = 1.0, .done_s = 1.5, .error = "HTTP 503"};
    summarize_remote_run(run);
    QCOMPARE(run.finished, 2u);
    QCOMPARE(run.failed, 1u);
    QCOMPARE(run.generated_tokens, uint64_t(5));
    QCOMPARE(run.makespan_s, 1.5);
    QCOMPARE(run.ttft.count, std::size_t(2));
    QVERIFY(std::abs(run.ttft.max - 0.4) < 1e-12); // 0.9 − 0.5
    QCOMPARE(run.itl.count, std::size_t(3));       // 0.1, 0.2, 0.1
    QVERIFY(std::abs(run.itl.max - 0.2) < 1e-12);
    QVERIFY(std::abs(run.latency.max - 0.5) < 1e-12); // both ended 0.5 s after they arrived
}

void TestServing::percentilesAreNearestRank()
{
    std::vector<double> v;
    for (int i = 100; i >= 1; --i)
        v.push_back(i); // 1 … 100, unsorted
    const Percentiles p = percentiles(v);
    QCOMPARE(p.p50, 50.0);
    QCOMPARE(p.p90, 90.0);
    QCOMPARE(p.p99, 99.0);
    QCOMPARE(p.max, 100.0);
    QCOMPARE(p.count, std::size_t(100));
    const Percentiles one = percentiles({7.5});
    QCOMPARE(one.p50, 7.5);
    QCOMPARE(one.p99, 7.5);
    QCOMPARE(percentiles({}).count, std::size_t(0));
}

QTEST_GUILESS_MAIN(TestServing)
#include "test_serving.moc"
