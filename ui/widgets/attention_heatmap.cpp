// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/attention_heatmap.h"

#include "widgets/colormap.h"
#include "widgets/count_text.h"

#include <QHelpEvent>
#include <QLocale>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>
#include <cmath>

namespace tokenscope::ui {

namespace {

constexpr int kPooledMax = 1024; // a longer side is max-pooled down to this for zoomed-out drawing

float shade(float w, bool log)
{
    if (!log)
        return w;
    // 1e-4 … 1 on a log scale
    return w <= 1e-4f ? 0.0f : (std::log10(w) + 4.0f) / 4.0f;
}

} // namespace

AttentionHeatmap::AttentionHeatmap(QWidget* parent) : QWidget(parent)
{
    setMouseTracking(true);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
    setMinimumSize(200, 200);
}

QSize AttentionHeatmap::sizeHint() const
{
    return {640, 640};
}

int AttentionHeatmap::labelWidth() const
{
    return fontMetrics().horizontalAdvance(QString(9, 'M'));
}

QRect AttentionHeatmap::plotRect() const
{
    const int l = labelWidth();
    return {l, l / 2 + fontMetrics().height(), std::max(10, width() - l - 6),
            std::max(10, height() - l / 2 - fontMetrics().height() - 6 - legendHeight())};
}

int AttentionHeatmap::legendHeight() const
{
    return m_full.isNull() ? 0 : colour_scale_height(fontMetrics()) + 8;
}

QRect AttentionHeatmap::legendRect() const
{
    if (m_full.isNull())
        return {};
    // right under the drawn cells (a fitted square may end well above the plot's bottom)
    const QRect plot = plotRect();
    const int cells_bottom = int(std::ceil(plot.top() + (m_m.n - m_origin.y()) * m_cell));
    return {plot.left(), std::clamp(cells_bottom, plot.top(), plot.bottom()) + 8,
            std::max(80, width() - plot.left() - 8), colour_scale_height(fontMetrics())};
}

QStringList AttentionHeatmap::legendLabels() const
{
    if (m_m.diverging) {
        const QString r = QLocale().toString(double(m_m.range), 'g', 2);
        return {QString::fromUtf8("\u2212") + r, "0", "+" + r};
    }
    if (m_log)
        return {QString::fromUtf8("\u2264 10\u207B\u2074"), QString::fromUtf8("10\u207B\u00B2"), "1"};
    return {"0", QLocale().toString(0.5), "1"};
}

void AttentionHeatmap::setMatrix(Matrix matrix)
{
    const bool same_size = matrix.n == m_m.n;
    m_m = std::move(matrix);
    rebuildImages();
    if (!same_size || m_fitted)
        fit();
    if (m_selected_row >= m_m.n)
        m_selected_row = m_selected_column = -1;
    update();
}

void AttentionHeatmap::setLogScale(bool on)
{
    m_log = on;
    rebuildImages();
    update();
}

void AttentionHeatmap::setSelected(int row, int column)
{
    m_selected_row = row;
    m_selected_column = column;
    update();
}

float AttentionHeatmap::value(int row, int column) const
{
    return m_m.values[std::size_t(row) * std::size_t(m_m.n) + std::size_t(column)];
}

bool AttentionHeatmap::masked(int row, int column) const
{
    if (!m_m.causal)
        return false;
    return column > row || (m_m.window > 0 && row - column >= m_m.window);
}

void AttentionHeatmap::rebuildImages()
{
    const int n = m_m.n;
    if (n <= 0 || !m_m.values) {
        m_full = m_pooled = {};
        return;
    }
    const QRgb masked_rgb = palette().color(QPalette::Base).rgb();
    m_full = QImage(n, n, QImage::Format_RGB32);
    for (int r = 0; r < n; ++r) {
        auto* line = reinterpret_cast<QRgb*>(m_full.scanLine(r));
        const float* row = m_m.values + std::size_t(r) * std::size_t(n);
        for (int c = 0; c < n; ++c)
            line[c] = masked(r, c)    ? masked_rgb
                      : m_m.diverging ? diverging_colour(row[c] / std::max(1e-12f, m_m.range))
                                      : sequential_colour(shade(row[c], m_log));
    }
    // Max-pooled copy: each pixel keeps the strongest cell it covers (by magnitude).
    m_pool_factor = (n + kPooledMax - 1) / kPooledMax;
    if (m_pool_factor > 1) {
        const int p = m_pool_factor, m = (n + p - 1) / p;
        m_pooled = QImage(m, m, QImage::Format_RGB32);
        for (int R = 0; R < m; ++R) {
            auto* line = reinterpret_cast<QRgb*>(m_pooled.scanLine(R));
            for (int C = 0; C < m; ++C) {
                float best = -1.0f, best_value = 0.0f;
                bool any = false;
                for (int r = R * p; r < std::min(n, (R + 1) * p); ++r)
                    for (int c = C * p; c < std::min(n, (C + 1) * p); ++c)
                        if (!masked(r, c)) {
                            const float v = m_m.values[std::size_t(r) * std::size_t(n) + std::size_t(c)];
                            if (std::abs(v) > best) {
                                best = std::abs(v);
                                best_value = v;
                            }
                            any = true;
                        }
                line[C] = !any            ? masked_rgb
                          : m_m.diverging ? diverging_colour(best_value / std::max(1e-12f, m_m.range))
                                          : sequential_colour(shade(best_value, m_log));
            }
        }
    } else {
        m_pooled = {};
    }
}

void AttentionHeatmap::fit()
{
    const QRect plot = plotRect();
    m_cell = m_m.n > 0 ? std::min(plot.width(), plot.height()) / double(m_m.n) : 1.0;
    m_origin = {0, 0};
    m_fitted = true;
    update();
}

void AttentionHeatmap::zoomAt(QPointF pos, double factor)
{
    if (m_m.n <= 0)
        return;
    const QRect plot = plotRect();
    const QPointF at = m_origin + (pos - plot.topLeft()) / m_cell; // matrix coordinate under the pointer
    const double fit_cell = std::min(plot.width(), plot.height()) / double(m_m.n);
    m_cell = std::clamp(m_cell * factor, fit_cell, 64.0);
    m_origin = at - (pos - plot.topLeft()) / m_cell;
    m_fitted = m_cell <= fit_cell * 1.0001;
    update();
}

void AttentionHeatmap::resizeEvent(QResizeEvent*)
{
    if (m_fitted)
        fit();
}

std::pair<int, int> AttentionHeatmap::cellAt(QPointF pos) const
{
    const QRect plot = plotRect();
    if (m_m.n <= 0 || !plot.contains(pos.toPoint()))
        return {-1, -1};
    const QPointF m = m_origin + (pos - plot.topLeft()) / m_cell;
    const int column = int(std::floor(m.x())), row = int(std::floor(m.y()));
    if (row < 0 || column < 0 || row >= m_m.n || column >= m_m.n)
        return {-1, -1};
    return {row, column};
}

QPointF AttentionHeatmap::cellCentre(int row, int column) const
{
    return QPointF(plotRect().topLeft()) + (QPointF(column + 0.5, row + 0.5) - m_origin) * m_cell;
}

void AttentionHeatmap::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    const QPalette& pal = palette();
    const QRect plot = plotRect();
    if (m_full.isNull()) {
        p.setPen(pal.color(QPalette::PlaceholderText));
        p.drawText(rect().adjusted(16, 16, -16, -16), Qt::AlignCenter | Qt::TextWordWrap,
                   tr("Each row is a token looking back: its query is matched against the key of every earlier token, "
                      "and the softmax of those scores (one row) says how much of each token's value it takes. Type a "
                      "prompt and press Run."));
        return;
    }
    const int n = m_m.n;
    p.save();
    p.setClipRect(plot);
    // Visible matrix range
    const double x0 = std::max(0.0, m_origin.x()), y0 = std::max(0.0, m_origin.y());
    const double x1 = std::min(double(n), m_origin.x() + plot.width() / m_cell);
    const double y1 = std::min(double(n), m_origin.y() + plot.height() / m_cell);
    const QRectF source(x0, y0, x1 - x0, y1 - y0);
    const QRectF target(QPointF(plot.topLeft()) + (QPointF(x0, y0) - m_origin) * m_cell, source.size() * m_cell);
    const bool pooled = !m_pooled.isNull() && m_cell * m_pool_factor <= 1.5;
    if (pooled) {
        const double f = m_pool_factor;
        p.drawImage(target, m_pooled, QRectF(source.x() / f, source.y() / f, source.width() / f, source.height() / f));
    } else {
        p.drawImage(target, m_full, source);
    }
    // Masked cells: hatched spans, one per visible pixel row (or per row when rows are tall).
    if (m_m.causal) {
        QColor hatch = pal.color(QPalette::Text);
        hatch.setAlpha(70);
        const QBrush brush(hatch, Qt::BDiagPattern);
        const double step = std::max(1.0, m_cell);
        for (double y = target.top(); y < target.bottom(); y += step) {
            const double h = std::min(step, target.bottom() - y);
            // The row under the band's middle: its top edge can round either way.
            const int row = int(std::floor(m_origin.y() + (y + h / 2 - plot.top()) / m_cell));
            if (row < 0 || row >= n)
                continue;
            const double xf = plot.left() + (row + 1 - m_origin.x()) * m_cell; // first future column
            if (xf < target.right())
                p.fillRect(QRectF(std::max(xf, target.left()), y, target.right() - std::max(xf, target.left()), h),
                           brush);
            if (m_m.window > 0 && row - m_m.window + 1 > 0) {
                const double xw =
                    plot.left() + (row - m_m.window + 1 - m_origin.x()) * m_cell; // first column in the window
                if (xw > target.left())
                    p.fillRect(QRectF(target.left(), y, std::min(xw, target.right()) - target.left(), h), brush);
            }
        }
    }
    // Selection
    if (m_selected_row >= 0) {
        p.setPen(QPen(pal.color(QPalette::Highlight), 2));
        p.setBrush(Qt::NoBrush);
        const QPointF a = QPointF(plot.topLeft()) + (QPointF(0, m_selected_row) - m_origin) * m_cell;
        p.drawRect(QRectF(a.x(), a.y(), n * m_cell, std::max(2.0, m_cell)));
        if (m_selected_column >= 0)
            p.drawRect(QRectF(cellCentre(m_selected_row, m_selected_column) - QPointF(m_cell / 2, m_cell / 2),
                              QSizeF(std::max(3.0, m_cell), std::max(3.0, m_cell))));
    }
    p.restore();

    // Labels: every row/column when cells are tall enough, else a thinned-out set.
    QFont small = font();
    small.setPointSizeF(std::max(6.0, small.pointSizeF() * 0.85));
    p.setFont(small);
    const double lh = QFontMetrics(small).height();
    const int every = std::max(1, int(std::ceil(lh / std::max(0.01, m_cell))));
    p.setPen(pal.color(QPalette::Text));
    for (int i = int(y0) - int(y0) % every; i < int(std::ceil(y1)); i += every) {
        if (i < 0 || i >= m_m.labels.size())
            continue;
        const double y = plot.top() + (i + 0.5 - m_origin.y()) * m_cell;
        p.drawText(QRectF(0, y - lh / 2, labelWidth() - 4, lh), Qt::AlignRight | Qt::AlignVCenter,
                   QFontMetrics(small).elidedText(m_m.labels[i], Qt::ElideRight, labelWidth() - 6));
    }
    p.save();
    p.translate(0, plot.top() - 2);
    p.rotate(-90);
    const int every_x = std::max(1, int(std::ceil(lh / std::max(0.01, m_cell))));
    for (int j = int(x0) - int(x0) % every_x; j < int(std::ceil(x1)); j += every_x) {
        if (j < 0 || j >= m_m.labels.size())
            continue;
        const double x = plot.left() + (j + 0.5 - m_origin.x()) * m_cell;
        p.drawText(QRectF(0, x - lh / 2, plot.top() - 4, lh), Qt::AlignLeft | Qt::AlignVCenter,
                   QFontMetrics(small).elidedText(m_m.labels[j], Qt::ElideRight, plot.top() - 6));
    }
    p.restore();

    // The colour scale
    const bool diverging = m_m.diverging;
    draw_colour_scale(
        p, legendRect(), std::min(260, legendRect().width() / 2),
        [diverging](float t) { return diverging ? diverging_colour(2.0f * t - 1.0f) : sequential_colour(t); },
        legendLabels(),
        diverging ? tr("difference")
        : m_log   ? tr("attention weight (log scale)")
                  : tr("attention weight"),
        pal);
}

void AttentionHeatmap::wheelEvent(QWheelEvent* event)
{
    zoomAt(event->position(), std::pow(1.0015, event->angleDelta().y()));
    event->accept();
}

void AttentionHeatmap::mousePressEvent(QMouseEvent* event)
{
    m_drag_from = event->position().toPoint();
    m_drag_origin = m_origin;
    m_dragging = false;
}

void AttentionHeatmap::mouseMoveEvent(QMouseEvent* event)
{
    if (!(event->buttons() & Qt::LeftButton))
        return;
    const QPoint d = event->position().toPoint() - m_drag_from;
    if (!m_dragging && d.manhattanLength() < 4)
        return;
    m_dragging = true;
    m_origin = m_drag_origin - QPointF(d) / m_cell;
    m_fitted = false;
    update();
}

void AttentionHeatmap::mouseReleaseEvent(QMouseEvent* event)
{
    if (m_dragging) {
        m_dragging = false;
        return;
    }
    const auto [row, column] = cellAt(event->position());
    if (row >= 0) {
        setSelected(row, column);
        emit cellClicked(row, column);
    }
}

void AttentionHeatmap::mouseDoubleClickEvent(QMouseEvent*)
{
    fit();
}

bool AttentionHeatmap::event(QEvent* event)
{
    if (event->type() != QEvent::ToolTip)
        return QWidget::event(event);
    auto* help = static_cast<QHelpEvent*>(event);
    const auto [row, column] = cellAt(help->pos());
    if (row < 0) {
        QToolTip::hideText();
        return true;
    }
    const QString q = row < m_m.labels.size() ? m_m.labels[row] : QString(),
                  k = column < m_m.labels.size() ? m_m.labels[column] : QString();
    QString text;
    if (masked(row, column))
        text =
            column > row
                ? tr("“%1” (%2) cannot see “%3” (%4): a later token (causal mask)").arg(q).arg(row).arg(k).arg(column)
                : tr("“%1” (%2) does not see “%3” (%4): outside this layer's %5-token sliding window")
                      .arg(q)
                      .arg(row)
                      .arg(k)
                      .arg(column)
                      .arg(m_m.window);
    else if (m_m.diverging)
        text = tr("query “%1” (%2) → key “%3” (%4): difference %5")
                   .arg(q)
                   .arg(row)
                   .arg(k)
                   .arg(column)
                   .arg(decimalText(double(value(row, column)), 5));
    else
        text = tr("query “%1” (%2) → key “%3” (%4): weight %5")
                   .arg(q)
                   .arg(row)
                   .arg(k)
                   .arg(column)
                   .arg(decimalText(double(value(row, column)), 6));
    QToolTip::showText(help->globalPos(), text, this);
    return true;
}

} // namespace tokenscope::ui
