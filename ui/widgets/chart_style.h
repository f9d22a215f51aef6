// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

class QAbstractAxis;
class QChart;
class QChartView;
class QPalette;

namespace tokenscope::ui {

// Charts follow the application palette (light or dark): background, title, legend and every axis.
// Call after the axes are added.
void style_chart(QChart* chart, const QPalette& palette);

// Puts `chart` into `view` in place of the chart it showed (deleted): x along the bottom and y
// along the left, every series of the chart attached to both, styled as above.
void show_chart(QChartView* view, QChart* chart, QAbstractAxis* x, QAbstractAxis* y, const QPalette& palette);

} // namespace tokenscope::ui
