// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QColor>
#include <QStringList>
#include <array>
#include <functional>

class QFontMetrics;
class QPainter;
class QPalette;
class QRect;

namespace tokenscope::ui {

// A perceptually ordered sequential map (dark violet → orange → pale yellow, magma-like) for
// weights in [0, 1], and a diverging blue–neutral–red map for differences in [-1, 1].
QRgb sequential_colour(float t);
QRgb diverging_colour(float t);
// The sequential map as a 256-entry table, for images built pixel by pixel.
const std::array<QRgb, 256>& sequential_table();

// What a heatmap's colours mean: a bar of `colour` (t from 0 at the left to 1 at the right) across
// `area`'s width, its labels (low, middle, high) under it and `title` beside the bar. The area is
// colour_scale_height() tall; a bar narrower than the area leaves room for the title on its right.
int colour_scale_height(const QFontMetrics& metrics);
void draw_colour_scale(QPainter& painter, const QRect& area, int bar_width, const std::function<QRgb(float)>& colour,
                       const QStringList& labels, const QString& title, const QPalette& palette);

} // namespace tokenscope::ui
