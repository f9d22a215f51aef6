// SPDX-License-Identifier: GPL-3.0-or-later
#include "scripted/latency_probes.h"

#include "bridge/engine_controller.h"
#include "main_window.h"
#include "panels/chat_panel.h"
#include "panels/tokenizer_panel.h"

#include <QApplication>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QTimer>
#include <algorithm>
#include <cstdio>
#include <memory>

namespace tokenscope::ui {

namespace {

// A 5 ms timer that records the worst lateness of the event loop while it runs.
struct LatencyProbe {
    QElapsedTimer clock;
    QTimer timer;
    qint64 last_tick = 0, worst_ms = 0, ticks = 0;

    explicit LatencyProbe(QObject* owner)
    {
        timer.setInterval(5);
        timer.setTimerType(Qt::PreciseTimer);
        QObject::connect(&timer, &QTimer::timeout, owner, [this] {
            const qint64 now = clock.elapsed();
            if (last_tick)
                worst_ms = std::max(worst_ms, now - last_tick - 5);
            last_tick = now;
            ++ticks;
        });
    }
    void start()
    {
        clock.start();
        timer.start();
    }
};

} // namespace

void probe_paste_latency(QApplication& app, EngineController& engine, MainWindow& window, int characters)
{
    auto probe = std::make_shared<LatencyProbe>(&app);
    // A long paste: prose, code and other scripts repeated to the length asked for.
    const QString unit = QStringLiteral("The lighthouse keeper climbed the stairs. def f(x): return x * 2  # Код 数字 "
                                        "émojis 🙂 and numbers 12345.\n");
    QString text;
    while (text.size() < characters)
        text += unit;
    text.truncate(characters);
    QObject::connect(&engine, &EngineController::modelLoaded, &window, [&window, probe, text] {
        window.findChild<QDockWidget*>("dock-tokenizer")->raise();
        probe->start();
        window.tokenizerPanel()->setText(text);
    });
    QObject::connect(window.tokenizerPanel(), &TokenizerPanel::rendered, &app, [&app, &window, probe, characters] {
        const auto current = window.tokenizerPanel()->current();
        if (!current || current->text.size() != characters)
            return; // an earlier text's drawing, not the paste's
        probe->timer.stop();
        std::printf("ui latency probe (paste): worst event-loop delay %lld ms while %d characters were tokenized and "
                    "drawn (%lld ms, %d tokens drawn)\n",
                    static_cast<long long>(probe->worst_ms), characters, static_cast<long long>(probe->clock.elapsed()),
                    window.tokenizerPanel()->drawnTokens());
        app.quit();
    });
}

void probe_reply_latency(QApplication& app, EngineController& engine, MainWindow& window)
{
    auto probe = std::make_shared<LatencyProbe>(&app);
    auto sampling = window.chatPanel()->sampling();
    sampling.temperature = 0.0f;
    sampling.max_tokens = 128;
    window.chatPanel()->setSampling(sampling);
    QObject::connect(&engine, &EngineController::modelLoaded, &window, [&window, probe] {
        window.chatPanel()->send("Write a long story about a lighthouse keeper and the sea.");
        probe->start();
    });
    QObject::connect(window.chatPanel(), &ChatPanel::replyFinished, &app,
                     [&app, probe](std::shared_ptr<const ReplyStats> s) {
                         probe->timer.stop();
                         std::printf("ui latency probe: worst event-loop delay %lld ms over %d generated tokens (%lld "
                                     "timer ticks, %.1f tokens/s)\n",
                                     static_cast<long long>(probe->worst_ms), s->generated_tokens,
                                     static_cast<long long>(probe->ticks), s->tokens_per_second);
                         app.quit();
                     });
}

} // namespace tokenscope::ui
