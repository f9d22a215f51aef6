// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QString>

namespace tokenscope::ui {

// "1 token", "2,048 tokens": a count with its noun in the right number, written as QLocale writes
// numbers elsewhere in the app. (Qt's "%n token(s)" needs a translation file to become a plural; we
// ship none, so it showed "(s)".)
QString countText(qint64 n, const QString& one, const QString& many);

} // namespace tokenscope::ui
