// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/timeline_view.h"

#include "session/generator.h"
#include "widgets/count_text.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

namespace tokenscope::ui {

namespace {

// engine::TimelineStage order; the last two (draft, verify) only for a speculative run
constexpr int kAllLanes = 7;
constexpr int kPlainLanes = 5;

const QColor kStageColours[kAllLanes] = {QColor(120, 120, 130),   QColor(230, 140, 40), QColor(60, 130, 220),
                                         QColor(70, 170, 90),     QColor(170, 90, 190), QColor(0x8e, 0x6b, 0xbf),
                                         QColor(0x2f, 0x7e, 0xc1)};

QString stage_name(int stage)
{
    return QString::fromUtf8(engine::timeline_stage_name(engine::TimelineStage(stage)).data());
}

} // namespace

TimelineView::TimelineView(QWidget* parent) : QWidget(parent)
{
    setMouseTracking(true);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
}

void TimelineView::setTimeline(std::shared_ptr<const TimelineSnapshot> timeline)
{
    m_timeline = std::move(timeline);
    m_lanes = kPlainLanes;
    if (m_timeline)
        for (const TimelineEventUi& e : m_timeline->events)
            if (e.stage >= kPlainLanes)
                m_lanes = kAllLanes;
    updateGeometry();
    update();
}

void TimelineView::setCursor(qint64 ns)
{
    m_cursor = ns;
    update();
}

void TimelineView::setSelectedStep(int step)
{
    m_selected_step = step;
    update();
}

qint64 TimelineView::endNs() const
{
    return m_timeline && !m_timeline->events.empty() ? m_timeline->events.back().end_ns : 0;
}

int TimelineView::laneHeight() const
{
    return fontMetrics().height() + 10;
}
int TimelineView::labelWidth() const
{
    return fontMetrics().horizontalAdvance("detokenize  ");
}
QSize TimelineView::sizeHint() const
{
    return {800, (m_lanes + 3) * laneHeight()};
}

std::vector<double> TimelineView::axisTicksMs() const
{
    const double end_ms = double(endNs()) / 1e6;
    const double tick = end_ms > 2000 ? 500 : end_ms > 500 ? 100 : end_ms > 100 ? 20 : end_ms > 20 ? 5 : 1;
    std::vector<double> out;
    for (double ms = 0; ms <= end_ms; ms += tick)
        out.push_back(ms);
    return out;
}

std::vector<std::pair<int, double>> TimelineView::tokenMarks() const
{
    std::vector<std::pair<int, double>> out;
    const TimelineSnapshot& t = *m_timeline;
    for (std::size_t i = 0; i < t.events.size(); ++i) {
        const TimelineEventUi& e = t.events[i];
        const bool last_of_step = i + 1 == t.events.size() || t.events[i + 1].step != e.step;
        if (e.step >= 0 && last_of_step && std::size_t(e.step) < t.steps.size())
            out.emplace_back(e.step, xOf(e.end_ns));
    }
    return out;
}

std::vector<TimelineView::Label> TimelineView::labels() const
{
    std::vector<Label> out;
    if (!m_timeline || m_timeline->events.empty())
        return out;
    const TimelineSnapshot& t = *m_timeline;
    const int h = laneHeight();
    // a rectangle of `w` starting at `x`, moved left as far as it must to end inside the view
    const auto inside = [&](double x, double w) {
        return std::max(double(labelWidth()), std::min(x, width() - w - 1));
    };
    const QFontMetrics axis(font());
    for (const double ms : axisTicksMs()) {
        const QString text = QString("%1 ms").arg(decimalText(ms, 0));
        const double w = axis.horizontalAdvance(text) + 2;
        out.push_back({QRectF(inside(xOf(qint64(ms * 1e6)) + 2, w), 0, w, h - 4), text, false});
    }
    QFont small = font();
    small.setPointSizeF(std::max(6.0, small.pointSizeF() * 0.85));
    const QFontMetrics token(small);
    const int token_row = h + m_lanes * h;
    double last_x = -1e9;
    for (const auto& [step, x] : tokenMarks()) {
        if (x - last_x <= fontMetrics().horizontalAdvance("MMMM"))
            continue; // thinned out: labels would overlap
        const QString text = t.steps[std::size_t(step)].text.left(8);
        const double w = token.horizontalAdvance(text) + 4;
        out.push_back({QRectF(inside(x - w / 2, w), token_row + 5, w, h), text, true});
        last_x = x;
    }
    return out;
}

double TimelineView::xOf(qint64 ns) const
{
    const double end = double(std::max<qint64>(1, endNs()));
    return labelWidth() + (width() - labelWidth() - 8) * (double(ns) / end);
}

QRectF TimelineView::eventRect(std::size_t i) const
{
    const TimelineEventUi& e = m_timeline->events[i];
    const double x0 = xOf(e.begin_ns), x1 = xOf(e.end_ns);
    const int top = laneHeight() + e.stage * laneHeight();
    return {x0, double(top + 3), std::max(1.5, x1 - x0), double(laneHeight() - 6)};
}

int TimelineView::eventAt(const QPoint& pos) const
{
    if (!m_timeline)
        return -1;
    for (std::size_t i = 0; i < m_timeline->events.size(); ++i)
        if (eventRect(i).adjusted(-2, 0, 2, 0).contains(pos))
            return int(i);
    return -1;
}

void TimelineView::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    const QPalette& pal = palette();
    if (!m_timeline || m_timeline->events.empty()) {
        p.setPen(pal.color(QPalette::PlaceholderText));
        p.drawText(rect().adjusted(12, 12, -12, -12), Qt::AlignCenter | Qt::TextWordWrap,
                   tr("Send a chat message or step in the decode stepper: its stages appear here on one time axis. "
                      "The prompt is read in one parallel pass (prefill) — the time to the first token (TTFT) — and "
                      "then every further token costs one decode step, reading all the weights again."));
        return;
    }
    const TimelineSnapshot& t = *m_timeline;
    const int h = laneHeight();
    // Axis
    p.setPen(pal.color(QPalette::PlaceholderText));
    for (const double ms : axisTicksMs()) {
        const double x = xOf(qint64(ms * 1e6));
        p.drawLine(QPointF(x, h - 4), QPointF(x, h + m_lanes * h));
    }
    const std::vector<Label> all_labels = labels();
    for (const Label& l : all_labels)
        if (!l.token)
            p.drawText(l.rect, Qt::AlignLeft | Qt::AlignVCenter, l.text);
    for (int lane = 0; lane < m_lanes; ++lane) {
        p.setPen(pal.color(QPalette::Text));
        p.drawText(QRect(0, h + lane * h, labelWidth() - 6, h), Qt::AlignRight | Qt::AlignVCenter, stage_name(lane));
    }
    for (std::size_t i = 0; i < t.events.size(); ++i) {
        const TimelineEventUi& e = t.events[i];
        QColor c = kStageColours[std::clamp(e.stage, 0, kAllLanes - 1)];
        if (m_cursor >= 0 && e.begin_ns > m_cursor)
            c.setAlpha(50);
        const QRectF r = eventRect(i);
        p.fillRect(r, c);
        if (m_selected_step >= 0 && e.step == m_selected_step) {
            p.setPen(QPen(pal.color(QPalette::Text), 2));
            p.drawRect(r.adjusted(-1, -1, 1, 1));
        }
    }
    // Tokens where they became final (end of their detokenize, or sample when there is none).
    const int token_row = h + m_lanes * h;
    QFont small = font();
    small.setPointSizeF(std::max(6.0, small.pointSizeF() * 0.85));
    p.setFont(small);
    p.setPen(pal.color(QPalette::Highlight));
    for (const auto& mark : tokenMarks())
        p.drawLine(QPointF(mark.second, token_row), QPointF(mark.second, token_row + 5));
    for (const Label& l : all_labels)
        if (l.token)
            p.drawText(l.rect, Qt::AlignHCenter | Qt::AlignTop, l.text);
    // TTFT
    if (t.ttft_ms > 0) {
        const double x = xOf(qint64(t.ttft_ms * 1e6));
        p.setPen(QPen(QColor(208, 69, 58), 2, Qt::DashLine));
        p.drawLine(QPointF(x, h - 6), QPointF(x, token_row));
        p.setFont(font());
        p.drawText(QRectF(x + 4, h, 240, h), Qt::AlignLeft | Qt::AlignVCenter,
                   tr("TTFT %1 ms").arg(decimalText(t.ttft_ms, 1)));
    }
    if (m_cursor >= 0) {
        p.setPen(QPen(pal.color(QPalette::Text), 1.5));
        const double x = xOf(m_cursor);
        p.drawLine(QPointF(x, h - 6), QPointF(x, token_row + h));
    }
}

void TimelineView::mousePressEvent(QMouseEvent* event)
{
    const int i = eventAt(event->position().toPoint());
    if (i >= 0 && m_timeline->events[std::size_t(i)].step >= 0)
        emit stepClicked(m_timeline->events[std::size_t(i)].step);
}

bool TimelineView::event(QEvent* event)
{
    if (event->type() != QEvent::ToolTip)
        return QWidget::event(event);
    auto* help = static_cast<QHelpEvent*>(event);
    const int i = eventAt(help->pos());
    if (i < 0) {
        QToolTip::hideText();
        return true;
    }
    const TimelineEventUi& e = m_timeline->events[std::size_t(i)];
    QString what = stage_name(e.stage);
    if (e.step >= 0 && std::size_t(e.step) < m_timeline->steps.size())
        what += tr(" of token %1 “%2”").arg(e.step).arg(m_timeline->steps[std::size_t(e.step)].text);
    QToolTip::showText(help->globalPos(),
                       tr("%1: %2 ms (%3 – %4 ms)")
                           .arg(what)
                           .arg(decimalText(double(e.end_ns - e.begin_ns) / 1e6, 3))
                           .arg(decimalText(double(e.begin_ns) / 1e6, 2))
                           .arg(decimalText(double(e.end_ns) / 1e6, 2)),
                       this);
    return true;
}

} // namespace tokenscope::ui
