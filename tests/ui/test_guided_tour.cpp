// SPDX-License-Identifier: GPL-3.0-or-later
// Help → Tour, end to end with real clicks on its buttons, on the loaded model: each page raises
// and outlines its panel and drives it — the tokenizer shows the misspelt text, the stepper prefills
// and takes two steps, the context simulator gains turns — and what the tour did stays when it
// closes. With no model loaded it offers the default model and Next waits.
#include "bridge/engine_controller.h"
#include "main_window.h"
#include "panels/context_panel.h"
#include "panels/stepper_panel.h"
#include "panels/tokenizer_panel.h"
#include "storage/conversation_store.h"
#include "test_paths.h"
#include "text_review.h"
#include "tour/guided_tour.h"

#include <QAction>
#include <QDockWidget>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

using namespace tokenscope::ui;

class TestGuidedTour : public QObject {
    Q_OBJECT
private slots:
    void initTestCase()
    {
        QStandardPaths::setTestModeEnabled(true);
        QVERIFY(m_dir.isValid());
    }

    void theTourRunsThePipelineOnTheLoadedModel()
    {
        REQUIRE_DEFAULT_MODEL(path);
        ConversationStore store(m_dir.filePath("tour.sqlite"), "tour");
        EngineController engine;
        MainWindow window(&engine, &store);
        window.setDialogsEnabled(false);
        window.resize(1400, 900);
        window.show();

        // No model yet: the first page offers the default model, and Next waits for it.
        auto* action = window.findChild<QAction*>("tour");
        QVERIFY(action);
        action->trigger();
        auto* tour = window.findChild<GuidedTour*>();
        QVERIFY(tour && tour->isVisible());
        auto* next = tour->findChild<QPushButton*>("tour-next");
        auto* open = tour->findChild<QPushButton*>("tour-open-model");
        QVERIFY(next && open);
        QVERIFY(!next->isEnabled());
        QVERIFY(open->isVisible());
        QVERIFY(tour->stepText().contains("No model is loaded"));
        QSignalSpy loaded(&engine, &EngineController::modelLoaded);
        if (qEnvironmentVariableIsSet("TOKENSCOPE_MODEL"))
            window.openModel(QString::fromStdString(path)); // the sanitizer tree's small model
        else
            QTest::mouseClick(open, Qt::LeftButton); // the installed default model
        QVERIFY(loaded.wait(120000));
        QVERIFY(next->isEnabled());
        QVERIFY(!open->isVisible());

        QSignalSpy shown(tour, &GuidedTour::stepShown);
        QSignalSpy ready(tour, &GuidedTour::ready);
        QStringList titles;
        while (tour->step() + 1 < tour->stepCount()) {
            QTRY_VERIFY_WITH_TIMEOUT(next->isEnabled(), 120000); // the panel finished the last page's work
            QTest::mouseClick(next, Qt::LeftButton);
            titles << tour->stepTitle();
            QVERIFY_WORDING(tour);
            auto* outline = window.findChild<QFrame*>("tour-outline");
            if (tour->step() + 1 < tour->stepCount()) {
                QVERIFY2(outline && outline->parentWidget()->isVisible(), qPrintable(tour->stepTitle()));
            }
        }
        QTRY_VERIFY_WITH_TIMEOUT(next->isEnabled(), 120000);
        QCOMPARE(titles.size(), tour->stepCount() - 1);
        QVERIFY(titles.first().contains("tokens") && titles.last().contains("whole loop"));
        QVERIFY(ready.count() >= 4); // the tokens drawn, the prefill and two steps

        // What the tour did is there to keep playing with.
        QVERIFY(window.tokenizerPanel()->countsText().contains("token"));
        const auto state = window.stepperPanel()->state();
        QVERIFY(state && state->steps == 2);
        QVERIFY(state->prompt_length > 5);
        QVERIFY_WORDING(&window);
        QTest::mouseClick(next, Qt::LeftButton); // Finish
        QTRY_VERIFY(window.findChild<GuidedTour*>() == nullptr);
        QCOMPARE(window.stepperPanel()->state()->steps, 2);
        QVERIFY(window.findChild<QFrame*>("tour-outline") == nullptr || !window.findChild<QFrame*>("tour-outline"));
    }

private:
    QTemporaryDir m_dir;
};

QTEST_MAIN(TestGuidedTour)
#include "test_guided_tour.moc"
