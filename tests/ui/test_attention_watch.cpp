// SPDX-License-Identifier: GPL-3.0-or-later
// Attention is recorded only while a view shows it: a chat reply with no attention view on screen
// records nothing; with one on screen (setAttentionWatched, as the attention panel's show event
// sends it) the reply's passes are recorded and the panel's "current sequence" reads them; when
// the view goes away the recording is dropped and a later request recomputes. Each case prints the
// process's peak resident memory (bench/chat_memory.sh runs them as separate processes with a long
// reply: TOKENSCOPE_WATCH_REPLY_TOKENS).
#include "bridge/chat_client.h"
#include "bridge/engine_controller.h"
#include "bridge/inspection_client.h"
#include "signal_wait.h"
#include "test_paths.h"

#include <QSignalSpy>
#include <QTest>
#include <sys/resource.h>

using namespace tokenscope::ui;
using testsupport::seen;

namespace {

long peak_rss_mib()
{
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss / 1024;
}

int reply_tokens()
{
    const int n = qEnvironmentVariableIntValue("TOKENSCOPE_WATCH_REPLY_TOKENS");
    return n > 0 ? n : 96;
}

} // namespace

class TestAttentionWatch : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void closedRecordsNothing();
    void openRecordsTheReply();

private:
    std::shared_ptr<const ReplyStats> reply(EngineController& engine);
    std::string m_path;
};

void TestAttentionWatch::initTestCase()
{
    REQUIRE_DEFAULT_MODEL(path);
    m_path = path;
}

std::shared_ptr<const ReplyStats> TestAttentionWatch::reply(EngineController& engine)
{
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    engine.loadModel(QString::fromStdString(m_path), 2, 2048);
    if (!seen(loaded, 1, 300000))
        return nullptr;
    QSignalSpy finished(&engine.chat(), &ChatClient::replyFinished);
    SamplingSettings s;
    s.temperature = 0.0f;
    s.max_tokens = reply_tokens();
    engine.chat().sendChat({{"user", "Count from 1 to 2000, one number per line."}}, s);
    if (!seen(finished, 1, 300000))
        return nullptr;
    return finished.last().at(0).value<std::shared_ptr<const ReplyStats>>();
}

void TestAttentionWatch::closedRecordsNothing()
{
    EngineController engine;
    const auto stats = reply(engine);
    QVERIFY(stats && !stats->cancelled);
    QCOMPARE(stats->attention_bytes, quint64(0));
    qInfo("attention view closed: %d tokens generated, attention recorded %llu bytes, peak resident %ld MiB",
          stats->generated_tokens, stats->attention_bytes, peak_rss_mib());
}

void TestAttentionWatch::openRecordsTheReply()
{
    EngineController engine;
    engine.inspection().setAttentionWatched(true);
    const auto stats = reply(engine);
    QVERIFY(stats && !stats->cancelled);
    qInfo("attention view open: %d tokens generated, attention recorded %llu bytes, peak resident %ld MiB",
          stats->generated_tokens, stats->attention_bytes, peak_rss_mib());
    if (reply_tokens() <= 200) // within the recorder's budget: every head of every layer
        QVERIFY(stats->attention_bytes > 0);

    // The panel's "current sequence" reads the recording of the reply's real passes...
    QSignalSpy attention(&engine.inspection(), &InspectionClient::attentionReady);
    engine.inspection().captureAttention(QString(), true, {0});
    QVERIFY(seen(attention, 1, 300000));
    auto snapshot = attention.last().at(0).value<std::shared_ptr<const AttentionSnapshot>>();
    QVERIFY2(snapshot->error.isEmpty(), qPrintable(snapshot->error));
    if (reply_tokens() <= 200)
        QCOMPARE(snapshot->source, QString("recorded"));
    // ...and once no view watches, the recording is gone: the same request is one fresh pass.
    engine.inspection().setAttentionWatched(false);
    engine.inspection().captureAttention(QString(), true, {0});
    QVERIFY(seen(attention, 2, 300000));
    snapshot = attention.last().at(0).value<std::shared_ptr<const AttentionSnapshot>>();
    QVERIFY2(snapshot->error.isEmpty(), qPrintable(snapshot->error));
    QCOMPARE(snapshot->source, QString("sequence"));
    QVERIFY(!snapshot->heads.empty());
}

QTEST_GUILESS_MAIN(TestAttentionWatch)
#include "test_attention_watch.moc"
