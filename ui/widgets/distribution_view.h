// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QWidget>
#include <vector>

namespace tokenscope::ui {

// Next-token candidates as horizontal probability bars: one stage of the sampling chain drawn
// solid over the stage before it drawn as an outline, so a user sees what a stage reshaped (the
// temperature) or cut away (top-k, top-p, min-p: greyed, struck out). The token a step would take
// is drawn in the accent colour. Clicking a row asks to force that token; a right-click asks for its
// logit to be attributed (the lab).
class DistributionView : public QWidget {
    Q_OBJECT
public:
    struct Row {
        int id = 0;
        QString text;
        float before = 0.0f; // probability in the stage before
        float after = 0.0f;  // probability in this stage; 0 when the stage cut it
        float logit = 0.0f;
        bool survives = true;
        bool chosen = false;
    };

    explicit DistributionView(QWidget* parent = nullptr);
    void setRows(std::vector<Row> rows, const QString& before_name, const QString& after_name);
    void setPlaceholder(const QString& text);
    const std::vector<Row>& rows() const { return m_rows; }
    int rowAt(int y) const;
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

signals:
    void tokenClicked(int id);
    void tokenAttributionRequested(int id);

protected:
    void paintEvent(QPaintEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    bool event(QEvent* event) override;

private:
    int rowHeight() const;
    int top() const;

    std::vector<Row> m_rows;
    QString m_before, m_after, m_placeholder;
};

} // namespace tokenscope::ui
