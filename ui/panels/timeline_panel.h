// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/engine_types.h"

#include <QWidget>
#include <memory>

class QChartView;
class QLabel;
class QPushButton;
class QTimer;

namespace tokenscope::ui {

class EngineController;
class TimelineView;
class TokenSelection;

// Why decode is slow: the last generation's measured stages on one time axis (played back on
// request), TTFT and each inter-token latency, and prefill's achieved FLOP/s versus decode's
// achieved bytes/s against this machine's measured peaks — compute-bound prefill, memory-bound
// decode.
class TimelinePanel : public QWidget {
    Q_OBJECT
public:
    TimelinePanel(EngineController* engine, TokenSelection* selection, QWidget* parent = nullptr);

    const std::shared_ptr<const TimelineSnapshot>& timeline() const { return m_timeline; }
    void showSaved(std::shared_ptr<const TimelineSnapshot> timeline) { onTimeline(std::move(timeline)); }
    TimelineView* view() const { return m_view; }
    QString statsText() const;
    void setPeaks(const MachinePeaksUi& peaks);
    const MachinePeaksUi& peaks() const { return m_peaks; }
    void play();

signals:
    void timelineShown();
    void peaksChanged();

private:
    void onTimeline(std::shared_ptr<const TimelineSnapshot> timeline);
    void renderStats();
    void renderServerStats(const TimelineSnapshot& t);
    void renderSpeculationStats(const TimelineSnapshot& t);
    void drawChart();

    EngineController* m_engine;
    TokenSelection* m_selection;
    std::shared_ptr<const TimelineSnapshot> m_timeline;
    MachinePeaksUi m_peaks;
    TimelineView* m_view = nullptr;
    QLabel* m_stats = nullptr;
    QChartView* m_chart = nullptr;
    QPushButton* m_play = nullptr;
    QPushButton* m_probe = nullptr;
    QTimer* m_playback = nullptr;
    qint64 m_play_started_ms = 0;
};

} // namespace tokenscope::ui
