// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QColor>
#include <QString>
#include <cstdint>

namespace engine {
class Tokenizer;
}

namespace tokenscope::ui {

// Whitespace made visible: · for a space, → for a tab, ⏎ for a newline.
QString visible_whitespace(const QString& text);

// What goes between two tokens drawn side by side: a zero-width space where `token` starts a word
// (its text begins with a visible space · or tab →) or `previous` ends a line (⏎ or ↵), nothing
// elsewhere. Spaces shown as "·" offer no line break: without it a view's lines break anywhere,
// inside words ("hap/pened").
QString word_break_before(const QString& previous, const QString& token);

// How a token is shown in every panel: its text with visible whitespace; control tokens as their
// name (<bos>); byte-fallback tokens, and pieces that are not whole UTF-8 on their own, as <0xNN>
// chips.
QString token_display_text(const engine::Tokenizer& tokenizer, int32_t id);

// The background of the index-th token span: a fixed palette cycled by position, so neighbours
// always differ; translucent, so the text keeps the theme's colour.
QColor token_span_colour(int index);

} // namespace tokenscope::ui
