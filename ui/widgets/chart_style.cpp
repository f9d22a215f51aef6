// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/chart_style.h"

#include <QAbstractAxis>
#include <QChart>
#include <QLegend>
#include <QPalette>

namespace tokenscope::ui {

void style_chart(QChart* chart, const QPalette& pal)
{
    chart->setBackgroundBrush(pal.color(QPalette::Base));
    chart->setTitleBrush(pal.color(QPalette::Text));
    chart->legend()->setLabelColor(pal.color(QPalette::Text));
    chart->legend()->setAlignment(Qt::AlignBottom);
    for (QAbstractAxis* a : chart->axes()) {
        a->setLabelsColor(pal.color(QPalette::Text));
        a->setTitleBrush(pal.color(QPalette::Text));
    }
}

} // namespace tokenscope::ui
