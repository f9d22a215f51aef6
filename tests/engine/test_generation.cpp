// SPDX-License-Identifier: GPL-3.0-or-later
// Generation end to end on the real model: seeded sampling is reproducible, stop conditions end the
// run with the right reason, traces record every step, bad input gives clear errors, an unknown
// architecture is refused by name, and peak memory for 512 tokens stays within 1.5 × the model file
// plus the KV cache.
#include "backend/backend.h"
#include "gguf_builder.h"
#include "model/model.h"
#include "process_status.h"
#include "session/generator.h"
#include "test_paths.h"
#include "util/error.h"

#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <filesystem>
#include <fstream>

using namespace engine;

class TestGeneration : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void seededSamplingIsReproducible();
    void stopReasons();
    void badInputGivesClearErrors();
    void unknownArchitectureIsRefusedByName();
    void peakMemoryFor512Tokens();

private:
    std::shared_ptr<const Model> m_model;
};

void TestGeneration::initTestCase()
{
    REQUIRE_DEFAULT_MODEL(path);
    m_model = Model::load(path);
}

void TestGeneration::seededSamplingIsReproducible()
{
    auto run = [&](uint64_t seed) {
        Session s(m_model, make_cpu_backend(m_model, {.threads = 0, .n_ctx = 512}));
        SamplerConfig c;
        c.seed = seed;
        c.temperature = 1.0f;
        Sampler sampler(c);
        return generate(s, sampler, "Once upon a time", {.max_tokens = 24});
    };
    const GenerationTrace a = run(7), b = run(7), c = run(8);
    QCOMPARE(a.steps.size(), std::size_t(24));
    QCOMPARE(a.text, b.text);
    QVERIFY(a.text != c.text);
    QCOMPARE(a.stop, StopReason::MaxTokens);
    QCOMPARE(a.prompt_tokens, uint32_t(m_model->tokenizer().encode_ids("Once upon a time").size()));
    for (std::size_t i = 0; i < a.steps.size(); ++i) {
        QVERIFY(a.steps[i].probability > 0.0f && a.steps[i].probability <= 1.0f);
        QVERIFY(!a.steps[i].top.empty());
        QCOMPARE(a.steps[i].kv.tokens_cached, a.prompt_tokens + uint32_t(i) + (i + 1 == a.steps.size() ? 0u : 1u));
    }
    QVERIFY(a.ttft_ms > 0.0);
    // The timeline: contiguous events from 0; TTFT is tokenize + prefill + the first token's sample
    // and detokenize, exactly; every later latency is its decode + sample + detokenize.
    QVERIFY(!a.events.empty());
    QCOMPARE(a.events.front().begin_ns, int64_t(0));
    for (std::size_t i = 1; i < a.events.size(); ++i)
        QCOMPARE(a.events[i].begin_ns, a.events[i - 1].end_ns);
    QCOMPARE(a.events[0].stage, TimelineStage::Tokenize);
    QCOMPARE(a.events[1].stage, TimelineStage::Prefill);
    const auto span_of = [&](int32_t step) {
        int64_t ns = 0;
        for (const auto& e : a.events)
            if (e.step == step || (step == 0 && e.step == -1))
                ns += e.end_ns - e.begin_ns;
        return double(ns) / 1e6;
    };
    QCOMPARE(a.ttft_ms, span_of(0));
    QCOMPARE(a.steps[0].latency_ms, a.ttft_ms);
    QCOMPARE(a.ttft_ms, double(a.events[3].end_ns - a.events[0].begin_ns) / 1e6);
    for (std::size_t i = 1; i < a.steps.size(); ++i) {
        QCOMPARE(a.steps[i].latency_ms, span_of(int32_t(i)));
        QVERIFY(std::abs(a.steps[i].latency_ms - (a.steps[i].ms + a.steps[i].sample_ms + a.steps[i].detokenize_ms)) <
                1e-9);
        QVERIFY(a.steps[i].ms > 0.0);
    }
    QVERIFY(a.decode_tokens_per_second() > 0.0);
}

void TestGeneration::stopReasons()
{
    Session s(m_model, make_cpu_backend(m_model, {.threads = 0, .n_ctx = 512}));
    SamplerConfig greedy;
    greedy.greedy = true;
    Sampler sampler(greedy);
    // Greedy continuation of this prompt is "… watched the sun set over the harbor.\n\n…" (llama.cpp's too).
    const auto t = generate(s, sampler, "The old lighthouse keeper climbed the stairs every evening and",
                            {.max_tokens = 64, .stop_strings = {"harbor"}});
    QCOMPARE(t.stop, StopReason::StopString);
    QVERIFY2(t.text.find("harbor") == std::string::npos, t.text.c_str()); // the stop string is not shown
    QVERIFY(t.text.find("sun set over the") != std::string::npos);
    // End of generation: forcing <end_of_turn> as the only candidate stops at once.
    std::vector<float> logits(m_model->config().n_vocab, -100.0f);
    const TokenId eot = *m_model->tokenizer().vocab().find("<end_of_turn>");
    logits[std::size_t(eot)] = 10.0f;
    StopCondition stop(m_model->tokenizer().vocab().end_of_generation, 10, {});
    QCOMPARE(stop.check(Sampler(greedy).sample(logits, {}).token, "", 1), StopReason::EndOfGeneration);

    // No token limit: a full context ends the reply (every token shown), it is not an error.
    Session small(m_model, make_cpu_backend(m_model, {.threads = 0, .n_ctx = 20}));
    const auto full = generate(small, sampler, "1, 2, 3, 4, 5,", {.max_tokens = 0});
    QCOMPARE(full.stop, StopReason::ContextFull);
    QCOMPARE(std::size_t(full.prompt_tokens) + full.steps.size(), std::size_t(21)); // the last is not forwarded
    QCOMPARE(small.tokens().size(), std::size_t(20));
    // Only the prompt: nothing is generated.
    small.truncate(0);
    const auto none = generate(small, sampler, "1, 2, 3, 4, 5,", {.prompt_only = true});
    QVERIFY(none.steps.empty());
    QVERIFY(none.text.empty());
    QCOMPARE(small.tokens().size(), std::size_t(none.prompt_tokens));
}

void TestGeneration::badInputGivesClearErrors()
{
    Session s(m_model, make_cpu_backend(m_model, {.threads = 0, .n_ctx = 64}));
    Sampler sampler;
    try {
        generate(s, sampler, "", {.max_tokens = 4});
        // an empty prompt still has BOS for Gemma: it generates from BOS alone
    } catch (const Error& e) {
        QVERIFY(QString(e.what()).contains("empty"));
    }
    std::string long_prompt;
    for (int i = 0; i < 100; ++i)
        long_prompt += "word ";
    try {
        generate(s, sampler, long_prompt, {.max_tokens = 4});
        QFAIL("a prompt longer than the context was accepted");
    } catch (const Error& e) {
        // Refused before any of it is computed (it used to run batch after batch to the overflow).
        QVERIFY2(QString(e.what()).contains("tokens but the context holds 64"), e.what());
    }
    QVERIFY_THROWS_EXCEPTION(Error,
                             s.backend().forward({.tokens = std::vector<TokenId>{int32_t(m_model->config().n_vocab)}}));
}

void TestGeneration::unknownArchitectureIsRefusedByName()
{
    QTemporaryDir dir;
    testsupport::GgufBuilder b;
    b.add_string("general.architecture", "mamba2");
    b.add_u32("mamba2.block_count", 2);
    b.add_u32("mamba2.embedding_length", 64);
    b.add_u32("mamba2.attention.head_count", 4);
    const std::string path = dir.filePath("mamba.gguf").toStdString();
    QVERIFY(testsupport::write_file(path, b.build()));
    try {
        Model::load(path);
        QFAIL("accepted");
    } catch (const UnsupportedError& e) {
        QVERIFY2(QString(e.what()).contains("'mamba2' is not supported"), e.what());
    }
}

void TestGeneration::peakMemoryFor512Tokens()
{
    Session s(m_model, make_cpu_backend(m_model, {.threads = 0, .n_ctx = 1024}));
    SamplerConfig c;
    c.seed = 1;
    Sampler sampler(c);
    const auto t = generate(s, sampler, "Write a long story about a lighthouse.", {.max_tokens = 512});
    const uint64_t kv = s.backend().kv_cache().accounting().bytes_allocated;
    const uint64_t file = std::filesystem::file_size(m_model->file().name());
    const uint64_t peak = testsupport::process_status_bytes("VmHWM");
    qInfo("peak RSS %.1f MiB; model file %.1f MiB; KV cache %.1f MiB; %zu tokens", double(peak) / 1048576.0,
          double(file) / 1048576.0, double(kv) / 1048576.0, t.steps.size());
    QVERIFY(peak > 0);
    QVERIFY(peak < uint64_t(1.5 * double(file)) + kv);
}

QTEST_GUILESS_MAIN(TestGeneration)
#include "test_generation.moc"
