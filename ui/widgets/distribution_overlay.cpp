// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/distribution_overlay.h"

#include <QPainter>
#include <algorithm>

namespace tokenscope::ui {

namespace {

constexpr int kBar = 9, kRowGap = 6, kHeader = 40;
const QColor kColourA(0x3b, 0x75, 0xaf), kColourB(0xef, 0x8a, 0x36);

} // namespace

DistributionOverlay::DistributionOverlay(QWidget* parent) : QWidget(parent)
{
    setMinimumHeight(kHeader);
}

void DistributionOverlay::setDistributions(const QString& title, const QString& name_a, const QString& name_b,
                                           std::vector<Row> rows)
{
    m_title = title;
    m_a = name_a;
    m_b = name_b;
    m_rows = std::move(rows);
    setMinimumHeight(sizeHint().height()); // every candidate visible: the splitter gives way
    updateGeometry();
    update();
}

void DistributionOverlay::clear()
{
    m_rows.clear();
    m_title.clear();
    setMinimumHeight(kHeader);
    update();
}

QSize DistributionOverlay::sizeHint() const
{
    return {480, kHeader + int(m_rows.size()) * (2 * kBar + kRowGap) + 8};
}

namespace {
// Two decimals, or three significant digits below 0.1% (a flat distribution's probabilities are all
// "0.00%" otherwise, and a change among them invisible).
QString percent_text(double p)
{
    const double v = 100 * p;
    return (v > 0 && v < 0.1 ? QString::number(v, 'g', 3) : QString::number(v, 'f', 2)) + "%";
}
} // namespace

void DistributionOverlay::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    const QPalette& pal = palette();
    p.fillRect(rect(), pal.base());
    if (m_rows.empty()) {
        p.setPen(pal.color(QPalette::PlaceholderText));
        p.drawText(rect(), Qt::AlignCenter, tr("Click a token to see both models' distributions for it"));
        return;
    }
    const QFontMetrics fm(font());
    p.setPen(pal.color(QPalette::Text));
    p.drawText(QRect(8, 4, width() - 16, fm.height()), Qt::AlignLeft | Qt::AlignVCenter, m_title);
    // legend
    int x = 8;
    const int ly = 8 + fm.height();
    for (const auto& [colour, name] : {std::pair{kColourA, m_a}, std::pair{kColourB, m_b}}) {
        p.fillRect(QRect(x, ly + 3, 12, 10), colour);
        x += 16;
        const QString label = fm.elidedText(name, Qt::ElideMiddle, 240);
        p.drawText(QPoint(x, ly + fm.ascent()), label);
        x += fm.horizontalAdvance(label) + 18;
    }
    double max_p = 1e-9;
    int label_w = 40;
    for (const Row& r : m_rows) {
        max_p = std::max({max_p, r.p_a, r.p_b});
        label_w = std::max(label_w, fm.horizontalAdvance(r.text) + 14);
    }
    label_w = std::min(label_w, width() / 3);
    const int value_w = fm.horizontalAdvance("100.00%") + 10;
    const int bar_w = std::max(20, width() - label_w - value_w - 16);
    int y = kHeader;
    for (const Row& r : m_rows) {
        QFont f = font();
        f.setBold(r.real);
        p.setFont(f);
        p.setPen(pal.color(QPalette::Text));
        const QString label = QFontMetrics(f).elidedText(r.text, Qt::ElideRight, label_w - 14);
        p.drawText(QRect(8, y, label_w - 8, 2 * kBar), Qt::AlignRight | Qt::AlignVCenter,
                   r.real ? QString::fromUtf8("▸ ") + label : label);
        p.setFont(font());
        int yy = y;
        for (const auto& [colour, prob] : {std::pair{kColourA, r.p_a}, std::pair{kColourB, r.p_b}}) {
            const int w = std::max(1, int(bar_w * prob / max_p));
            p.fillRect(QRect(label_w + 4, yy, w, kBar - 1), colour);
            p.setPen(pal.color(QPalette::Text));
            QFont small = font();
            small.setPointSizeF(small.pointSizeF() * 0.85);
            p.setFont(small);
            p.drawText(QRect(label_w + 8 + w, yy - 2, value_w, kBar + 4), Qt::AlignLeft | Qt::AlignVCenter,
                       percent_text(prob));
            p.setFont(font());
            yy += kBar;
        }
        y += 2 * kBar + kRowGap;
    }
}

} // namespace tokenscope::ui
