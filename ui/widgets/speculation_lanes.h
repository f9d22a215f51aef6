// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/speculation_types.h"

#include <QWidget>
#include <memory>

namespace tokenscope::ui {

// The speculative run's passes on one clock: the drafter's work and the target's verification passes
// as two lanes (each verification marked with the tokens it kept), and the plain loop's passes below
// them on the same scale, so the speedup (or the slowdown) is a length you can see. Hover: the step.
class SpeculationLanes : public QWidget {
    Q_OBJECT
public:
    explicit SpeculationLanes(QWidget* parent = nullptr);

    void setSnapshot(std::shared_ptr<const SpeculationSnapshot> snapshot);
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

    struct Segment {
        double start_ms = 0, end_ms = 0;
        int step = -1; // speculative step, or −1 (the plain loop)
        int kept = 0;  // tokens this pass gave
    };
    // The lanes as drawn: draft, verify, plain (public for tests).
    const std::vector<Segment>& lane(int i) const { return m_lanes[std::size_t(i)]; }

protected:
    void paintEvent(QPaintEvent* event) override;
    bool event(QEvent* event) override;

private:
    QRectF plotArea() const;
    double axisEnd() const;

    std::shared_ptr<const SpeculationSnapshot> m_snapshot;
    std::vector<Segment> m_lanes[3];
};

} // namespace tokenscope::ui
