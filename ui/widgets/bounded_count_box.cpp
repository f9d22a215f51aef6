// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/bounded_count_box.h"
#include "widgets/count_text.h"

#include <QLocale>
#include <QPalette>
#include <limits>

namespace tokenscope::ui {

BoundedCountBox::BoundedCountBox(int minimum, int limit, int value, const QString& tip, QWidget* parent)
    : QSpinBox(parent), m_limit(limit), m_tip(tip)
{
    setRange(minimum, std::numeric_limits<int>::max());
    setValue(value);
    setToolTip(tip);
    connect(this, &QSpinBox::valueChanged, this, &BoundedCountBox::showValidity);
}

QString BoundedCountBox::limitText() const
{
    return tr("at most %1").arg(numberText(m_limit));
}

void BoundedCountBox::showValidity()
{
    const bool ok = valid();
    // The text in red, through the palette: a style sheet would redraw the arrows in its own style.
    QPalette p = QPalette();
    if (!ok)
        p.setColor(QPalette::Text, QColor(0xc0, 0x39, 0x2b));
    setPalette(p);
    setToolTip(ok ? m_tip : m_tip + " — " + limitText());
    if (ok != m_valid) {
        m_valid = ok;
        emit validityChanged(ok);
    }
}

} // namespace tokenscope::ui
