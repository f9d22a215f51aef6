// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/engine_types.h"

#include <QImage>
#include <QStringList>
#include <QWidget>
#include <memory>

namespace tokenscope::ui {

// The cached K (or V) vectors of one layer and KV head: one row per position, one column per
// dimension, a diverging colour map centred on zero. Rows a sliding window freed are hatched;
// generated tokens are marked in the accent colour; the selected token is outlined. Drawn from a
// QImage built once per snapshot.
class KvHeatStrip : public QWidget {
    Q_OBJECT
public:
    explicit KvHeatStrip(QWidget* parent = nullptr);
    void setContents(std::shared_ptr<const KvContents> contents, bool values);
    void setSelected(int position);
    int rowAt(int y) const;
    int columnAt(int x) const;
    float valueAt(int position, int dim) const;
    // The colour scale above the rows, and its labels from the low end to the high one.
    QRect legendRect() const;
    QStringList legendLabels() const;
    QSize sizeHint() const override;

signals:
    void positionClicked(int position);

protected:
    void paintEvent(QPaintEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    bool event(QEvent* event) override;

private:
    int labelWidth() const;
    int rowHeight() const;
    QRect imageRect() const;

    std::shared_ptr<const KvContents> m_contents;
    bool m_values = false;
    QImage m_image;
    float m_scale = 1.0f;
    int m_selected = -1;
};

} // namespace tokenscope::ui
