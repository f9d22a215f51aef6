// SPDX-License-Identifier: GPL-3.0-or-later
#include "bridge/token_text.h"

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

QString token_display_text(const engine::Tokenizer& tokenizer, int32_t id)
{
    const engine::Vocab& vocab = tokenizer.vocab();
    if (id < 0 || std::size_t(id) >= vocab.size())
        return QStringLiteral("<%1?>").arg(id);
    const engine::TokenType type = vocab.type_of(id);
    if (type == engine::TokenType::Control || type == engine::TokenType::Byte || type == engine::TokenType::Unknown)
        return QString::fromStdString(vocab.tokens[std::size_t(id)]);
    const std::string piece = tokenizer.token_to_piece(id);
    const QByteArray bytes(piece.data(), qsizetype(piece.size()));
    const QString text = QString::fromUtf8(bytes);
    if (text.toUtf8() != bytes) { // part of a multi-byte character: show its bytes
        QString chips;
        for (unsigned char b : bytes)
            chips += QStringLiteral("<0x%1>").arg(b, 2, 16, QChar('0')).toUpper().replace("0X", "0x");
        return chips;
    }
    return visible_whitespace(text);
}

} // namespace tokenscope::ui
