// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/engine_types.h"

#include <QWidget>
#include <memory>

class QCheckBox;
class QLabel;
class QPlainTextEdit;
class QTextBrowser;
class QTimer;

namespace tokenscope::ui {

class EngineController;
class TokenSelection;
class TokenizerComparison;

// Text becomes tokens, live as you type: each token a coloured span (whitespace and byte-fallback
// tokens made visible, control tokens marked), ids in place of text on request, the details of the
// token under the pointer, and the counts. Tokenization runs on the engine thread.
class TokenizerPanel : public QWidget {
    Q_OBJECT
public:
    TokenizerPanel(EngineController* engine, TokenSelection* selection, QWidget* parent = nullptr);

    void setText(const QString& text);
    const std::shared_ptr<const Tokenization>& current() const { return m_current; }
    QString countsText() const;
    QString detailText() const;
    void showDetails(int token_index);
    // Selects a token (as a click on its span does) in every linked panel.
    void selectToken(int token_index);
    QString viewHtml() const;
    TokenizerComparison* comparison() const { return m_comparison; }
    // The last edit's effect on the tokens ("what changed"): which tokens split, merged or changed.
    QString changesText() const;
    const std::vector<std::pair<int, int>>& changedRanges() const
    {
        return m_changed;
    }                                                   // [first, first + count) in the current tokens
    double lastRenderMs() const { return m_render_ms; } // for the benchmark, not asserted
    // The current tokens as data: index, id, piece, type, byte offsets, bytes (hex) and text.
    QString tokensJson() const;
    QString tokensCsv() const;
    // Writes JSON or CSV by the file's extension; false (and a message) when it cannot.
    bool exportTo(const QString& path, QString* error = nullptr) const;

    int drawnTokens() const { return m_drawn; }

signals:
    void updated();
    // Every span that will be drawn for the current tokens is drawn (they arrive in chunks).
    void rendered();

private:
    void request();
    void render();
    void renderMore(quint64 generation);
    QString spansHtml(int begin, int end) const;
    void clearChanges();
    void describeChanges(const Tokenization& before, const Tokenization& after);

    EngineController* m_engine;
    TokenSelection* m_selection;
    std::shared_ptr<const Tokenization> m_current;
    std::vector<std::pair<int, int>> m_changed;
    quint64 m_request = 0;
    QPlainTextEdit* m_input = nullptr;
    QTextBrowser* m_view = nullptr;
    QLabel* m_counts = nullptr;
    QLabel* m_detail = nullptr;
    QLabel* m_changes = nullptr;
    TokenizerComparison* m_comparison = nullptr;
    QCheckBox* m_show_ids = nullptr;
    QTimer* m_debounce = nullptr;
    double m_render_ms = 0.0;
    quint64 m_render_generation = 0; // a render abandons the chunks of the one before
    int m_drawn = 0;                 // tokens drawn so far
    static constexpr int kChunkTokens = 250;
    static constexpr int kMaxDrawnTokens = 2000;
};

} // namespace tokenscope::ui
