// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QObject>

namespace tokenscope::ui {

// The linked selection of design/ui.md: one token position of the current run, selected in any
// panel and shown in all of them. -1 when nothing is selected.
class TokenSelection : public QObject {
    Q_OBJECT
public:
    using QObject::QObject;
    int position() const { return m_position; }

public slots:
    void select(int position);
    void clear() { select(-1); }

signals:
    void changed(int position);

private:
    int m_position = -1;
};

} // namespace tokenscope::ui
