// SPDX-License-Identifier: GPL-3.0-or-later
// Layouts that fit: every panel of the window, raised in turn at 1280×800 and 1920×1080 (and at 2× in
// test_layout_2x), on a 30-layer model with the chat model's vocabulary (make-test-model --layers 30
// --vocab), after a real load and a long prompt prefilled and stepped in the stepper. The geometry, not
// the pixels: no visible widget reaches outside its parent (a scroll area's content may: it scrolls),
// and no label's text is wider than the label unless it wraps or a tooltip holds it.
#include "bridge/engine_controller.h"
#include "gguf/gguf_file.h"
#include "main_window.h"
#include "model/test_model.h"
#include "panels/stepper_panel.h"
#include "storage/conversation_store.h"
#include "test_paths.h"
#include "text_review.h"
#include "widgets/kv_layer_view.h"

#include <QAbstractScrollArea>
#include <QDockWidget>
#include <QLabel>
#include <QScrollBar>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QStyle>
#include <QTabBar>
#include <QTemporaryDir>
#include <QTest>

using namespace tokenscope::ui;

namespace {

QString name_of(const QWidget* w)
{
    QString n = w->metaObject()->className();
    if (!w->objectName().isEmpty())
        n += " '" + w->objectName() + "'";
    if (const auto* l = qobject_cast<const QLabel*>(w))
        n += " \"" + l->text().left(40) + "\"";
    return n;
}

// Whether `w` is the content of a scroll area (its viewport's child): it may be larger than its parent.
bool scrolls(const QWidget* w)
{
    const QWidget* p = w->parentWidget();
    return p && qobject_cast<const QAbstractScrollArea*>(p->parentWidget()) &&
           qobject_cast<const QAbstractScrollArea*>(p->parentWidget())->viewport() == p;
}

// A tab's title Qt elides ("Decode stepp…") when the bar is short of room, without a tooltip to hold it.
QStringList elided_tabs(const QTabBar* bar)
{
    QStringList out;
    for (int i = 0; i < bar->count(); ++i) {
        const int need = bar->fontMetrics().horizontalAdvance(bar->tabText(i)) +
                         bar->style()->pixelMetric(QStyle::PM_TabBarTabHSpace, nullptr, bar);
        if (need > bar->tabRect(i).width() && bar->tabToolTip(i).isEmpty())
            out << QString("tab \"%1\" is elided (%2 px of %3) and no tooltip holds it")
                       .arg(bar->tabText(i))
                       .arg(bar->tabRect(i).width())
                       .arg(need);
    }
    return out;
}

// What does not fit inside `root`, one line each; `checked` counts the visible widgets looked at.
QStringList misfits(const QWidget* root, int* checked = nullptr)
{
    QStringList out;
    for (const QWidget* w : root->findChildren<QWidget*>()) {
        if (!w->isVisible() || w->isWindow())
            continue;
        if (checked)
            ++*checked;
        const QWidget* p = w->parentWidget();
        if (p && !scrolls(w) && !p->rect().contains(w->geometry()) && w->width() > 0 && w->height() > 0)
            out << QString("%1 at %2,%3 %4×%5 reaches outside %6 (%7×%8)")
                       .arg(name_of(w))
                       .arg(w->x())
                       .arg(w->y())
                       .arg(w->width())
                       .arg(w->height())
                       .arg(name_of(p))
                       .arg(p->width())
                       .arg(p->height());
        if (const auto* bar = qobject_cast<const QTabBar*>(w))
            out << elided_tabs(bar);
        if (const auto* l = qobject_cast<const QLabel*>(w);
            l && !l->wordWrap() && l->textFormat() != Qt::RichText && l->toolTip().isEmpty() && !l->text().isEmpty()) {
            const int need = l->fontMetrics().horizontalAdvance(l->text()) + 2 * l->margin();
            if (need > l->contentsRect().width())
                out << QString("%1 is cut: its text needs %2 px, it has %3, and no tooltip holds it")
                           .arg(name_of(l))
                           .arg(need)
                           .arg(l->contentsRect().width());
        }
    }
    return out;
}

} // namespace

class TestLayout : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void theCheckFindsWhatDoesNotFit();
    void everyPanelFits_data();
    void everyPanelFits();
    void theProofreadingFindsMiswording();

private:
    QTemporaryDir m_dir;
    QString m_model;
};

void TestLayout::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true);
    REQUIRE_CHAT_MODEL(chat);
    const auto vocab = engine::gguf::GgufFile::open(chat);
    engine::TestModelShape shape;
    shape.n_layer = 30;
    m_model = m_dir.filePath("deep.gguf");
    engine::make_test_model("qwen2", 1, shape, vocab.get()).write(m_model.toStdString());
}

// The check itself: a child placed past its parent's edge and a label too narrow for its text are
// found; the same label with a tooltip, or wrapping, is not.
void TestLayout::theCheckFindsWhatDoesNotFit()
{
    QWidget parent;
    parent.resize(200, 100);
    auto* child = new QWidget(&parent);
    child->setGeometry(150, 10, 100, 20);
    auto* label = new QLabel("a sentence far too long for forty pixels", &parent);
    label->setGeometry(0, 50, 40, 20);
    parent.show();
    QStringList found = misfits(&parent);
    QCOMPARE(found.size(), 2);
    QVERIFY2(found[0].contains("reaches outside") || found[1].contains("reaches outside"),
             qPrintable(found.join("\n")));
    QVERIFY2(found.join(" ").contains("is cut"), qPrintable(found.join("\n")));
    child->setGeometry(10, 10, 100, 20);
    label->setToolTip(label->text());
    QCOMPARE(misfits(&parent), QStringList());
    label->setToolTip(QString());
    label->setWordWrap(true);
    QCOMPARE(misfits(&parent), QStringList());
    // a tab bar too short for its titles: elided without a tooltip is found, with one it is not
    auto* tabs = new QTabBar(&parent);
    tabs->setElideMode(Qt::ElideRight);
    tabs->setUsesScrollButtons(false);
    tabs->addTab("a long title for a tab");
    tabs->addTab("another long title");
    tabs->setGeometry(0, 0, 120, 30);
    tabs->show();
    QCOMPARE(elided_tabs(tabs).size(), 2);
    tabs->setTabToolTip(0, tabs->tabText(0));
    tabs->setTabToolTip(1, tabs->tabText(1));
    QCOMPARE(elided_tabs(tabs), QStringList());
}

void TestLayout::everyPanelFits_data()
{
    QTest::addColumn<QSize>("size");
    QTest::newRow("1280×800") << QSize(1280, 800);
    QTest::newRow("1920×1080") << QSize(1920, 1080);
}

void TestLayout::everyPanelFits()
{
    QFETCH(QSize, size);
    ConversationStore store(m_dir.filePath("c.sqlite"), "layout");
    EngineController engine;
    MainWindow window(&engine, &store);
    window.resize(size);
    window.show();
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    window.openModel(m_model);
    QVERIFY(loaded.wait(120000));
    // a long prompt in the stepper, prefilled and stepped: the views hold a real sequence
    StepperPanel* stepper = window.stepperPanel();
    QSignalSpy changed(stepper, &StepperPanel::stateChanged);
    QString prompt;
    for (int i = 0; i < 12; ++i)
        prompt += "The keeper climbed the stairs of the lighthouse every evening and wrote in his log. ";
    stepper->setPrompt(prompt);
    stepper->prefill();
    QVERIFY(changed.wait(120000));
    changed.clear();
    stepper->step();
    QVERIFY(changed.wait(120000));
    // the window keeps the screen's size: nothing in it (the model bar's long line) forces it wider
    QCoreApplication::processEvents();
    QVERIFY2(window.width() <= size.width() && window.height() <= size.height(),
             qPrintable(QString("the window is %1×%2 on a %3×%4 screen (its minimum: %5×%6)")
                            .arg(window.width())
                            .arg(window.height())
                            .arg(size.width())
                            .arg(size.height())
                            .arg(window.minimumSizeHint().width())
                            .arg(window.minimumSizeHint().height())));
    QStringList all;
    // the KV panel's live view has a row for each of the 30 layers, within reach by scrolling
    if (auto* layers = window.findChild<KvLayerView*>()) {
        window.findChild<QDockWidget*>("dock-kv")->raise();
        QTest::qWait(50);
        if (layers->height() < layers->sizeHint().height())
            all << QString("KV cache: the layer view is %1 px high, its rows for %2 layers need %3: the last are out "
                           "of reach")
                       .arg(layers->height())
                       .arg(30)
                       .arg(layers->sizeHint().height());
    } else {
        all << "KV cache: no layer view";
    }
    for (QDockWidget* dock : window.findChildren<QDockWidget*>()) {
        dock->show();
        dock->raise();
        QTest::qWait(50);
        // at a screen's size the panel fits its dock: its scroll area is a safety net, not the layout
        if (auto* scroll = qobject_cast<QAbstractScrollArea*>(dock->widget()))
            if (scroll->horizontalScrollBar()->isVisible() || scroll->verticalScrollBar()->isVisible())
                all << QString("%1 scrolls in its %2×%3 dock (the panel needs %4×%5)")
                           .arg(dock->windowTitle())
                           .arg(dock->width())
                           .arg(dock->height())
                           .arg(scroll->viewport()->childrenRect().width())
                           .arg(scroll->viewport()->childrenRect().height());
        int checked = 0;
        for (const QString& m : misfits(dock, &checked))
            all << dock->windowTitle() + ": " + m;
        qInfo("%s: %d visible widgets, dock %d×%d", qPrintable(dock->windowTitle()), checked, dock->width(),
              dock->height());
        QVERIFY2(checked > 3, qPrintable(dock->windowTitle() + " shows nothing"));
    }
    // the docks' tab bars (the window's own children)
    for (const QTabBar* bar : window.findChildren<QTabBar*>(Qt::FindDirectChildrenOnly))
        if (bar->isVisible())
            for (const QString& m : elided_tabs(bar))
                all << "dock tabs: " + m;
    QVERIFY2(all.isEmpty(), qPrintable("\n" + all.join("\n")));
    // the words every panel shows in this state, tooltips and menus included
    QVERIFY_WORDING(&window);
}

// The proofreading rules themselves: each fault is found, and the app's own forms pass.
void TestLayout::theProofreadingFindsMiswording()
{
    using testsupport::text_faults;
    for (const char* wrong :
         {"3 token(s)", "1 tokens", "1 candidates survive", "2 head ablated", "context 32768", "at most %1 tokens",
          "<b>TTFT</b> 3 ms", "CPU (1 threads)", "two  spaces", "a pause , then"})
        QVERIFY2(!text_faults(wrong).isEmpty(), wrong);
    for (const char* right :
         {"1 token", "2,048 tokens", "1 candidate survives", "layer 2 token 'the'", "http://127.0.0.1:8080/v1",
          "gemma-3-270m-Q4_K_M.gguf", "0.0001 s", "#1234", "32,768 tokens", "Qwen2.5 Coder 0.5B",
          "an OpenAI .tiktoken file", "piece 7 · id 151643", "position 1 · 2 heads"})
        QVERIFY2(text_faults(right).isEmpty(), qPrintable(QString(right) + ": " + text_faults(right).join("; ")));
}

QTEST_MAIN(TestLayout)
#include "test_layout.moc"
