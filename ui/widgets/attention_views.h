// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/engine_types.h"

#include <QImage>
#include <QWidget>
#include <memory>
#include <vector>

namespace tokenscope::ui {

// Small pictures of many heads (a layer, or layers × heads), grouped by the KV head they share;
// click one to open it; right-click toggles it in the lab's ablation set.
class HeadGrid : public QWidget {
    Q_OBJECT
public:
    struct Thumb {
        int layer = 0, head = 0, kv_head = 0, window = 0;
        QImage image;
        float sink = 0.0f; // mean attention to the first token
    };
    explicit HeadGrid(QWidget* parent = nullptr);
    void setThumbs(std::vector<Thumb> thumbs, int columns, const QString& caption);
    const std::vector<Thumb>& thumbs() const { return m_thumbs; }
    QRect thumbRect(int index) const;
    // The colour scale under the thumbnails (square-root shading), empty without them.
    QRect legendRect() const;
    QSize sizeHint() const override;
    // Every thumbnail at its smallest (32 px) and the colour scale: the grid sits in a scroll area,
    // which grows it to this rather than cutting rows or columns off.
    QSize minimumSizeHint() const override;

signals:
    void headClicked(int layer, int head);
    void headAblationToggled(int layer, int head);

protected:
    void paintEvent(QPaintEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;

private:
    int cellSize() const;
    std::vector<Thumb> m_thumbs;
    int m_columns = 4;
    QString m_caption;
};

// The classic two-column view: tokens on the left look at tokens on the right, line strength the
// attention weight, for one head over a stretch of the sequence around the selected token.
class AttentionLines : public QWidget {
    Q_OBJECT
public:
    explicit AttentionLines(QWidget* parent = nullptr);
    void setHead(std::shared_ptr<const AttentionSnapshot> snapshot, const AttentionHead* head, int selected_row);
    int first() const { return m_first; }
    int last() const { return m_last; }
    QSize sizeHint() const override;

signals:
    void rowClicked(int row);

protected:
    void paintEvent(QPaintEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;

private:
    double rowY(int i) const;
    std::shared_ptr<const AttentionSnapshot> m_snapshot;
    const AttentionHead* m_head = nullptr;
    int m_selected = -1, m_first = 0, m_last = 0;
};

// What lies behind one cell: the query and key vectors (after RoPE), their scaled dot product, the
// softmax over the row that turns it into the weight shown, and the value vectors the weights mix.
struct QkBreakdown {
    double dot = 0.0;     // q · k
    double capped = 0.0;  // after the soft-cap (= dot without one)
    double scaled = 0.0;  // × scale: the score
    double row_max = 0.0; // the largest visible score in the row
    double row_sum = 0.0; // Σ exp(score − max) over the visible keys
    double weight = 0.0;  // exp(score − max) / sum
    bool masked = false;
    std::vector<std::pair<int, double>> top_dims;   // dimensions contributing most to q·k
    std::vector<std::pair<int, double>> top_values; // keys contributing most to the output (by weight)
};
QkBreakdown explain_cell(const AttentionHead& head, int window, int row, int column);

class QkView : public QWidget {
    Q_OBJECT
public:
    explicit QkView(QWidget* parent = nullptr);
    void setCell(std::shared_ptr<const AttentionSnapshot> snapshot, const AttentionHead* head, int window, int row,
                 int column);
    const QkBreakdown& breakdown() const { return m_b; }
    QString text() const { return m_text; }
    QSize sizeHint() const override;

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    std::shared_ptr<const AttentionSnapshot> m_snapshot;
    const AttentionHead* m_head = nullptr;
    int m_row = -1, m_column = -1;
    QkBreakdown m_b;
    QString m_text;
};

// A pooled thumbnail of one head's matrix (masked cells in the base colour).
QImage head_thumbnail(const AttentionHead& head, int window, int size, const QColor& masked);

} // namespace tokenscope::ui
