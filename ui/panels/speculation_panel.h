// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/speculation_types.h"

#include <QWidget>
#include <memory>

class QChartView;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;
class QTableWidget;
class QTextBrowser;
class QTimer;

namespace tokenscope::ui {

class EngineController;
class SpeculationLanes;

// Speculative decoding, token by token: a drafter (prompt lookup, the model's own first L layers, or
// a draft model) proposes up to k tokens, the model checks them in one pass. The text shows every
// drafted token accepted (green), rejected (struck out) and the token that replaced it; the table
// each drafted token's draft and target probabilities side by side with the draft–target KL and
// overlap (which predict acceptance); a chart the acceptance along the draft; lanes the draft and
// verify passes against the plain loop's on one clock, with the measured speedup (below 1 shown as
// such). Changing the source, L or k while it runs starts the comparison again.
class SpeculationPanel : public QWidget {
    Q_OBJECT
public:
    explicit SpeculationPanel(EngineController* engine, QWidget* parent = nullptr);

    SpeculationSettings settings() const;
    void setSettings(const SpeculationSettings& settings);
    void run();
    void runOnChat(); // the chat's last request and reply length
    void stop();
    // A saved run's comparison (File → Open run…): its settings, text, table, chart and lanes as they were.
    void showSaved(std::shared_ptr<const SpeculationSnapshot> snapshot);
    const std::shared_ptr<const SpeculationSnapshot>& result() const { return m_snapshot; }
    QString statusText() const;
    QTableWidget* table() const { return m_table; }
    SpeculationLanes* lanes() const { return m_lanes; }
    QTextBrowser* sequenceView() const { return m_text; }

signals:
    void progressed();
    void finished();
    void stepperPromptWanted(); // the main window answers with setPrompt()

public slots:
    void setPrompt(const QString& text, double temperature);

private:
    void buildUi();
    void onSnapshot(std::shared_ptr<const SpeculationSnapshot> s, bool final);
    void render();
    QString sequenceHtml() const;
    void fillTable();
    void fillChart();
    QString summary() const;
    void settingChanged();
    void updateSourceControls();

    EngineController* m_engine;
    std::shared_ptr<const SpeculationSnapshot> m_snapshot;
    quint64 m_request = 0;
    bool m_live = false; // a comparison was asked for: changed settings run it again
    bool m_chat = false; // …on the chat's last request
    QPlainTextEdit* m_prompt = nullptr;
    QComboBox* m_source = nullptr;
    QSpinBox* m_layers = nullptr;
    QLabel* m_layers_label = nullptr;
    QLineEdit* m_draft_path = nullptr;
    QPushButton* m_draft_pick = nullptr;
    QSpinBox* m_k = nullptr;
    QSpinBox* m_tokens = nullptr;
    QDoubleSpinBox* m_temperature = nullptr;
    QSpinBox* m_seed = nullptr;
    QPushButton* m_run = nullptr;
    QPushButton* m_run_chat = nullptr;
    QPushButton* m_stop = nullptr;
    QLabel* m_status = nullptr;
    QTextBrowser* m_text = nullptr;
    QTableWidget* m_table = nullptr;
    QChartView* m_chart = nullptr;
    SpeculationLanes* m_lanes = nullptr;
    QTimer* m_restart = nullptr;
};

} // namespace tokenscope::ui
