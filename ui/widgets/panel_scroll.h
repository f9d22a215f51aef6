// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QScrollArea>

namespace tokenscope::ui {

// A dock's panel inside a scroll area that scrolls only when the dock is smaller than the panel's
// minimum — never because the panel would like more room. (QScrollArea's resizable mode asks a
// panel with wrapping rows for its preferred height, and scrolled panels that fitted.) The panel
// fills the dock otherwise.
class PanelScroll : public QScrollArea {
public:
    explicit PanelScroll(QWidget* panel, QWidget* parent = nullptr);

    // The least height the panel needs at `width`: its layout's minimum, with each wrapping row at
    // the height its lines take at its width.
    int minimumHeightAt(int width) const;

protected:
    void resizeEvent(QResizeEvent* event) override;
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    void fit();
};

} // namespace tokenscope::ui
