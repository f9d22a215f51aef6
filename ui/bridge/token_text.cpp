// SPDX-License-Identifier: GPL-3.0-or-later
#include "bridge/token_text.h"

#include "tokenizer/token_display.h"
#include "tokenizer/tokenizer.h"

#include <QByteArray>

namespace tokenscope::ui {

QColor token_span_colour(int index)
{
    static const QColor colours[] = {QColor(90, 160, 255, 70), QColor(255, 170, 60, 80), QColor(80, 200, 120, 80),
                                     QColor(220, 90, 200, 70), QColor(240, 210, 60, 90), QColor(90, 210, 220, 80)};
    return colours[std::size_t(index) % std::size(colours)];
}

QString visible_whitespace(const QString& text)
{
    QString s = text;
    s.replace(' ', QChar(0x00B7));
    s.replace('\t', QChar(0x2192));
    s.replace('\n', QChar(0x23CE));
    return s;
}

QString word_break_before(const QString& previous, const QString& token)
{
    const bool starts_word = token.startsWith(QChar(0x00B7)) || token.startsWith(QChar(0x2192));
    const bool after_line = previous.endsWith(QChar(0x23CE)) || previous.endsWith(QChar(0x21B5)) ||
                            previous.endsWith(QLatin1String("<br>"));
    return !previous.isEmpty() && (starts_word || after_line) ? QString(QChar(0x200B)) : QString();
}

QString token_display_text(const engine::Tokenizer& tokenizer, int32_t id)
{
    return QString::fromStdString(engine::token_display_text(tokenizer, id));
}

} // namespace tokenscope::ui
