// SPDX-License-Identifier: GPL-3.0-or-later
// The remote client against a real llama-server (llama.cpp from the llama-cpp-python sdist, built by
// scripts/setup.sh test): the chat model serves the chat tests (behind an API key), the default
// model the tokenizer and log-probability comparisons with Tokenscope's own engine.
#include "llama_server_process.h"
#include "remote/remote_client.h"
#include "signal_wait.h"
#include "test_paths.h"

#include "backend/backend.h"
#include "model/model.h"
#include "session/session.h"
#include "tokenizer/tokenizer.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSignalSpy>
#include <QTest>
#include <algorithm>
#include <cmath>
#include <numeric>

using namespace tokenscope::remote;
namespace er = engine::remote;

namespace {

const QString kKey = "tokenscope-test-key";

QStringList corpus_texts()
{
    QFile f(QString::fromStdString(testsupport::data_dir()) + "/tokenizer/corpus.json");
    if (!f.open(QIODevice::ReadOnly))
        return {};
    QStringList out;
    for (const auto& c : QJsonDocument::fromJson(f.readAll()).object()["cases"].toArray())
        out << c.toObject()["text"].toString();
    return out;
}

// A client probed against `url`; nullptr (with a QFAIL message in `why`) on failure.
std::unique_ptr<Client> connected(const QString& url, const QString& key, QString* why)
{
    auto c = std::make_unique<Client>();
    Endpoint e;
    e.base = QUrl(url);
    e.api_key = key;
    e.timeout_ms = 120000;
    c->setEndpoint(e);
    QSignalSpy ok(c.get(), &Client::probed), bad(c.get(), &Client::failed);
    c->probe();
    if (!QTest::qWaitFor([&] { return ok.count() + bad.count() > 0; }, 60000)) {
        *why = "the probe got no answer";
        return nullptr;
    }
    if (bad.count()) {
        *why = bad.first().at(1).toString();
        return nullptr;
    }
    return c;
}

std::shared_ptr<const StreamedReply> chat_reply(Client& c, const std::vector<er::ChatMessage>& messages, int max_tokens,
                                                QString* joined_deltas = nullptr)
{
    er::SamplingRequest s;
    s.sampling.temperature = 0.0;
    s.sampling.seed = 1;
    s.send_seed = true;
    s.sampling.max_tokens = max_tokens;
    QSignalSpy done(&c, &Client::replyFinished), bad(&c, &Client::failed);
    QString deltas;
    auto conn = QObject::connect(&c, &Client::delta, [&](quint64, const QString& t) { deltas += t; });
    c.chat(messages, s);
    const bool answered = QTest::qWaitFor([&] { return done.count() + bad.count() > 0; }, 300000);
    QObject::disconnect(conn);
    if (!answered)
        return nullptr;
    if (joined_deltas)
        *joined_deltas = deltas;
    if (!done.count())
        return nullptr;
    return done.first().at(0).value<std::shared_ptr<const StreamedReply>>();
}

} // namespace

Q_DECLARE_METATYPE(std::shared_ptr<const tokenscope::remote::StreamedReply>)
Q_DECLARE_METATYPE(std::shared_ptr<const tokenscope::remote::ServerInfo>)
Q_DECLARE_METATYPE(std::shared_ptr<const std::vector<engine::remote::RemoteToken>>)
Q_DECLARE_METATYPE(std::shared_ptr<const engine::remote::TokenLogprob>)

class TestRemoteLlamaServer : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void probeNamesTheServer();
    void streamedChatReply();
    void cachedTokensOnTheSecondTurn();
    void tokenizeEqualsOurTokenizer();
    void nextTokenLogprobsEqualTheEngine();
    void wrongApiKeyIsRefused();
    void refusedConnectionIsNamed();
    void serverKilledMidStreamKeepsThePartialReply();
    void cliOnTheServer();

private:
    QString m_binary;
    std::string m_chat_model, m_default_model;
    testsupport::LlamaServerProcess m_chat, m_default;
};

void TestRemoteLlamaServer::initTestCase()
{
    qRegisterMetaType<std::shared_ptr<const StreamedReply>>();
    qRegisterMetaType<std::shared_ptr<const ServerInfo>>();
    qRegisterMetaType<std::shared_ptr<const std::vector<er::RemoteToken>>>();
    qRegisterMetaType<std::shared_ptr<const er::TokenLogprob>>();
    m_binary = QString::fromStdString(testsupport::reference_tool("TOKENSCOPE_LLAMA_SERVER"));
    if (m_binary.isEmpty()) {
        if (testsupport::reference_required())
            QFAIL("TOKENSCOPE_LLAMA_SERVER is not set or not executable (CI builds it)");
        QSKIP("no llama-server: set TOKENSCOPE_LLAMA_SERVER (scripts/setup.sh test builds it)");
    }
    REQUIRE_CHAT_MODEL(chat);
    REQUIRE_DEFAULT_MODEL(gemma);
    m_chat_model = chat;
    m_default_model = gemma;
    QVERIFY2(m_chat.start(m_binary, QString::fromStdString(chat), {"--api-key", kKey}), qPrintable(m_chat.error()));
    // Weight repacking off: llama.cpp's repacked CPU kernels sum in another order than its plain
    // ones (which the engine's AVX2 path follows; see the CPU parity issue), and the log-probability
    // comparison is of the two engines' arithmetic, not of that reordering. --swa-full: the
    // sliding-window layers keep the whole context, as the library's defaults (and the engine's
    // fixtures) have it; the server's own default, a cache the size of the window, gives prompts
    // of 8 tokens or more other logits (top-5 log-probabilities up to 0.28 apart).
    QVERIFY2(m_default.start(m_binary, QString::fromStdString(gemma), {"--no-repack", "--swa-full"}),
             qPrintable(m_default.error()));
}

void TestRemoteLlamaServer::probeNamesTheServer()
{
    QString why;
    auto c = connected(m_chat.url(), kKey, &why);
    QVERIFY2(c, qPrintable(why));
    const ServerInfo& s = *c->server();
    QCOMPARE(s.kind, ServerKind::LlamaCpp);
    QCOMPARE(s.kind_name, QString("llama.cpp (llama-server)"));
    QCOMPARE(s.models.size(), 1);
    QVERIFY2(s.model.endsWith("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"), qPrintable(s.model));
    QCOMPARE(s.context_length, 4096u);   // -c 4096, one slot
    QCOMPARE(s.trained_context, 32768u); // the model's own
    QCOMPARE(s.n_vocab, 151936u);
    QVERIFY(s.tokenizer && s.token_pieces && s.next_token_probs && s.logprobs && s.metrics);
    // A base URL given with /v1 (as OpenAI clients take it) reaches the same server.
    auto c2 = connected(m_chat.url() + "/v1/", kKey, &why);
    QVERIFY2(c2, qPrintable(why));
    QCOMPARE(c2->server()->model, s.model);
}

void TestRemoteLlamaServer::streamedChatReply()
{
    QString why;
    auto c = connected(m_chat.url(), kKey, &why);
    QVERIFY2(c, qPrintable(why));
    QString deltas;
    const auto r = chat_reply(*c, {{"user", "What is the capital of France? Answer in one word."}}, 16, &deltas);
    QVERIFY(r);
    QVERIFY2(r->text.contains("Paris"), qPrintable(r->text));
    QCOMPARE(deltas, r->text); // the deltas are the reply, in order
    QCOMPARE(r->finish_reason, QString("stop"));
    QVERIFY(!r->cut_off && r->error.isEmpty());
    // Client-side timing: one arrival per content chunk, in order; TTFT is the first.
    QVERIFY(!r->arrival_ms.empty());
    QVERIFY(std::is_sorted(r->arrival_ms.begin(), r->arrival_ms.end()));
    QCOMPARE(r->ttft_ms, r->arrival_ms.front());
    QVERIFY(r->ttft_ms > 0.0);
    QVERIFY(r->total_ms >= r->arrival_ms.back());
    // The server's own account: usage (include_usage) and timings, consistent with the stream.
    QVERIFY(r->usage);
    QVERIFY(r->timings);
    QCOMPARE(r->timings->predicted_n, r->usage->completion_tokens);
    QVERIFY(r->usage->prompt_tokens > 10); // ChatML around the question
    QCOMPARE(r->timings->prompt_n + std::max(0, r->timings->cache_n), r->usage->prompt_tokens);
    // llama-server sends one token per chunk: as many arrivals as generated tokens, less the end token.
    QVERIFY(static_cast<int>(r->arrival_ms.size()) <= r->usage->completion_tokens);
    QVERIFY(static_cast<int>(r->arrival_ms.size()) >= r->usage->completion_tokens - 1);
    // The whole reply took at least what the server spent on it.
    QVERIFY(r->total_ms >= r->timings->server_ms());
    qInfo("reply %s: %d tokens, TTFT %.1f ms here (server: prompt %.1f ms), total %.1f ms here, %.1f ms on the server",
          qPrintable(r->text.trimmed()), r->usage->completion_tokens, r->ttft_ms, r->timings->prompt_ms, r->total_ms,
          r->timings->server_ms());
}

void TestRemoteLlamaServer::cachedTokensOnTheSecondTurn()
{
    QString why;
    auto c = connected(m_chat.url(), kKey, &why);
    QVERIFY2(c, qPrintable(why));
    std::vector<er::ChatMessage> turns{{"system", "You answer briefly."}, {"user", "Name a prime number below ten."}};
    const auto first = chat_reply(*c, turns, 12);
    QVERIFY(first && first->timings);
    turns.push_back({"assistant", first->text.toStdString()});
    turns.push_back({"user", "And one more?"});
    const auto second = chat_reply(*c, turns, 12);
    QVERIFY(second && second->timings && second->usage);
    // The whole history is re-sent; the server reuses what it cached of the first turn.
    QVERIFY2(
        second->timings->cache_n >= first->usage->prompt_tokens,
        qPrintable(
            QString("cache_n %1, first prompt %2").arg(second->timings->cache_n).arg(first->usage->prompt_tokens)));
    QVERIFY(second->timings->prompt_n < second->usage->prompt_tokens);
    if (second->usage->cached_tokens >= 0)
        QCOMPARE(second->usage->cached_tokens, second->timings->cache_n);
    qInfo("second turn: %d prompt tokens, %d reused from the server's cache", second->usage->prompt_tokens,
          second->timings->cache_n);
}

void TestRemoteLlamaServer::tokenizeEqualsOurTokenizer()
{
    const QStringList texts = corpus_texts();
    QVERIFY(texts.size() >= 40);
    struct Case {
        testsupport::LlamaServerProcess* server;
        QString key;
        std::string model;
    };
    for (const Case& k : {Case{&m_default, {}, m_default_model}, Case{&m_chat, kKey, m_chat_model}}) {
        QString why;
        auto c = connected(k.server->url(), k.key, &why);
        QVERIFY2(c, qPrintable(why));
        const auto model = engine::Model::load(k.model);
        int same = 0;
        for (const QString& text : texts) {
            for (const bool special : {false, true}) {
                QSignalSpy got(c.get(), &Client::tokenized), bad(c.get(), &Client::failed);
                c->tokenize(text, special);
                QVERIFY(QTest::qWaitFor([&] { return got.count() + bad.count() > 0; }, 60000));
                QVERIFY2(bad.isEmpty(), bad.isEmpty() ? "" : qPrintable(bad.first().at(1).toString()));
                const auto remote = got.first().at(1).value<std::shared_ptr<const std::vector<er::RemoteToken>>>();
                const auto ours =
                    model->tokenizer().encode(text.toStdString(), {.add_special = special, .parse_special = true});
                QCOMPARE(remote->size(), ours.size());
                for (std::size_t i = 0; i < ours.size(); ++i) {
                    QCOMPARE((*remote)[i].id, ours[i].id);
                    QVERIFY((*remote)[i].has_piece);
                }
                ++same;
            }
        }
        qInfo("%s: ids identical on %d texts (the corpus with and without special tokens)",
              qPrintable(c->server()->model.section('/', -1)), same);
    }
}

// The distribution of the next token as llama-server gives it (/completion with the ids, n_probs 5,
// before sampling) against the CPU engine's logits for the same ids, on prompts of 4 to 9 tokens.
// The engine's logits put through the server's own arithmetic (tools/server
// get_token_probabilities: the top n_probs partially sorted to the front, the exponentials summed
// in single precision in the order that sort left, each probability divided by the sum and its
// logarithm taken in float) give the server's log-probabilities bit for bit; an exact log-softmax
// of the same logits differs from them only by that single-precision sum (reported, and < 1e-3).
void TestRemoteLlamaServer::nextTokenLogprobsEqualTheEngine()
{
    QString why;
    auto c = connected(m_default.url(), {}, &why);
    QVERIFY2(c, qPrintable(why));
    const auto model = engine::Model::load(m_default_model);
    double worst_exact = 0.0;
    int compared = 0;
    for (const char* prompt : {"The capital of France is", "Once upon a time", "Hello, my name is", "The sky is",
                               "import numpy as", "def add(a, b):", "Once upon a time, there was a", "1, 2, 3,"}) {
        const auto ids = model->tokenizer().encode_ids(prompt);
        QSignalSpy got(c.get(), &Client::nextTokenReady), bad(c.get(), &Client::failed);
        c->nextToken(ids, 5);
        QVERIFY(QTest::qWaitFor([&] { return got.count() + bad.count() > 0; }, 60000));
        QVERIFY2(bad.isEmpty(), bad.isEmpty() ? "" : qPrintable(bad.first().at(1).toString()));
        const auto next = got.first().at(1).value<std::shared_ptr<const er::TokenLogprob>>();
        QCOMPARE(next->top.size(), std::size_t(5));

        engine::Session s(model, engine::make_cpu_backend(model, {.threads = 0, .n_ctx = 512}), 2048);
        s.prefill(ids);
        const auto logits = s.logits();

        struct Candidate {
            int32_t id;
            float logit;
            float p;
        };
        std::vector<Candidate> cur(logits.size());
        for (std::size_t i = 0; i < logits.size(); ++i)
            cur[i] = {static_cast<int32_t>(i), logits[i], 0.0f};
        std::partial_sort(cur.begin(), cur.begin() + 5, cur.end(),
                          [](const Candidate& a, const Candidate& b) { return a.logit > b.logit; });
        float sum = 0.0f;
        for (auto& t : cur) {
            t.p = expf(t.logit - cur[0].logit);
            sum += t.p;
        }

        double lse = 0.0; // exact log-softmax, for the report
        for (const float l : logits)
            lse += std::exp(static_cast<double>(l) - static_cast<double>(cur[0].logit));
        lse = static_cast<double>(cur[0].logit) + std::log(lse);

        double worst = 0.0;
        for (std::size_t i = 0; i < 5; ++i) {
            const auto& theirs = next->top[i];
            QCOMPARE(theirs.id, cur[i].id);
            const float ours = std::log(cur[i].p / sum);
            QVERIFY2(static_cast<double>(ours) == theirs.logprob,
                     qPrintable(QString("%1, candidate %2: server %3, engine %4")
                                    .arg(prompt)
                                    .arg(theirs.id)
                                    .arg(theirs.logprob, 0, 'g', 9)
                                    .arg(static_cast<double>(ours), 0, 'g', 9)));
            worst = std::max(worst, std::abs(static_cast<double>(cur[i].logit) - lse - theirs.logprob));
        }
        qInfo("%s (%zu tokens): top 5 bit-identical; exact log-softmax within %.3g", prompt, ids.size(), worst);
        QVERIFY2(worst < 1e-3, qPrintable(QString("%1: %2").arg(prompt).arg(worst)));
        worst_exact = std::max(worst_exact, worst);
        compared += 5;
    }
    qInfo("top-5 log-probabilities: %d candidates of 8 prompts bit-identical to the server's; an exact "
          "log-softmax is within %.3g of them",
          compared, worst_exact);
}

void TestRemoteLlamaServer::wrongApiKeyIsRefused()
{
    QString why;
    QVERIFY(!connected(m_chat.url(), "not-the-key", &why));
    QVERIFY2(why.contains("HTTP 401") && why.contains("API key"), qPrintable(why));
    QVERIFY2(!why.contains("not-the-key"), qPrintable(why)); // the key is never repeated back
    QVERIFY(!connected(m_chat.url(), {}, &why));
    QVERIFY2(why.contains("HTTP 401"), qPrintable(why));
}

void TestRemoteLlamaServer::refusedConnectionIsNamed()
{
    QTcpServer probe;
    QVERIFY(probe.listen(QHostAddress::LocalHost, 0));
    const quint16 port = probe.serverPort();
    probe.close(); // nothing listens there now
    QString why;
    QVERIFY(!connected(QString("http://127.0.0.1:%1").arg(port), {}, &why));
    QVERIFY2(why.contains("refused the connection") && why.contains(QString::number(port)), qPrintable(why));
}

void TestRemoteLlamaServer::serverKilledMidStreamKeepsThePartialReply()
{
    testsupport::LlamaServerProcess doomed;
    QVERIFY2(doomed.start(m_binary, QString::fromStdString(m_chat_model)), qPrintable(doomed.error()));
    QString why;
    auto c = connected(doomed.url(), {}, &why);
    QVERIFY2(c, qPrintable(why));
    er::SamplingRequest s;
    s.sampling.temperature = 0.0;
    s.sampling.max_tokens = 400;
    QSignalSpy done(c.get(), &Client::replyFinished), bad(c.get(), &Client::failed);
    QString deltas;
    int pieces = 0;
    connect(c.get(), &Client::delta, this, [&](quint64, const QString& t) {
        deltas += t;
        if (++pieces == 5)
            doomed.kill(); // mid-reply
    });
    c->chat({{"user", "Write a long story about a lighthouse keeper."}}, s);
    QVERIFY(QTest::qWaitFor([&] { return done.count() + bad.count() > 0; }, 300000));
    QVERIFY2(bad.isEmpty(), bad.isEmpty() ? "" : qPrintable(bad.first().at(1).toString()));
    const auto r = done.first().at(0).value<std::shared_ptr<const StreamedReply>>();
    QVERIFY(r->cut_off);
    QVERIFY(pieces >= 5);
    QCOMPARE(r->text, deltas); // nothing that arrived is lost
    QVERIFY(!r->text.isEmpty());
    QVERIFY2(!r->error.isEmpty(), "a cut-off reply says why");
    qInfo("cut off after %d pieces: \"%s\" — %s", pieces, qPrintable(r->text.left(60)), qPrintable(r->error));
}

void TestRemoteLlamaServer::cliOnTheServer()
{
    QProcess p;
    p.setProcessChannelMode(QProcess::SeparateChannels);
    const QString text = "Hello, wörld! def f(x):";
    p.start(TOKENSCOPE_CLI_PATH, {"tokenize", "--server", m_default.url(), "--ids", text});
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 0);
    const auto model = engine::Model::load(m_default_model);
    const auto ids = model->tokenizer().encode_ids(text.toStdString());
    QString want = "[";
    for (std::size_t i = 0; i < ids.size(); ++i)
        want += (i ? ", " : "") + QString::number(ids[i]);
    QCOMPARE(QString::fromUtf8(p.readAllStandardOutput()).trimmed(), want + "]");

    p.start(TOKENSCOPE_CLI_PATH,
            {"generate", "--server", m_default.url(), "-p", "The capital of France is", "-n", "8", "--temp", "0"});
    QVERIFY(p.waitForFinished(120000));
    QCOMPARE(p.exitCode(), 0);
    QVERIFY(QString::fromUtf8(p.readAllStandardOutput()).startsWith("The capital of France is"));
    const QString stats = QString::fromUtf8(p.readAllStandardError());
    QVERIFY2(stats.contains("8 tokens") && stats.contains("TTFT") && stats.contains("the server: prompt"),
             qPrintable(stats));

    // The key comes from the environment as well; a wrong one is named as such.
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("TOKENSCOPE_API_KEY", "wrong");
    p.setProcessEnvironment(env);
    p.start(TOKENSCOPE_CLI_PATH, {"tokenize", "--server", m_chat.url(), "x"});
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 1);
    QVERIFY2(QString::fromUtf8(p.readAllStandardError()).contains("HTTP 401"), "401 named");
}

QTEST_GUILESS_MAIN(TestRemoteLlamaServer)
#include "test_remote_llama_server.moc"
