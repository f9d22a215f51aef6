// SPDX-License-Identifier: GPL-3.0-or-later
// Where a text view's lines break: a token view shows spaces as "·", which offers no line break, so
// unless the view marks the word starts its lines break inside words ("hap/pened").
#pragma once

#include <QStringList>
#include <QTextBlock>
#include <QTextDocument>
#include <QTextLayout>

#include <memory>

namespace testsupport {

// The places (a few characters either side) where `doc`'s lines break between two letters or digits
// when it is `width` pixels wide; `breaks` counts every line break.
inline QStringList words_broken(const QTextDocument* view_doc, int width, int* breaks)
{
    // a copy: the view lays its own document out at its own width whenever it likes
    std::unique_ptr<QTextDocument> doc(view_doc->clone());
    doc->setTextWidth(width);
    (void)doc->size(); // lays it out
    *breaks = 0;
    QStringList inside;
    for (QTextBlock b = doc->begin(); b.isValid(); b = b.next()) {
        QTextLayout* layout = b.layout();
        const QString s = b.text();
        for (int l = 1; l < layout->lineCount(); ++l) {
            const int at = layout->lineAt(l).textStart();
            ++*breaks;
            if (at > 0 && at < s.size() && s[at - 1].isLetterOrNumber() && s[at].isLetterOrNumber())
                inside << s.mid(std::max(0, at - 8), 16);
        }
    }
    return inside;
}

} // namespace testsupport
