// SPDX-License-Identifier: GPL-3.0-or-later
// Cancelling a model load at a fixed point: a gate pauses the load at 50% of its progress (the test
// asserts it got there), Cancel is pressed, the load ends with a clear message, and the app stays
// usable: the same model loads and answers afterwards. CI also runs this suite under valgrind's
// memcheck, which fails on any definitely lost memory.
#include "bridge/engine_controller.h"
#include "test_paths.h"

#include <QFile>
#include <QSemaphore>
#include <QTemporaryDir>
#include <QSignalSpy>
#include <QTest>

using namespace tokenscope::ui;

class TestLoadCancel : public QObject {
    Q_OBJECT
private slots:
    void cancelAtHalfwayThenLoadAgain();
    void badFileShowsTheLoaderMessage();
};

void TestLoadCancel::badFileShowsTheLoaderMessage()
{
    REQUIRE_DEFAULT_MODEL(path);
    QTemporaryDir dir;
    const QString bad = dir.filePath("truncated.gguf");
    QFile f(bad);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("GGUF\x03\x00\x00\x00", 8); // header cut short
    f.close();
    EngineController engine;
    QSignalSpy failed(&engine, &EngineController::loadFailed);
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    engine.loadModel(bad);
    QVERIFY(failed.wait(30000));
    const QString message = failed.last().at(0).toString();
    QVERIFY2(message.contains(bad) && message.contains("truncated"), qPrintable(message));
    QVERIFY(!engine.busy());
    engine.loadModel(QString::fromStdString(path), 2, 256); // the app stays usable
    QVERIFY(loaded.wait(120000));
}

void TestLoadCancel::cancelAtHalfwayThenLoadAgain()
{
    REQUIRE_DEFAULT_MODEL(path);
    EngineController engine;
    QSemaphore reached, proceed;
    auto gate = std::make_shared<LoadGate>();
    gate->reached = [&] { reached.release(); };
    gate->wait = [&] { proceed.acquire(); };
    engine.setLoadGate(gate);

    QSignalSpy progress(&engine, &EngineController::loadProgress);
    QSignalSpy failed(&engine, &EngineController::loadFailed);
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    engine.loadModel(QString::fromStdString(path), 2, 512);
    QVERIFY(reached.tryAcquire(1, 120000)); // the load is paused at 50%
    QTRY_VERIFY(!progress.isEmpty() && progress.last().at(0).toInt() == 50);
    QVERIFY(engine.busy());
    engine.stop(); // Cancel
    proceed.release();
    QVERIFY(failed.wait(60000));
    QVERIFY(failed.last().at(0).toString().contains("cancelled"));
    QCOMPARE(loaded.count(), 0);
    QVERIFY(!engine.busy());
    QVERIFY(engine.model() == nullptr);

    // still usable: load without the gate and get a reply
    engine.setLoadGate(nullptr);
    engine.loadModel(QString::fromStdString(path), 2, 512);
    QVERIFY(loaded.wait(120000));
    QSignalSpy finished(&engine, &EngineController::replyFinished);
    SamplingSettings s;
    s.temperature = 0.0f;
    s.max_tokens = 4;
    engine.sendChat({{"user", "Hi"}}, s);
    QVERIFY(finished.wait(120000));
    QCOMPARE(finished.last().at(0).value<std::shared_ptr<const ReplyStats>>()->generated_tokens, 4);
}

QTEST_GUILESS_MAIN(TestLoadCancel)
#include "test_load_cancel.moc"
