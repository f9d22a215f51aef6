// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/distribution_view.h"
#include "widgets/count_text.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

namespace tokenscope::ui {

DistributionView::DistributionView(QWidget* parent) : QWidget(parent)
{
    setMouseTracking(true);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

void DistributionView::setRows(std::vector<Row> rows, const QString& before_name, const QString& after_name)
{
    m_rows = std::move(rows);
    m_before = before_name;
    m_after = after_name;
    m_placeholder.clear();
    updateGeometry();
    update();
}

void DistributionView::setPlaceholder(const QString& text)
{
    m_rows.clear();
    m_placeholder = text;
    update();
}

int DistributionView::rowHeight() const
{
    return fontMetrics().height() + 8;
}
int DistributionView::top() const
{
    return fontMetrics().height() + 10;
}

QSize DistributionView::sizeHint() const
{
    return {420, top() + rowHeight() * std::max<int>(8, int(m_rows.size())) + 4};
}
QSize DistributionView::minimumSizeHint() const
{
    return {260, top() + rowHeight() * 4};
}

int DistributionView::rowAt(int y) const
{
    const int i = (y - top()) / rowHeight();
    return y >= top() && i < int(m_rows.size()) ? i : -1;
}

void DistributionView::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    const QPalette& pal = palette();
    if (m_rows.empty()) {
        p.setPen(pal.color(QPalette::PlaceholderText));
        p.drawText(rect().adjusted(16, 16, -16, -16), Qt::AlignCenter | Qt::TextWordWrap, m_placeholder);
        return;
    }
    const QFontMetrics fm = fontMetrics();
    const int label_w = std::min(width() / 3, fm.horizontalAdvance(QString(14, 'M')));
    const int pct_w = fm.horizontalAdvance("100.0% ");
    const int bar_x = label_w + 8;
    const int bar_w = std::max(40, width() - bar_x - pct_w - 8);
    const QColor accent = pal.color(QPalette::Highlight);
    const QColor text = pal.color(QPalette::Text);
    QColor muted = pal.color(QPalette::PlaceholderText);
    QColor bar = text;
    bar.setAlpha(110);

    p.setPen(muted);
    p.drawText(QRect(bar_x, 2, bar_w + pct_w, fm.height() + 4), Qt::AlignLeft | Qt::AlignVCenter,
               tr("▮ %1   ▯ %2").arg(m_after, m_before));

    float max_p = 0.0f;
    for (const Row& r : m_rows)
        max_p = std::max({max_p, r.before, r.after});
    if (max_p <= 0.0f)
        max_p = 1.0f;
    const int h = rowHeight();
    for (std::size_t i = 0; i < m_rows.size(); ++i) {
        const Row& r = m_rows[i];
        const int y = top() + int(i) * h;
        QFont f = font();
        f.setStrikeOut(!r.survives);
        f.setBold(r.chosen);
        p.setFont(f);
        p.setPen(r.survives ? text : muted);
        p.drawText(QRect(0, y, label_w, h), Qt::AlignRight | Qt::AlignVCenter,
                   fm.elidedText(r.text, Qt::ElideMiddle, label_w));
        const QRectF slot(bar_x, y + 3, bar_w, h - 6);
        // the stage before, as an outline
        p.setPen(QPen(muted, 1.0));
        p.setBrush(Qt::NoBrush);
        p.drawRect(QRectF(slot.x(), slot.y(), slot.width() * double(r.before / max_p), slot.height()));
        // this stage, solid
        p.setPen(Qt::NoPen);
        p.setBrush(r.chosen ? accent : bar);
        p.drawRect(QRectF(slot.x(), slot.y() + 2, slot.width() * double(r.after / max_p), slot.height() - 4));
        p.setPen(r.survives ? text : muted);
        p.drawText(QRect(bar_x + bar_w + 4, y, pct_w + 4, h), Qt::AlignLeft | Qt::AlignVCenter,
                   r.survives ? QString::number(double(r.after) * 100.0, 'f', 1) + "%" : tr("cut"));
    }
}

void DistributionView::mousePressEvent(QMouseEvent* event)
{
    const int i = rowAt(int(event->position().y()));
    if (i < 0)
        return;
    if (event->button() == Qt::RightButton)
        emit tokenAttributionRequested(m_rows[std::size_t(i)].id);
    else
        emit tokenClicked(m_rows[std::size_t(i)].id);
}

bool DistributionView::event(QEvent* event)
{
    if (event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
        const int i = rowAt(help->pos().y());
        if (i >= 0) {
            const Row& r = m_rows[std::size_t(i)];
            QToolTip::showText(help->globalPos(),
                               tr("“%1” · id %2 · logit %3\n%4: %5%   →   %6: %7%\nClick to force this token as the "
                                  "next one; right-click to split its logit (Lab).")
                                   .arg(r.text)
                                   .arg(r.id)
                                   .arg(decimalText(double(r.logit), 3))
                                   .arg(m_before)
                                   .arg(decimalText(double(r.before) * 100.0, 2))
                                   .arg(m_after)
                                   .arg(decimalText(double(r.after) * 100.0, 2)),
                               this);
        } else {
            QToolTip::hideText();
        }
        return true;
    }
    return QWidget::event(event);
}

} // namespace tokenscope::ui
