// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QColor>
#include <array>

namespace tokenscope::ui {

// A perceptually ordered sequential map (dark violet → orange → pale yellow, magma-like) for
// weights in [0, 1], and a diverging blue–neutral–red map for differences in [-1, 1].
QRgb sequential_colour(float t);
QRgb diverging_colour(float t);
// The sequential map as a 256-entry table, for images built pixel by pixel.
const std::array<QRgb, 256>& sequential_table();

} // namespace tokenscope::ui
