// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/lab_types.h"

#include <QWidget>
#include <set>

namespace tokenscope::ui {

// Every head of the model, layers × heads: coloured by class (previous-token, induction,
// duplicate-token, first-token, self, mixed; brighter = a higher score) or, after an ablation
// scan, by how much turning the head off moved the prediction (KL). Click toggles a head in the
// ablation set (outlined); hover shows every score.
class ModelHeadMap : public QWidget {
    Q_OBJECT
public:
    explicit ModelHeadMap(QWidget* parent = nullptr);
    void setClasses(std::shared_ptr<const HeadsSnapshot> classes);
    void setScan(std::shared_ptr<const HeadsSnapshot> scan); // colours by KL while set
    void showScan(bool on);
    const std::set<std::pair<int, int>>& selected() const { return m_selected; }
    void setSelected(std::set<std::pair<int, int>> heads);
    std::pair<int, int> headAt(QPointF pos) const;
    QString headText(int layer, int head) const;
    static QColor classColour(int cls);
    QSize sizeHint() const override { return {520, 360}; }

signals:
    void selectionChanged();

protected:
    void paintEvent(QPaintEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    bool event(QEvent* event) override;

private:
    QRectF gridRect() const;
    int layers() const;
    int heads() const;
    std::shared_ptr<const HeadsSnapshot> m_classes, m_scan;
    bool m_show_scan = false;
    std::set<std::pair<int, int>> m_selected;
};

} // namespace tokenscope::ui
