// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/count_text.h"

#include <QLocale>

namespace tokenscope::ui {

QString numberText(qint64 n)
{
    return QLocale().toString(n);
}

QString decimalText(double v, int decimals)
{
    return QLocale().toString(v, 'f', decimals);
}

QString countText(qint64 n, const QString& one, const QString& many)
{
    return numberText(n) + QLatin1Char(' ') + (n == 1 ? one : many);
}

} // namespace tokenscope::ui
