// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/attention_views.h"

#include "widgets/colormap.h"
#include "widgets/count_text.h"

#include <QLocale>
#include <QMouseEvent>
#include <QPainter>
#include <QTextDocument>
#include <algorithm>
#include <cmath>

namespace tokenscope::ui {

namespace {

bool is_masked(int row, int column, int window)
{
    return column > row || (window > 0 && row - column >= window);
}

} // namespace

QImage head_thumbnail(const AttentionHead& head, int window, int size, const QColor& masked)
{
    const int n = head.n;
    const int m = std::max(1, std::min(size, n));
    QImage image(m, m, QImage::Format_RGB32);
    for (int R = 0; R < m; ++R) {
        auto* line = reinterpret_cast<QRgb*>(image.scanLine(R));
        const int r0 = R * n / m, r1 = std::max(r0 + 1, (R + 1) * n / m);
        for (int C = 0; C < m; ++C) {
            const int c0 = C * n / m, c1 = std::max(c0 + 1, (C + 1) * n / m);
            float best = -1.0f;
            for (int r = r0; r < r1; ++r)
                for (int c = c0; c < c1; ++c)
                    if (!is_masked(r, c, window))
                        best = std::max(best, head.weights[std::size_t(r) * std::size_t(n) + std::size_t(c)]);
            line[C] =
                best < 0 ? masked.rgb() : sequential_colour(std::sqrt(best)); // sqrt: faint structure stays visible
        }
    }
    return image;
}

// ---- HeadGrid --------------------------------------------------------------------------------------

HeadGrid::HeadGrid(QWidget* parent) : QWidget(parent)
{
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

void HeadGrid::setThumbs(std::vector<Thumb> thumbs, int columns, const QString& caption)
{
    m_thumbs = std::move(thumbs);
    m_columns = std::max(1, columns);
    m_caption = caption;
    updateGeometry();
    update();
}

int HeadGrid::cellSize() const
{
    const int rows = std::max(1, (int(m_thumbs.size()) + m_columns - 1) / m_columns);
    const int label = fontMetrics().height() + 4;
    const int by_width = (width() - 8) / m_columns - 8;
    const int by_height = (height() - label - 8 - colour_scale_height(fontMetrics()) - 8) / rows - label - 8;
    // the largest cell that fits both ways, never under 32 px: the grid's minimum size (and the scroll
    // area around it) make room for that
    return std::clamp(std::min(by_width, by_height), 32, 260);
}

QRect HeadGrid::thumbRect(int index) const
{
    const int s = cellSize(), label = fontMetrics().height() + 4;
    const int col = index % m_columns, row = index / m_columns;
    return {8 + col * (s + 8), label + 8 + row * (s + label + 8) + label, s, s};
}

QRect HeadGrid::legendRect() const
{
    if (m_thumbs.empty())
        return {};
    const QRect last = thumbRect(int(m_thumbs.size()) - 1);
    return {8, last.bottom() + 10, std::max(80, width() - 16), colour_scale_height(fontMetrics())};
}

QSize HeadGrid::minimumSizeHint() const
{
    if (m_thumbs.empty())
        return {120, 80};
    const int label = fontMetrics().height() + 4, s = 32;
    const int rows = (int(m_thumbs.size()) + m_columns - 1) / m_columns;
    return {8 + m_columns * (s + 8), label + 8 + rows * (s + label + 8) + colour_scale_height(fontMetrics()) + 12};
}

QSize HeadGrid::sizeHint() const
{
    return {640, 520};
}

void HeadGrid::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    const QPalette& pal = palette();
    p.setPen(pal.color(QPalette::Text));
    p.drawText(QRect(8, 2, width() - 16, fontMetrics().height() + 4), Qt::AlignLeft | Qt::AlignVCenter, m_caption);
    if (m_thumbs.empty()) {
        p.setPen(pal.color(QPalette::PlaceholderText));
        p.drawText(rect(), Qt::AlignCenter, tr("Run a prompt to see every head of the layer."));
        return;
    }
    for (int i = 0; i < int(m_thumbs.size()); ++i) {
        const Thumb& t = m_thumbs[std::size_t(i)];
        const QRect r = thumbRect(i);
        p.drawImage(r, t.image);
        p.setPen(t.sink > 0.5f ? QColor(208, 69, 58) : pal.color(QPalette::Text));
        const QString label = m_columns <= 8 ? tr("L%1 H%2 · KV %3%4")
                                                   .arg(t.layer)
                                                   .arg(t.head)
                                                   .arg(t.kv_head)
                                                   .arg(t.window ? tr(" · local") : tr(" · global"))
                                             : QString("%1.%2").arg(t.layer).arg(t.head);
        p.drawText(QRect(r.x(), r.y() - fontMetrics().height() - 2, r.width() + 40, fontMetrics().height()),
                   Qt::AlignLeft, label);
        // Heads sharing a KV head are framed alike (GQA groups).
        p.setPen(QPen(QColor::fromHsv((t.kv_head * 67) % 360, 140, 200), 2));
        p.setBrush(Qt::NoBrush);
        p.drawRect(r.adjusted(-1, -1, 1, 1));
    }
    // thumbnails shade the square root of the weight (faint structure stays visible): mid-bar is 0.25
    const QRect legend = legendRect();
    draw_colour_scale(
        p, legend, std::min(220, legend.width() / 2), [](float t) { return sequential_colour(t); },
        {"0", QLocale().toString(0.25), "1"}, tr("attention weight (square-root shading; each pixel its largest)"),
        pal);
}

void HeadGrid::mousePressEvent(QMouseEvent* event)
{
    for (int i = 0; i < int(m_thumbs.size()); ++i)
        if (thumbRect(i).contains(event->position().toPoint())) {
            const Thumb& t = m_thumbs[std::size_t(i)];
            if (event->button() == Qt::RightButton)
                emit headAblationToggled(t.layer, t.head);
            else
                emit headClicked(t.layer, t.head);
            return;
        }
}

// ---- AttentionLines --------------------------------------------------------------------------------

AttentionLines::AttentionLines(QWidget* parent) : QWidget(parent)
{
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

QSize AttentionLines::sizeHint() const
{
    return {520, 640};
}

void AttentionLines::setHead(std::shared_ptr<const AttentionSnapshot> snapshot, const AttentionHead* head,
                             int selected_row)
{
    m_snapshot = std::move(snapshot);
    m_head = head;
    m_selected = selected_row;
    const int n = m_head ? m_head->n : 0;
    const int span = 40;
    const int centre = selected_row >= 0 ? selected_row : n - 1;
    m_last = std::min(n, std::max(centre + 1, span));
    m_first = std::max(0, m_last - span);
    update();
}

double AttentionLines::rowY(int i) const
{
    const int rows = std::max(1, m_last - m_first);
    return 10 + (height() - 20) * (i - m_first + 0.5) / rows;
}

void AttentionLines::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    const QPalette& pal = palette();
    if (!m_head) {
        p.setPen(pal.color(QPalette::PlaceholderText));
        p.drawText(rect(), Qt::AlignCenter, tr("Run a prompt: lines join each token to those it attends to."));
        return;
    }
    const int label_w = std::min(width() / 3, fontMetrics().horizontalAdvance(QString(12, 'M')));
    const double xl = label_w + 6, xr = width() - label_w - 6;
    const QColor accent = pal.color(QPalette::Highlight);
    for (int i = m_first; i < m_last; ++i)
        for (int j = m_first; j <= i; ++j) {
            const float w = m_head->weights[std::size_t(i) * std::size_t(m_head->n) + std::size_t(j)];
            if (w < 0.01f)
                continue;
            QColor c = accent;
            const bool focus = m_selected < 0 || i == m_selected;
            // The selected token's lines stand out; the rest stay as faint context.
            c.setAlphaF(focus ? std::clamp(0.2f + 1.6f * w, 0.0f, 1.0f) : std::clamp(0.25f * w, 0.0f, 1.0f));
            p.setPen(QPen(c, focus ? 1.0 + 8.0 * double(w) : 1.0));
            p.drawLine(QPointF(xl, rowY(i)), QPointF(xr, rowY(j)));
        }
    const double lh = fontMetrics().height();
    for (int i = m_first; i < m_last; ++i) {
        const QString t =
            std::size_t(i) < m_snapshot->tokens.size() ? m_snapshot->tokens[std::size_t(i)].text : QString();
        QFont f = font();
        f.setBold(i == m_selected);
        p.setFont(f);
        p.setPen(pal.color(QPalette::Text));
        p.drawText(QRectF(0, rowY(i) - lh / 2, label_w, lh), Qt::AlignRight | Qt::AlignVCenter,
                   fontMetrics().elidedText(t, Qt::ElideRight, label_w));
        p.drawText(QRectF(xr + 6, rowY(i) - lh / 2, label_w, lh), Qt::AlignLeft | Qt::AlignVCenter,
                   fontMetrics().elidedText(t, Qt::ElideRight, label_w));
    }
}

void AttentionLines::mousePressEvent(QMouseEvent* event)
{
    if (!m_head || m_last <= m_first)
        return;
    const double y = event->position().y();
    const int rows = m_last - m_first;
    const int i = m_first + int((y - 10) / std::max(1.0, double(height() - 20)) * rows);
    if (i >= m_first && i < m_last)
        emit rowClicked(i);
}

// ---- Q·K -------------------------------------------------------------------------------------------

QkBreakdown explain_cell(const AttentionHead& head, int window, int row, int column)
{
    QkBreakdown b;
    const int n = head.n, D = head.head_dim;
    b.masked = is_masked(row, column, window);
    const float* q = head.q.data() + std::size_t(row) * std::size_t(D);
    const auto score = [&](int j) {
        const float* k = head.k.data() + std::size_t(j) * std::size_t(D);
        double dot = 0.0;
        for (int d = 0; d < D; ++d)
            dot += double(q[d]) * double(k[d]);
        return dot;
    };
    // a soft-capped model (gemma2) bends q·k through c·tanh(q·k / c) before the scale
    const auto capped = [&](double dot) {
        return head.softcap != 0.0f ? double(head.softcap) * std::tanh(dot / double(head.softcap)) : dot;
    };
    b.dot = score(column);
    b.capped = capped(b.dot);
    b.scaled = b.capped * double(head.scale);
    b.row_max = -INFINITY;
    for (int j = 0; j < n; ++j)
        if (!is_masked(row, j, window))
            b.row_max = std::max(b.row_max, capped(score(j)) * double(head.scale));
    for (int j = 0; j < n; ++j)
        if (!is_masked(row, j, window))
            b.row_sum += std::exp(capped(score(j)) * double(head.scale) - b.row_max);
    b.weight = b.masked ? 0.0 : std::exp(b.scaled - b.row_max) / b.row_sum;
    const float* k = head.k.data() + std::size_t(column) * std::size_t(D);
    for (int d = 0; d < D; ++d)
        b.top_dims.emplace_back(d, double(q[d]) * double(k[d]));
    std::sort(b.top_dims.begin(), b.top_dims.end(),
              [](auto& a, auto& c) { return std::abs(a.second) > std::abs(c.second); });
    b.top_dims.resize(std::min<std::size_t>(5, b.top_dims.size()));
    for (int j = 0; j < n; ++j)
        if (!is_masked(row, j, window))
            b.top_values.emplace_back(j, double(head.weights[std::size_t(row) * std::size_t(n) + std::size_t(j)]));
    std::sort(b.top_values.begin(), b.top_values.end(), [](auto& a, auto& c) { return a.second > c.second; });
    b.top_values.resize(std::min<std::size_t>(5, b.top_values.size()));
    return b;
}

QkView::QkView(QWidget* parent) : QWidget(parent)
{
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
}

QSize QkView::sizeHint() const
{
    return {420, 360};
}

void QkView::setCell(std::shared_ptr<const AttentionSnapshot> snapshot, const AttentionHead* head, int window, int row,
                     int column)
{
    m_snapshot = std::move(snapshot);
    m_head = head;
    m_row = row;
    m_column = column;
    m_text.clear();
    if (m_head && row >= 0 && column >= 0 && row < m_head->n && column < m_head->n) {
        m_b = explain_cell(*m_head, window, row, column);
        const auto token = [&](int i) {
            return std::size_t(i) < m_snapshot->tokens.size() ? m_snapshot->tokens[std::size_t(i)].text.toHtmlEscaped()
                                                              : QString();
        };
        const double shown = double(m_head->weights[std::size_t(row) * std::size_t(m_head->n) + std::size_t(column)]);
        if (m_b.masked) {
            m_text = tr("<b>“%1” (%2) cannot attend to “%3” (%4)</b>: %5 — the mask sets its score to −∞, so its "
                        "weight is exactly 0.")
                         .arg(token(row))
                         .arg(row)
                         .arg(token(column))
                         .arg(column)
                         .arg(column > row ? tr("it comes later") : tr("it lies outside the sliding window"));
        } else {
            m_text = tr("<b>Query</b> of “%1” (%2): <i>what am I looking for?</i> · <b>Key</b> of “%3” (%4): <i>what "
                        "do I offer?</i><br>"
                        "q·k = %5%12 · × scale %6 = score <b>%7</b><br>"
                        "softmax over the row: exp(%7 − max %8) / Σ %9 = <b>%10</b> (shown: %11)<br>"
                        "<b>Values</b> — <i>what do I carry?</i> — the output of “%1” is Σ weight × value; the largest "
                        "weights: ")
                         .arg(token(row))
                         .arg(row)
                         .arg(token(column))
                         .arg(column)
                         .arg(decimalText(m_b.dot, 3))
                         .arg(double(m_head->scale), 0, 'g', 4)
                         .arg(decimalText(m_b.scaled, 4))
                         .arg(decimalText(m_b.row_max, 4))
                         .arg(decimalText(m_b.row_sum, 4))
                         .arg(decimalText(m_b.weight, 6))
                         .arg(decimalText(shown, 6))
                         .arg(m_head->softcap != 0.0f ? tr(" → soft-capped %1·tanh(q·k / %1) = %2")
                                                            .arg(double(m_head->softcap), 0, 'g', 4)
                                                            .arg(decimalText(m_b.capped, 4))
                                                      : QString());
            QStringList parts;
            for (const auto& [j, w] : m_b.top_values)
                parts << QString("“%1” %2").arg(token(j)).arg(decimalText(w, 3));
            m_text += parts.join(", ");
        }
    }
    update();
}

void QkView::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    const QPalette& pal = palette();
    if (!m_head || m_row < 0) {
        p.setPen(pal.color(QPalette::PlaceholderText));
        p.drawText(
            rect().adjusted(8, 8, -8, -8), Qt::AlignCenter | Qt::TextWordWrap,
            tr("Click a cell of the heatmap to see the query and key vectors behind it, their scaled dot product "
               "and the softmax that turns it into the weight."));
        return;
    }
    QTextDocument doc;
    doc.setDefaultFont(font());
    doc.setHtml(QString("<div style='color:%1'>%2</div>").arg(pal.color(QPalette::Text).name(), m_text));
    doc.setTextWidth(width() - 8);
    p.save();
    p.translate(4, 4);
    doc.drawContents(&p);
    p.restore();
    if (m_b.masked)
        return;
    // q, k and q⊙k as strips, one cell per dimension.
    const int D = m_head->head_dim;
    const float* q = m_head->q.data() + std::size_t(m_row) * std::size_t(D);
    const float* k = m_head->k.data() + std::size_t(m_column) * std::size_t(D);
    float qmax = 1e-6f, kmax = 1e-6f, pmax = 1e-6f;
    for (int d = 0; d < D; ++d) {
        qmax = std::max(qmax, std::abs(q[d]));
        kmax = std::max(kmax, std::abs(k[d]));
        pmax = std::max(pmax, std::abs(q[d] * k[d]));
    }
    double y = doc.size().height() + 10;
    const double x0 = 52, cell = std::max(1.0, double(width() - x0 - 8) / D), h = 14;
    const std::pair<QString, std::function<float(int)>> rows[] = {{"q", [&](int d) { return q[d] / qmax; }},
                                                                  {"k", [&](int d) { return k[d] / kmax; }},
                                                                  {"q⊙k", [&](int d) { return q[d] * k[d] / pmax; }}};
    for (const auto& [name, value] : rows) {
        p.setPen(pal.color(QPalette::Text));
        p.drawText(QRectF(0, y, x0 - 4, h), Qt::AlignRight | Qt::AlignVCenter, name);
        for (int d = 0; d < D; ++d)
            p.fillRect(QRectF(x0 + d * cell, y, std::ceil(cell), h), QColor(diverging_colour(value(d))));
        y += h + 4;
    }
    // The values the row mixes: the three keys it weighs most, each value vector scaled by its weight.
    float vmax = 1e-6f;
    for (const auto& [j, w] : m_b.top_values)
        for (int d = 0; d < D; ++d)
            vmax = std::max(vmax, std::abs(float(w) * m_head->v[std::size_t(j) * std::size_t(D) + std::size_t(d)]));
    for (std::size_t i = 0; i < m_b.top_values.size() && i < 3; ++i) {
        const auto [j, w] = m_b.top_values[i];
        p.setPen(pal.color(QPalette::Text));
        p.drawText(QRectF(0, y, x0 - 4, h), Qt::AlignRight | Qt::AlignVCenter,
                   QString("%1·v%2").arg(decimalText(w, 2)).arg(j));
        for (int d = 0; d < D; ++d)
            p.fillRect(QRectF(x0 + d * cell, y, std::ceil(cell), h),
                       QColor(diverging_colour(float(w) * m_head->v[std::size_t(j) * std::size_t(D) + std::size_t(d)] /
                                               vmax)));
        y += h + 4;
    }
    QStringList dims;
    for (const auto& [d, v] : m_b.top_dims)
        dims << QString("d%1: %2").arg(d).arg(decimalText(v, 3));
    p.setPen(pal.color(QPalette::Text));
    // wrapped between terms rather than cut at the edge
    p.drawText(QRectF(x0, y, std::max(1.0, width() - x0 - 4), std::max(h + 4, height() - y)),
               Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap, tr("largest terms of q·k: %1").arg(dims.join(", ")));
}

} // namespace tokenscope::ui
