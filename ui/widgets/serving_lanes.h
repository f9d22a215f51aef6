// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/serving_types.h"

#include <QColor>
#include <QWidget>
#include <memory>

namespace tokenscope::ui {

// Each request's own colour in the serving lab (lanes and pool map agree).
QColor request_colour(uint32_t request);

// A serving run as lanes, one per request, on the run's clock: queued (arrived, waiting for room or a
// place in the batch), prompt chunks (prefill), decode steps, preempted (recomputed later, or swapped
// to the host store), and the end of its reply; copy-on-write events as ticks. Hover: the request.
class ServingLanes : public QWidget {
    Q_OBJECT
public:
    explicit ServingLanes(QWidget* parent = nullptr);

    void setRun(std::shared_ptr<const ServingRunView> run);
    // The time axis ends here (0: the run's own clock), so runs of several modes share one scale.
    void setAxisEnd(double seconds);
    const std::shared_ptr<const ServingRunView>& run() const { return m_run; }
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

    enum class Kind { Queued, Prefill, Decode, Preempted, Swapped };
    struct Segment {
        double start = 0, end = 0;
        Kind kind = Kind::Queued;
    };
    struct Lane {
        uint32_t request = 0;
        std::vector<Segment> segments;
        std::vector<double> copies; // copy-on-write events
        double finish = -1;
    };
    // The lanes drawn (public for tests).
    const std::vector<Lane>& lanes() const { return m_lanes; }

protected:
    void paintEvent(QPaintEvent* event) override;
    bool event(QEvent* event) override;

private:
    void buildLanes();
    QRectF plotArea() const;
    int rowHeight() const;
    double axisEnd() const;

    std::shared_ptr<const ServingRunView> m_run;
    std::vector<Lane> m_lanes;
    double m_axis_end = 0;
};

} // namespace tokenscope::ui
