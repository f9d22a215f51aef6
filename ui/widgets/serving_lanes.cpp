// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/serving_lanes.h"

#include "widgets/chart_style.h"
#include "widgets/count_text.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>
#include <cmath>

namespace tokenscope::ui {

namespace {

constexpr int kMinRow = 14, kMaxRow = 26;
constexpr int kLabelWidth = 44;
constexpr int kAxisHeight = 22;
constexpr int kLegendHeight = 20;

QColor kind_colour(ServingLanes::Kind kind, const QPalette& palette)
{
    switch (kind) {
    case ServingLanes::Kind::Queued:
        return palette.color(QPalette::Mid);
    case ServingLanes::Kind::Prefill:
        return QColor(0x4e, 0x79, 0xa7);
    case ServingLanes::Kind::Decode:
        return QColor(0x59, 0xa1, 0x4f);
    case ServingLanes::Kind::Preempted:
        return QColor(0xe1, 0x57, 0x59);
    case ServingLanes::Kind::Swapped:
        return QColor(0xf2, 0x8e, 0x2b);
    }
    return {};
}

QString kind_name(ServingLanes::Kind kind)
{
    switch (kind) {
    case ServingLanes::Kind::Queued:
        return ServingLanes::tr("queued");
    case ServingLanes::Kind::Prefill:
        return ServingLanes::tr("prompt chunk");
    case ServingLanes::Kind::Decode:
        return ServingLanes::tr("decode");
    case ServingLanes::Kind::Preempted:
        return ServingLanes::tr("preempted (recompute)");
    case ServingLanes::Kind::Swapped:
        return ServingLanes::tr("preempted (swapped out)");
    }
    return {};
}

} // namespace

QColor request_colour(uint32_t request)
{
    // golden-ratio hues: neighbours differ, and a request keeps its colour in every view
    const double hue = std::fmod(0.12 + 0.61803398875 * double(request), 1.0);
    return QColor::fromHsvF(float(hue), 0.55f, 0.85f);
}

ServingLanes::ServingLanes(QWidget* parent) : QWidget(parent)
{
    setObjectName("servingLanes");
    setMouseTracking(true);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
}

void ServingLanes::setRun(std::shared_ptr<const ServingRunView> run)
{
    m_run = std::move(run);
    buildLanes();
    updateGeometry();
    update();
}

void ServingLanes::setAxisEnd(double seconds)
{
    m_axis_end = seconds;
    update();
}

QSize ServingLanes::sizeHint() const
{
    const int rows = std::max<int>(4, int(m_lanes.size()));
    return {640, rows * kMinRow + kAxisHeight + kLegendHeight + 8};
}

int ServingLanes::rowHeight() const
{
    // lanes grow to fill the panel (a few requests read better as thick bars), never below kMinRow
    const int rows = std::max<int>(1, int(m_lanes.size()));
    return std::clamp((height() - kAxisHeight - kLegendHeight - 8) / rows, kMinRow, kMaxRow);
}

QSize ServingLanes::minimumSizeHint() const
{
    return {320, sizeHint().height()};
}

double ServingLanes::axisEnd() const
{
    const double own = m_run ? m_run->clock_s : 0.0;
    return std::max({m_axis_end, own, 1e-3});
}

void ServingLanes::buildLanes()
{
    m_lanes.clear();
    if (!m_run)
        return;
    std::vector<double> first_slice(m_run->requests.size(), -1);
    m_lanes.resize(m_run->requests.size());
    for (std::size_t i = 0; i < m_run->requests.size(); ++i)
        m_lanes[i].request = m_run->requests[i].id;
    // where a preemption left a lane, until its next slice
    std::vector<std::optional<Segment>> open(m_run->requests.size());
    for (const engine::ServeStep& step : m_run->steps) {
        for (const engine::ServeSlice& s : step.slices) {
            if (s.request >= m_lanes.size())
                continue;
            Lane& lane = m_lanes[s.request];
            if (open[s.request]) {
                open[s.request]->end = step.start_s;
                lane.segments.push_back(*open[s.request]);
                open[s.request].reset();
            }
            if (first_slice[s.request] < 0)
                first_slice[s.request] = step.start_s;
            const Kind kind = s.prefill ? Kind::Prefill : Kind::Decode;
            // a run of steps of one kind is one segment (the passes follow each other on the clock)
            if (!lane.segments.empty() && lane.segments.back().kind == kind &&
                std::abs(lane.segments.back().end - step.start_s) < 1e-9)
                lane.segments.back().end = step.end_s;
            else
                lane.segments.push_back({step.start_s, step.end_s, kind});
        }
        for (const engine::ServeEvent& e : step.events) {
            if (e.request >= m_lanes.size())
                continue;
            if (e.kind == engine::ServeEvent::Kind::Preempted || e.kind == engine::ServeEvent::Kind::SwappedOut)
                open[e.request] = // from the pass it was taken out of
                    Segment{step.start_s, step.start_s,
                            e.kind == engine::ServeEvent::Kind::SwappedOut ? Kind::Swapped : Kind::Preempted};
            else if (e.kind == engine::ServeEvent::Kind::CopyOnWrite)
                m_lanes[e.request].copies.push_back(step.start_s);
        }
    }
    for (std::size_t i = 0; i < m_lanes.size(); ++i) {
        const engine::RequestState& r = m_run->requests[i];
        if (open[i]) {
            open[i]->end = m_run->clock_s;
            m_lanes[i].segments.push_back(*open[i]);
        }
        const double arrival = r.request.arrival_s;
        const double until = first_slice[i] >= 0 ? first_slice[i] : m_run->clock_s;
        if (!r.parent && until > arrival)
            m_lanes[i].segments.insert(m_lanes[i].segments.begin(), Segment{arrival, until, Kind::Queued});
        m_lanes[i].finish = r.finish_s;
    }
}

QRectF ServingLanes::plotArea() const
{
    return QRectF(kLabelWidth, 4, std::max(10, width() - kLabelWidth - 8),
                  std::max<int>(1, int(m_lanes.size())) * rowHeight());
}

void ServingLanes::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing, false);
    const QPalette& pal = palette();
    p.fillRect(rect(), pal.color(QPalette::Base));
    if (m_lanes.empty()) {
        p.setPen(pal.color(QPalette::PlaceholderText));
        p.drawText(rect(), Qt::AlignCenter, tr("Run a workload to see each request's lane here."));
        return;
    }
    const QRectF area = plotArea();
    const int row_height = rowHeight();
    const double end = axisEnd();
    const auto x_of = [&](double t) { return area.left() + area.width() * std::clamp(t / end, 0.0, 1.0); };
    QFont small = font();
    small.setPointSizeF(std::max(6.0, small.pointSizeF() * 0.85));
    p.setFont(small);
    for (std::size_t i = 0; i < m_lanes.size(); ++i) {
        const Lane& lane = m_lanes[i];
        const double y = area.top() + double(i) * row_height;
        p.setPen(pal.color(QPalette::Text));
        p.drawText(QRectF(0, y, kLabelWidth - 6, row_height), Qt::AlignRight | Qt::AlignVCenter,
                   QString("#%1").arg(lane.request));
        p.fillRect(QRectF(area.left() - 4, y + 3, 3, row_height - 6), request_colour(lane.request));
        for (const Segment& s : lane.segments) {
            const double x0 = x_of(s.start), x1 = std::max(x_of(s.end), x0 + 1.0);
            p.fillRect(QRectF(x0, y + 2, x1 - x0, row_height - 4), kind_colour(s.kind, pal));
        }
        p.setPen(QPen(QColor(0xd6, 0x27, 0x28), 2));
        for (double t : lane.copies)
            p.drawLine(QPointF(x_of(t), y + 1), QPointF(x_of(t), y + row_height - 1));
        if (lane.finish >= 0) {
            p.setPen(QPen(pal.color(QPalette::Text), 2));
            p.drawLine(QPointF(x_of(lane.finish), y + 1), QPointF(x_of(lane.finish), y + row_height - 1));
        }
    }
    // the time axis
    const double axis_y = area.bottom() + 2;
    p.setPen(pal.color(QPalette::Text));
    p.drawLine(QPointF(area.left(), axis_y), QPointF(area.right(), axis_y));
    const double step = nice_step(end, false, 6);
    for (double t = 0; t <= end + 1e-9; t += step) {
        const double x = x_of(t);
        p.drawLine(QPointF(x, axis_y), QPointF(x, axis_y + 4));
        const int decimals = step >= 1 ? 0 : step >= 0.1 ? 1 : 2;
        p.drawText(QRectF(x - 40, axis_y + 4, 80, kAxisHeight - 6), Qt::AlignHCenter | Qt::AlignTop,
                   tr("%1 s").arg(decimalText(t, decimals)));
    }
    // the legend
    double x = area.left();
    const double ly = axis_y + kAxisHeight;
    const QFontMetricsF fm(small);
    for (Kind k : {Kind::Queued, Kind::Prefill, Kind::Decode, Kind::Preempted, Kind::Swapped}) {
        p.fillRect(QRectF(x, ly + 4, 10, 10), kind_colour(k, pal));
        p.setPen(pal.color(QPalette::Text));
        const QString name = kind_name(k);
        p.drawText(QPointF(x + 14, ly + 13), name);
        x += 14 + fm.horizontalAdvance(name) + 14;
    }
    p.setPen(QPen(QColor(0xd6, 0x27, 0x28), 2));
    p.drawLine(QPointF(x, ly + 3), QPointF(x, ly + 15));
    p.setPen(pal.color(QPalette::Text));
    const QString cow = tr("copy on write");
    p.drawText(QPointF(x + 6, ly + 13), cow);
    x += 6 + fm.horizontalAdvance(cow) + 14;
    p.setPen(QPen(pal.color(QPalette::Text), 2));
    p.drawLine(QPointF(x, ly + 3), QPointF(x, ly + 15));
    p.drawText(QPointF(x + 6, ly + 13), tr("last token"));
}

bool ServingLanes::event(QEvent* e)
{
    if (e->type() != QEvent::ToolTip || !m_run)
        return QWidget::event(e);
    const auto* help = static_cast<QHelpEvent*>(e);
    const QRectF area = plotArea();
    const int row = int((help->pos().y() - area.top()) / rowHeight());
    if (row < 0 || row >= int(m_lanes.size()) || help->pos().y() < area.top()) {
        QToolTip::hideText();
        return true;
    }
    const engine::RequestState& r = m_run->requests[std::size_t(row)];
    QString text = tr("Request #%1: %2, %3 of %4")
                       .arg(r.id)
                       .arg(countText(qint64(r.request.prompt.size()), tr("prompt token"), tr("prompt tokens")))
                       .arg(countText(qint64(r.output.size()), tr("token generated"), tr("tokens generated")))
                       .arg(numberText(r.request.max_new_tokens));
    if (r.parent)
        text += tr("<br>a reply forked from request #%1's prompt").arg(*r.parent);
    if (r.reused_tokens)
        text += tr("<br>%1 taken from the prefix cache")
                    .arg(countText(r.reused_tokens, tr("prompt token"), tr("prompt tokens")));
    if (r.first_token_s >= 0)
        text += tr("<br>time to first token %1 ms").arg(decimalText((r.first_token_s - r.request.arrival_s) * 1e3, 0));
    if (r.preemptions)
        text += tr("<br>preempted %1 (%2 swapped out)")
                    .arg(countText(r.preemptions, tr("time"), tr("times")))
                    .arg(numberText(r.swaps));
    text += tr("<br>now: %1").arg(QString::fromUtf8(engine::request_phase_name(r.phase).data()));
    QToolTip::showText(help->globalPos(), text, this);
    return true;
}

} // namespace tokenscope::ui
