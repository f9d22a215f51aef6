// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/flow_layout.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QStyle>
#include <QWidget>

#include <algorithm>

namespace tokenscope::ui {

FlowLayout::FlowLayout(QWidget* parent, int spacing) : QLayout(parent), m_spacing(spacing)
{
    setContentsMargins(0, 0, 0, 0);
}

FlowLayout::~FlowLayout()
{
    while (QLayoutItem* item = takeAt(0))
        delete item;
}

void FlowLayout::addItem(QLayoutItem* item)
{
    m_items.append(item);
}

int FlowLayout::count() const
{
    return int(m_items.size());
}

QLayoutItem* FlowLayout::itemAt(int index) const
{
    return index >= 0 && index < m_items.size() ? m_items.at(index) : nullptr;
}

QLayoutItem* FlowLayout::takeAt(int index)
{
    return index >= 0 && index < m_items.size() ? m_items.takeAt(index) : nullptr;
}

Qt::Orientations FlowLayout::expandingDirections() const
{
    return {};
}

bool FlowLayout::hasHeightForWidth() const
{
    return true;
}

int FlowLayout::heightForWidth(int width) const
{
    return arrange(QRect(0, 0, width, 0), false);
}

// As narrow as its widest item: everything else wraps.
QSize FlowLayout::minimumSize() const
{
    QSize size;
    for (const QLayoutItem* item : m_items)
        size = size.expandedTo(item->minimumSize());
    const QMargins m = contentsMargins();
    return size + QSize(m.left() + m.right(), m.top() + m.bottom());
}

// One line holding every item.
QSize FlowLayout::sizeHint() const
{
    int width = 0, height = 0, visible = 0;
    for (const QLayoutItem* item : m_items) {
        if (item->isEmpty())
            continue;
        width += item->sizeHint().width();
        height = std::max(height, item->sizeHint().height());
        ++visible;
    }
    const QMargins m = contentsMargins();
    return {width + std::max(0, visible - 1) * gap() + m.left() + m.right(), height + m.top() + m.bottom()};
}

void FlowLayout::setGeometry(const QRect& rect)
{
    QLayout::setGeometry(rect);
    arrange(rect, true);
}

int FlowLayout::gap() const
{
    if (m_spacing >= 0)
        return m_spacing;
    const QWidget* w = parentWidget();
    return w ? w->style()->pixelMetric(QStyle::PM_LayoutHorizontalSpacing, nullptr, w) : 6;
}

int FlowLayout::arrange(const QRect& rect, bool apply) const
{
    const QRect area = rect.marginsRemoved(contentsMargins());
    int x = area.x(), y = area.y(), line_height = 0;
    // Items of one line share its height and are centred in it, as a box layout's row would be.
    QList<QPair<QLayoutItem*, QRect>> line;
    const auto flush = [&] {
        if (apply)
            for (auto& [item, r] : line)
                item->setGeometry(QRect(r.x(), y + (line_height - r.height()) / 2, r.width(), r.height()));
        line.clear();
    };
    for (QLayoutItem* item : m_items) {
        if (item->isEmpty())
            continue;
        const QSize hint = item->sizeHint().boundedTo(QSize(area.width(), QWIDGETSIZE_MAX));
        if (x > area.x() && x + hint.width() > area.right() + 1) { // wrap before this item
            flush();
            x = area.x();
            y += line_height + gap();
            line_height = 0;
        }
        line.append({item, QRect(QPoint(x, y), hint)});
        x += hint.width() + gap();
        line_height = std::max(line_height, hint.height());
    }
    flush();
    return y + line_height - rect.y() + contentsMargins().bottom();
}

QWidget* labelled(const QString& caption, QWidget* field)
{
    auto* pair = new QWidget;
    auto* row = new QHBoxLayout(pair);
    row->setContentsMargins(0, 0, 0, 0);
    auto* label = new QLabel(caption);
    label->setBuddy(field);
    row->addWidget(label);
    row->addWidget(field);
    return pair;
}

} // namespace tokenscope::ui
