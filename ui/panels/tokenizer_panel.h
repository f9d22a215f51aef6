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

// Text becomes tokens, live as you type: each token a coloured span (whitespace and byte-fallback
// tokens made visible, control tokens marked), ids in place of text on request, the details of the
// token under the pointer, and the counts. Tokenization runs on the engine thread.
class TokenizerPanel : public QWidget {
    Q_OBJECT
public:
    explicit TokenizerPanel(EngineController* engine, QWidget* parent = nullptr);

    void setText(const QString& text);
    const std::shared_ptr<const Tokenization>& current() const { return m_current; }
    QString countsText() const;
    QString detailText() const;
    void showDetails(int token_index);

signals:
    void updated();

private:
    void request();
    void render();

    EngineController* m_engine;
    std::shared_ptr<const Tokenization> m_current;
    quint64 m_request = 0;
    QPlainTextEdit* m_input = nullptr;
    QTextBrowser* m_view = nullptr;
    QLabel* m_counts = nullptr;
    QLabel* m_detail = nullptr;
    QCheckBox* m_show_ids = nullptr;
    QTimer* m_debounce = nullptr;
};

} // namespace tokenscope::ui
