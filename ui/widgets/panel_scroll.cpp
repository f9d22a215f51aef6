// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/panel_scroll.h"

#include "widgets/flow_layout.h"

#include <QEvent>
#include <QLayout>
#include <QScrollBar>

#include <algorithm>

namespace tokenscope::ui {

PanelScroll::PanelScroll(QWidget* panel, QWidget* parent) : QScrollArea(parent)
{
    setFrameShape(QFrame::NoFrame);
    setWidgetResizable(false); // sized by fit()
    setWidget(panel);
    panel->installEventFilter(this); // its minimum changes with its contents
    fit();
}

int PanelScroll::minimumHeightAt(int width) const
{
    const QWidget* panel = widget();
    int height = panel->minimumSizeHint().height();
    if (panel->layout())
        height = std::max(height, panel->layout()->totalMinimumSize().height());
    // A flow's minimum is one line; at this width it may take more.
    for (const FlowLayout* flow : panel->findChildren<FlowLayout*>()) {
        const QWidget* owner = flow->parentWidget();
        if (!owner || !owner->isVisibleTo(panel))
            continue;
        // its width follows the panel's (its margins stay): the width it will have at `width`
        const int flow_width = flow->geometry().width() > 0 ? flow->geometry().width() + width - panel->width() : width;
        height += std::max(0, flow->heightForWidth(flow_width) - flow->minimumSize().height());
    }
    return height;
}

void PanelScroll::fit()
{
    QWidget* panel = widget();
    if (!panel)
        return;
    const QSize room = maximumViewportSize(); // the viewport without scroll bars
    int width = std::max(room.width(), panel->minimumSizeHint().width());
    int height = std::max(room.height(), minimumHeightAt(width));
    // a scroll bar shown in one direction takes room from the other
    if (height > room.height())
        width = std::max(room.width() - verticalScrollBar()->sizeHint().width(), panel->minimumSizeHint().width());
    if (width > room.width())
        height = std::max(room.height() - horizontalScrollBar()->sizeHint().height(), minimumHeightAt(width));
    if (panel->size() != QSize(width, height))
        panel->resize(width, height);
}

void PanelScroll::resizeEvent(QResizeEvent* event)
{
    QScrollArea::resizeEvent(event);
    fit();
}

bool PanelScroll::eventFilter(QObject* watched, QEvent* event)
{
    if (watched == widget() && event->type() == QEvent::LayoutRequest)
        fit();
    return QScrollArea::eventFilter(watched, event);
}

} // namespace tokenscope::ui
