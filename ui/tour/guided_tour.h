// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// Help → Tour: the pipeline the way the explainers tell it, on the loaded model — text becomes tokens,
// the prompt is prefilled in parallel, each step predicts a distribution, sampling picks a token, it
// is appended and the model predicts again, the KV cache grows and is reused, the context window
// fills. Each step drives the real panel (raises and outlines it, fills its input, presses its button)
// with a few sentences beside it; Back and Next; the panels are left as the tour made them, to keep
// playing with. A small non-modal window: the app stays usable around it.

#include <QFrame>
#include <QPointer>
#include <functional>
#include <vector>

class QLabel;
class QPushButton;

namespace tokenscope::ui {

class EngineController;
class MainWindow;

class GuidedTour : public QFrame {
    Q_OBJECT
public:
    GuidedTour(MainWindow* window, EngineController* engine);

    int step() const { return m_step; }
    int stepCount() const { return int(m_steps.size()); }
    QString stepTitle() const;
    QString stepText() const;
    // True while the step's panel is still working (Next waits for it).
    bool waiting() const { return m_waiting; }

    void showStep(int index);

signals:
    void stepShown(int index);
    void ready(); // the step's panel finished what the step asked of it

private:
    struct Step {
        QString dock; // the panel it shows ("" for the first and last page)
        QString title, text;
        std::function<void()> act; // fills the panel's input, presses its button (waiting() until it is done)
    };
    void buildSteps();
    void outline(const QString& dock);
    void updateButtons();
    QPushButton* stepperButton(const QString& text) const;

    MainWindow* m_window;
    EngineController* m_engine;
    std::vector<Step> m_steps;
    int m_step = 0;
    bool m_waiting = false;
    std::function<bool()> m_done_when; // what ends the wait (the panel's own state says so)
    QLabel* m_title = nullptr;
    QLabel* m_text = nullptr;
    QPushButton* m_back = nullptr;
    QPushButton* m_next = nullptr;
    QPushButton* m_open_model = nullptr;
    QPointer<QFrame> m_outline;
};

} // namespace tokenscope::ui
