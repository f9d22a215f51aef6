// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QStringList>
#include <QWidget>
#include <vector>

namespace tokenscope::ui {

// A layers × columns grid of patching effects (rows: layers, first at the top; columns: positions
// with their tokens, or heads) in a diverging map centred on 0 (blue below, red toward 1 = the
// clean run's behaviour restored). Cells not run (a Stop) are hatched. Hover names the cell and
// its exact value. render() draws the same picture anywhere (PNG and SVG export).
class EffectGrid : public QWidget {
    Q_OBJECT
public:
    explicit EffectGrid(QWidget* parent = nullptr);
    // effect[layer][column]; NaN where not run.
    void setData(std::vector<std::vector<double>> effect, QStringList column_labels, QString title);
    void clear();
    // The colour bar's labels at 1, 0 and −1 (default: patching's "1 clean", "0", "−1").
    void setScaleLabels(const QString& top, const QString& middle, const QString& bottom)
    {
        m_scale = {top, middle, bottom};
        update();
    }
    bool empty() const { return m_effect.empty(); }
    // The cell under a widget position (layer, column), or (-1, -1).
    std::pair<int, int> cellAt(QPointF pos) const;
    QString cellText(int layer, int column) const;
    void render(QPainter& p, QSizeF size) const;
    QSize sizeHint() const override { return {640, 420}; }

protected:
    void paintEvent(QPaintEvent* event) override;
    bool event(QEvent* event) override;

private:
    struct Layout {
        QRectF grid;
        double cell_w = 0, cell_h = 0;
    };
    Layout layout(QSizeF size) const;

    std::vector<std::vector<double>> m_effect;
    QStringList m_columns;
    QString m_title;
    QStringList m_scale = {QStringLiteral("1 clean"), QStringLiteral("0"), QString::fromUtf8("−1")};
};

} // namespace tokenscope::ui
