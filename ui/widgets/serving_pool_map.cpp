// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/serving_pool_map.h"

#include "widgets/count_text.h"
#include "widgets/serving_lanes.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>

namespace tokenscope::ui {

namespace {
constexpr int kMinCell = 14, kMaxCell = 56;
constexpr int kGap = 2;
constexpr int kLegend = 22;
} // namespace

ServingPoolMap::ServingPoolMap(QWidget* parent) : QWidget(parent)
{
    setObjectName("servingPoolMap");
    setMouseTracking(true);
    QSizePolicy policy(QSizePolicy::Expanding, QSizePolicy::Preferred);
    policy.setHeightForWidth(true);
    setSizePolicy(policy);
}

void ServingPoolMap::setPool(engine::PoolSnapshot pool)
{
    const bool resized = pool.blocks.size() != m_pool.blocks.size();
    m_pool = std::move(pool);
    if (resized)
        updateGeometry();
    update();
}

int ServingPoolMap::cellSize(int width, int height) const
{
    // the largest squares (up to kMaxCell) with which every block fits the space the map is given: a
    // small pool reads at a glance, a large one still fits
    const int n = std::max<int>(1, int(m_pool.blocks.size()));
    for (int size = kMaxCell; size > kMinCell; --size) {
        const int cols = std::max(1, (width - 8) / (size + kGap));
        const int rows = (n + cols - 1) / cols;
        if (8 + rows * (size + kGap) + kLegend <= height)
            return size;
    }
    return kMinCell;
}

int ServingPoolMap::columns(int width) const
{
    return std::max(1, (width - 8) / (cellSize(width, height()) + kGap));
}

QRect ServingPoolMap::cell(int index, int cols) const
{
    const int size = cellSize(width(), height());
    return {4 + (index % cols) * (size + kGap), 4 + (index / cols) * (size + kGap), size, size};
}

int ServingPoolMap::heightForWidth(int width) const
{
    const int n = std::max<int>(1, int(m_pool.blocks.size()));
    const int cols = std::max(1, (width - 8) / (kMinCell + kGap));
    const int rows = (n + cols - 1) / cols;
    return 8 + rows * (kMinCell + kGap) + kLegend;
}

QSize ServingPoolMap::sizeHint() const
{
    return {640, heightForWidth(640)};
}

QSize ServingPoolMap::minimumSizeHint() const
{
    return {200, std::min(heightForWidth(std::max(width(), 200)), 400)};
}

void ServingPoolMap::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    const QPalette& pal = palette();
    p.fillRect(rect(), pal.color(QPalette::Base));
    if (m_pool.blocks.empty()) {
        p.setPen(pal.color(QPalette::PlaceholderText));
        p.drawText(rect(), Qt::AlignCenter, tr("The KV block pool appears here during a run."));
        return;
    }
    const int cols = columns(width());
    const int size = cellSize(width(), height());
    const QColor free_border = pal.color(QPalette::Mid);
    QFont small = font();
    small.setPixelSize(std::max(8, size / 3));
    p.setFont(small);
    for (int i = 0; i < int(m_pool.blocks.size()); ++i) {
        const auto& b = m_pool.blocks[std::size_t(i)];
        const QRect r = cell(i, cols);
        if (b.refs > 0) {
            p.fillRect(r, request_colour(b.owner));
            if (b.refs > 1) { // shared: a prefix or a fork's prompt held by several sequences
                p.setRenderHint(QPainter::Antialiasing, true);
                p.setPen(Qt::NoPen);
                p.setBrush(Qt::white);
                const double inset = size >= 24 ? size * 0.32 : 4;
                p.drawEllipse(QRectF(r).adjusted(inset, inset, -inset, -inset));
                p.setRenderHint(QPainter::Antialiasing, false);
            } else if (size >= 24) { // room for the owner's number
                p.setPen(Qt::black);
                p.drawText(r, Qt::AlignCenter, QString::number(b.owner));
            }
        } else if (b.cached) {
            p.fillRect(r, QBrush(request_colour(b.owner).lighter(130), Qt::BDiagPattern));
            p.setPen(free_border);
            p.setBrush(Qt::NoBrush);
            p.drawRect(r.adjusted(0, 0, -1, -1));
        } else {
            p.setPen(free_border);
            p.setBrush(Qt::NoBrush);
            p.drawRect(r.adjusted(0, 0, -1, -1));
        }
    }
    // legend
    const int rows = (int(m_pool.blocks.size()) + cols - 1) / cols;
    const int y = 8 + rows * (size + kGap);
    int x = 4;
    p.setFont(font());
    const QFontMetrics fm(font());
    const auto entry = [&](const QString& text, const std::function<void(const QRect&)>& draw) {
        const QRect r(x, y + 4, 12, 12);
        draw(r);
        p.setPen(pal.color(QPalette::Text));
        p.drawText(QPoint(x + 16, y + 15), text);
        x += 16 + fm.horizontalAdvance(text) + 14;
    };
    entry(tr("held (colour: its request)"), [&](const QRect& r) { p.fillRect(r, request_colour(0)); });
    entry(tr("shared"), [&](const QRect& r) {
        p.fillRect(r, request_colour(1));
        p.setPen(Qt::NoPen);
        p.setBrush(Qt::white);
        p.drawEllipse(QRectF(r).adjusted(3, 3, -3, -3));
    });
    entry(tr("cached prefix, held by none"),
          [&](const QRect& r) { p.fillRect(r, QBrush(request_colour(2).lighter(130), Qt::BDiagPattern)); });
    entry(tr("free"), [&](const QRect& r) {
        p.setPen(free_border);
        p.setBrush(Qt::NoBrush);
        p.drawRect(r.adjusted(0, 0, -1, -1));
    });
}

bool ServingPoolMap::event(QEvent* e)
{
    if (e->type() != QEvent::ToolTip)
        return QWidget::event(e);
    const auto* help = static_cast<QHelpEvent*>(e);
    const int cols = columns(width());
    for (int i = 0; i < int(m_pool.blocks.size()); ++i)
        if (cell(i, cols).contains(help->pos())) {
            const auto& b = m_pool.blocks[std::size_t(i)];
            QString text;
            if (b.refs > 0)
                text = tr("Block %1: computed by request #%2, held by %3")
                           .arg(numberText(i))
                           .arg(b.owner)
                           .arg(countText(b.refs, tr("sequence"), tr("sequences")));
            else if (b.cached)
                text = tr("Block %1: a prefix computed by request #%2, kept for a later prompt that begins the same "
                          "way (given up when room is needed)")
                           .arg(numberText(i))
                           .arg(b.owner);
            else
                text = tr("Block %1: free").arg(numberText(i));
            QToolTip::showText(help->globalPos(), text, this);
            return true;
        }
    QToolTip::hideText();
    return true;
}

} // namespace tokenscope::ui
