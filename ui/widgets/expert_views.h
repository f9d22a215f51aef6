// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// The Experts panel's pictures of one routing snapshot: the tokens × layers map, one token's route
// through every layer, and one layer's load over the experts.

#include "bridge/experts_types.h"

#include <QColor>
#include <QWidget>
#include <memory>

namespace tokenscope::ui {

// A colour per expert id, distinct for neighbours and stable between runs (the golden-angle hue walk).
QColor expert_colour(int expert);

// Rows are tokens, columns the MoE layers; each cell is the colour of the token's top expert there,
// lighter where that expert's weight is smaller. Hover: the token's k experts with their weights at
// that layer. Click: selects the token (and the layer).
class ExpertMap : public QWidget {
    Q_OBJECT
public:
    explicit ExpertMap(QWidget* parent = nullptr);
    void setSnapshot(std::shared_ptr<const ExpertsSnapshot> snapshot);
    void setSelection(int token, int layer_index);
    int selectedToken() const { return m_token; }
    int selectedLayer() const { return m_layer; }
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;
    // The cell under a widget point: (token, layer index), or (−1, −1) (public for tests).
    std::pair<int, int> cellAt(QPoint p) const;
    QRect cellRect(int token, int layer_index) const;
    QString cellText(int token, int layer_index) const; // what the hover says

signals:
    void selected(int token, int layer_index);

protected:
    void paintEvent(QPaintEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    bool event(QEvent* event) override;

private:
    int labelWidth() const;
    int cellWidth() const; // the layers share the width, 12 to 48 px each
    std::shared_ptr<const ExpertsSnapshot> m_s;
    int m_token = -1, m_layer = 0;
};

// One token's route: layers left to right, experts top to bottom; at every layer a dot for each of the
// k chosen experts (its area the weight), the top ones joined into a path.
class ExpertRoute : public QWidget {
    Q_OBJECT
public:
    explicit ExpertRoute(QWidget* parent = nullptr);
    void setSnapshot(std::shared_ptr<const ExpertsSnapshot> snapshot, int token);
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    std::shared_ptr<const ExpertsSnapshot> m_s;
    int m_token = -1;
};

// One layer's load: for every expert the tokens routed to it (bars) against the even share n·k / E
// (the dashed line the router's auxiliary loss pulls towards); the chosen expert outlined. Click: picks it.
class ExpertLoad : public QWidget {
    Q_OBJECT
public:
    explicit ExpertLoad(QWidget* parent = nullptr);
    void setSnapshot(std::shared_ptr<const ExpertsSnapshot> snapshot, int layer_index, int expert);
    std::vector<int> counts() const; // tokens per expert at the layer (public for tests)
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

signals:
    void expertClicked(int expert);

protected:
    void paintEvent(QPaintEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;

private:
    QRectF plot() const;
    std::shared_ptr<const ExpertsSnapshot> m_s;
    int m_layer = 0, m_expert = -1;
};

} // namespace tokenscope::ui
