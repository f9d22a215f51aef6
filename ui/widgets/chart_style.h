// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

class QChart;
class QPalette;

namespace tokenscope::ui {

// Charts follow the application palette (light or dark): background, title, legend and every axis.
// Call after the axes are added.
void style_chart(QChart* chart, const QPalette& palette);

} // namespace tokenscope::ui
