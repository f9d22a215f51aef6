// SPDX-License-Identifier: GPL-3.0-or-later
// A load that fails (a text file renamed .gguf) must not leave the model bar saying "Loading X…":
// it shows the model that is still loaded, or that none is.
#include "bridge/engine_controller.h"
#include "main_window.h"
#include "storage/conversation_store.h"
#include "test_paths.h"

#include <QFile>
#include <QLabel>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

using namespace tokenscope::ui;

class TestLoadFailure : public QObject {
    Q_OBJECT
private slots:
    void initTestCase()
    {
        QStandardPaths::setTestModeEnabled(true);
        QVERIFY(m_dir.isValid());
        QFile bad(m_dir.filePath("notes.gguf"));
        QVERIFY(bad.open(QIODevice::WriteOnly));
        bad.write("These are my notes, not a model.\n");
    }

    void failedLoadRestoresTheModelBar()
    {
        REQUIRE_DEFAULT_MODEL(path);
        ConversationStore store(m_dir.filePath("c.sqlite"), "load-failure");
        EngineController engine;
        MainWindow window(&engine, &store);
        window.setDialogsEnabled(false);
        window.show();
        auto* label = window.findChild<QLabel*>("modelBarLabel");
        QVERIFY(label);
        QSignalSpy failed(&engine, &EngineController::loadFailed);
        QSignalSpy loaded(&engine, &EngineController::modelLoaded);

        // No model yet: the bar says none is loaded, naming the file that failed.
        window.openModel(m_dir.filePath("notes.gguf"));
        QVERIFY(label->text().contains("Loading"));
        QVERIFY(failed.wait(60000));
        QVERIFY2(!label->text().contains("Loading"), qPrintable(label->text()));
        QVERIFY2(label->text().contains("No model loaded") && label->text().contains("notes.gguf"),
                 qPrintable(label->text()));

        // A model loaded, then a bad file: the bar shows the model still loaded.
        window.openModel(QString::fromStdString(path));
        QVERIFY(loaded.wait(120000));
        const QString shown = label->text();
        window.openModel(m_dir.filePath("notes.gguf"));
        QVERIFY(failed.wait(60000));
        QCOMPARE(label->text(), shown);
    }

private:
    QTemporaryDir m_dir;
};

QTEST_MAIN(TestLoadFailure)
#include "test_load_failure.moc"
