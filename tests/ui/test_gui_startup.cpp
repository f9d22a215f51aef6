// SPDX-License-Identifier: GPL-3.0-or-later
// The desktop app started where there is no display: `tokenscope --help` prints its help and
// exits 0, and a plain start says what to do and exits 2 — neither aborts in Qt's xcb plugin
// (exit 134 before).
#include <QProcess>
#include <QProcessEnvironment>
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
};

QTEST_GUILESS_MAIN(TestGuiStartup)
#include "test_gui_startup.moc"
