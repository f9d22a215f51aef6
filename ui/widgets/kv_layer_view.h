// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/engine_types.h"

#include <QWidget>
#include <memory>

namespace tokenscope::ui {

// The live KV cache, per layer: a bar of the positions attention can see (sliding-window layers
// visibly capped at their window) and, beside it, the layer's paged blocks — in the window, held
// behind it as a step-back reserve, or free.
class KvLayerView : public QWidget {
    Q_OBJECT
public:
    explicit KvLayerView(QWidget* parent = nullptr);
    void setSnapshot(std::shared_ptr<const KvSnapshot> snapshot);
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

    enum class BlockState { Free, InWindow, Reserve };
    // What block `block` of layer `layer` holds now (derived from the engine's accounting).
    BlockState blockState(int layer, int block) const;

protected:
    void paintEvent(QPaintEvent* event) override;
    bool event(QEvent* event) override;

private:
    int rowHeight() const;
    int labelWidth() const;
    QRect barRect(int layer) const;
    QRect mapRect(int layer) const;

    std::shared_ptr<const KvSnapshot> m_snapshot;
};

} // namespace tokenscope::ui
