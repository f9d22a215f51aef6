// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/attribution_waterfall.h"
#include "widgets/count_text.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>
#include <cmath>
#include <numeric>

namespace tokenscope::ui {

namespace {
constexpr double kLabel = 150, kTop = 26, kBottom = 22, kRight = 64;
}

AttributionWaterfall::AttributionWaterfall(QWidget* parent) : QWidget(parent)
{
    setMouseTracking(true);
    setMinimumSize(320, 240);
}

void AttributionWaterfall::setParts(std::vector<Bar> parts, double total, QString title)
{
    m_parts = std::move(parts);
    m_total = total;
    m_title = std::move(title);
    rebuild();
}

void AttributionWaterfall::setShown(int n)
{
    m_shown = std::max(1, n);
    rebuild();
}

void AttributionWaterfall::clear()
{
    m_parts.clear();
    rebuild();
}

void AttributionWaterfall::rebuild()
{
    m_bars.clear();
    m_start.clear();
    if (!m_parts.empty()) {
        std::vector<std::size_t> order(m_parts.size());
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
            return std::abs(m_parts[a].value) > std::abs(m_parts[b].value);
        });
        std::vector<bool> own(m_parts.size(), false);
        for (std::size_t i = 0; i < std::min<std::size_t>(order.size(), std::size_t(m_shown)); ++i)
            own[order[i]] = true;
        double folded = 0.0;
        int n_folded = 0;
        for (std::size_t i = 0; i < m_parts.size(); ++i) {
            if (own[i]) {
                m_bars.push_back(m_parts[i]);
            } else {
                folded += m_parts[i].value;
                ++n_folded;
            }
        }
        if (n_folded)
            m_bars.push_back({tr("%n other parts", nullptr, n_folded), folded});
        double run = 0.0;
        for (const Bar& b : m_bars) {
            m_start.push_back(run);
            run += b.value;
        }
        m_bars.push_back({tr("logit"), m_total});
        m_start.push_back(0.0);
    }
    update();
}

int AttributionWaterfall::barAt(QPointF pos) const
{
    if (m_bars.empty())
        return -1;
    const double h = (height() - kTop - kBottom) / double(m_bars.size());
    const int i = int((pos.y() - kTop) / h);
    return pos.y() >= kTop && i >= 0 && i < int(m_bars.size()) ? i : -1;
}

void AttributionWaterfall::render(QPainter& p, QSizeF size) const
{
    p.save();
    const QColor text = palette().color(QPalette::WindowText);
    p.setPen(text);
    if (m_bars.empty()) {
        p.drawText(QRectF(QPointF(0, 0), size), Qt::AlignCenter,
                   tr("Attribute a token to see each head's and MLP's part of its logit."));
        p.restore();
        return;
    }
    p.drawText(QRectF(8, 2, size.width() - 16, kTop - 4), Qt::AlignLeft | Qt::AlignVCenter, m_title);
    // value range over every bar's start and end (and 0)
    double lo = 0.0, hi = 0.0;
    for (std::size_t i = 0; i < m_bars.size(); ++i) {
        lo = std::min({lo, m_start[i], m_start[i] + m_bars[i].value});
        hi = std::max({hi, m_start[i], m_start[i] + m_bars[i].value});
    }
    if (hi - lo < 1e-9)
        hi = lo + 1.0;
    const QRectF plot(kLabel, kTop, std::max(10.0, size.width() - kLabel - kRight), size.height() - kTop - kBottom);
    const auto x_of = [&](double v) { return plot.left() + (v - lo) / (hi - lo) * plot.width(); };
    const double h = plot.height() / double(m_bars.size());
    QFont f = p.font();
    f.setPointSizeF(std::max(6.5, std::min(9.0, h * 0.5)));
    p.setFont(f);
    p.setPen(QPen(QColor(128, 128, 128, 140), 1, Qt::DashLine));
    p.drawLine(QPointF(x_of(0.0), plot.top()), QPointF(x_of(0.0), plot.bottom()));
    for (std::size_t i = 0; i < m_bars.size(); ++i) {
        const bool total = i + 1 == m_bars.size();
        const double row = double(i);
        const double a = m_start[i], b = m_start[i] + m_bars[i].value;
        const QRectF r(
            QPointF(x_of(std::min(a, b)), plot.top() + row * h + h * 0.15),
            QPointF(std::max(x_of(std::max(a, b)), x_of(std::min(a, b)) + 1.0), plot.top() + (row + 1) * h - h * 0.15));
        const QColor fill = total                  ? QColor(90, 130, 200)
                            : m_bars[i].value >= 0 ? QColor(64, 160, 96)
                                                   : QColor(205, 70, 60);
        p.fillRect(r, fill);
        p.setPen(text);
        p.drawText(QRectF(0, plot.top() + row * h, kLabel - 8, h), Qt::AlignRight | Qt::AlignVCenter,
                   p.fontMetrics().elidedText(m_bars[i].name, Qt::ElideMiddle, int(kLabel - 10)));
        p.drawText(QRectF(r.right() + 4, plot.top() + row * h, kRight + 40, h), Qt::AlignLeft | Qt::AlignVCenter,
                   QString::asprintf("%+.3f", m_bars[i].value));
        // the running sum continues from here
        if (!total && i + 2 < m_bars.size()) {
            p.setPen(QPen(QColor(128, 128, 128, 120), 1));
            p.drawLine(QPointF(x_of(b), r.bottom()), QPointF(x_of(b), r.bottom() + h * 0.3));
        }
    }
    p.setPen(text);
    p.drawText(QRectF(plot.left(), plot.bottom() + 2, plot.width(), kBottom - 2), Qt::AlignLeft | Qt::AlignVCenter,
               QString::asprintf("%.2f", lo));
    p.drawText(QRectF(plot.left(), plot.bottom() + 2, plot.width(), kBottom - 2), Qt::AlignRight | Qt::AlignVCenter,
               QString::asprintf("%.2f", hi));
    p.restore();
}

void AttributionWaterfall::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    render(p, size());
}

bool AttributionWaterfall::event(QEvent* e)
{
    if (e->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(e);
        const int i = barAt(help->pos());
        if (i >= 0)
            QToolTip::showText(help->globalPos(),
                               tr("%1: %2 (running sum %3 → %4)")
                                   .arg(m_bars[std::size_t(i)].name)
                                   .arg(decimalText(m_bars[std::size_t(i)].value, 5))
                                   .arg(decimalText(m_start[std::size_t(i)], 4))
                                   .arg(decimalText(m_start[std::size_t(i)] + m_bars[std::size_t(i)].value, 4)),
                               this);
        else
            QToolTip::hideText();
        return true;
    }
    return QWidget::event(e);
}

} // namespace tokenscope::ui
