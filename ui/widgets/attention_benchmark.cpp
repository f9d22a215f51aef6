// SPDX-License-Identifier: GPL-3.0-or-later
#include "widgets/attention_benchmark.h"

#include "widgets/attention_heatmap.h"

#include <QElapsedTimer>
#include <QImage>
#include <QPainter>
#include <cmath>
#include <cstdio>
#include <random>

namespace tokenscope::ui {

int run_attention_view_benchmark(int n, int frames)
{
    // A causal matrix shaped like real attention: a sink on the first token, a local diagonal band.
    auto values = std::make_shared<std::vector<float>>(std::size_t(n) * std::size_t(n), 0.0f);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> noise(0.0f, 1.0f);
    for (int r = 0; r < n; ++r) {
        float* row = values->data() + std::size_t(r) * std::size_t(n);
        double sum = 0;
        for (int c = 0; c <= r; ++c) {
            row[c] = (c == 0 ? 20.0f : 0.0f) + std::exp(-float(r - c) / 8.0f) * 4.0f + noise(rng);
            sum += row[c];
        }
        for (int c = 0; c <= r; ++c)
            row[c] = float(row[c] / sum);
    }
    QStringList labels;
    for (int i = 0; i < n; ++i)
        labels << QString("t%1").arg(i);
    AttentionHeatmap view;
    view.resize(900, 900);
    QElapsedTimer build;
    build.start();
    view.setMatrix({n, values, values->data(), labels, 512});
    const double build_ms = double(build.nsecsElapsed()) / 1e6;
    QImage target(view.size(), QImage::Format_ARGB32_Premultiplied);
    const auto measure = [&](const char* what) {
        QElapsedTimer t;
        t.start();
        for (int i = 0; i < frames; ++i) {
            QPainter p(&target);
            view.render(&p);
        }
        const double ms = double(t.nsecsElapsed()) / 1e6 / frames;
        std::printf("%-34s %6.2f ms per frame (%d frames)\n", what, ms, frames);
    };
    std::printf("attention head view %d x %d, widget 900 x 900\n", n, n);
    std::printf("%-34s %6.2f ms (once per matrix)\n", "build images (full + max-pooled)", build_ms);
    measure("redraw, fitted (pooled image)");
    view.zoomAt(QPointF(450, 450), 8.0);
    measure("redraw, zoomed 8x");
    view.zoomAt(QPointF(450, 450), 4.0);
    measure("redraw, zoomed 32x (labels drawn)");
    return 0;
}

} // namespace tokenscope::ui
