// SPDX-License-Identifier: GPL-3.0-or-later
// Stop cancels exactly the request it was pressed for, queued or running: a reply stopped while it
// waits behind a load ends without running; a capture stopped in the queue behind a running reply
// ends without running while the reply finishes; a running reply stopped with a capture queued
// behind it ends early while the capture runs. Every request's token is released at its end.
#include "bridge/chat_client.h"
#include "bridge/engine_controller.h"
#include "bridge/inspection_client.h"
#include "load_pause.h"
#include "signal_wait.h"
#include "test_paths.h"

#include <QSignalSpy>
#include <QTest>

using namespace tokenscope::ui;
using testsupport::seen;

class TestRequestCancel : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void replyStoppedInTheQueueNeverRuns();
    void queuedCaptureStoppedReplyFinishes();
    void runningReplyStoppedCaptureRuns();
    void serverProbeKeepsOtherRequestsTokens();

private:
    // A reply long enough to be running while the test queues something behind it.
    quint64 sendLongReply(EngineController& engine, QSignalSpy& deltas);
    std::string m_path;
};

void TestRequestCancel::initTestCase()
{
    REQUIRE_DEFAULT_MODEL(path);
    m_path = path;
}

quint64 TestRequestCancel::sendLongReply(EngineController& engine, QSignalSpy& deltas)
{
    SamplingSettings s;
    s.temperature = 0.0f;
    s.max_tokens = 200;
    const quint64 id = engine.chat().sendChat({{"user", "Tell me a long story about a lighthouse keeper."}}, s);
    [&] { QVERIFY(seen(deltas)); }(); // the reply is running: its first token has arrived
    return id;
}

void TestRequestCancel::replyStoppedInTheQueueNeverRuns()
{
    EngineController engine;
    testsupport::LoadPause pause(engine);
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    QSignalSpy failed(&engine, &EngineController::loadFailed);
    QSignalSpy deltas(&engine.chat(), &ChatClient::replyDelta);
    QSignalSpy finished(&engine.chat(), &ChatClient::replyFinished);
    engine.loadModel(QString::fromStdString(m_path), 2, 512);
    QVERIFY(pause.reached()); // the engine thread is held inside the load

    SamplingSettings s;
    s.temperature = 0.0f;
    s.max_tokens = 8;
    const quint64 reply = engine.chat().sendChat({{"user", "Hi"}}, s); // queued behind the load
    QCOMPARE(engine.outstanding(), std::size_t(2));
    engine.cancel(reply); // Stop, pressed for the reply before it started
    pause.release();

    QVERIFY(seen(loaded)); // the load was not cancelled
    QCOMPARE(failed.count(), 0);
    QVERIFY(seen(finished));
    const auto stats = finished.last().at(0).value<std::shared_ptr<const ReplyStats>>();
    QCOMPARE(stats->request_id, reply);
    QVERIFY(stats->cancelled);
    QCOMPARE(stats->generated_tokens, 0);
    QCOMPARE(stats->computed_tokens, 0); // not even the prompt was evaluated
    QCOMPARE(deltas.count(), 0);
    QCOMPARE(engine.outstanding(), std::size_t(0));

    // A Stop pressed earlier does not reach a request made after it.
    const quint64 next = engine.chat().sendChat({{"user", "Hi"}}, s);
    QVERIFY(seen(finished, 2));
    const auto again = finished.last().at(0).value<std::shared_ptr<const ReplyStats>>();
    QCOMPARE(again->request_id, next);
    QVERIFY(!again->cancelled);
    QVERIFY(again->generated_tokens > 0);
}

void TestRequestCancel::queuedCaptureStoppedReplyFinishes()
{
    EngineController engine;
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    engine.loadModel(QString::fromStdString(m_path), 2, 1024);
    QVERIFY(seen(loaded));
    QSignalSpy deltas(&engine.chat(), &ChatClient::replyDelta);
    QSignalSpy finished(&engine.chat(), &ChatClient::replyFinished);
    QSignalSpy attention(&engine.inspection(), &InspectionClient::attentionReady);
    const quint64 reply = sendLongReply(engine, deltas);
    const quint64 capture = engine.inspection().captureAttention("The cat sat on the mat.", false, {0});
    engine.cancel(capture);

    QVERIFY(seen(finished));
    const auto stats = finished.last().at(0).value<std::shared_ptr<const ReplyStats>>();
    QCOMPARE(stats->request_id, reply);
    QVERIFY2(!stats->cancelled, qPrintable(stats->stop_reason)); // the reply was not touched
    QVERIFY(seen(attention));
    const auto snapshot = attention.last().at(0).value<std::shared_ptr<const AttentionSnapshot>>();
    QCOMPARE(snapshot->request_id, capture);
    QCOMPARE(snapshot->error, QString("Stopped before it started."));
    QVERIFY(snapshot->heads.empty());
    QCOMPARE(engine.outstanding(), std::size_t(0));
}

void TestRequestCancel::runningReplyStoppedCaptureRuns()
{
    EngineController engine;
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    engine.loadModel(QString::fromStdString(m_path), 2, 1024);
    QVERIFY(seen(loaded));
    QSignalSpy deltas(&engine.chat(), &ChatClient::replyDelta);
    QSignalSpy finished(&engine.chat(), &ChatClient::replyFinished);
    QSignalSpy attention(&engine.inspection(), &InspectionClient::attentionReady);
    const quint64 reply = sendLongReply(engine, deltas);
    const quint64 capture = engine.inspection().captureAttention("The cat sat on the mat.", false, {0});
    engine.cancel(reply); // Stop in the chat: the running reply

    QVERIFY(seen(finished));
    const auto stats = finished.last().at(0).value<std::shared_ptr<const ReplyStats>>();
    QCOMPARE(stats->request_id, reply);
    QVERIFY(stats->cancelled);
    QVERIFY(stats->generated_tokens >= 1 && stats->generated_tokens < 200);
    QVERIFY(seen(attention));
    const auto snapshot = attention.last().at(0).value<std::shared_ptr<const AttentionSnapshot>>();
    QCOMPARE(snapshot->request_id, capture);
    QVERIFY2(snapshot->error.isEmpty(), qPrintable(snapshot->error));
    QCOMPARE(int(snapshot->heads.size()), snapshot->heads_per_layer.at(0)); // every head of layer 0
    QCOMPARE(engine.outstanding(), std::size_t(0));
}

// Request ids come from one place: a server probe made while a load is held must neither share the
// load's id nor release its cancel token when it ends (the probe's id once came from the network
// client's own counter, and its end erased the load's token, so Stop no longer reached the load).
void TestRequestCancel::serverProbeKeepsOtherRequestsTokens()
{
    EngineController engine;
    testsupport::LoadPause pause(engine);
    QSignalSpy failed(&engine, &EngineController::loadFailed);
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    QSignalSpy server_failed(&engine, &EngineController::serverFailed);
    const quint64 load = engine.loadModel(QString::fromStdString(m_path), 2, 512);
    QVERIFY(pause.reached()); // the engine thread is held inside the load
    QCOMPARE(engine.outstanding(), std::size_t(1));

    tokenscope::remote::Endpoint nobody; // a closed port on the loopback: the probe fails at once
    nobody.base = QUrl("http://127.0.0.1:9");
    const quint64 probe = engine.connectServer(nobody);
    QVERIFY2(probe != load, "the probe got the load's request id");
    QVERIFY(seen(server_failed));
    QCOMPARE(engine.outstanding(), std::size_t(1)); // the load's token is still held

    engine.cancel(load); // Stop reaches the load
    pause.release();
    QVERIFY(seen(failed));
    QCOMPARE(failed.last().at(0).toString(), QString("Loading was cancelled."));
    QCOMPARE(loaded.count(), 0);
    QCOMPARE(engine.outstanding(), std::size_t(0));
}

QTEST_GUILESS_MAIN(TestRequestCancel)
#include "test_request_cancel.moc"
