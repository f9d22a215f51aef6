// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/chart_style.h"

#include <QAbstractAxis>
#include <QAbstractSeries>
#include <QChart>
#include <QChartView>
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

void show_chart(QChartView* view, QChart* chart, QAbstractAxis* x, QAbstractAxis* y, const QPalette& palette)
{
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    for (QAbstractSeries* s : chart->series()) {
        s->attachAxis(x);
        s->attachAxis(y);
    }
    style_chart(chart, palette);
    QChart* old = view->chart();
    view->setChart(chart);
    delete old;
}

} // namespace tokenscope::ui
