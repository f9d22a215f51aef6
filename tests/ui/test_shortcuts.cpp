// SPDX-License-Identifier: GPL-3.0-or-later
// Keyboard shortcuts with every dock shown: no two shortcuts can fire for the same keys in the same
// place (Qt drops an ambiguous shortcut silently: Ctrl+Enter did nothing while the Chat and Decode
// stepper docks were both present), and Ctrl+Enter, typed with real key events, acts on the dock
// that has the focus — Send in the chat, Prefill in the stepper.
#include "bridge/engine_controller.h"
#include "main_window.h"
#include "panels/chat_panel.h"
#include "panels/stepper_panel.h"
#include "storage/conversation_store.h"
#include "test_paths.h"

#include <QAbstractButton>
#include <QAction>
#include <QApplication>
#include <QDockWidget>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QShortcut>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <QWhatsThis>

using namespace tokenscope::ui;

namespace {

// One binding of keys: where it can fire (null: the whole window) and what it is, for messages.
struct Binding {
    QString keys;
    const QWidget* scope;
    QString what;
};

QString describe(const QObject* o)
{
    QString name = o->objectName();
    if (const auto* b = qobject_cast<const QAbstractButton*>(o))
        name = "button '" + b->text() + "'";
    else if (const auto* a = qobject_cast<const QAction*>(o))
        name = "action '" + a->text() + "'";
    else if (const auto* s = qobject_cast<const QShortcut*>(o))
        name = "shortcut on " + QString(s->parent() ? s->parent()->metaObject()->className() : "nothing");
    return name;
}

const QWidget* scope_of(Qt::ShortcutContext context, const QWidget* widget)
{
    return context == Qt::WindowShortcut || context == Qt::ApplicationShortcut ? nullptr : widget;
}

std::vector<Binding> bindings_of(const QWidget& window)
{
    std::vector<Binding> out;
    for (const QAction* a : window.findChildren<QAction*>())
        for (const QKeySequence& k : a->shortcuts())
            if (!k.isEmpty())
                out.push_back(
                    {k.toString(), scope_of(a->shortcutContext(), qobject_cast<QWidget*>(a->parent())), describe(a)});
    for (const QShortcut* s : window.findChildren<QShortcut*>())
        for (const QKeySequence& k : s->keys())
            if (!k.isEmpty())
                out.push_back({k.toString(), scope_of(s->context(), qobject_cast<QWidget*>(s->parent())), describe(s)});
    for (const QAbstractButton* b : window.findChildren<QAbstractButton*>())
        if (!b->shortcut().isEmpty()) // a button's shortcut fires anywhere in its window
            out.push_back({b->shortcut().toString(), nullptr, describe(b)});
    return out;
}

bool overlaps(const QWidget* a, const QWidget* b)
{
    if (!a || !b)
        return true;
    return a == b || a->isAncestorOf(b) || b->isAncestorOf(a);
}

} // namespace

class TestShortcuts : public QObject {
    Q_OBJECT
private slots:
    void initTestCase()
    {
        QStandardPaths::setTestModeEnabled(true);
        QVERIFY(m_dir.isValid());
    }

    void noTwoShortcutsCollide()
    {
        ConversationStore store(m_dir.filePath("a.sqlite"), "shortcuts-1");
        EngineController engine;
        MainWindow window(&engine, &store);
        window.show();
        for (QDockWidget* dock : window.findChildren<QDockWidget*>())
            dock->show();
        const std::vector<Binding> all = bindings_of(window);
        QVERIFY2(all.size() >= 10, qPrintable(QString("only %1 shortcuts found").arg(all.size())));
        QStringList collisions;
        for (std::size_t i = 0; i < all.size(); ++i)
            for (std::size_t j = i + 1; j < all.size(); ++j)
                if (all[i].keys == all[j].keys && overlaps(all[i].scope, all[j].scope))
                    collisions << all[i].keys + ": " + all[i].what + " and " + all[j].what;
        QVERIFY2(collisions.isEmpty(), qPrintable(collisions.join("\n")));
    }

    void ctrlEnterActsOnTheFocusedDock()
    {
        REQUIRE_DEFAULT_MODEL(path);
        ConversationStore store(m_dir.filePath("b.sqlite"), "shortcuts-2");
        EngineController engine;
        MainWindow window(&engine, &store);
        window.show();
        for (QDockWidget* dock : window.findChildren<QDockWidget*>())
            dock->show();
        QVERIFY(QTest::qWaitForWindowActive(&window));
        QSignalSpy loaded(&engine, &EngineController::modelLoaded);
        window.openModel(QString::fromStdString(path));
        QVERIFY(loaded.wait(120000));

        ChatPanel* chat = window.chatPanel();
        auto s = chat->sampling();
        s.max_tokens = 2;
        chat->setSampling(s);
        QPushButton* send = nullptr;
        for (auto* b : chat->findChildren<QPushButton*>())
            if (b->text() == tr("Send"))
                send = b;
        QPushButton* prefill = nullptr;
        for (auto* b : window.stepperPanel()->findChildren<QPushButton*>())
            if (b->text() == tr("Prefill"))
                prefill = b;
        QVERIFY(send && prefill);
        QSignalSpy sent(send, &QPushButton::clicked);
        QSignalSpy prefilled(prefill, &QPushButton::clicked);

        auto* input = chat->findChild<QPlainTextEdit*>("messageInput");
        QVERIFY(input);
        input->setFocus();
        QTest::keyClicks(input, "Hi");
        QSignalSpy finished(chat, &ChatPanel::replyFinished);
        QTest::keyClick(input, Qt::Key_Return, Qt::ControlModifier);
        QCOMPARE(sent.count(), 1);
        QCOMPARE(prefilled.count(), 0);
        QVERIFY(finished.wait(60000));

        auto* prompt = window.stepperPanel()->findChild<QPlainTextEdit*>("stepperPrompt");
        QVERIFY(prompt);
        prompt->setFocus();
        QTest::keyClicks(prompt, "The sky is");
        QTest::keyClick(prompt, Qt::Key_Enter, Qt::ControlModifier); // the keypad's Enter too
        QCOMPARE(prefilled.count(), 1);
        QCOMPARE(sent.count(), 1);
    }

    // Help → What is this? (Shift+F1), then a click in a panel: every panel explains itself with the
    // text bundled for it (resources/help), typed and clicked as a user does.
    void whatIsThisExplainsEveryPanel()
    {
        ConversationStore store(m_dir.filePath("c.sqlite"), "shortcuts-3");
        EngineController engine;
        MainWindow window(&engine, &store);
        window.resize(1400, 900);
        window.show();
        QVERIFY(QTest::qWaitForWindowActive(&window));
        const auto docks = window.findChildren<QDockWidget*>();
        QVERIFY(docks.size() >= 9);
        for (QDockWidget* dock : docks) {
            QWidget* panel = dock->widget();
            QVERIFY2(panel->whatsThis().startsWith("<h3>" + dock->windowTitle() + "</h3>"),
                     qPrintable(dock->objectName() + ": " + panel->whatsThis().left(80)));
            QVERIFY(panel->whatsThis().size() > 200);
            dock->show();
            dock->raise();
            QCoreApplication::processEvents();
            panel->setFocus();
            QTest::keyClick(panel, Qt::Key_F1, Qt::ShiftModifier);
            QVERIFY2(QWhatsThis::inWhatsThisMode(), qPrintable(dock->objectName()));
            QTest::mouseClick(panel, Qt::LeftButton, {}, panel->rect().center());
            QVERIFY(!QWhatsThis::inWhatsThisMode());
            bool shown = false;
            for (QWidget* w : QApplication::topLevelWidgets())
                shown = shown || (w->isVisible() && QByteArray(w->metaObject()->className()) == "QWhatsThat");
            QVERIFY2(shown, qPrintable(dock->objectName() + ": no text shown"));
            QWhatsThis::hideText();
            window.activateWindow(); // the text's popup took the activation
            QVERIFY(QTest::qWaitForWindowActive(&window));
        }
    }

private:
    QTemporaryDir m_dir;
};

QTEST_MAIN(TestShortcuts)
#include "test_shortcuts.moc"
