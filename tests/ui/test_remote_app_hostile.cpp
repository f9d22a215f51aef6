// SPDX-License-Identifier: GPL-3.0-or-later
// The desktop app against a hostile server (tests/support/hostile_server.h): connecting through a
// redirect to another origin is refused with both origins named and the key kept; a chat whose
// stream never ends, sends 2,000,000 events, a 100 MB field or a count out of range is cut off with
// the limit named, what arrived kept, and the window usable; and screenshot mode ends with the
// reason and a non-zero status when the server refuses (a plain 401 too), redirects elsewhere or
// cannot be reached, the reply fails, or the model fails to load, instead of waiting for ever. No assertion is
// timed: the limits end every case, and a wait's timeout is only a backstop.
#include "bridge/chat_client.h"
#include "hostile_server.h"
#include "signal_wait.h"
#include "test_paths.h"

#include "bridge/engine_controller.h"
#include "main_window.h"
#include "panels/chat_panel.h"
#include "scripted/screenshot_script.h"
#include "storage/conversation_store.h"
#include "widgets/connect_server_dialog.h"

#include <QComboBox>
#include <QFile>
#include <QProcess>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTcpServer>
#include <QTemporaryDir>
#include <QTest>

using namespace tokenscope::ui;
using tokenscope::remote::Endpoint;

namespace {

const QString kKey = "hostile-app-key";

Endpoint endpoint(const QString& url)
{
    Endpoint e;
    e.base = QUrl(url);
    e.api_key = kKey;
    return e;
}

} // namespace

class TestRemoteAppHostile : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void connectRefusesAnotherOrigin();
    void chatIsCutOffAtTheLimit_data();
    void chatIsCutOffAtTheLimit();
    void screenshotEndsWhenTheServerFails_data();
    void screenshotEndsWhenTheServerFails();
    void screenshotEndsWhenTheModelFailsToLoad();
    void connectScreenshotShowsAnExampleUrlAndNoKey();

private:
    struct Run {
        bool finished = false;
        int exit_code = -1;
        QString err;
    };
    Run screenshot(const QStringList& args);
    testsupport::HostileServer m_server;
    QTemporaryDir m_dir;
};

void TestRemoteAppHostile::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true); // the windows' settings stay out of the user's
    QVERIFY(m_server.listening());
    QVERIFY(m_dir.isValid());
}

void TestRemoteAppHostile::connectRefusesAnotherOrigin()
{
    ConversationStore store(m_dir.filePath("origin.sqlite"), "hostile-origin");
    EngineController engine;
    MainWindow window(&engine, &store);
    window.setDialogsEnabled(false);
    QSignalSpy failed(&engine, &EngineController::serverFailed), loaded(&engine, &EngineController::modelLoaded);
    window.connectServer(endpoint(m_server.url("redirect-get-307")));
    QVERIFY(testsupport::seen(failed));
    const QString message = failed.first().at(0).toString();
    QVERIFY2(message.contains("another origin") && message.contains(m_server.otherOrigin()), qPrintable(message));
    QCOMPARE(m_server.requestsAtOther(), 0);
    QCOMPARE(m_server.keysAtOther(), 0);
    QCOMPARE(loaded.count(), 0);
    QVERIFY(!engine.server());
    QVERIFY(!engine.busy());
}

void TestRemoteAppHostile::chatIsCutOffAtTheLimit_data()
{
    QTest::addColumn<QString>("behaviour");
    QTest::addColumn<QString>("named");
    QTest::newRow("endless stream") << "endless"
                                    << "TOKENSCOPE_REMOTE_MAX_BYTES";
    QTest::newRow("2,000,000 events") << "many-events"
                                      << "TOKENSCOPE_REMOTE_MAX_EVENTS";
    QTest::newRow("100 MB in one field") << "huge-field"
                                         << "TOKENSCOPE_REMOTE_MAX_FIELD_BYTES";
    QTest::newRow("2^31 tokens counted") << "big-count"
                                         << "2147483648 is outside";
}

void TestRemoteAppHostile::chatIsCutOffAtTheLimit()
{
    QFETCH(QString, behaviour);
    QFETCH(QString, named);
    ConversationStore store(m_dir.filePath(behaviour + ".sqlite"), "hostile-" + behaviour);
    EngineController engine;
    MainWindow window(&engine, &store);
    window.setDialogsEnabled(false);
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    window.connectServer(endpoint(m_server.url(behaviour)));
    QVERIFY(testsupport::seen(loaded));
    ChatPanel* chat = window.chatPanel();
    auto s = chat->sampling();
    s.max_tokens = 16;
    chat->setSampling(s);
    QSignalSpy finished(chat, &ChatPanel::replyFinished), failed(&engine.chat(), &ChatClient::replyFailed);
    chat->send("Hello");
    QVERIFY(QTest::qWaitFor([&] { return finished.count() + failed.count() > 0; }, 120000)); // a backstop
    const QString message = failed.count() ? failed.first().at(1).toString() : chat->lastStats()->notice;
    QVERIFY2(message.contains(named), qPrintable(message));
    if (finished.count()) {
        QCOMPARE(chat->lastStats()->stop_reason, QString("cut off"));
        QCOMPARE(chat->messageCount(), 2); // what arrived is kept
    }
    QVERIFY(!engine.busy());
}

TestRemoteAppHostile::Run TestRemoteAppHostile::screenshot(const QStringList& args)
{
    QProcess app;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("HOME", m_dir.filePath("home"));
    env.remove("XDG_CONFIG_HOME");
    env.remove("XDG_DATA_HOME");
    env.insert("QT_QPA_PLATFORM", "offscreen");
    env.insert("TOKENSCOPE_API_KEY", kKey);
    app.setProcessEnvironment(env);
    app.start(TOKENSCOPE_GUI_PATH, args);
    Run r;
    r.finished = app.waitForFinished(120000); // a backstop: the app must end on its own
    if (!r.finished) {
        app.kill();
        app.waitForFinished();
    }
    r.exit_code = app.exitStatus() == QProcess::NormalExit ? app.exitCode() : -1;
    r.err = QString::fromUtf8(app.readAllStandardError());
    return r;
}

void TestRemoteAppHostile::screenshotEndsWhenTheServerFails_data()
{
    QTest::addColumn<QString>("url");
    QTest::addColumn<QString>("named");
    QTest::newRow("401") << m_server.url("unauthorized") << "HTTP 401";
    QTest::newRow("redirected to another origin") << m_server.url("redirect-get-302") << "another origin";
    QTcpServer closed; // a port that was free a moment ago: nothing listens there now
    QVERIFY(closed.listen(QHostAddress::LocalHost));
    const QString refused = QString("http://127.0.0.1:%1").arg(closed.serverPort());
    closed.close();
    QTest::newRow("connection refused") << refused << "refused the connection";
    QTest::newRow("the reply fails (HTTP 500)") << m_server.url("reply-500") << "the model crashed";
}

void TestRemoteAppHostile::screenshotEndsWhenTheServerFails()
{
    QFETCH(QString, url);
    QFETCH(QString, named);
    const QString shot = m_dir.filePath("server.png");
    const Run r = screenshot({"--screenshot", shot, "--panel", "main", "--server", url});
    QVERIFY2(r.finished, "screenshot mode was still waiting after the failure");
    QCOMPARE(r.exit_code, 1);
    QVERIFY2(r.err.contains(named), qPrintable(r.err));
    QVERIFY(!QFile::exists(shot));
    QCOMPARE(m_server.keysAtOther(), 0);
}

void TestRemoteAppHostile::screenshotEndsWhenTheModelFailsToLoad()
{
    const QString model = m_dir.filePath("broken.gguf");
    QFile f(model);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QByteArray("GGUF\x03\0\0\0", 8) + QByteArray(64, '\xff')); // a header that claims too much
    f.close();
    const QString shot = m_dir.filePath("model.png");
    const Run r = screenshot({"--screenshot", shot, "--panel", "main", "--model", model});
    QVERIFY2(r.finished, "screenshot mode was still waiting after the model failed to load");
    QCOMPARE(r.exit_code, 1);
    QVERIFY2(!r.err.trimmed().isEmpty(), "the reason is printed");
    QVERIFY(!QFile::exists(shot));
}

// The Connect dialog's screenshot showed the chat prompt as the server URL and a made-up key as dots.
void TestRemoteAppHostile::connectScreenshotShowsAnExampleUrlAndNoKey()
{
    EngineController engine;
    ConversationStore store(m_dir.filePath("connect.sqlite"), "connect-shot");
    MainWindow window(&engine, &store);
    window.setDialogsEnabled(false);
    ScreenshotOptions o;
    o.file = m_dir.filePath("connect.png");
    o.panel = "connect";
    o.prompt = "Explain in two sentences why the sky is blue."; // the option's default
    script_screenshot(*qApp, engine, window, o);
    auto* dialog = window.findChild<ConnectServerDialog*>();
    QVERIFY(dialog);
    auto* url = dialog->findChild<QComboBox*>();
    QVERIFY(url);
    QCOMPARE(url->currentText(), QString("http://127.0.0.1:8080"));
    QCOMPARE(dialog->apiKey(), QString());
    dialog->close();
}

QTEST_MAIN(TestRemoteAppHostile)
#include "test_remote_app_hostile.moc"
