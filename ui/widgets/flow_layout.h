// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QLayout>
#include <QList>

namespace tokenscope::ui {

// A row of controls that wraps onto further lines when its panel is narrower than the row, instead
// of making the panel (and the window beside it) wider than the screen. Items keep their size hints;
// a trailing stretch is not needed (lines are left-aligned). Pair a caption with its field through
// `labelled` so the two never part at a line break.
class FlowLayout : public QLayout {
    Q_OBJECT // so that findChildren<FlowLayout*> finds flows, not every layout

        public : explicit FlowLayout(QWidget* parent = nullptr, int spacing = -1);
    ~FlowLayout() override;

    void addItem(QLayoutItem* item) override;
    int count() const override;
    QLayoutItem* itemAt(int index) const override;
    QLayoutItem* takeAt(int index) override;
    Qt::Orientations expandingDirections() const override;
    bool hasHeightForWidth() const override;
    int heightForWidth(int width) const override;
    QSize minimumSize() const override;
    QSize sizeHint() const override;
    void setGeometry(const QRect& rect) override;

private:
    // Places the items within `rect` (only measures when `apply` is false); returns the height used.
    int arrange(const QRect& rect, bool apply) const;
    int gap() const;

    QList<QLayoutItem*> m_items;
    int m_spacing;
};

// A caption and its field as one item of a flow (they wrap together).
QWidget* labelled(const QString& caption, QWidget* field);

} // namespace tokenscope::ui
