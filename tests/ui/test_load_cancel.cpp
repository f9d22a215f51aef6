// SPDX-License-Identifier: GPL-3.0-or-later
// Cancelling a model load at a fixed point: a gate pauses the load at 50% of its progress (the test
// asserts it got there), Cancel is pressed, the load ends with a clear message, and the app stays
// usable: the same model loads and answers afterwards. A file with a 1 GiB general.name is refused
// by name without the process copying it. CI also runs this suite under valgrind's memcheck, which
// fails on any definitely lost memory.
#include "bridge/chat_client.h"
#include "bridge/engine_controller.h"
#include "gguf_builder.h"
#include "load_pause.h"
#include "test_paths.h"

#include <QFile>
#include <QFileInfo>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <sys/resource.h>

using namespace tokenscope::ui;

class TestLoadCancel : public QObject {
    Q_OBJECT
private slots:
    // First: the process's peak resident memory is still small, so a copy of the name would show.
    void gigabyteNameIsRefusedWithoutACopy();
    void cancelAtHalfwayThenLoadAgain();
    void badFileShowsTheLoaderMessage();
};

namespace {
long peak_rss_kib()
{
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;
}
} // namespace

void TestLoadCancel::gigabyteNameIsRefusedWithoutACopy()
{
    QTemporaryDir dir;
    const QString file = dir.filePath("long-name.gguf");
    QVERIFY(testsupport::write_gguf_with_long_name(file.toStdString(), 1ull << 30));
    QVERIFY(QFileInfo(file).size() > qint64(1) << 30);
    EngineController engine;
    QSignalSpy failed(&engine, &EngineController::loadFailed);
    const long before = peak_rss_kib();
    engine.loadModel(file);
    QVERIFY(failed.wait(60000));
    const QString message = failed.last().at(0).toString();
    QVERIFY2(message.contains("general.name") && message.contains("1073741824") && message.contains("limit"),
             qPrintable(message));
    // The old loader read the whole string (and the GUI copied it several times: 10.6 GB).
    const long grown_mib = (peak_rss_kib() - before) / 1024;
    QVERIFY2(grown_mib < 64, qPrintable(QString("peak resident memory grew by %1 MiB").arg(grown_mib)));
    QVERIFY(!engine.busy());
}

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
    testsupport::LoadPause pause(engine);

    QSignalSpy progress(&engine, &EngineController::loadProgress);
    QSignalSpy failed(&engine, &EngineController::loadFailed);
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    engine.loadModel(QString::fromStdString(path), 2, 512);
    QVERIFY(pause.reached()); // the load is paused at 50%
    QTRY_VERIFY(!progress.isEmpty() && progress.last().at(0).toInt() == 50);
    QVERIFY(engine.busy());
    engine.stop(); // Cancel
    pause.release();
    QVERIFY(failed.wait(60000));
    QVERIFY(failed.last().at(0).toString().contains("cancelled"));
    QCOMPARE(loaded.count(), 0);
    QVERIFY(!engine.busy());
    QVERIFY(engine.model() == nullptr);

    // still usable: load without the gate and get a reply
    engine.setLoadGate(nullptr);
    engine.loadModel(QString::fromStdString(path), 2, 512);
    QVERIFY(loaded.wait(120000));
    QSignalSpy finished(&engine.chat(), &ChatClient::replyFinished);
    SamplingSettings s;
    s.temperature = 0.0f;
    s.max_tokens = 4;
    engine.chat().sendChat({{"user", "Hi"}}, s);
    QVERIFY(finished.wait(120000));
    QCOMPARE(finished.last().at(0).value<std::shared_ptr<const ReplyStats>>()->generated_tokens, 4);
}

QTEST_GUILESS_MAIN(TestLoadCancel)
#include "test_load_cancel.moc"
