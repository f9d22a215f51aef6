// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QString>
#include <QWidget>
#include <vector>

namespace tokenscope::ui {

// A waterfall of a logit's parts: each bar starts where the running sum stood and ends where the
// part takes it (green up, red down), in the order of the forward pass; the last bar is the logit
// itself. The largest parts (by size) get a bar each, the rest one "other parts" bar, so the bars
// still add up. Hover gives a bar's exact value and the running sum.
class AttributionWaterfall : public QWidget {
    Q_OBJECT
public:
    struct Bar {
        QString name;
        double value = 0.0;
    };
    explicit AttributionWaterfall(QWidget* parent = nullptr);
    // parts in forward order; `total` their sum (the real logit).
    void setParts(std::vector<Bar> parts, double total, QString title);
    void setShown(int n); // how many parts get a bar of their own
    void clear();
    // The bars as drawn: the shown parts, "other parts" when any were folded, then the total.
    const std::vector<Bar>& bars() const { return m_bars; }
    int barAt(QPointF pos) const;
    void render(QPainter& p, QSizeF size) const;
    QSize sizeHint() const override { return {560, 460}; }

protected:
    void paintEvent(QPaintEvent* event) override;
    bool event(QEvent* event) override;

private:
    void rebuild();
    std::vector<Bar> m_parts, m_bars;
    std::vector<double> m_start; // running sum before each bar
    double m_total = 0.0;
    int m_shown = 18;
    QString m_title;
};

} // namespace tokenscope::ui
