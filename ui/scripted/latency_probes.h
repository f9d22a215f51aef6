// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// The UI thread must never wait on the engine: these benchmarks run a 5 ms timer and print how late
// the event loop served it while the app works (bench/ui_latency.sh runs them).
class QApplication;
class QString;

namespace tokenscope::ui {

class EngineController;
class MainWindow;

// `tokenscope --latency-paste N`: N characters pasted into the tokenizer panel once the model is
// loaded; the worst delay until the paste is drawn.
void probe_paste_latency(QApplication& app, EngineController& engine, MainWindow& window, int characters);
// `tokenscope --latency-probe`: a 128-token chat reply; the worst delay while it streams.
void probe_reply_latency(QApplication& app, EngineController& engine, MainWindow& window);

} // namespace tokenscope::ui
