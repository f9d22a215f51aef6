// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QSpinBox>

namespace tokenscope::ui {

// A count with an upper limit that is shown, not enforced while typing: a QSpinBox with a maximum
// rejects the keystroke that would pass it, so typing 5000 into a box limited to 4096 silently
// leaves 500. Here any count can be typed; above the limit the box is marked invalid (red, with the
// limit in its tooltip) and valid() is false until it is corrected.
class BoundedCountBox : public QSpinBox {
    Q_OBJECT
public:
    BoundedCountBox(int minimum, int limit, int value, const QString& tip, QWidget* parent = nullptr);

    int limit() const { return m_limit; }
    bool valid() const { return value() <= m_limit; }
    // "at most 4,096": what an invalid value is told.
    QString limitText() const;

signals:
    void validityChanged(bool valid);

private:
    void showValidity();

    int m_limit;
    QString m_tip;
    bool m_valid = true;
};

} // namespace tokenscope::ui
