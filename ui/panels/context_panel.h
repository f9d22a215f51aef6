// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "chat/context_simulator.h"

#include <QWidget>
#include <vector>

class QChartView;
class QComboBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QPlainTextEdit;
class QProgressBar;
class QSpinBox;

namespace tokenscope::ui {

class EngineController;

// The context-window fill simulator: every chat request re-sends the whole history, so the input
// grows turn by turn until the window overflows and a policy leaves something out. Typed turns are
// counted by the loaded model's tokenizer (chat template included); synthetic turns by their length.
class ContextPanel : public QWidget {
    Q_OBJECT
public:
    struct Turn {
        QString role;
        QString text;    // empty for a synthetic turn
        int tokens = -1; // -1 while the tokenizer counts it
    };

    explicit ContextPanel(EngineController* engine, QWidget* parent = nullptr);

    void setWindow(int tokens);
    void setPolicy(engine::OverflowPolicy policy);
    void setSystemPrompt(const QString& text);
    void addTypedTurn(const QString& user, const QString& reply);
    void addSyntheticTurn(int user_tokens, int reply_tokens);
    void clearTurns();
    const std::vector<Turn>& turns() const { return m_turns; }
    const std::vector<engine::SimRequest>& requests() const { return m_requests; }
    bool counted() const; // every typed turn has its count
    int window() const;
    QString gaugeText() const;

signals:
    void simulated();

private:
    void requestCounts();
    void simulate();
    void drawCharts();

    EngineController* m_engine;
    std::vector<Turn> m_turns; // the system prompt first when there is one
    std::vector<engine::SimRequest> m_requests;
    quint64 m_count_request = 0;
    int m_model_window = 0;

    QComboBox* m_window = nullptr;
    QComboBox* m_policy = nullptr;
    QLineEdit* m_system = nullptr;
    QPlainTextEdit* m_user = nullptr;
    QPlainTextEdit* m_reply = nullptr;
    QSpinBox* m_synthetic_user = nullptr;
    QSpinBox* m_synthetic_reply = nullptr;
    QListWidget* m_list = nullptr;
    QProgressBar* m_gauge = nullptr;
    QLabel* m_note = nullptr;
    QChartView* m_bars = nullptr;
    QChartView* m_cumulative = nullptr;
};

} // namespace tokenscope::ui
