// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/kv_layer_view.h"
#include "widgets/count_text.h"

#include <QHelpEvent>
#include <QLocale>
#include <QPainter>
#include <QToolTip>

namespace tokenscope::ui {

namespace {

QString kib(quint64 bytes)
{
    return QLocale().toString(double(bytes) / 1024.0, 'f', 1) + " KiB";
}

} // namespace

KvLayerView::KvLayerView(QWidget* parent) : QWidget(parent)
{
    setMouseTracking(true);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
}

void KvLayerView::setSnapshot(std::shared_ptr<const KvSnapshot> snapshot)
{
    m_snapshot = std::move(snapshot);
    updateGeometry();
    update();
}

int KvLayerView::rowHeight() const
{
    return fontMetrics().height() + 6;
}
int KvLayerView::labelWidth() const
{
    return fontMetrics().horizontalAdvance("L00 global ·");
}

QSize KvLayerView::sizeHint() const
{
    const int rows = m_snapshot ? int(m_snapshot->layers.size()) : 8;
    return {700, (rows + 1) * rowHeight() + 8};
}

// Every layer's row: the scroll area around the view scrolls to the last layer rather than squeezing
// the view to its height (the rows past it were drawn outside, out of reach: layers 24–29 of 30).
QSize KvLayerView::minimumSizeHint() const
{
    return {360, sizeHint().height()};
}

QRect KvLayerView::barRect(int layer) const
{
    const int x = labelWidth() + 6;
    const int w = std::max(60, (width() - x) / 2 - 12);
    return {x, rowHeight() + layer * rowHeight() + 3, w, rowHeight() - 6};
}

QRect KvLayerView::mapRect(int layer) const
{
    const QRect bar = barRect(layer);
    const int x = bar.right() + 18;
    return {x, bar.y(), width() - x - 4, bar.height()};
}

KvLayerView::BlockState KvLayerView::blockState(int layer, int block) const
{
    if (!m_snapshot || layer < 0 || layer >= int(m_snapshot->layers.size()))
        return BlockState::Free;
    const KvLayerState& l = m_snapshot->layers[std::size_t(layer)];
    const int bt = std::max(1, m_snapshot->block_tokens);
    const int n = m_snapshot->tokens_cached;
    if (n == 0 || l.blocks == 0)
        return BlockState::Free;
    const int first_block = l.first_stored / bt, last_block = (n - 1) / bt;
    if (block < first_block || block > last_block)
        return BlockState::Free;
    const int window_start = l.window > 0 ? std::max(0, n - l.window) : 0;
    return (block + 1) * bt <= window_start ? BlockState::Reserve : BlockState::InWindow;
}

void KvLayerView::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    const QPalette& pal = palette();
    if (!m_snapshot || m_snapshot->layers.empty()) {
        p.setPen(pal.color(QPalette::PlaceholderText));
        p.drawText(rect(), Qt::AlignCenter | Qt::TextWordWrap,
                   tr("Load a model: its KV cache is drawn here, layer by layer."));
        return;
    }
    const KvSnapshot& s = *m_snapshot;
    const QColor accent = pal.color(QPalette::Highlight);
    QColor reserve = accent;
    reserve.setAlpha(90);
    QColor empty = pal.color(QPalette::Text);
    empty.setAlpha(30);
    const QColor muted = pal.color(QPalette::PlaceholderText);

    // The bar scale: what is cached, at least the widest window, so a capped layer shows its cap.
    int scale = std::max(64, s.tokens_cached);
    for (const auto& l : s.layers)
        scale = std::max(scale, l.window > 0 ? std::min(l.window + l.window / 8, s.n_ctx) : 0);
    scale = std::min(std::max(scale, s.tokens_cached), std::max(1, s.n_ctx));

    p.setPen(muted);
    const QRect head_bar = barRect(0).translated(0, -rowHeight());
    p.drawText(head_bar, Qt::AlignLeft | Qt::AlignVCenter,
               tr("positions attention can see (scale 0 – %1)").arg(numberText(scale)));
    const QRect head_map = mapRect(0).translated(0, -rowHeight());
    p.drawText(head_map, Qt::AlignLeft | Qt::AlignVCenter,
               tr("blocks of %1 positions: ■ in use  ▨ step-back reserve  □ free").arg(s.block_tokens));

    for (int l = 0; l < int(s.layers.size()); ++l) {
        const KvLayerState& L = s.layers[std::size_t(l)];
        const QRect bar = barRect(l);
        p.setPen(pal.color(QPalette::Text));
        p.drawText(QRect(0, bar.y() - 3, labelWidth(), rowHeight()), Qt::AlignRight | Qt::AlignVCenter,
                   L.window > 0 ? tr("L%1 local").arg(l) : tr("L%1 global").arg(l));
        p.fillRect(bar, empty);
        const int used = int(double(bar.width()) * std::min(1.0, double(L.tokens_in_use) / scale));
        p.fillRect(QRect(bar.x(), bar.y(), used, bar.height()), L.window > 0 ? reserve.darker(110) : accent);
        if (L.window > 0 && L.window < scale) {
            const int x = bar.x() + int(double(bar.width()) * L.window / scale);
            p.setPen(QPen(pal.color(QPalette::Text), 1, Qt::DashLine));
            p.drawLine(x, bar.y() - 2, x, bar.bottom() + 2);
        }
        // Blocks
        const QRect map = mapRect(l);
        const int n_blocks = std::max(1, s.blocks_per_layer);
        const double bw = double(map.width()) / n_blocks;
        for (int b = 0; b < n_blocks; ++b) {
            const QRectF cell(map.x() + b * bw, map.y(), std::max(1.0, bw - (bw > 4 ? 1 : 0)), map.height());
            switch (blockState(l, b)) {
            case BlockState::InWindow:
                p.fillRect(cell, accent);
                break;
            case BlockState::Reserve:
                p.fillRect(cell, QBrush(accent, Qt::BDiagPattern));
                break;
            case BlockState::Free:
                p.fillRect(cell, empty);
                break;
            }
        }
    }
}

bool KvLayerView::event(QEvent* event)
{
    if (event->type() != QEvent::ToolTip || !m_snapshot)
        return QWidget::event(event);
    auto* help = static_cast<QHelpEvent*>(event);
    const KvSnapshot& s = *m_snapshot;
    for (int l = 0; l < int(s.layers.size()); ++l) {
        const KvLayerState& L = s.layers[std::size_t(l)];
        if (barRect(l).adjusted(-barRect(l).x(), -3, 0, 3).contains(help->pos())) {
            QToolTip::showText(
                help->globalPos(),
                tr("Layer %1 (%2): attention sees %3 of %4 cached positions; %5 in use, %6 allocated in %7")
                    .arg(l)
                    .arg(L.window > 0 ? tr("sliding window of %1").arg(numberText(L.window)) : tr("global"))
                    .arg(numberText(L.tokens_in_use), numberText(qint64(s.tokens_cached)), kib(L.bytes_in_use),
                         kib(L.bytes_allocated), countText(L.blocks, tr("block"), tr("blocks"))),
                this);
            return true;
        }
        const QRect map = mapRect(l);
        if (map.adjusted(0, -3, 0, 3).contains(help->pos())) {
            const int b = int(double(help->pos().x() - map.x()) / map.width() * std::max(1, s.blocks_per_layer));
            const BlockState st = blockState(l, b);
            QToolTip::showText(help->globalPos(),
                               tr("Layer %1, block %2: positions %3–%4 · %5")
                                   .arg(l)
                                   .arg(b)
                                   .arg(b * s.block_tokens)
                                   .arg((b + 1) * s.block_tokens - 1)
                                   .arg(st == BlockState::InWindow ? tr("in use")
                                        : st == BlockState::Reserve
                                            ? tr("held behind the window, so Back needs no recompute")
                                            : tr("free")),
                               this);
            return true;
        }
    }
    QToolTip::hideText();
    return true;
}

} // namespace tokenscope::ui
