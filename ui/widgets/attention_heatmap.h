// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QImage>
#include <QStringList>
#include <QWidget>
#include <memory>
#include <vector>

namespace tokenscope::ui {

// A query × key matrix (rows: the token that looks, columns: the tokens it looks at) drawn from an
// image built once per matrix — with a max-pooled copy for long sequences, so thin peaks survive
// zooming out — while hover reads the exact value. Masked cells (future tokens, and beyond a
// sliding window) are hatched, never coloured as zero. A colour scale under the plot says what the
// colours mean (weights 0 … 1, linear or logarithmic, or a difference's −range … +range). Wheel zooms
// around the pointer, drag pans, double-click fits.
class AttentionHeatmap : public QWidget {
    Q_OBJECT
public:
    struct Matrix {
        int n = 0;
        std::shared_ptr<const void> owner; // keeps `values` alive
        const float* values = nullptr;     // [n][n]
        QStringList labels;                // one per token
        int window = 0;                    // sliding window (0: causal only)
        bool diverging = false;            // a difference map in [-range, range]
        float range = 1.0f;
        bool causal = true; // false for difference maps of unmasked data
    };

    explicit AttentionHeatmap(QWidget* parent = nullptr);
    void setMatrix(Matrix matrix);
    void setLogScale(bool on);
    void setSelected(int row, int column = -1);
    void fit();
    void zoomAt(QPointF pos, double factor);

    int n() const { return m_m.n; }
    float value(int row, int column) const;
    bool masked(int row, int column) const;
    // The cell under a widget position (row, column), or (-1, -1).
    std::pair<int, int> cellAt(QPointF pos) const;
    QPointF cellCentre(int row, int column) const;
    double cellSize() const { return m_cell; }
    QSize sizeHint() const override;
    // The colour scale: where it is drawn, and its labels from the low end to the high one.
    QRect legendRect() const;
    QStringList legendLabels() const;

signals:
    void cellClicked(int row, int column);

protected:
    void paintEvent(QPaintEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void mouseDoubleClickEvent(QMouseEvent* event) override;
    bool event(QEvent* event) override;

private:
    void rebuildImages();
    QRect plotRect() const;
    int labelWidth() const;
    int legendHeight() const;

    Matrix m_m;
    QImage m_full;
    QImage m_pooled; // max-pooled by m_pool_factor
    int m_pool_factor = 1;
    bool m_log = false;
    double m_cell = 1.0; // pixels per cell
    QPointF m_origin;    // matrix coordinate (column, row) at the plot's top-left
    int m_selected_row = -1, m_selected_column = -1;
    QPoint m_drag_from;
    QPointF m_drag_origin;
    bool m_dragging = false;
    bool m_fitted = true;
};

} // namespace tokenscope::ui
