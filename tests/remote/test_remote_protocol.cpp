// SPDX-License-Identifier: GPL-3.0-or-later
// engine/remote's parsers and request bodies. The llama-server inputs are captures from a real
// server; the vLLM, SGLang, Ollama and LM Studio ones are written from those servers' documented
// shapes (tests/data/remote/SOURCES.md names each source) — labelled "documented shape" below,
// since those servers do not run here.
#include "test_paths.h"

#include "remote/remote_protocol.h"
#include "util/error.h"

#include <QTest>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

using namespace engine::remote;

namespace {

std::string fixture(const std::string& name)
{
    std::ifstream in(testsupport::data_dir() + "/remote/" + name, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Every chunk of an SSE file fed through the decoder in pieces of `step` bytes.
std::vector<StreamChunk> chunks_of(const std::string& sse, std::size_t step, bool* done = nullptr)
{
    SseDecoder d;
    std::vector<StreamChunk> out;
    for (std::size_t i = 0; i < sse.size(); i += step)
        for (const auto& e : d.feed(std::string_view(sse).substr(i, step)))
            out.push_back(parse_stream_chunk(e));
    if (done)
        *done = d.done();
    return out;
}

} // namespace

class TestRemoteProtocol : public QObject {
    Q_OBJECT
private slots:
    void llamaServerModelsAndProps();
    void llamaServerChatStreamInAnyPieces();
    void llamaServerTokenizeWithPieces();
    void vllmDocumentedShapes();
    void sglangDocumentedShapes();
    void ollamaDocumentedShapes();
    void lmStudioDocumentedShapes();
    void sseFraming();
    void requestBodies();
    void errorsAreSentences();
    void malformedInputIsRefused();
    void outOfRangeIsRefusedNotTruncated();
    void limitsAndTheirVariables();
};

void TestRemoteProtocol::llamaServerModelsAndProps()
{
    const ModelList list = parse_models(fixture("llamacpp-models.json"));
    QCOMPARE(list.kind, ServerKind::LlamaCpp);
    QCOMPARE(list.models.size(), std::size_t(1));
    QCOMPARE(list.models[0].id, std::string("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"));
    QCOMPARE(list.models[0].context_length, 32768u);
    QCOMPARE(list.models[0].n_vocab, 151936u);
    QCOMPARE(list.models[0].n_params, uint64_t(630167424));
    QCOMPARE(parse_props_context(fixture("llamacpp-props.json")), 4096u);
    const ServerMetrics m = parse_metrics(fixture("llamacpp-metrics.txt"));
    QVERIFY(!m.kv_cache_usage); // llama-server no longer reports it: nothing invented
    QVERIFY(m.running && m.waiting);
    QCOMPARE(*m.running, 0.0);
}

void TestRemoteProtocol::llamaServerChatStreamInAnyPieces()
{
    const std::string sse = fixture("llamacpp-chat-stream.sse");
    bool done = false;
    const auto whole = chunks_of(sse, sse.size(), &done);
    QVERIFY(done); // [DONE]
    std::string text;
    std::vector<TokenLogprob> lps;
    std::optional<Usage> usage;
    std::optional<ServerTimings> timings;
    std::string finish;
    for (const auto& c : whole) {
        text += c.content;
        lps.insert(lps.end(), c.logprobs.begin(), c.logprobs.end());
        if (c.usage)
            usage = c.usage;
        if (c.timings)
            timings = c.timings;
        if (!c.finish_reason.empty())
            finish = c.finish_reason;
    }
    QCOMPARE(text, std::string("Hello! How can"));
    QCOMPARE(finish, std::string("length"));
    QCOMPARE(lps.size(), std::size_t(4));
    QCOMPARE(lps[0].id, 9707);
    QCOMPARE(lps[0].token, std::string("Hello"));
    QCOMPARE(lps[0].top.size(), std::size_t(2));
    QCOMPARE(lps[0].top[1].id, 13048);
    QCOMPARE(lps[0].top[1].token, std::string("Hi"));
    QVERIFY(lps[0].top[0].logprob > lps[0].top[1].logprob);
    QVERIFY(usage && timings);
    QCOMPARE(usage->completion_tokens, 4);
    QCOMPARE(timings->predicted_n, 4);
    QCOMPARE(timings->prompt_n + timings->cache_n, usage->prompt_tokens);
    QVERIFY(timings->prompt_ms > 0 && timings->predicted_ms > 0);
    QCOMPARE(timings->draft_n, -1); // this server had no draft model: nothing said
    QCOMPARE(timings->draft_n_accepted, -1);
    // The same server with a draft model (`-md CHAT.gguf --spec-type draft-simple --spec-draft-n-max 4`):
    // its reply's timings say what it drafted and accepted
    std::optional<ServerTimings> drafted;
    for (const auto& c : chunks_of(fixture("llamacpp-chat-stream-draft.sse"), 1000))
        if (c.timings)
            drafted = c.timings;
    QVERIFY(drafted);
    QCOMPARE(drafted->predicted_n, 24);
    QCOMPARE(drafted->draft_n, 18);
    QCOMPARE(drafted->draft_n_accepted, 18);
    // The network delivers events in arbitrary pieces: the same chunks whatever the split.
    for (const std::size_t step : {1, 2, 3, 7, 64, 1000}) {
        const auto pieces = chunks_of(sse, step);
        QCOMPARE(pieces.size(), whole.size());
        for (std::size_t i = 0; i < whole.size(); ++i) {
            QCOMPARE(pieces[i].content, whole[i].content);
            QCOMPARE(pieces[i].logprobs.size(), whole[i].logprobs.size());
        }
    }
}

void TestRemoteProtocol::llamaServerTokenizeWithPieces()
{
    const auto t = parse_tokenize(fixture("llamacpp-tokenize.json"));
    QCOMPARE(t.size(), std::size_t(2));
    QCOMPARE(t[0].id, 13048);
    QCOMPARE(t[0].piece, std::string("Hi"));
    QCOMPARE(t[1].piece, std::string(" \xc3\xa9"));
    // A piece that is not valid UTF-8 on its own comes as its bytes.
    const auto b = parse_tokenize(R"({"tokens":[{"id":198,"piece":[195]},{"id":5,"piece":"a"}]})");
    QCOMPARE(b[0].piece, std::string("\xc3"));
    QVERIFY(b[0].has_piece);
}

void TestRemoteProtocol::vllmDocumentedShapes()
{
    const ModelList list = parse_models(fixture("vllm-models.json"));
    QCOMPARE(list.kind, ServerKind::Vllm);
    QCOMPARE(list.models[0].id, std::string("Qwen/Qwen2.5-72B-Instruct"));
    QCOMPARE(list.models[0].context_length, 32768u);
    bool done = false;
    const auto chunks = chunks_of(fixture("vllm-chat-stream.sse"), 5, &done);
    QVERIFY(done);
    QCOMPARE(chunks.size(), std::size_t(4));
    QCOMPARE(chunks[1].content + chunks[2].content, std::string("Paris."));
    QCOMPARE(chunks[1].logprobs[0].id, -1); // vLLM names no token ids
    QCOMPARE(chunks[1].logprobs[0].top[1].token, std::string("The"));
    QCOMPARE(chunks[2].finish_reason, std::string("stop"));
    QVERIFY(chunks[3].usage);
    QCOMPARE(chunks[3].usage->prompt_tokens, 31);
    QCOMPARE(chunks[3].usage->cached_tokens, 16);
    QVERIFY(chunks[3].content.empty());
    const auto t = parse_tokenize(fixture("vllm-tokenize.json"));
    QCOMPARE(t.size(), std::size_t(3));
    QCOMPARE(t[2].id, 1879);
    QCOMPARE(t[2].piece, std::string(" world"));
    const ServerMetrics m = parse_metrics(fixture("vllm-metrics.txt"));
    QVERIFY(m.kv_cache_usage && m.running && m.waiting);
    QCOMPARE(*m.kv_cache_usage, 0.4375);
    QCOMPARE(*m.running, 3.0);
    QCOMPARE(*m.waiting, 1.0);
}

void TestRemoteProtocol::sglangDocumentedShapes()
{
    const ModelList list = parse_models(fixture("sglang-models.json"));
    QCOMPARE(list.kind, ServerKind::Sglang);
    QCOMPARE(list.models[0].context_length, 131072u);
    const auto t = parse_tokenize(fixture("sglang-tokenize.json"));
    QCOMPARE(t.size(), std::size_t(3));
    QVERIFY(!t[0].has_piece); // ids only
    const ServerMetrics m = parse_metrics(fixture("sglang-metrics.txt"));
    QCOMPARE(*m.kv_cache_usage, 0.5); // the mean over data-parallel ranks
    QCOMPARE(*m.running, 3.0);        // the sum
    QCOMPARE(*m.waiting, 4.0);
}

void TestRemoteProtocol::ollamaDocumentedShapes()
{
    QCOMPARE(parse_ollama_version(fixture("ollama-version.json")).value_or(""), std::string("0.12.11"));
    QVERIFY(!parse_ollama_version(fixture("vllm-models.json")));
    LineDecoder d;
    const std::string nd = fixture("ollama-chat-stream.ndjson");
    std::vector<StreamChunk> chunks;
    for (std::size_t i = 0; i < nd.size(); i += 9)
        for (const auto& l : d.feed(std::string_view(nd).substr(i, 9)))
            chunks.push_back(parse_stream_chunk(l));
    QVERIFY(!d.finish());
    QCOMPARE(chunks.size(), std::size_t(4));
    QCOMPARE(chunks[0].content + chunks[1].content + chunks[2].content, std::string("The sky is blue."));
    QVERIFY(!chunks[2].done);
    QVERIFY(chunks[3].done);
    QCOMPARE(chunks[3].finish_reason, std::string("stop"));
    QVERIFY(chunks[3].timings && chunks[3].usage);
    QCOMPARE(chunks[3].timings->prompt_ms, 342.546); // nanoseconds → ms
    QCOMPARE(chunks[3].timings->predicted_ms, 4535.599);
    QCOMPARE(chunks[3].timings->total_ms, 4883.583458);
    QCOMPARE(chunks[3].usage->completion_tokens, 282);
    QCOMPARE(chunks[3].usage->cached_tokens, -1); // not reported by this version
    // A stream cut without its last newline still yields the last line.
    LineDecoder cut;
    QVERIFY(cut.feed("{\"a\":1}\n{\"b\"").size() == 1);
    QCOMPARE(cut.finish().value_or(""), std::string("{\"b\""));
}

void TestRemoteProtocol::lmStudioDocumentedShapes()
{
    const auto models = parse_lmstudio_models(fixture("lmstudio-models.json"));
    QCOMPARE(models.size(), std::size_t(2));                     // the embedding model left out
    QCOMPARE(models[0].id, std::string("qwen2-vl-7b-instruct")); // the loaded one first
    QCOMPARE(models[1].context_length, 4096u);
    const StreamChunk c = parse_stream_chunk(fixture("lmstudio-chat.json"));
    QCOMPARE(c.content, std::string("Hello! How can I help?"));
    QVERIFY(c.timings);
    QCOMPARE(c.timings->ttft_ms, 111.0);
    QCOMPARE(c.timings->predicted_ms, 954.0);
}

void TestRemoteProtocol::sseFraming()
{
    SseDecoder d;
    // CRLF line ends, a comment (keep-alive), an event name, multi-line data, then [DONE] and
    // anything after it ignored.
    const auto out = d.feed(": keep-alive\r\n\r\nevent: message\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\ndata: x\n\n"
                            "data: [DONE]\n\ndata: after\n\n");
    QCOMPARE(out.size(), std::size_t(2));
    QCOMPARE(out[0], std::string("{\"a\":\n1}"));
    QCOMPARE(out[1], std::string("x"));
    QVERIFY(d.done());
    SseDecoder partial;
    QVERIFY(partial.feed("data: {\"choices\":[").empty());
    QVERIFY(partial.has_partial());
}

void TestRemoteProtocol::requestBodies()
{
    SamplingRequest s;
    s.model = "m";
    s.sampling.temperature = 0.5;
    s.sampling.seed = 7;
    s.send_seed = true;
    s.sampling.max_tokens = 9;
    s.top_logprobs = 5;
    const auto chat = nlohmann::json::parse(chat_request_body({{"system", "S"}, {"user", "U"}}, s, ServerKind::Vllm));
    QCOMPARE(chat["messages"].size(), std::size_t(2));
    QCOMPARE(chat["messages"][1]["content"].get<std::string>(), std::string("U"));
    QCOMPARE(chat["stream"].get<bool>(), true);
    QCOMPARE(chat["stream_options"]["include_usage"].get<bool>(), true);
    QCOMPARE(chat["logprobs"].get<bool>(), true);
    QCOMPARE(chat["top_logprobs"].get<int>(), 5);
    QCOMPARE(chat["seed"].get<int>(), 7);
    QCOMPARE(chat["max_tokens"].get<int>(), 9);
    const auto ollama = nlohmann::json::parse(chat_request_body({{"user", "U"}}, s, ServerKind::Ollama));
    QCOMPARE(ollama["options"]["num_predict"].get<int>(), 9);
    QVERIFY(!ollama.contains("stream_options"));
    const auto next = nlohmann::json::parse(next_token_request_body({2, 651, 6037}, 5));
    QCOMPARE(next["prompt"].get<std::vector<int>>(), (std::vector<int>{2, 651, 6037}));
    QCOMPARE(next["n_probs"].get<int>(), 5);
    QCOMPARE(next["n_predict"].get<int>(), 1);
    const auto tok = nlohmann::json::parse(tokenize_request_body("hi", ServerKind::LlamaCpp, "", false));
    QCOMPARE(tok["with_pieces"].get<bool>(), true);
    QCOMPARE(tok["content"].get<std::string>(), std::string("hi"));
    const auto vtok = nlohmann::json::parse(tokenize_request_body("hi", ServerKind::Vllm, "m", true));
    QCOMPARE(vtok["prompt"].get<std::string>(), std::string("hi"));
    QCOMPARE(vtok["model"].get<std::string>(), std::string("m"));
}

void TestRemoteProtocol::errorsAreSentences()
{
    const auto e = nlohmann::json::parse(fixture("errors.json"));
    const std::string m401 = http_error_message(401, e["llamacpp-401"].dump(), "POST /v1/chat/completions");
    QVERIFY2(m401.find("HTTP 401") != std::string::npos && m401.find("API key") != std::string::npos &&
                 m401.find("Invalid API Key") != std::string::npos,
             m401.c_str());
    const std::string m404 = http_error_message(404, e["vllm-404"].dump(), "POST /v1/chat/completions");
    QVERIFY2(m404.find("`gpt-5` does not exist") != std::string::npos, m404.c_str());
    QVERIFY(http_error_message(422, e["fastapi-422"].dump(), "x").find("Field required") != std::string::npos);
    QVERIFY(http_error_message(400, e["ollama-400"].dump(), "x").find("between 0 and 20") != std::string::npos);
    QVERIFY(http_error_message(429, "", "x").find("rate-limiting") != std::string::npos);
    QVERIFY(http_error_message(503, "<html>busy</html>", "x").find("unavailable") != std::string::npos);
    // An error reported inside a stream.
    const StreamChunk c = parse_stream_chunk(R"({"error":{"code":500,"message":"context shift is disabled"}})");
    QCOMPARE(c.error, std::string("context shift is disabled"));
}

void TestRemoteProtocol::malformedInputIsRefused()
{
    QVERIFY_THROWS_EXCEPTION(engine::Error, parse_models("<html>nginx</html>"));
    QVERIFY_THROWS_EXCEPTION(engine::Error, parse_models("{\"object\":\"list\"}"));
    QVERIFY_THROWS_EXCEPTION(engine::Error, parse_tokenize("{\"tokens\":[\"a\"]}"));
    QVERIFY_THROWS_EXCEPTION(engine::Error, parse_completion_probabilities("{\"content\":\"x\"}"));
    QVERIFY_THROWS_EXCEPTION(engine::Error, parse_stream_chunk("{\"choices\":[{\"delta\":"));
    try {
        parse_models("");
        QFAIL("an empty answer was read");
    } catch (const engine::Error& err) {
        QVERIFY2(std::string(err.what()).find("empty") != std::string::npos, err.what());
    }
}

void TestRemoteProtocol::outOfRangeIsRefusedNotTruncated()
{
    const auto refused = [](const auto& parse, const char* named) {
        try {
            parse();
        } catch (const engine::Error& e) {
            return std::string(e.what()).find(named) != std::string::npos;
        }
        return false;
    };
    // Ids: 2^40 and -1 refused, 2^31-1 read as it is.
    QVERIFY(refused([] { parse_tokenize(R"({"tokens":[1099511627776]})"); }, "1099511627776 is outside"));
    QVERIFY(refused([] { parse_tokenize(R"({"tokens":[{"id":-1,"piece":"a"}]})"); }, "-1 is outside"));
    QVERIFY(refused([] { parse_tokenize(R"({"tokens":[{"id":1.5,"piece":"a"}]})"); }, "1.5 is outside"));
    QCOMPARE(parse_tokenize(R"({"tokens":[2147483647]})")[0].id, 2147483647);
    QVERIFY(refused([] { parse_tokenize(R"({"tokens":[{"id":1,"piece":[300]}]})"); }, "300 is outside 0..255"));
    // Counts: 2^31 refused (it printed as -2147483648), 2^31-1 read.
    QVERIFY(refused([] { parse_stream_chunk(R"({"choices":[],"usage":{"completion_tokens":2147483648}})"); },
                    "completion_tokens 2147483648 is outside"));
    QCOMPARE(parse_stream_chunk(R"({"choices":[],"usage":{"completion_tokens":2147483647}})").usage->completion_tokens,
             2147483647);
    QVERIFY(refused([] { parse_stream_chunk(R"({"timings":{"cache_n":-5}})"); }, "cache_n -5 is outside"));
    QVERIFY(refused([] { parse_stream_chunk(R"({"done":true,"eval_count":1e20})"); }, "eval_count"));
    QVERIFY(refused([] { parse_models(R"({"data":[{"id":"m","max_model_len":4294967296}]})"); }, "max_model_len"));
    QVERIFY(refused([] { parse_props_context(R"({"default_generation_settings":{"n_ctx":-1}})"); }, "n_ctx"));
    // Log-probabilities: 1e308 ("inf%") and a number too large for a double refused; a server's
    // stand-in for -inf kept; a probability above 1 refused.
    const auto logprob = [](const std::string& v) {
        return parse_stream_chunk(
            R"({"choices":[{"delta":{"content":"a"},"logprobs":{"content":[{"token":"a","logprob":)" + v + "}]}}]}");
    };
    QVERIFY(refused([&] { logprob("1e308"); }, "not a log-probability"));
    QVERIFY(refused([&] { logprob("1e400"); }, "not"));
    QCOMPARE(logprob("-9999.0").logprobs[0].logprob, -9999.0);
    QCOMPARE(logprob("-3.4028234663852886e+38").logprobs[0].logprob, -3.4028234663852886e+38);
    QVERIFY(refused([] { parse_completion_probabilities(R"({"completion_probabilities":[{"id":1,"prob":2.5}]})"); },
                    "not a probability"));
    // (nlohmann/json refuses a number beyond a double's range as a whole: "not JSON".)
    QVERIFY(refused([] { parse_stream_chunk(R"({"timings":{"prompt_ms":1e400}})"); }, "not"));
    // Gauges that are not finite, or a cache fuller than full, are not shown.
    const ServerMetrics m = parse_metrics("vllm:kv_cache_usage_perc NaN\nvllm:num_requests_running +Inf\n"
                                          "vllm:num_requests_waiting 2\nsglang:token_usage 7\n");
    QVERIFY(!m.kv_cache_usage && !m.running);
    QCOMPARE(*m.waiting, 2.0);
}

void TestRemoteProtocol::limitsAndTheirVariables()
{
    const ResponseLimits s = stream_limits(256);
    QCOMPARE(s.max_bytes, uint64_t(2 * 1024 * 1024 + 16 * 1024 * 256));
    QCOMPARE(s.max_events, uint64_t(1024 + 2 * 256));
    QCOMPARE(s.max_field_bytes, uint64_t(1024 * 1024 + 8 * 1024 * 256));
    QCOMPARE(s.max_seconds, uint64_t(600 + 2 * 256));
    const ResponseLimits a = answer_limits(1000);
    QCOMPARE(a.max_bytes, uint64_t(16 * 1024 * 1024 + 128 * 1000));
    QCOMPARE(a.max_field_bytes, uint64_t(4 * 1024 * 1024));
    QCOMPARE(a.max_seconds, uint64_t(600));
    qputenv("TOKENSCOPE_REMOTE_MAX_SECONDS", "3");
    qputenv("TOKENSCOPE_REMOTE_MAX_EVENTS", "-1"); // not a count: ignored, the derived limit stays
    const ResponseLimits scaled = stream_limits(256);
    qunsetenv("TOKENSCOPE_REMOTE_MAX_SECONDS");
    qunsetenv("TOKENSCOPE_REMOTE_MAX_EVENTS");
    QCOMPARE(scaled.max_seconds, uint64_t(3));
    QCOMPARE(scaled.max_events, s.max_events);
    const std::string m = limit_message(Limit::Seconds, scaled, "POST /v1/chat/completions", "10.0.0.2:8000");
    QVERIFY2(m.find("after 3 s") != std::string::npos &&
                 m.find("TOKENSCOPE_REMOTE_MAX_SECONDS=12") != std::string::npos &&
                 m.find("a reply of at most 256 tokens") != std::string::npos &&
                 m.find("10.0.0.2:8000") != std::string::npos,
             m.c_str());
    QVERIFY(limit_message(Limit::Bytes, s, "x", "y").find("6.0 MiB") != std::string::npos);

    // Decoders hold at most one event or line of the limit, then stop.
    SseDecoder sse(64);
    QCOMPARE(sse.feed("data: {\"a\":1}\n\n").size(), std::size_t(1));
    QVERIFY(sse.feed("data: " + std::string(100, 'x')).empty());
    QVERIFY(sse.too_long() && !sse.has_partial());
    QVERIFY(sse.feed("\n\ndata: {}\n\n").empty()); // stopped for good
    LineDecoder lines(64);
    QCOMPARE(lines.feed("{}\n").size(), std::size_t(1));
    QVERIFY(lines.feed(std::string(100, 'x') + "\n").empty());
    QVERIFY(lines.too_long());
    QCOMPARE(longest_json_string("{\"a\":\"bc\\\"d\",\"piece\":\"12345\"}"), std::size_t(5));
    // An error body is quoted, not pasted whole.
    const std::string big = http_error_message(500, R"({"error":")" + std::string(100000, 'x') + "\"}", "x");
    QVERIFY(big.size() < 2000);
}

QTEST_GUILESS_MAIN(TestRemoteProtocol)
#include "test_remote_protocol.moc"
