// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QString>
#include <QWidget>
#include <vector>

namespace tokenscope::ui {

// Two next-token distributions over the same candidates, side by side: for each candidate a pair
// of bars (model A above, model B below) with their probabilities, the real next token marked.
class DistributionOverlay : public QWidget {
    Q_OBJECT
public:
    struct Row {
        QString text;
        double p_a = 0.0, p_b = 0.0;
        bool real = false; // the token that came next in the text
    };

    explicit DistributionOverlay(QWidget* parent = nullptr);

    void setDistributions(const QString& title, const QString& name_a, const QString& name_b, std::vector<Row> rows);
    void clear();
    const std::vector<Row>& rows() const { return m_rows; }
    QSize sizeHint() const override;

protected:
    void paintEvent(QPaintEvent*) override;

private:
    QString m_title, m_a, m_b;
    std::vector<Row> m_rows;
};

} // namespace tokenscope::ui
