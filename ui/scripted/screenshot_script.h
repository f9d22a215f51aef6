// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// `tokenscope --screenshot FILE --panel NAME`: a real run scripted on the window (a chat reply, a
// stepper session, an attention capture…), then the panel saved as a PNG and the app's exit code
// set. One function per panel (screenshot_script.cpp).
#include <QSize>
#include <QString>
#include <QStringList>

class QApplication;

namespace tokenscope::ui {

class EngineController;
class MainWindow;

struct ScreenshotOptions {
    QString file;           // the PNG to write
    QString panel;          // one of screenshot_panels()
    QString prompt;         // the message or prompt of the run
    QString tab;            // kv: live, contents, calculator; attention: head, grid, overview, lines, compare
    QString edit;           // tokenizer: the prompt after an edit (empty: none)
    QStringList compare;    // tokenizer: files to compare with
    QStringList follow_ups; // chat, main: messages after the first reply
    int steps = 6;          // stepper: steps after Prefill
    QSize size;             // the window's (main) or the panel's size; invalid: each panel's own
    QString model_path;     // the model the window opens (the memory planner reads it)
    QString run_path;       // a saved run shown instead of a live run (no model is loaded)
};

// The panels a screenshot can show.
const QStringList& screenshot_panels();

// Connects the script to the window's signals; the picture is taken and the app told to exit once
// the run is done. The window must not have started loading the model yet.
void script_screenshot(QApplication& app, EngineController& engine, MainWindow& window,
                       const ScreenshotOptions& options);

} // namespace tokenscope::ui
