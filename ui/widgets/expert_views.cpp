// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/expert_views.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>
#include <algorithm>
#include <cmath>

namespace tokenscope::ui {

namespace {
constexpr int kMinCellW = 12, kMaxCellW = 48, kCellH = 16, kHeader = 18;

// The token's text as a row label: whitespace shown, long pieces cut.
QString label_of(const StepperToken& t)
{
    QString s = t.text;
    if (s.size() > 14)
        s = s.left(13) + "…";
    return s;
}
} // namespace

QColor expert_colour(int expert)
{
    const double hue = std::fmod(expert * 137.508, 360.0);
    const int band = (expert / 8) % 3; // neighbours in hue differ in lightness too
    return QColor::fromHsl(int(hue), 150 + 40 * (band % 2), 105 + 25 * band);
}

// ---- ExpertMap --------------------------------------------------------------------------------------

ExpertMap::ExpertMap(QWidget* parent) : QWidget(parent)
{
    setMouseTracking(true);
    setAccessibleName(tr("Experts by token and layer"));
}

void ExpertMap::setSnapshot(std::shared_ptr<const ExpertsSnapshot> snapshot)
{
    m_s = std::move(snapshot);
    m_token = m_s && m_s->n() > 0 ? std::clamp(m_token, 0, m_s->n() - 1) : -1;
    m_layer = m_s && !m_s->moe_layers.empty() ? std::clamp(m_layer, 0, int(m_s->moe_layers.size()) - 1) : 0;
    setMinimumSize(minimumSizeHint()); // a scroll area shows the rest
    updateGeometry();
    update();
}

void ExpertMap::setSelection(int token, int layer_index)
{
    m_token = token;
    m_layer = layer_index;
    update();
}

int ExpertMap::labelWidth() const
{
    int w = fontMetrics().horizontalAdvance("0000 ") + 8;
    if (m_s)
        for (const StepperToken& t : m_s->tokens)
            w = std::max(w, fontMetrics().horizontalAdvance("0000 " + label_of(t)) + 8);
    return std::min(w, 170);
}

QSize ExpertMap::sizeHint() const
{
    if (!m_s)
        return {360, 240};
    return {labelWidth() + 22 * int(m_s->moe_layers.size()) + 8, kHeader + kCellH * m_s->n() + 4};
}

QSize ExpertMap::minimumSizeHint() const
{
    if (!m_s)
        return {200, 120};
    return {labelWidth() + kMinCellW * int(m_s->moe_layers.size()) + 8, kHeader + kCellH * m_s->n() + 4};
}

int ExpertMap::cellWidth() const
{
    const int layers = m_s ? std::max<int>(1, int(m_s->moe_layers.size())) : 1;
    return std::clamp((width() - labelWidth() - 8) / layers, kMinCellW, kMaxCellW);
}

QRect ExpertMap::cellRect(int token, int layer_index) const
{
    const int w = cellWidth();
    return {labelWidth() + layer_index * w, kHeader + token * kCellH, w - 1, kCellH - 1};
}

std::pair<int, int> ExpertMap::cellAt(QPoint p) const
{
    if (!m_s || p.x() < labelWidth() || p.y() < kHeader)
        return {-1, -1};
    const int layer = (p.x() - labelWidth()) / cellWidth(), token = (p.y() - kHeader) / kCellH;
    if (layer >= int(m_s->moe_layers.size()) || token >= m_s->n())
        return {-1, -1};
    return {token, layer};
}

QString ExpertMap::cellText(int t, int li) const
{
    if (!m_s || t < 0 || li < 0)
        return {};
    QString s = tr("<b>%1</b> (token %2), layer %3:")
                    .arg(m_s->tokens[std::size_t(t)].text.toHtmlEscaped())
                    .arg(t)
                    .arg(m_s->moe_layers[std::size_t(li)]);
    for (int slot = 0; slot < m_s->k; ++slot)
        s += tr("<br>expert %1 · weight %2").arg(m_s->expert(li, t, slot)).arg(m_s->weight(li, t, slot), 0, 'f', 3);
    return s;
}

void ExpertMap::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    const QPalette& pal = palette();
    p.fillRect(rect(), pal.base());
    if (!m_s || m_s->moe_layers.empty())
        return;
    const int lw = labelWidth(), cw = cellWidth();
    p.setPen(pal.color(QPalette::PlaceholderText));
    p.drawText(QRect(0, 0, lw - 6, kHeader), Qt::AlignVCenter | Qt::AlignRight, tr("layer"));
    const int every = cw >= fontMetrics().horizontalAdvance("00 ") ? 1 : 2; // layer numbers, every other when crowded
    for (int li = 0; li < int(m_s->moe_layers.size()); li += every)
        p.drawText(QRect(lw + li * cw, 0, cw * every, kHeader), Qt::AlignVCenter | Qt::AlignLeft,
                   QString::number(m_s->moe_layers[std::size_t(li)]));
    for (int t = 0; t < m_s->n(); ++t) {
        const QRect label(0, kHeader + t * kCellH, lw - 6, kCellH);
        p.setPen(t == m_token ? pal.color(QPalette::Highlight) : pal.color(QPalette::Text));
        p.drawText(label, Qt::AlignVCenter | Qt::AlignRight,
                   QString::number(t) + " " + label_of(m_s->tokens[std::size_t(t)]));
        for (int li = 0; li < int(m_s->moe_layers.size()); ++li) {
            QColor c = expert_colour(m_s->expert(li, t, 0));
            // weaker top weight: washed towards the background (weights span 1/k … 1 when normalised)
            const float w = m_s->weight(li, t, 0);
            const float strength = std::clamp(0.35f + 0.65f * w, 0.35f, 1.0f);
            const QColor bg = pal.color(QPalette::Base);
            c = QColor::fromRgbF(bg.redF() + (c.redF() - bg.redF()) * strength,
                                 bg.greenF() + (c.greenF() - bg.greenF()) * strength,
                                 bg.blueF() + (c.blueF() - bg.blueF()) * strength);
            p.fillRect(cellRect(t, li), c);
        }
    }
    if (m_token >= 0) { // the selected token's row and layer's column outlined
        p.setPen(QPen(pal.color(QPalette::Highlight), 2));
        p.setBrush(Qt::NoBrush);
        p.drawRect(QRect(lw - 1, kHeader + m_token * kCellH - 1, cw * int(m_s->moe_layers.size()) + 1, kCellH + 1));
        p.setPen(QPen(pal.color(QPalette::Text), 1, Qt::DashLine));
        p.drawRect(QRect(lw + m_layer * cw - 1, kHeader - 1, cw + 1, kCellH * m_s->n() + 1));
    }
}

void ExpertMap::mousePressEvent(QMouseEvent* event)
{
    const auto [t, li] = cellAt(event->position().toPoint());
    if (t < 0)
        return;
    setSelection(t, li);
    emit selected(t, li);
}

bool ExpertMap::event(QEvent* event)
{
    if (event->type() == QEvent::ToolTip) {
        const auto* help = static_cast<QHelpEvent*>(event);
        const auto [t, li] = cellAt(help->pos());
        if (t >= 0)
            QToolTip::showText(help->globalPos(), cellText(t, li), this);
        else
            QToolTip::hideText();
        return true;
    }
    return QWidget::event(event);
}

// ---- ExpertRoute ------------------------------------------------------------------------------------

ExpertRoute::ExpertRoute(QWidget* parent) : QWidget(parent)
{
    setAccessibleName(tr("The selected token's route through the layers"));
}

void ExpertRoute::setSnapshot(std::shared_ptr<const ExpertsSnapshot> snapshot, int token)
{
    m_s = std::move(snapshot);
    m_token = token;
    update();
}

QSize ExpertRoute::sizeHint() const
{
    return {420, 260};
}

QSize ExpertRoute::minimumSizeHint() const
{
    return {240, 160};
}

void ExpertRoute::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    const QPalette& pal = palette();
    p.fillRect(rect(), pal.base());
    if (!m_s || m_token < 0 || m_token >= m_s->n() || m_s->moe_layers.empty())
        return;
    const QFontMetrics fm = fontMetrics();
    const int L = int(m_s->moe_layers.size()), E = m_s->n_expert;
    const QRectF area(fm.horizontalAdvance("expert 000") + 6, fm.height() + 6,
                      width() - fm.horizontalAdvance("expert 000") - 14, height() - 2 * fm.height() - 14);
    const auto x_of = [&](int li) { return area.left() + (L == 1 ? area.width() / 2 : area.width() * li / (L - 1)); };
    const auto y_of = [&](int e) { return area.top() + (E == 1 ? area.height() / 2 : area.height() * e / (E - 1)); };
    p.setPen(pal.color(QPalette::PlaceholderText));
    const int label_every = std::max(1, int(std::ceil(E / (area.height() / fm.height()))));
    for (int e = 0; e < E; e += label_every)
        p.drawText(QRectF(0, y_of(e) - fm.height() / 2.0, area.left() - 6, fm.height()),
                   Qt::AlignRight | Qt::AlignVCenter, tr("expert %1").arg(e));
    const int layer_every = std::max(1, int(std::ceil(L * fm.horizontalAdvance("00 ") / area.width())));
    for (int li = 0; li < L; li += layer_every)
        p.drawText(QRectF(x_of(li) - 20, area.bottom() + 4, 40, fm.height()), Qt::AlignCenter,
                   QString::number(m_s->moe_layers[std::size_t(li)]));
    p.drawText(QRectF(area.left() - fm.horizontalAdvance("layer ") - 6, area.bottom() + 4,
                      fm.horizontalAdvance("layer "), fm.height()),
               Qt::AlignRight, tr("layer"));
    p.setPen(pal.color(QPalette::Text));
    p.drawText(QRectF(area.left(), 0, area.width(), fm.height()), Qt::AlignLeft,
               tr("“%1” (token %2) through the layers: dot area = the expert's weight")
                   .arg(m_s->tokens[std::size_t(m_token)].text)
                   .arg(m_token));
    // the path through each layer's top expert
    QPainterPath path;
    for (int li = 0; li < L; ++li) {
        const QPointF at(x_of(li), y_of(m_s->expert(li, m_token, 0)));
        li == 0 ? path.moveTo(at) : path.lineTo(at);
    }
    p.setPen(QPen(pal.color(QPalette::Text), 1.5));
    p.setBrush(Qt::NoBrush);
    p.drawPath(path);
    const double r_max = std::min(10.0, std::max(3.0, area.height() / E * 0.9));
    for (int li = 0; li < L; ++li)
        for (int slot = m_s->k - 1; slot >= 0; --slot) {
            const int e = m_s->expert(li, m_token, slot);
            const double r = std::max(1.5, r_max * std::sqrt(std::max(0.0f, m_s->weight(li, m_token, slot))));
            p.setPen(QPen(pal.color(QPalette::Base), 1));
            p.setBrush(expert_colour(e));
            p.drawEllipse(QPointF(x_of(li), y_of(e)), r, r);
        }
}

// ---- ExpertLoad -------------------------------------------------------------------------------------

ExpertLoad::ExpertLoad(QWidget* parent) : QWidget(parent)
{
    setAccessibleName(tr("Tokens per expert at the layer"));
}

void ExpertLoad::setSnapshot(std::shared_ptr<const ExpertsSnapshot> snapshot, int layer_index, int expert)
{
    m_s = std::move(snapshot);
    m_layer = layer_index;
    m_expert = expert;
    update();
}

std::vector<int> ExpertLoad::counts() const
{
    std::vector<int> c(m_s ? std::size_t(m_s->n_expert) : 0, 0);
    if (!m_s || m_layer < 0 || m_layer >= int(m_s->experts.size()))
        return c;
    for (const int32_t e : m_s->experts[std::size_t(m_layer)])
        if (e >= 0 && e < int(c.size()))
            ++c[std::size_t(e)];
    return c;
}

QSize ExpertLoad::sizeHint() const
{
    return {420, 170};
}

QSize ExpertLoad::minimumSizeHint() const
{
    return {240, 120};
}

QRectF ExpertLoad::plot() const
{
    const QFontMetrics fm = fontMetrics();
    return QRectF(fm.horizontalAdvance("0000") + 8, fm.height() + 6, width() - fm.horizontalAdvance("0000") - 16,
                  height() - 2 * fm.height() - 14);
}

void ExpertLoad::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    const QPalette& pal = palette();
    p.fillRect(rect(), pal.base());
    if (!m_s || m_s->experts.empty())
        return;
    const std::vector<int> c = counts();
    const QRectF area = plot();
    const QFontMetrics fm = fontMetrics();
    const int top = std::max(1, *std::max_element(c.begin(), c.end()));
    const double even = double(m_s->n()) * m_s->k / m_s->n_expert;
    const double y_max = std::max<double>(top, even) * 1.1;
    const double bw = area.width() / double(c.size());
    p.setPen(pal.color(QPalette::Text));
    p.drawText(QRectF(area.left(), 0, area.width(), fm.height()), Qt::AlignLeft,
               tr("Layer %1: tokens per expert (dashed: the even share, %2)")
                   .arg(m_s->moe_layers[std::size_t(m_layer)])
                   .arg(even, 0, 'f', 1));
    for (std::size_t e = 0; e < c.size(); ++e) {
        const double h = area.height() * c[e] / y_max;
        const QRectF bar(area.left() + double(e) * bw + bw * 0.1, area.bottom() - h, bw * 0.8, h);
        p.fillRect(bar, expert_colour(int(e)));
        if (int(e) == m_expert) {
            p.setPen(QPen(pal.color(QPalette::Highlight), 2));
            p.drawRect(bar.adjusted(-1, -1, 1, 1));
        }
    }
    p.setPen(QPen(pal.color(QPalette::Text), 1, Qt::DashLine));
    const double y_even = area.bottom() - area.height() * even / y_max;
    p.drawLine(QPointF(area.left(), y_even), QPointF(area.right(), y_even));
    p.setPen(pal.color(QPalette::PlaceholderText));
    p.drawText(QRectF(0, area.top() - fm.height() / 2.0, area.left() - 4, fm.height()), Qt::AlignRight,
               QString::number(int(std::round(y_max))));
    p.drawText(QRectF(0, area.bottom() - fm.height() / 2.0, area.left() - 4, fm.height()), Qt::AlignRight, "0");
    const int every = std::max(1, int(std::ceil(double(c.size()) * fm.horizontalAdvance("000") / area.width())));
    for (std::size_t e = 0; e < c.size(); e += std::size_t(every))
        p.drawText(QRectF(area.left() + double(e) * bw + bw / 2 - 20, area.bottom() + 2, 40, fm.height()),
                   Qt::AlignHCenter, QString::number(e));
}

void ExpertLoad::mousePressEvent(QMouseEvent* event)
{
    if (!m_s || m_s->n_expert == 0)
        return;
    const QRectF area = plot();
    const double x = event->position().x() - area.left();
    if (x < 0 || x >= area.width())
        return;
    emit expertClicked(int(x / (area.width() / m_s->n_expert)));
}

} // namespace tokenscope::ui
