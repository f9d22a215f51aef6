// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "serve/serving_engine.h"

#include <QWidget>

namespace tokenscope::ui {

// The serving engine's KV block pool, one square per block: coloured by the request that computed
// it, a white dot where more than one sequence holds it (a shared prefix or a fork's prompt), hatched
// where it is a cached prefix nobody holds now (reused or evicted later), empty where free. Hover: the
// block, its owner and holders.
class ServingPoolMap : public QWidget {
    Q_OBJECT
public:
    explicit ServingPoolMap(QWidget* parent = nullptr);

    void setPool(engine::PoolSnapshot pool);
    const engine::PoolSnapshot& pool() const { return m_pool; }
    QSize sizeHint() const override;
    bool hasHeightForWidth() const override { return true; }
    int heightForWidth(int width) const override;
    QSize minimumSizeHint() const override;

protected:
    void paintEvent(QPaintEvent* event) override;
    bool event(QEvent* event) override;

private:
    int cellSize(int width, int height) const;
    int columns(int width) const;
    QRect cell(int index, int cols) const;

    engine::PoolSnapshot m_pool;
};

} // namespace tokenscope::ui
