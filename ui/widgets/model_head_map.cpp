// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/model_head_map.h"

#include "widgets/colormap.h"

#include "lab/head_classes.h"
#include "widgets/count_text.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>
#include <cmath>

namespace tokenscope::ui {

namespace {
constexpr double kLeft = 40, kTop = 22, kRight = 150, kBottom = 8;
// The class's name as the engine gives it (cls clamped to the known classes).
QString class_name(int cls)
{
    return QString::fromUtf8(engine::head_class_name(engine::HeadClass(std::clamp(cls, 0, 5))).data());
}
} // namespace

ModelHeadMap::ModelHeadMap(QWidget* parent) : QWidget(parent)
{
    setMouseTracking(true);
    setMinimumSize(320, 220);
}

QColor ModelHeadMap::classColour(int cls)
{
    static const QColor colours[] = {QColor(66, 133, 244), QColor(219, 68, 55),  QColor(244, 160, 0),
                                     QColor(15, 157, 88),  QColor(171, 71, 188), QColor(150, 150, 150)};
    return colours[std::clamp(cls, 0, 5)];
}

void ModelHeadMap::setClasses(std::shared_ptr<const HeadsSnapshot> classes)
{
    m_classes = std::move(classes);
    if (m_scan && m_classes && !m_classes->sameLayout(*m_scan)) {
        m_scan.reset();
        m_show_scan = false;
    }
    update();
}

void ModelHeadMap::setScan(std::shared_ptr<const HeadsSnapshot> scan)
{
    m_scan = std::move(scan);
    if (m_classes && m_scan && !m_scan->sameLayout(*m_classes))
        m_classes.reset();
    m_show_scan = m_scan != nullptr;
    update();
}

void ModelHeadMap::showScan(bool on)
{
    m_show_scan = on && m_scan;
    update();
}

void ModelHeadMap::setSelected(std::set<std::pair<int, int>> heads)
{
    m_selected = std::move(heads);
    update();
    emit selectionChanged();
}

int ModelHeadMap::layers() const
{
    const auto& s = m_show_scan ? m_scan : m_classes ? m_classes : m_scan;
    return s ? s->n_layers : 0;
}

int ModelHeadMap::heads() const
{
    const auto& s = m_show_scan ? m_scan : m_classes ? m_classes : m_scan;
    return s ? s->n_heads : 0;
}

QRectF ModelHeadMap::gridRect() const
{
    return QRectF(kLeft, kTop, std::max(1.0, width() - kLeft - kRight), std::max(1.0, height() - kTop - kBottom));
}

std::pair<int, int> ModelHeadMap::headAt(QPointF pos) const
{
    const QRectF g = gridRect();
    if (!layers() || !g.contains(pos))
        return {-1, -1};
    const int l = int((pos.y() - g.top()) / (g.height() / layers()));
    const int h = int((pos.x() - g.left()) / (g.width() / heads()));
    if (l < 0 || l >= layers() || h < 0 || h >= heads())
        return {-1, -1};
    return {l, h};
}

QString ModelHeadMap::headText(int layer, int head) const
{
    QString text = tr("layer %1, head %2").arg(layer).arg(head);
    if (m_classes) {
        const HeadInfo& i = m_classes->heads[std::size_t(layer * m_classes->n_heads + head)];
        if (!i.scores.empty())
            text += tr("\nclass: %1\nprevious-token %2 · induction %3 · duplicate %4\nfirst-token %5 · self %6 · "
                       "entropy %7")
                        .arg(class_name(i.cls))
                        .arg(decimalText(i.scores[0], 3))
                        .arg(decimalText(i.scores[1], 3))
                        .arg(decimalText(i.scores[2], 3))
                        .arg(decimalText(i.scores[3], 3))
                        .arg(decimalText(i.scores[4], 3))
                        .arg(decimalText(i.entropy, 3));
    }
    if (m_scan) {
        const HeadInfo& i = m_scan->heads[std::size_t(layer * m_scan->n_heads + head)];
        if (i.kl >= 0)
            text += tr("\nablated: KL %1 nats, logit of %2 %3")
                        .arg(i.kl, 0, 'g', 4)
                        .arg(m_scan->token)
                        .arg(decimalText(i.logit_change, 4));
    }
    text += m_selected.count({layer, head}) ? tr("\n(in the ablation set: click to take it out)")
                                            : tr("\n(click to add it to the ablation set)");
    return text;
}

void ModelHeadMap::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    const QColor text = palette().color(QPalette::WindowText);
    p.setPen(text);
    if (!layers()) {
        p.drawText(rect(), Qt::AlignCenter, tr("Classify the heads or scan their ablations to fill this grid."));
        return;
    }
    const QRectF g = gridRect();
    const double cw = g.width() / heads(), ch = g.height() / layers();
    double max_kl = 1e-12;
    if (m_show_scan)
        for (const HeadInfo& i : m_scan->heads)
            max_kl = std::max(max_kl, i.kl);
    // the title may run over the legend's column (the legend starts below it)
    p.drawText(QRectF(kLeft, 2, std::max(g.width(), double(width() - kLeft - 4)), kTop - 4),
               Qt::AlignLeft | Qt::AlignVCenter,
               m_show_scan ? tr("KL when ablated (darker = more), %1")
                                 .arg(m_scan->token.isEmpty() ? QString() : tr("next token %1").arg(m_scan->token))
                           : tr("head classes on repeated random tokens"));
    for (int l = 0; l < layers(); ++l) {
        for (int h = 0; h < heads(); ++h) {
            const QRectF cell(g.left() + h * cw + 1, g.top() + l * ch + 1, cw - 2, ch - 2);
            QColor c;
            if (m_show_scan) {
                const double kl = m_scan->heads[std::size_t(l * m_scan->n_heads + h)].kl;
                c = kl < 0 ? QColor(128, 128, 128, 60)
                           : QColor::fromRgb(sequential_colour(float(1.0 - std::sqrt(kl / max_kl))));
            } else {
                const HeadInfo& i = m_classes->heads[std::size_t(l * m_classes->n_heads + h)];
                c = classColour(i.cls);
                const double top = i.scores.empty() ? 0.0 : *std::max_element(i.scores.begin(), i.scores.end());
                c.setAlphaF(float(0.25 + 0.75 * std::clamp(top, 0.0, 1.0)));
            }
            p.fillRect(cell, c);
            if (m_selected.count({l, h})) {
                p.setPen(QPen(text, 2));
                p.drawRect(cell.adjusted(1, 1, -1, -1));
                p.drawLine(cell.topLeft() + QPointF(3, 3), cell.bottomRight() - QPointF(3, 3));
            }
        }
        p.setPen(text);
        p.drawText(QRectF(0, g.top() + l * ch, kLeft - 6, ch), Qt::AlignRight | Qt::AlignVCenter, QString::number(l));
    }
    // the legend: the classes, or the scan's scale
    if (m_show_scan) {
        const QRectF bar(g.right() + 14, g.top(), 12, std::min(160.0, g.height()));
        for (int i = 0; i < int(bar.height()); ++i)
            p.fillRect(
                QRectF(bar.left(), bar.top() + i, bar.width(), 1.0),
                QColor::fromRgb(sequential_colour(float(std::sqrt(double(i) / std::max(1.0, bar.height() - 1))))));
        p.drawRect(bar);
        p.drawText(QPointF(bar.right() + 6, bar.top() + 10), tr("KL %1").arg(max_kl, 0, 'g', 3));
        p.drawText(QPointF(bar.right() + 6, bar.bottom()), "0");
    } else
        for (int k = 0; k < 6; ++k) {
            const QRectF sw(g.right() + 14, g.top() + k * 20, 12, 12);
            p.fillRect(sw, classColour(k));
            p.drawText(QPointF(sw.right() + 6, sw.bottom()), class_name(k));
        }
}

void ModelHeadMap::mousePressEvent(QMouseEvent* event)
{
    const auto head = headAt(event->position());
    if (head.first < 0)
        return;
    if (!m_selected.erase(head))
        m_selected.insert(head);
    update();
    emit selectionChanged();
}

bool ModelHeadMap::event(QEvent* e)
{
    if (e->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(e);
        const auto [l, h] = headAt(help->pos());
        if (l >= 0)
            QToolTip::showText(help->globalPos(), headText(l, h), this);
        else
            QToolTip::hideText();
        return true;
    }
    return QWidget::event(e);
}

} // namespace tokenscope::ui
