// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/engine_types.h"

#include <QWidget>
#include <memory>
#include <vector>

namespace tokenscope::ui {

// One generation on a time axis, a lane per stage (tokenize, prefill, decode, sample, detokenize),
// the first-token mark (TTFT) and each token's text where it became final. A cursor plays the run
// back; what lies after it is faded. Clicking an event selects its token.
class TimelineView : public QWidget {
    Q_OBJECT
public:
    explicit TimelineView(QWidget* parent = nullptr);
    void setTimeline(std::shared_ptr<const TimelineSnapshot> timeline);
    void setCursor(qint64 ns); // -1: no playback, everything solid
    void setSelectedStep(int step);
    qint64 endNs() const;
    int eventAt(const QPoint& pos) const;
    QRectF eventRect(std::size_t i) const; // where event i is drawn
    // The time axis' labels ("100 ms") and the tokens' under the lanes, where they are drawn: each as
    // wide as its text and kept inside the view (a label at the right edge is moved left, not cut).
    struct Label {
        QRectF rect;
        QString text;
        bool token = false; // drawn in the smaller font, centred
    };
    std::vector<Label> labels() const;
    QSize sizeHint() const override;

signals:
    void stepClicked(int step);

protected:
    void paintEvent(QPaintEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    bool event(QEvent* event) override;

private:
    // The time axis' ticks, in ms from the start: every 1, 5, 20, 100 or 500 ms by the run's length.
    std::vector<double> axisTicksMs() const;
    // Where each token became final (the end of its step's last event): (step, x), in time order.
    std::vector<std::pair<int, double>> tokenMarks() const;
    int laneHeight() const;
    int labelWidth() const;
    double xOf(qint64 ns) const;

    std::shared_ptr<const TimelineSnapshot> m_timeline;
    qint64 m_cursor = -1;
    int m_selected_step = -1;
    int m_lanes = 5; // stages drawn: five, or seven with a speculative run's draft and verify
};

} // namespace tokenscope::ui
