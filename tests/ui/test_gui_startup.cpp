// SPDX-License-Identifier: GPL-3.0-or-later
// The desktop app started where there is no display: `tokenscope --help` prints its help and
// exits 0, and a plain start says what to do and exits 2 — neither aborts in Qt's xcb plugin
// (exit 134 before).
#include "test_paths.h"

#include <QFile>
#include <QProcess>
#include <QProcessEnvironment>
#include <QTemporaryDir>
#include <QTest>

class TestGuiStartup : public QObject {
    Q_OBJECT
private slots:
    void withoutADisplay_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<int>("exit_code");
        QTest::addColumn<QString>("says");
        QTest::newRow("help") << QStringList{"--help"} << 0 << "--screenshot";
        QTest::newRow("plain start") << QStringList{} << 2 << "no display";
    }
    void withoutADisplay()
    {
        QFETCH(QStringList, args);
        QFETCH(int, exit_code);
        QFETCH(QString, says);
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        for (const char* name : {"DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"})
            env.remove(name);
        p.setProcessEnvironment(env);
        p.start(TOKENSCOPE_GUI_PATH, args);
        QVERIFY(p.waitForFinished(60000));
        const QString out = QString::fromUtf8(p.readAllStandardOutput() + p.readAllStandardError());
        QCOMPARE(p.exitStatus(), QProcess::NormalExit); // not killed by SIGABRT
        QVERIFY2(p.exitCode() == exit_code, qPrintable(QString("exit %1: %2").arg(p.exitCode()).arg(out)));
        QVERIFY2(out.contains(says), qPrintable(out));
    }

    // A screenshot run loads a model the user did not choose: it must not become the model the next
    // real start opens (the recent list decides that), nor appear in Open recent.
    void screenshotLeavesTheRecentListAlone()
    {
        REQUIRE_DEFAULT_MODEL(path);
        QTemporaryDir home;
        QVERIFY(home.isValid());
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("QT_QPA_PLATFORM", "offscreen");
        env.insert("XDG_CONFIG_HOME", home.filePath("config"));
        env.insert("XDG_DATA_HOME", home.filePath("data"));
        p.setProcessEnvironment(env);
        p.start(TOKENSCOPE_GUI_PATH, {"--screenshot", home.filePath("shot.png"), "--panel", "tokenizer", "--model",
                                      QString::fromStdString(path), "--prompt", "Hi"});
        QVERIFY(p.waitForFinished(180000));
        QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
        QVERIFY(QFile::exists(home.filePath("shot.png")));
        QFile settings(home.filePath("config/Tokenscope/Tokenscope.conf"));
        const QByteArray written = settings.open(QIODevice::ReadOnly) ? settings.readAll() : QByteArray();
        QVERIFY2(!written.contains("recent"), written.constData());
    }

    // `--panel lab --tab heads` opens the Heads tab (it opened the Patching tab's heads mode);
    // patching over heads is `--tab patch-heads`.
    void labTabHeadsOpensTheHeadsTab_data()
    {
        QTest::addColumn<QString>("tab");
        QTest::addColumn<QString>("said");
        QTest::newRow("heads") << "heads"
                               << "lab: the Heads tab";
        QTest::newRow("patch-heads") << "patch-heads"
                                     << "lab: the Patching tab, over heads";
    }
    void labTabHeadsOpensTheHeadsTab()
    {
        QFETCH(QString, tab);
        QFETCH(QString, said);
        REQUIRE_DEFAULT_MODEL(path);
        QTemporaryDir home;
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("QT_QPA_PLATFORM", "offscreen");
        env.insert("XDG_CONFIG_HOME", home.filePath("config"));
        env.insert("XDG_DATA_HOME", home.filePath("data"));
        p.setProcessEnvironment(env);
        p.start(TOKENSCOPE_GUI_PATH, {"--screenshot", home.filePath("lab.png"), "--panel", "lab", "--tab", tab,
                                      "--model", QString::fromStdString(path)});
        QVERIFY(p.waitForFinished(300000));
        const QString err = QString::fromUtf8(p.readAllStandardError());
        QVERIFY2(p.exitCode() == 0 && err.contains(said), qPrintable(err));
        QVERIFY(QFile::exists(home.filePath("lab.png")));
    }
};

QTEST_GUILESS_MAIN(TestGuiStartup)
#include "test_gui_startup.moc"
