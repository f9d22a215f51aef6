// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QString>

namespace tokenscope::ui {

// "1 token", "2,048 tokens": a count with its noun in the right number, written as QLocale writes
// numbers elsewhere in the app. (Qt's "%n token(s)" needs a translation file to become a plural; we
// ship none, so it showed "(s)".)
QString countText(qint64 n, const QString& one, const QString& many);

// A whole number as the app writes them, grouped by the locale ("32,768"); a count without its noun.
QString numberText(qint64 n);

// A decimal as the app writes them: the locale's grouping and point, `decimals` places ("1,234.5").
QString decimalText(double v, int decimals);

} // namespace tokenscope::ui
