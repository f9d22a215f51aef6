// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/effect_grid.h"

#include "widgets/colormap.h"
#include "widgets/count_text.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>
#include <cmath>

namespace tokenscope::ui {

namespace {
constexpr double kLeft = 56, kTop = 28, kRight = 92, kBottom = 76;
}

EffectGrid::EffectGrid(QWidget* parent) : QWidget(parent)
{
    setMouseTracking(true);
    setMinimumSize(320, 220);
}

void EffectGrid::setData(std::vector<std::vector<double>> effect, QStringList column_labels, QString title)
{
    m_effect = std::move(effect);
    m_columns = std::move(column_labels);
    m_title = std::move(title);
    update();
}

void EffectGrid::clear()
{
    m_effect.clear();
    m_columns.clear();
    update();
}

EffectGrid::Layout EffectGrid::layout(QSizeF size) const
{
    Layout l;
    const int rows = int(m_effect.size()), cols = rows ? int(m_effect[0].size()) : 0;
    l.grid = QRectF(kLeft, kTop, std::max(1.0, size.width() - kLeft - kRight),
                    std::max(1.0, size.height() - kTop - kBottom));
    if (rows && cols) {
        l.cell_w = l.grid.width() / cols;
        l.cell_h = l.grid.height() / rows;
    }
    return l;
}

std::pair<int, int> EffectGrid::cellAt(QPointF pos) const
{
    const Layout l = layout(size());
    if (m_effect.empty() || !l.grid.contains(pos))
        return {-1, -1};
    const int layer = int((pos.y() - l.grid.top()) / l.cell_h), col = int((pos.x() - l.grid.left()) / l.cell_w);
    if (layer < 0 || layer >= int(m_effect.size()) || col < 0 || col >= int(m_effect[0].size()))
        return {-1, -1};
    return {layer, col};
}

QString EffectGrid::cellText(int layer, int column) const
{
    const double v = m_effect[std::size_t(layer)][std::size_t(column)];
    const QString where = column < m_columns.size() ? m_columns[column] : QString::number(column);
    if (std::isnan(v))
        return tr("layer %1, %2: not run").arg(layer).arg(where);
    return tr("layer %1, %2: effect %3").arg(layer).arg(where).arg(decimalText(v, 4));
}

void EffectGrid::render(QPainter& p, QSizeF size) const
{
    p.save();
    p.setRenderHint(QPainter::Antialiasing, false);
    const QColor text = palette().color(QPalette::WindowText);
    p.setPen(text);
    if (m_effect.empty()) {
        p.drawText(QRectF(QPointF(0, 0), size), Qt::AlignCenter,
                   tr("Run a patching experiment to see which layers and positions carry the difference."));
        p.restore();
        return;
    }
    const Layout l = layout(size);
    const int rows = int(m_effect.size()), cols = int(m_effect[0].size());
    QFont f = p.font();
    f.setPointSizeF(std::max(6.5, std::min(9.0, l.cell_h * 0.55)));
    p.setFont(f);
    p.drawText(QRectF(kLeft, 4, l.grid.width(), kTop - 6), Qt::AlignLeft | Qt::AlignVCenter, m_title);
    for (int r = 0; r < rows; ++r) {
        for (int c = 0; c < cols; ++c) {
            const QRectF cell(l.grid.left() + c * l.cell_w, l.grid.top() + r * l.cell_h, l.cell_w, l.cell_h);
            const double v = m_effect[std::size_t(r)][std::size_t(c)];
            if (std::isnan(v)) {
                p.fillRect(cell, QBrush(QColor(128, 128, 128, 110), Qt::BDiagPattern));
                continue;
            }
            p.fillRect(cell, QColor::fromRgb(diverging_colour(float(std::clamp(v, -1.0, 1.0)))));
        }
        if (rows <= 40 || r % 2 == 0)
            p.drawText(QRectF(0, l.grid.top() + r * l.cell_h, kLeft - 6, l.cell_h), Qt::AlignRight | Qt::AlignVCenter,
                       QString::number(r));
    }
    // column labels, turned so that token texts fit
    const int every = std::max(1, int(std::ceil(12.0 / std::max(1.0, l.cell_w))));
    for (int c = 0; c < cols; c += every) {
        const QString label = c < m_columns.size() ? m_columns[c] : QString::number(c);
        p.save();
        p.translate(l.grid.left() + (c + 0.5) * l.cell_w, l.grid.bottom() + 4);
        p.rotate(60);
        p.drawText(QRectF(0, -7, kBottom - 8, 14), Qt::AlignLeft | Qt::AlignVCenter,
                   p.fontMetrics().elidedText(label, Qt::ElideRight, int(kBottom - 8)));
        p.restore();
    }
    p.save();
    p.translate(12, l.grid.center().y());
    p.rotate(-90);
    p.drawText(QRectF(-40, -8, 80, 16), Qt::AlignCenter, tr("layer"));
    p.restore();
    // the colour bar: −1 … 0 … 1
    const QRectF bar(l.grid.right() + 16, l.grid.top(), 12, l.grid.height());
    for (int i = 0; i < int(bar.height()); ++i) {
        const double t = 1.0 - 2.0 * i / std::max(1.0, bar.height() - 1);
        p.fillRect(QRectF(bar.left(), bar.top() + i, bar.width(), 1.0), QColor::fromRgb(diverging_colour(float(t))));
    }
    p.drawRect(bar);
    p.drawText(QPointF(bar.right() + 4, bar.top() + 8), m_scale[0]);
    p.drawText(QPointF(bar.right() + 4, bar.center().y() + 4), "0");
    p.drawText(QPointF(bar.right() + 4, bar.bottom()), m_scale[2]);
    p.restore();
}

void EffectGrid::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    render(p, size());
}

bool EffectGrid::event(QEvent* e)
{
    if (e->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(e);
        const auto [layer, col] = cellAt(help->pos());
        if (layer >= 0)
            QToolTip::showText(help->globalPos(), cellText(layer, col), this);
        else
            QToolTip::hideText();
        return true;
    }
    return QWidget::event(e);
}

} // namespace tokenscope::ui
