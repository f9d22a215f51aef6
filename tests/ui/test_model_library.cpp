// SPDX-License-Identifier: GPL-3.0-or-later
// The model library dialog lists the installed models (scanned off the UI thread) with their kind
// (base or instruct), architecture and type, and a recently opened corrupt file with the loader's
// message; the kind's tooltip and the line under the list say which rule decided it.
#include "test_paths.h"
#include "text_review.h"
#include "widgets/model_library_dialog.h"

#include <QFile>
#include <QLabel>
#include <QLocale>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QTreeWidget>
#include <algorithm>

using namespace tokenscope::ui;

class TestModelLibrary : public QObject {
    Q_OBJECT
private slots:
    void listsDefaultModelAndBadFile();
    void marksTheLoadedModelAndHoldsWholeNames();
};

void TestModelLibrary::listsDefaultModelAndBadFile()
{
    REQUIRE_DEFAULT_MODEL(path);
    REQUIRE_CHAT_MODEL(chat_path);
    QTemporaryDir dir;
    const QString bad = dir.filePath("broken.gguf");
    QFile f(bad);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("GGUF\x03\x00\x00\x00 truncated", 20);
    f.close();
    ModelLibraryDialog dialog({bad});
    QSignalSpy done(&dialog, &ModelLibraryDialog::scanFinished);
    QVERIFY(done.wait(60000));
    auto* tree = dialog.findChild<QTreeWidget*>();
    QVERIFY(tree);
    QCOMPARE(tree->headerItem()->text(2), QString("Kind"));
    bool found_default = false, found_chat = false, found_bad = false;
    for (int i = 0; i < tree->topLevelItemCount(); ++i) {
        const auto* item = tree->topLevelItem(i);
        if (item->text(6) == QString::fromStdString(path)) {
            found_default = true;
            QCOMPARE(item->text(2), QString("base"));
            QCOMPARE(item->toolTip(2), QString("base: no chat template, and its name does not say instruct"));
            QCOMPARE(item->text(3), QString("gemma3"));
            QCOMPARE(item->text(4), QString("Q4_K_M"));
        }
        if (item->text(6) == QString::fromStdString(chat_path)) {
            found_chat = true;
            QCOMPARE(item->text(2), QString("instruct"));
            QCOMPARE(item->toolTip(2), QString(R"(instruct: general.finetune says "Instruct-AWQ")"));
            QCOMPARE(item->text(3), QString("qwen2"));
            QCOMPARE(item->text(4), QString("Q4_K_M"));
            QCOMPARE(item->text(5), QLocale().formattedDataSize(491400064, 1, QLocale::DataSizeTraditionalFormat));
        }
        if (item->text(6) == bad) {
            found_bad = true;
            QCOMPARE(item->text(3), QString("cannot be read"));
            QVERIFY(item->toolTip(0).contains("truncated"));
        }
    }
    QVERIFY(found_default);
    QVERIFY(found_chat);
    QVERIFY(found_bad);

    // Selecting a model says, under the list, why it has its kind.
    QVERIFY(dialog.selectModel(QString::fromStdString(chat_path)));
    const auto labels = dialog.findChildren<QLabel*>();
    const bool said = std::any_of(labels.begin(), labels.end(), [](const QLabel* l) {
        return l->text().endsWith(R"( is marked instruct: general.finetune says "Instruct-AWQ".)");
    });
    QVERIFY(said);
    QVERIFY(!dialog.selectModel("/nonexistent.gguf"));
}

// The model the window has loaded is marked (bold, "(loaded)"); every name and path is whole in its
// tooltip, so one cut by the column's width can still be read.
void TestModelLibrary::marksTheLoadedModelAndHoldsWholeNames()
{
    REQUIRE_DEFAULT_MODEL(path);
    ModelLibraryDialog dialog({}, QString::fromStdString(path));
    QSignalSpy done(&dialog, &ModelLibraryDialog::scanFinished);
    QVERIFY(done.wait(60000));
    auto* tree = dialog.findChild<QTreeWidget*>();
    QVERIFY(tree && tree->topLevelItemCount() >= 1);
    int loaded = 0;
    for (int i = 0; i < tree->topLevelItemCount(); ++i) {
        const auto* item = tree->topLevelItem(i);
        QCOMPARE(item->toolTip(6), item->text(6));
        QVERIFY2(item->toolTip(0).contains(item->text(6)) || !item->data(0, Qt::UserRole).isValid(),
                 qPrintable(item->toolTip(0)));
        const bool is_loaded = item->text(6) == QString::fromStdString(path);
        loaded += is_loaded;
        QCOMPARE(item->text(0).endsWith(" (loaded)"), is_loaded);
        QCOMPARE(item->font(0).bold(), is_loaded);
    }
    QCOMPARE(loaded, 1);
    QVERIFY_WORDING(&dialog);
}

QTEST_MAIN(TestModelLibrary)
#include "test_model_library.moc"
