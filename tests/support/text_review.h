// SPDX-License-Identifier: GPL-3.0-or-later
// Proofreading the words a window shows: every label, button, tab, tooltip, status tip, placeholder,
// list item, table header and cell, menu action and status-bar message under a widget (not a text
// view's body: that is what the user typed or the model wrote), checked
// against the rules the app's texts follow — plurals through countText ("1 token", "2 tokens", never
// "token(s)"), numbers of four digits or more grouped as QLocale writes them ("4,096"), no
// placeholder left unfilled ("%1"), no markup shown as text, no doubled or stray spaces.
#pragma once

#include <QAbstractButton>
#include <QAbstractItemView>
#include <QAction>
#include <QComboBox>
#include <QGroupBox>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMainWindow>
#include <QMenu>
#include <QMenuBar>
#include <QPlainTextEdit>
#include <QRegularExpression>
#include <QStatusBar>
#include <QTabBar>
#include <QTextDocument>
#include <QTextEdit>

namespace testsupport {

// One text and where it was seen ("QLabel 'status' tooltip").
struct ShownText {
    QString where;
    QString text;
    bool plain = false; // shown as written (a plain-text label): markup in it is seen as markup
};

inline QString plain_of(const QString& text)
{
    if (!Qt::mightBeRichText(text))
        return text;
    QTextDocument doc;
    doc.setHtml(text);
    return doc.toPlainText();
}

inline QString where_of(const QObject* o, const char* what)
{
    QString n = o->metaObject()->className();
    if (!o->objectName().isEmpty())
        n += " '" + o->objectName() + "'";
    return n + " " + what;
}

// The words of one item model: headers, and the display and tooltip text of its first rows (the
// rules are about wording, which repeats down a column).
inline void collect_model(const QAbstractItemModel* m, const QObject* owner, QList<ShownText>& out)
{
    if (!m)
        return;
    for (int c = 0; c < m->columnCount(); ++c) {
        out.push_back({where_of(owner, "header"), m->headerData(c, Qt::Horizontal).toString()});
        out.push_back(
            {where_of(owner, "header tooltip"), m->headerData(c, Qt::Horizontal, Qt::ToolTipRole).toString()});
    }
    for (int r = 0; r < std::min(m->rowCount(), 40); ++r)
        for (int c = 0; c < m->columnCount(); ++c) {
            const QModelIndex i = m->index(r, c);
            out.push_back({where_of(owner, "cell"), m->data(i).toString()});
            out.push_back({where_of(owner, "cell tooltip"), m->data(i, Qt::ToolTipRole).toString()});
        }
}

inline void collect_actions(const QList<QAction*>& actions, const QObject* owner, QList<ShownText>& out)
{
    for (const QAction* a : actions) {
        QString text = a->text();
        text.remove('&');
        out.push_back({where_of(owner, "action"), text});
        if (a->toolTip() != a->text() && a->toolTip() != text)
            out.push_back({where_of(owner, "action tooltip"), a->toolTip()});
        out.push_back({where_of(owner, "action status tip"), a->statusTip()});
        if (a->menu())
            collect_actions(a->menu()->actions(), a->menu(), out);
    }
}

// Every text shown under `root` (visible or not: a hidden tab's words are read when it is raised).
inline QList<ShownText> shown_texts(const QWidget* root)
{
    QList<ShownText> out;
    QList<const QWidget*> widgets{root};
    for (const QWidget* w : root->findChildren<QWidget*>())
        widgets << w;
    for (const QWidget* w : widgets) {
        out.push_back({where_of(w, "tooltip"), w->toolTip()});
        out.push_back({where_of(w, "status tip"), w->statusTip()});
        out.push_back({where_of(w, "what's this"), w->whatsThis()});
        if (const auto* l = qobject_cast<const QLabel*>(w))
            out.push_back({where_of(w, "text"), l->text(), l->textFormat() == Qt::PlainText});
        if (const auto* b = qobject_cast<const QAbstractButton*>(w)) {
            QString text = b->text();
            text.remove('&');
            out.push_back({where_of(w, "text"), text});
        }
        if (const auto* e = qobject_cast<const QLineEdit*>(w))
            out.push_back({where_of(w, "placeholder"), e->placeholderText()});
        if (const auto* e = qobject_cast<const QPlainTextEdit*>(w))
            out.push_back({where_of(w, "placeholder"), e->placeholderText()});
        if (const auto* e = qobject_cast<const QTextEdit*>(w)) // its body is the user's or the model's text
            out.push_back({where_of(w, "placeholder"), e->placeholderText()});
        if (const auto* g = qobject_cast<const QGroupBox*>(w))
            out.push_back({where_of(w, "title"), g->title()});
        if (const auto* t = qobject_cast<const QTabBar*>(w))
            for (int i = 0; i < t->count(); ++i) {
                QString text = t->tabText(i);
                text.remove('&');
                out.push_back({where_of(w, "tab"), text});
                out.push_back({where_of(w, "tab tooltip"), t->tabToolTip(i)});
            }
        if (const auto* c = qobject_cast<const QComboBox*>(w))
            for (int i = 0; i < c->count(); ++i) {
                out.push_back({where_of(w, "item"), c->itemText(i)});
                out.push_back({where_of(w, "item tooltip"), c->itemData(i, Qt::ToolTipRole).toString()});
            }
        if (const auto* v = qobject_cast<const QAbstractItemView*>(w); v && !qobject_cast<const QHeaderView*>(w))
            collect_model(v->model(), w, out);
        if (w->windowFlags() & Qt::Window || qobject_cast<const QMenuBar*>(w))
            out.push_back({where_of(w, "title"), w->windowTitle()});
        if (const auto* m = qobject_cast<const QMenuBar*>(w))
            collect_actions(m->actions(), w, out);
        if (const auto* s = qobject_cast<const QStatusBar*>(w))
            out.push_back({where_of(w, "message"), s->currentMessage()});
    }
    QList<ShownText> nonEmpty;
    for (ShownText& t : out)
        if (!t.text.trimmed().isEmpty()) {
            if (!t.plain)
                t.text = plain_of(t.text); // a tooltip may be rich text: its words are what is read
            nonEmpty.push_back(std::move(t));
        }
    return nonEmpty;
}

// What one text does wrong, one phrase each; nothing when it reads right.
inline QStringList text_faults(const QString& text)
{
    // A plural noun after a count of one, and a singular one after another count. The nouns are the
    // ones the app counts; a number that is an index ("layer 2 token") is not a count, hence the list
    // of counted nouns rather than any word.
    static const QString nouns = "token|head|layer|step|candidate|character|byte|request|turn|block|change|model|run|"
                                 "message|expert|second|word|line|position|entry|pass|file|item|value|"
                                 "element|sequence|thread|parameter";
    static const QRegularExpression ambiguousPlural(R"([A-Za-z]\((s|es)\))");
    static const QString plurals = "tokens|heads|layers|steps|candidates|characters|bytes|requests|turns|blocks|"
                                   "changes|models|runs|messages|experts|seconds|words|lines|positions|entries|"
                                   "prompts|passes|files|items|values|elements|sequences|threads|parameters";
    static const QRegularExpression onePlural(R"((?<![\d.,:/×x-])\b1 ()" + plurals + R"()\b)");
    static const QRegularExpression manySingular(R"((?<![\d.,:/×#-])\b(0|[2-9]|\d{2,}|\d{1,3}(,\d{3})+) ()" + nouns +
                                                 R"()\b(?![-'’]))");
    // Four digits or more, ungrouped, as a number in prose (not part of a name, a path, a port, a
    // version, a hex value, a decimal's fraction, a token id or a "%1"-style argument).
    static const QRegularExpression ungrouped(R"((?<![\w.,:/#%\-+_])(?<!\bid )\d{4,}(?![\w.,:/%\-_]))");
    static const QRegularExpression unfilled(R"(%\d)");
    static const QRegularExpression markup(R"(</?(b|i|br|p|span|a|tt|code)\b[^>]*>)");
    static const QRegularExpression doubleSpace(R"(\S  +\S)");
    static const QRegularExpression spaceBeforePunct(R"(\w ([,;]|\.(?![.\w])|:(?!\S)))");
    QStringList faults;
    if (text.contains(ambiguousPlural))
        faults << "a plural left to the reader: " + ambiguousPlural.match(text).captured(0);
    if (const auto m = onePlural.match(text); m.hasMatch())
        faults << "one with a plural: " + m.captured(0);
    for (auto it = manySingular.globalMatch(text); it.hasNext();) {
        // "layer 2 token 'the'": a number after a noun is an index, not a count
        const QRegularExpressionMatch m = it.next();
        static const QRegularExpression nounBefore(R"((\b()" + nouns + R"()s?|\bat|\bof|#) $)");
        if (!text.left(m.capturedStart()).contains(nounBefore)) {
            faults << "a count with a singular: " + m.captured(0);
            break;
        }
    }
    // (a locale that writes no group separators, such as plain C, is not held to it)
    const bool grouping = !(QLocale().numberOptions() & QLocale::OmitGroupSeparator);
    if (const auto m = ungrouped.match(text); grouping && m.hasMatch())
        faults << "a number not grouped as elsewhere: " + m.captured(0);
    if (const auto m = unfilled.match(text); m.hasMatch())
        faults << "a placeholder left unfilled: " + m.captured(0);
    if (const auto m = markup.match(text); m.hasMatch())
        faults << "markup shown as text: " + m.captured(0);
    if (const auto m = doubleSpace.match(text); m.hasMatch())
        faults << "a doubled space: '" + m.captured(0) + "'";
    if (const auto m = spaceBeforePunct.match(text); m.hasMatch())
        faults << "a space before punctuation: '" + m.captured(0) + "'";
    if (text != text.trimmed() && !text.contains('\n'))
        faults << "leading or trailing spaces";
    return faults;
}

// Every fault under `root`, one line each: where, what, and the text.
inline QStringList misworded(const QWidget* root)
{
    QStringList out;
    QSet<QString> seen;
    for (const ShownText& t : shown_texts(root)) {
        if (seen.contains(t.where + t.text))
            continue;
        seen.insert(t.where + t.text);
        for (const QString& f : text_faults(t.text))
            out << QString("%1: %2 — \"%3\"").arg(t.where, f, t.text.simplified().left(160));
    }
    return out;
}

} // namespace testsupport

// Proofreads everything shown under `widget` now, each fault on its own line (a test message is cut
// at 1,024 characters), and fails the test if there is one.
#define QVERIFY_WORDING(widget)                                                                                        \
    do {                                                                                                               \
        const QStringList wording_faults_ = testsupport::misworded(widget);                                            \
        for (const QString& f : wording_faults_)                                                                       \
            qWarning("%s", qPrintable(f));                                                                             \
        QVERIFY2(wording_faults_.isEmpty(), qPrintable(QString::number(wording_faults_.size()) + " wording faults"));  \
    } while (false)
