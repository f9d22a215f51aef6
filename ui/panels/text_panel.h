// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/analysis_types.h"

#include <QWidget>
#include <memory>
#include <vector>

class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QTextBrowser;

namespace tokenscope::ui {

class DistributionOverlay;
class EngineController;

// Any text through the model: paste or open a text, one pass with every position's logits (progress,
// Stop), each token coloured by its surprisal, its rank bucket (top 1 / 10 / 100 / 1000) or the
// entropy it was drawn from — or, against a second model or quantization of the same vocabulary,
// by the KL between the two; hover shows the candidates and where the real token ranked; the
// text's perplexity and that of a selection.
class TextPanel : public QWidget {
    Q_OBJECT
public:
    explicit TextPanel(EngineController* engine, QWidget* parent = nullptr);

    void analyze(const QString& text, const QString& compare_with = {});
    void setColouring(int mode); // 0 surprisal, 1 rank, 2 entropy, 3 KL
    const std::shared_ptr<const TextAnalysisSnapshot>& result() const { return m_result; }
    void showSaved(std::shared_ptr<const TextAnalysisSnapshot> result); // a saved run's analysis
    QString status() const;
    // Perplexity of the tokens [first, last) of the result (a selection).
    double selectionPerplexity(int first, int last) const;
    QString tokenTip(int index) const;
    // A click on token `index`: both models' distributions for it (when compared), and the stepper
    // asked to open at that position (its window's tokens before it).
    void selectToken(int index);
    int selectedToken() const { return m_selected; }
    DistributionOverlay* overlay() const { return m_overlay; }

signals:
    void analyzed();
    void stepperRequested(const std::vector<int32_t>& ids, const QString& text);

private:
    void onResult(std::shared_ptr<const TextAnalysisSnapshot> s);
    void render();

    EngineController* m_engine;
    QPlainTextEdit* m_input = nullptr;
    QLineEdit* m_compare = nullptr;
    QComboBox* m_colour = nullptr;
    QPushButton *m_run = nullptr, *m_stop = nullptr;
    QProgressBar* m_progress = nullptr;
    QLabel* m_status = nullptr;
    QLabel* m_legend = nullptr;
    QTextBrowser* m_view = nullptr;
    DistributionOverlay* m_overlay = nullptr;
    int m_selected = -1;
    quint64 m_request = 0;
    QString m_error; // of the last request, when it failed
    std::shared_ptr<const TextAnalysisSnapshot> m_result;
};

} // namespace tokenscope::ui
