// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/count_text.h"

#include <QLocale>

namespace tokenscope::ui {

QString countText(qint64 n, const QString& one, const QString& many)
{
    return QLocale().toString(n) + QLatin1Char(' ') + (n == 1 ? one : many);
}

} // namespace tokenscope::ui
