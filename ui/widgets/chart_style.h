// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

class QAbstractAxis;
class QChart;
class QChartView;
class QPalette;
class QValueAxis;

namespace tokenscope::ui {

// Charts follow the application palette (light or dark): background, title, legend and every axis.
// Call after the axes are added.
void style_chart(QChart* chart, const QPalette& palette);

// Puts `chart` into `view` in place of the chart it showed (deleted): x along the bottom and y
// along the left, every series of the chart attached to both, styled as above.
void show_chart(QChartView* view, QChart* chart, QAbstractAxis* x, QAbstractAxis* y, const QPalette& palette);

// A tick step of 1, 2 or 5 × 10^n that cuts a span into about `target` intervals; at least 1 on an
// axis of whole numbers (tokens, requests), where a tick at 2.5 tokens means nothing.
double nice_step(double span, bool integer, int target = 6);
// The axis from `lo` to `hi` widened to whole steps, a tick every nice_step(), labels without
// decimals on an axis of whole numbers.
void nice_axis(QValueAxis* axis, double lo, double hi, bool integer);

} // namespace tokenscope::ui
