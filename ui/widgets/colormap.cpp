// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/colormap.h"

#include <QFontMetrics>
#include <QPainter>
#include <QPalette>
#include <QRect>
#include <algorithm>
#include <cmath>

namespace tokenscope::ui {

namespace {

// Control points sampled by eye from the magma family; linear interpolation between them.
constexpr float kStops[][3] = {{0, 0, 4},      {28, 16, 68},   {79, 18, 123},   {129, 37, 129}, {181, 54, 122},
                               {229, 80, 100}, {251, 135, 97}, {254, 194, 135}, {252, 253, 191}};
constexpr int kN = int(std::size(kStops));

QRgb interpolate(float t)
{
    t = std::clamp(t, 0.0f, 1.0f) * float(kN - 1);
    const int i = std::min(kN - 2, int(t));
    const float f = t - float(i);
    const auto mix = [&](int c) { return int(kStops[i][c] + (kStops[i + 1][c] - kStops[i][c]) * f + 0.5f); };
    return qRgb(mix(0), mix(1), mix(2));
}

} // namespace

const std::array<QRgb, 256>& sequential_table()
{
    static const std::array<QRgb, 256> table = [] {
        std::array<QRgb, 256> t{};
        for (int i = 0; i < 256; ++i)
            t[std::size_t(i)] = interpolate(float(i) / 255.0f);
        return t;
    }();
    return table;
}

QRgb sequential_colour(float t)
{
    return sequential_table()[std::size_t(std::clamp(int(t * 255.0f + 0.5f), 0, 255))];
}

QRgb diverging_colour(float t)
{
    t = std::clamp(t, -1.0f, 1.0f);
    const float a = std::abs(t);
    const int end[3] = {t < 0 ? 49 : 202, t < 0 ? 104 : 62, t < 0 ? 196 : 48};
    const int mid = 240;
    const auto mix = [&](int e) { return int(float(mid) + float(e - mid) * a); };
    return qRgb(mix(end[0]), mix(end[1]), mix(end[2]));
}

int colour_scale_height(const QFontMetrics& metrics)
{
    return std::max(6, metrics.height() / 2) + metrics.height() + 4;
}

void draw_colour_scale(QPainter& p, const QRect& area, int bar_width, const std::function<QRgb(float)>& colour,
                       const QStringList& labels, const QString& title, const QPalette& palette)
{
    const QFontMetrics fm = p.fontMetrics();
    const int bar_h = std::max(6, fm.height() / 2);
    const QRect bar(area.left(), area.top(), std::clamp(bar_width, 16, std::max(16, area.width())), bar_h);
    for (int x = 0; x < bar.width(); ++x) {
        const float t = bar.width() > 1 ? float(x) / float(bar.width() - 1) : 0.0f;
        p.setPen(QColor::fromRgb(colour(t)));
        p.drawLine(bar.left() + x, bar.top(), bar.left() + x, bar.bottom());
    }
    p.setPen(palette.color(QPalette::Text));
    const QRect text(bar.left(), bar.bottom() + 2, bar.width(), fm.height());
    const Qt::Alignment where[] = {Qt::AlignLeft, Qt::AlignHCenter, Qt::AlignRight};
    for (int i = 0; i < std::min<int>(3, int(labels.size())); ++i)
        p.drawText(text, where[i] | Qt::AlignTop, labels[i]);
    const int title_left = bar.right() + 10;
    if (area.right() - title_left > 20)
        p.drawText(QRect(title_left, bar.top() - fm.height() / 2 + bar_h / 2, area.right() - title_left, fm.height()),
                   Qt::AlignLeft | Qt::AlignVCenter, fm.elidedText(title, Qt::ElideRight, area.right() - title_left));
}

} // namespace tokenscope::ui
