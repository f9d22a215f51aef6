// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/speculation_lanes.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>
#include <cmath>

namespace tokenscope::ui {

namespace {

constexpr int kLabelWidth = 110;
constexpr int kRowHeight = 22;
constexpr int kAxisHeight = 20;

QColor lane_colour(int lane)
{
    switch (lane) {
    case 0:
        return QColor(0x8e, 0x6b, 0xbf); // draft
    case 1:
        return QColor(0x2f, 0x7e, 0xc1); // verify
    default:
        return QColor(0x8a, 0x8a, 0x8a); // plain
    }
}

} // namespace

SpeculationLanes::SpeculationLanes(QWidget* parent) : QWidget(parent)
{
    setMouseTracking(true);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
}

QSize SpeculationLanes::sizeHint() const
{
    return {640, 3 * kRowHeight + kAxisHeight + 8};
}

QSize SpeculationLanes::minimumSizeHint() const
{
    return {320, sizeHint().height()};
}

void SpeculationLanes::setSnapshot(std::shared_ptr<const SpeculationSnapshot> snapshot)
{
    m_snapshot = std::move(snapshot);
    for (auto& l : m_lanes)
        l.clear();
    if (m_snapshot) {
        double t = 0;
        const auto& steps = m_snapshot->result.steps;
        for (std::size_t i = 0; i < steps.size(); ++i) {
            const auto& st = steps[i];
            if (st.draft_ms > 0)
                m_lanes[0].push_back({t, t + st.draft_ms, int(i), int(st.drafted.size())});
            t += st.draft_ms;
            m_lanes[1].push_back({t, t + st.verify_ms, int(i), 1 + int(st.acceptance.accepted)});
            t += st.verify_ms;
        }
        // the plain loop: its passes one token each, evenly over its measured time
        const std::size_t n = m_snapshot->plain_tokens.size();
        const double per = n ? m_snapshot->plain_s * 1000.0 / double(n) : 0.0;
        for (std::size_t i = 0; i + 1 < n; ++i) // the last token needs no pass
            m_lanes[2].push_back({double(i) * per, double(i + 1) * per, -1, 1});
    }
    update();
}

QRectF SpeculationLanes::plotArea() const
{
    return QRectF(kLabelWidth, 4, std::max(10, width() - kLabelWidth - 12), 3 * kRowHeight);
}

double SpeculationLanes::axisEnd() const
{
    double end = 1.0;
    for (const auto& l : m_lanes)
        if (!l.empty())
            end = std::max(end, l.back().end_ms);
    return end;
}

void SpeculationLanes::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    const QPalette& pal = palette();
    p.fillRect(rect(), pal.color(QPalette::Base));
    if (!m_snapshot || m_lanes[1].empty()) {
        p.setPen(pal.color(QPalette::PlaceholderText));
        p.drawText(rect(), Qt::AlignCenter, tr("The draft and verification passes appear here as the run goes."));
        return;
    }
    const QRectF area = plotArea();
    const double end = axisEnd();
    const auto x_of = [&](double ms) { return area.left() + area.width() * std::clamp(ms / end, 0.0, 1.0); };
    const QString names[3] = {tr("draft"), tr("verify"), tr("plain decode")};
    for (int lane = 0; lane < 3; ++lane) {
        const double y = area.top() + lane * kRowHeight;
        p.setPen(pal.color(QPalette::Text));
        p.drawText(QRectF(0, y, kLabelWidth - 8, kRowHeight), Qt::AlignRight | Qt::AlignVCenter, names[lane]);
        const QColor c = lane_colour(lane);
        for (const Segment& s : m_lanes[lane]) {
            const double x0 = x_of(s.start_ms), x1 = std::max(x_of(s.end_ms), x0 + 1.0);
            const QRectF r(x0, y + 3, x1 - x0, kRowHeight - 6);
            p.fillRect(r, c);
            if (lane != 0 && x1 - x0 > 3) // a gap between passes
                p.fillRect(QRectF(x1 - 1, y + 3, 1, kRowHeight - 6), pal.color(QPalette::Base));
            if (lane == 1 && r.width() > 14) {
                p.setPen(Qt::white);
                p.drawText(r, Qt::AlignCenter, QString::number(s.kept));
            }
        }
    }
    // the axis: milliseconds
    p.setPen(pal.color(QPalette::Mid));
    const double y_axis = area.bottom() + 2;
    p.drawLine(QPointF(area.left(), y_axis), QPointF(area.right(), y_axis));
    const double raw = end / 6.0, mag = std::pow(10.0, std::floor(std::log10(raw)));
    const double step = raw / mag < 2 ? 2 * mag : raw / mag < 5 ? 5 * mag : 10 * mag;
    p.setPen(pal.color(QPalette::Text));
    for (double t = 0; t <= end + 1e-9; t += step) {
        const double x = x_of(t);
        p.drawLine(QPointF(x, y_axis), QPointF(x, y_axis + 3));
        p.drawText(QRectF(x - 40, y_axis + 3, 80, kAxisHeight - 4), Qt::AlignHCenter | Qt::AlignTop,
                   QString("%1 ms").arg(t, 0, 'f', 0));
    }
}

bool SpeculationLanes::event(QEvent* e)
{
    if (e->type() != QEvent::ToolTip || !m_snapshot)
        return QWidget::event(e);
    const auto* help = static_cast<QHelpEvent*>(e);
    const QRectF area = plotArea();
    const int lane = int((help->pos().y() - area.top()) / kRowHeight);
    const double ms = (help->pos().x() - area.left()) / area.width() * axisEnd();
    if (lane >= 0 && lane < 3)
        for (const Segment& s : m_lanes[std::size_t(lane)])
            if (ms >= s.start_ms && ms <= s.end_ms) {
                QString text;
                if (lane == 0)
                    text = tr("Step %1: drafted %2 tokens in %3 ms")
                               .arg(s.step + 1)
                               .arg(s.kept)
                               .arg(s.end_ms - s.start_ms, 0, 'f', 1);
                else if (lane == 1)
                    text = tr("Step %1: one target pass over %2 tokens in %3 ms, kept %4")
                               .arg(s.step + 1)
                               .arg(m_snapshot->result.steps[std::size_t(s.step)].drafted.size() + 1)
                               .arg(s.end_ms - s.start_ms, 0, 'f', 1)
                               .arg(s.kept);
                else
                    text = tr("Plain decode: one pass per token, %1 ms each").arg(s.end_ms - s.start_ms, 0, 'f', 1);
                QToolTip::showText(help->globalPos(), text, this);
                return true;
            }
    QToolTip::hideText();
    return true;
}

} // namespace tokenscope::ui
