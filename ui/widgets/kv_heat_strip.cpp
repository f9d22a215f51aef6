// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/kv_heat_strip.h"

#include "widgets/colormap.h"
#include "widgets/count_text.h"

#include <QHelpEvent>
#include <QLocale>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <cmath>

namespace tokenscope::ui {

namespace {

// Diverging map: blue (negative) → neutral → red (positive); t in [-1, 1].
QRgb diverging(float t)
{
    t = std::clamp(t, -1.0f, 1.0f);
    const float a = std::abs(t);
    const QColor end = t < 0 ? QColor(49, 104, 196) : QColor(202, 62, 48);
    const QColor mid(238, 238, 238);
    const auto mix = [a](int from, int to) { return int(float(from) + float(to - from) * a); };
    return qRgb(mix(mid.red(), end.red()), mix(mid.green(), end.green()), mix(mid.blue(), end.blue()));
}

} // namespace

KvHeatStrip::KvHeatStrip(QWidget* parent) : QWidget(parent)
{
    setMouseTracking(true);
}

int KvHeatStrip::labelWidth() const
{
    return fontMetrics().horizontalAdvance(QString(16, 'M'));
}
int KvHeatStrip::rowHeight() const
{
    return std::max(3, fontMetrics().height() / 2 + 2);
}

QSize KvHeatStrip::sizeHint() const
{
    const int rows = m_contents ? m_contents->n_positions : 16;
    return {labelWidth() + 520, legendRect().bottom() + 6 + rows * rowHeight() + 4};
}

QRect KvHeatStrip::legendRect() const
{
    return {labelWidth() + 6, 2, std::max(64, width() - labelWidth() - 10), colour_scale_height(fontMetrics())};
}

QStringList KvHeatStrip::legendLabels() const
{
    const QString s = QLocale().toString(double(m_scale), 'g', 3);
    return {QString::fromUtf8("\u2264 \u2212") + s, "0", QString::fromUtf8("\u2265 +") + s};
}

QRect KvHeatStrip::imageRect() const
{
    const int rows = m_contents ? m_contents->n_positions : 0;
    return {labelWidth() + 6, legendRect().bottom() + 6, std::max(64, width() - labelWidth() - 10), rows * rowHeight()};
}

void KvHeatStrip::setContents(std::shared_ptr<const KvContents> contents, bool values)
{
    m_contents = std::move(contents);
    m_values = values;
    m_image = {};
    if (m_contents && m_contents->n_positions > 0 && m_contents->head_dim > 0) {
        const auto& vectors = m_values ? m_contents->values : m_contents->keys;
        // Scale by a high percentile of |x| so a few outliers do not wash the map out.
        std::vector<float> mags;
        mags.reserve(vectors.size());
        for (float v : vectors)
            if (v != 0.0f)
                mags.push_back(std::abs(v));
        m_scale = 1.0f;
        if (!mags.empty()) {
            const auto k = mags.begin() + std::ptrdiff_t(mags.size() * 98 / 100);
            std::nth_element(mags.begin(), k, mags.end());
            m_scale = std::max(*k, 1e-6f);
        }
        const int D = m_contents->head_dim, N = m_contents->n_positions;
        m_image = QImage(D, N, QImage::Format_RGB32);
        for (int r = 0; r < N; ++r) {
            auto* line = reinterpret_cast<QRgb*>(m_image.scanLine(r));
            const bool held = std::size_t(r) < m_contents->held.size() && m_contents->held[std::size_t(r)];
            for (int d = 0; d < D; ++d)
                line[d] = held ? diverging(vectors[std::size_t(r) * std::size_t(D) + std::size_t(d)] / m_scale)
                               : ((r + d) % 4 < 2 ? qRgb(200, 200, 200) : qRgb(160, 160, 160));
        }
    }
    updateGeometry();
    update();
}

void KvHeatStrip::setSelected(int position)
{
    m_selected = position;
    update();
}

int KvHeatStrip::rowAt(int y) const
{
    if (!m_contents)
        return -1;
    const int r = (y - imageRect().y()) / rowHeight();
    return y >= imageRect().y() && r < m_contents->n_positions ? r : -1;
}

int KvHeatStrip::columnAt(int x) const
{
    if (!m_contents || m_contents->head_dim == 0)
        return -1;
    const QRect r = imageRect();
    const int c = int(double(x - r.x()) / r.width() * m_contents->head_dim);
    return x >= r.x() && c < m_contents->head_dim ? c : -1;
}

float KvHeatStrip::valueAt(int position, int dim) const
{
    const auto& vectors = m_values ? m_contents->values : m_contents->keys;
    return vectors[std::size_t(position) * std::size_t(m_contents->head_dim) + std::size_t(dim)];
}

void KvHeatStrip::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    const QPalette& pal = palette();
    if (!m_contents || m_image.isNull()) {
        p.setPen(pal.color(QPalette::PlaceholderText));
        p.drawText(
            rect(), Qt::AlignCenter | Qt::TextWordWrap,
            m_contents && !m_contents->error.isEmpty()
                ? m_contents->error
                : tr("The cache is empty. Run the chat or the stepper: every token it processes writes one key and "
                     "one value vector per layer and KV head, and they appear here as rows."));
        return;
    }
    // the colour scale: the map is clipped at the 98th percentile of |x| (a few outliers would wash it out)
    const QRect legend = legendRect();
    draw_colour_scale(
        p, legend, std::min(240, legend.width() / 2), [](float t) { return diverging(2.0f * t - 1.0f); },
        legendLabels(),
        m_values ? tr("value elements (clipped at the 98th percentile of |v|)")
                 : tr("key elements (clipped at the 98th percentile of |k|)"),
        pal);
    const QRect r = imageRect();
    p.drawImage(r, m_image);
    const int h = rowHeight();
    QFont small = font();
    small.setPointSizeF(std::max(6.0, small.pointSizeF() * 0.8));
    p.setFont(small);
    const QColor accent = pal.color(QPalette::Highlight);
    const int every = std::max(1, (fontMetrics().height() + 1) / h); // label as many rows as fit
    for (int i = 0; i < m_contents->n_positions; ++i) {
        const bool generated = std::size_t(i) < m_contents->tokens.size() && !m_contents->tokens[std::size_t(i)].prompt;
        if (generated)
            p.fillRect(QRect(r.x() - 4, r.y() + i * h, 3, h), accent);
        if (i % every == 0 && std::size_t(i) < m_contents->tokens.size()) {
            p.setPen(generated ? accent : pal.color(QPalette::Text));
            p.drawText(QRect(0, r.y() + i * h - h / 2, labelWidth(), fontMetrics().height()),
                       Qt::AlignRight | Qt::AlignVCenter,
                       QString("%1 %2").arg(m_contents->tokens[std::size_t(i)].text.left(10)).arg(i));
        }
    }
    if (m_selected >= 0 && m_selected < m_contents->n_positions) {
        p.setPen(QPen(pal.color(QPalette::Text), 2));
        p.setBrush(Qt::NoBrush);
        p.drawRect(QRect(r.x() - 1, r.y() + m_selected * h - 1, r.width() + 1, h + 1));
    }
}

void KvHeatStrip::mousePressEvent(QMouseEvent* event)
{
    const int row = rowAt(int(event->position().y()));
    if (row >= 0)
        emit positionClicked(row);
}

bool KvHeatStrip::event(QEvent* event)
{
    if (event->type() != QEvent::ToolTip)
        return QWidget::event(event);
    auto* help = static_cast<QHelpEvent*>(event);
    const int row = rowAt(help->pos().y()), col = columnAt(help->pos().x());
    if (row < 0 || col < 0) {
        QToolTip::hideText();
        return true;
    }
    const bool held = std::size_t(row) < m_contents->held.size() && m_contents->held[std::size_t(row)];
    const QString token =
        std::size_t(row) < m_contents->tokens.size() ? m_contents->tokens[std::size_t(row)].text : QString();
    QToolTip::showText(help->globalPos(),
                       held ? tr("Position %1 “%2”: %3[%4] = %5")
                                  .arg(row)
                                  .arg(token)
                                  .arg(m_values ? "V" : "K")
                                  .arg(col)
                                  .arg(decimalText(double(valueAt(row, col)), 4))
                            : tr("Position %1 “%2”: freed (outside this layer's sliding window)").arg(row).arg(token),
                       this);
    return true;
}

} // namespace tokenscope::ui
