// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/chart_style.h"

#include <QAbstractAxis>
#include <QAbstractSeries>
#include <QChart>
#include <QChartView>
#include <QLegend>
#include <QPalette>
#include <QValueAxis>
#include <cmath>

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

double nice_step(double span, bool integer, int target)
{
    if (!(span > 0) || !std::isfinite(span))
        return 1.0;
    const double rough = span / std::max(1, target);
    const double decade = std::pow(10.0, std::floor(std::log10(rough)));
    double step = decade;
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (m * decade >= rough) {
            step = m * decade;
            break;
        }
    return integer ? std::max(1.0, std::round(step)) : step;
}

void nice_axis(QValueAxis* axis, double lo, double hi, bool integer)
{
    if (!(hi > lo))
        hi = lo + 1;
    const double step = nice_step(hi - lo, integer);
    const double first = std::floor(lo / step) * step, last = std::ceil(hi / step - 1e-9) * step;
    axis->setRange(first, last);
    axis->setTickType(QValueAxis::TicksDynamic);
    axis->setTickAnchor(first);
    axis->setTickInterval(step);
    if (integer)
        axis->setLabelFormat("%.0f");
    else
        axis->setLabelFormat(step >= 1 ? "%.0f" : step >= 0.1 ? "%.1f" : step >= 0.01 ? "%.2f" : "%.3g");
}

} // namespace tokenscope::ui
