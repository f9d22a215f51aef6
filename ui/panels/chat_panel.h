// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "bridge/engine_types.h"

#include <QWidget>
#include <memory>

class QCheckBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;
class QTextBrowser;
class QTextDocument;
class QTimer;

namespace tokenscope::ui {

class BoundedCountBox;

class ConversationStore;
class EngineController;

// The local chat window: a transcript streamed token by token, Send / Stop / Regenerate / New chat,
// edit-and-resend of the last message, a system prompt, sampling settings, per-reply statistics
// (tokens, TTFT, tokens/s and how much of the re-sent history the KV cache reused), and a view of the
// exact text and tokens the model received. Every completed message is written to the store.
class ChatPanel : public QWidget {
    Q_OBJECT
public:
    ChatPanel(EngineController* engine, ConversationStore* store, QWidget* parent = nullptr);

    // Sends `text` as the next user message (what the Send button does).
    // false when it was not sent (empty, no model, a reply running, max tokens over its limit: the status says why)
    bool send(const QString& text);
    void stop();
    void regenerate();
    void newChat();
    void editLastUserMessage();

    QString transcriptText() const;
    // The transcript as rendered: replies are Markdown (paragraphs, lists, emphasis, inline code,
    // fenced code blocks in a monospace frame), user messages plain text.
    const QTextDocument* transcriptDocument() const;
    // Copies the raw text of message `turn` (what the Copy link under each reply does).
    void copyMessage(int turn);
    // The one-line notice shown when the loaded model is a base model; empty otherwise.
    QString baseModelNotice() const;
    // What the conversation store says it could not save, or that it kept a damaged file aside.
    QString storageNotice() const;
    int messageCount() const { return static_cast<int>(m_turns.size()); }
    const std::shared_ptr<const ReplyStats>& lastStats() const { return m_last_stats; }
    bool replying() const { return m_replying; }
    QString fitNotice() const;
    SamplingSettings sampling() const;
    void setSampling(const SamplingSettings& s);

signals:
    void replyFinished(std::shared_ptr<const tokenscope::ui::ReplyStats> stats);
    // The base-model notice's button: open an instruct model (the chat model, or the library).
    void openInstructModelRequested();

private:
    void buildUi();
    void render();
    void onDelta(quint64 id, const QString& text);
    void flushPending();
    void onFinished(std::shared_ptr<const ReplyStats> stats);
    void onFailed(quint64 id, const QString& message);
    void startReply();
    void restore();
    void updateButtons();
    void updateModelNotice();
    void updateStorageNotice();
    void renderStreaming();
    // The model answering now, for the transcript's mark when it differs from the last reply's.
    QString currentModelName() const;

    EngineController* m_engine;
    ConversationStore* m_store;
    qint64 m_conversation = 0;
    std::vector<ChatTurn> m_turns; // completed messages (system prompt kept separately)
    struct TurnLine {
        QString stats; // the line under an assistant message
        QString model; // the model that wrote it (empty: a user message, or not recorded)
    };
    std::vector<TurnLine> m_turn_stats; // one per message
    QString m_streaming;                // the reply being generated
    QString m_pending;                  // deltas not yet shown (flushed once per frame)
    int m_stream_start = -1;            // where the streaming reply begins in the transcript
    quint64 m_request = 0;
    bool m_replying = false;
    std::shared_ptr<const ReplyStats> m_last_stats;

    QTextBrowser* m_transcript = nullptr;
    QPlainTextEdit* m_input = nullptr;
    QLineEdit* m_system = nullptr;
    QPushButton* m_send = nullptr;
    QPushButton* m_stop = nullptr;
    QPushButton* m_regenerate = nullptr;
    QPushButton* m_edit = nullptr;
    QPushButton* m_new = nullptr;
    QCheckBox* m_show_prompt = nullptr;
    QPlainTextEdit* m_prompt_view = nullptr;
    QLabel* m_status = nullptr;
    QLabel* m_storage = nullptr;
    QWidget* m_base_notice = nullptr; // "this is a base model" row with its button
    QLabel* m_base_notice_text = nullptr;
    QDoubleSpinBox* m_temperature = nullptr;
    QSpinBox* m_top_k = nullptr;
    QDoubleSpinBox* m_top_p = nullptr;
    QDoubleSpinBox* m_min_p = nullptr;
    QSpinBox* m_seed = nullptr;
    BoundedCountBox* m_max_tokens = nullptr;
    QTimer* m_frame = nullptr;
    QTimer* m_fit_timer = nullptr; // debounces the context check while typing
    QLabel* m_fit = nullptr;       // "this will not fit / oldest turns will be dropped" before sending
    quint64 m_fit_request = 0;
    std::vector<ChatTurn> requestTurns(const QString& draft) const;
};

} // namespace tokenscope::ui
