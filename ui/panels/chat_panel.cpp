// SPDX-License-Identifier: GPL-3.0-or-later
#include "panels/chat_panel.h"
#include "bridge/chat_client.h"

#include "bridge/engine_controller.h"
#include "storage/conversation_store.h"
#include "widgets/bounded_count_box.h"
#include "widgets/count_text.h"
#include "widgets/flow_layout.h"

#include <QCheckBox>
#include <QClipboard>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QFontDatabase>
#include <QFormLayout>
#include <QGuiApplication>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollBar>
#include <QShortcut>
#include <QSpinBox>
#include <QSplitter>
#include <QTextBlock>
#include <QTextBrowser>
#include <QTextCursor>
#include <QTextDocument>
#include <QTimer>
#include <QVBoxLayout>

namespace tokenscope::ui {

namespace {

QString stats_line(const ReplyStats& s)
{
    QString line = QObject::tr("%1 · TTFT %2 ms · %3 tokens/s · reused %4, processed %5 new")
                       .arg(countText(s.generated_tokens, QObject::tr("token"), QObject::tr("tokens")))
                       .arg(decimalText(s.ttft_ms, 0))
                       .arg(decimalText(s.tokens_per_second, 1))
                       .arg(countText(s.reused_tokens, QObject::tr("cached token"), QObject::tr("cached tokens")))
                       .arg(numberText(s.computed_tokens));
    if (s.cancelled)
        line += QObject::tr(" · stopped");
    else if (s.stop_reason == "cut off")
        line += QObject::tr(" · cut off");
    if (!s.server.isEmpty())
        line += QObject::tr(" · served by %1 (TTFT and speed measured here)").arg(s.server);
    return line;
}

bool is_code_block(const QTextBlock& block)
{
    const QTextBlockFormat f = block.blockFormat();
    return f.hasProperty(QTextFormat::BlockCodeFence) || f.hasProperty(QTextFormat::BlockCodeLanguage);
}

// Models write a newline where they mean a line break (code without a fence, poems, addresses), as
// chat front ends show them; Markdown would join such lines into one paragraph. So outside fenced
// code every line that another non-blank line follows ends with a hard break ("  ") before Qt's
// parser sees it. Only fences are recognised here: the Markdown itself is Qt's to parse.
QString with_hard_line_breaks(const QString& markdown)
{
    const QStringList lines = markdown.split('\n');
    QString out;
    out.reserve(markdown.size() + lines.size() * 2);
    bool in_fence = false;
    for (qsizetype i = 0; i < lines.size(); ++i) {
        const QString& line = lines[i];
        const QString trimmed = line.trimmed();
        const bool fence = trimmed.startsWith("```") || trimmed.startsWith("~~~");
        if (fence)
            in_fence = !in_fence;
        out += line;
        if (i + 1 == lines.size())
            break;
        const bool next_blank = lines[i + 1].trimmed().isEmpty();
        const bool next_fence = lines[i + 1].trimmed().startsWith("```") || lines[i + 1].trimmed().startsWith("~~~");
        if (!in_fence && !fence && !trimmed.isEmpty() && !next_blank && !next_fence && !line.endsWith("  "))
            out += "  ";
        out += '\n';
    }
    return out;
}

// Inserts a reply's Markdown at the cursor with Qt's own parser (GitHub dialect: lists, emphasis,
// inline code, fenced code), then gives every code block a shaded monospace box.
void insert_markdown(QTextCursor& cursor, const QString& markdown, const QPalette& palette)
{
    const int begin = cursor.position();
    cursor.insertMarkdown(with_hard_line_breaks(markdown), QTextDocument::MarkdownDialectGitHub);
    const int end = cursor.position();
    QTextBlockFormat box;
    box.setBackground(palette.color(QPalette::AlternateBase).darker(104));
    box.setLeftMargin(8);
    box.setRightMargin(8);
    QTextCharFormat mono;
    mono.setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    mono.setFontFixedPitch(true);
    for (QTextBlock b = cursor.document()->findBlock(begin); b.isValid() && b.position() <= end; b = b.next()) {
        if (!is_code_block(b))
            continue;
        QTextCursor c(b);
        c.mergeBlockFormat(box);
        c.movePosition(QTextCursor::EndOfBlock, QTextCursor::KeepAnchor);
        c.mergeCharFormat(mono);
    }
}

void insert_plain(QTextCursor& cursor, const QString& text)
{
    QTextBlockFormat plain;
    cursor.insertBlock(plain, QTextCharFormat());
    cursor.insertText(text);
}

void insert_heading(QTextCursor& cursor, const QString& who, bool first)
{
    QTextBlockFormat block;
    block.setTopMargin(first ? 0 : 10);
    QTextCharFormat bold;
    bold.setFontWeight(QFont::Bold);
    if (first)
        cursor.setBlockFormat(block);
    else
        cursor.insertBlock(block);
    cursor.insertText(who, bold);
    cursor.setCharFormat(QTextCharFormat());
}

} // namespace

ChatPanel::ChatPanel(EngineController* engine, ConversationStore* store, QWidget* parent)
    : QWidget(parent), m_engine(engine), m_store(store)
{
    buildUi();
    connect(&m_engine->chat(), &ChatClient::replyDelta, this, &ChatPanel::onDelta);
    connect(&m_engine->chat(), &ChatClient::replyFinished, this, &ChatPanel::onFinished);
    connect(&m_engine->chat(), &ChatClient::replyFailed, this, &ChatPanel::onFailed);
    connect(m_engine, &EngineController::busyChanged, this, [this] { updateButtons(); });
    connect(m_engine, &EngineController::modelLoaded, this, [this] {
        updateButtons();
        updateModelNotice();
        render(); // a switch of model is marked in the transcript
    });
    if (m_store)
        connect(m_store, &ConversationStore::statusChanged, this, &ChatPanel::updateStorageNotice);
    restore();
    render();
    updateButtons();
    updateStorageNotice();
}

void ChatPanel::buildUi()
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(6, 6, 6, 6);

    m_system = new QLineEdit;
    m_system->setPlaceholderText(tr("System prompt (optional): how the assistant should behave"));
    layout->addWidget(m_system);
    // the sampler's settings wrap onto a second line in a narrow dock (each caption with its field)
    auto* settings = new FlowLayout;
    auto spin = [&](const QString& caption, QDoubleSpinBox*& box, double lo, double hi, double step, double value,
                    const QString& tip) {
        box = new QDoubleSpinBox;
        box->setRange(lo, hi);
        box->setSingleStep(step);
        box->setDecimals(2);
        box->setValue(value);
        box->setToolTip(tip);
        settings->addWidget(labelled(caption, box));
    };
    auto ispin = [&](const QString& caption, QSpinBox*& box, int lo, int hi, int value, const QString& tip) {
        box = new QSpinBox;
        box->setRange(lo, hi);
        box->setValue(value);
        box->setToolTip(tip);
        settings->addWidget(labelled(caption, box));
    };
    spin(tr("temp"), m_temperature, 0.0, 2.0, 0.05, 0.8, tr("Temperature: 0 picks the most likely token every time"));
    ispin(tr("top-k"), m_top_k, 0, 1000, 40, tr("Keep only the k most likely tokens (0: off)"));
    spin(tr("top-p"), m_top_p, 0.0, 1.0, 0.01, 0.95,
         tr("Keep the smallest set of tokens whose probability reaches p (1: off)"));
    spin(tr("min-p"), m_min_p, 0.0, 1.0, 0.01, 0.05,
         tr("Drop tokens less likely than min-p × the most likely one (0: off)"));
    ispin(tr("seed"), m_seed, 0, 1 << 30, 0, tr("Random seed: the same seed gives the same reply"));
    m_max_tokens = new BoundedCountBox(1, 4096, 256, tr("Maximum tokens per reply"));
    settings->addWidget(labelled(tr("max"), m_max_tokens));
    connect(m_max_tokens, &BoundedCountBox::validityChanged, this, [this] { updateButtons(); });
    layout->addLayout(settings);

    // A base model continues text rather than answering: say so, with a way to an instruct model.
    m_base_notice = new QWidget;
    auto* notice_row = new QHBoxLayout(m_base_notice);
    notice_row->setContentsMargins(0, 0, 0, 0);
    m_base_notice_text = new QLabel;
    m_base_notice_text->setTextFormat(Qt::PlainText);
    m_base_notice_text->setWordWrap(true);
    notice_row->addWidget(m_base_notice_text, 1);
    auto* open_instruct = new QPushButton(tr("Open an instruct model…"));
    open_instruct->setObjectName("openInstructModel");
    notice_row->addWidget(open_instruct);
    connect(open_instruct, &QPushButton::clicked, this, &ChatPanel::openInstructModelRequested);
    m_base_notice->hide();
    layout->addWidget(m_base_notice);

    auto* split = new QSplitter(Qt::Vertical);
    m_transcript = new QTextBrowser;
    m_transcript->setOpenLinks(false);
    connect(m_transcript, &QTextBrowser::anchorClicked, this, [this](const QUrl& url) {
        if (url.scheme() == "copy")
            copyMessage(url.path().toInt());
    });
    m_transcript->setPlaceholderText(tr("Open a model, type a message and press Send. Each turn re-sends the whole "
                                        "conversation to the model; the statistics under each reply show how much "
                                        "of it the KV cache already held."));
    split->addWidget(m_transcript);
    m_prompt_view = new QPlainTextEdit;
    m_prompt_view->setObjectName("exactPromptView");
    m_prompt_view->setReadOnly(true);
    m_prompt_view->setVisible(false);
    split->addWidget(m_prompt_view);
    layout->addWidget(split, 1);

    m_status = new QLabel;
    m_status->setWordWrap(true);
    layout->addWidget(m_status);
    // What the conversation store could not save (or a damaged database it kept aside), in plain text.
    m_storage = new QLabel;
    m_storage->setObjectName("storageNotice");
    m_storage->setTextFormat(Qt::PlainText);
    m_storage->setWordWrap(true);
    m_storage->setStyleSheet("color: #c0392b");
    m_storage->hide();
    layout->addWidget(m_storage);

    auto* input_row = new QHBoxLayout;
    m_input = new QPlainTextEdit;
    m_input->setObjectName("messageInput");
    m_input->setPlaceholderText(tr("Message (Ctrl+Enter to send)"));
    m_input->setMaximumHeight(90);
    input_row->addWidget(m_input, 1);
    auto* buttons = new QVBoxLayout;
    m_send = new QPushButton(tr("Send"));
    // Ctrl+Enter sends when the focus is in this panel. A button's own shortcut is window-wide, and
    // the stepper's Prefill has the same keys: Qt drops an ambiguous shortcut, so neither acted.
    for (const char* keys : {"Ctrl+Return", "Ctrl+Enter"}) {
        auto* shortcut = new QShortcut(QKeySequence(keys), this);
        shortcut->setContext(Qt::WidgetWithChildrenShortcut);
        connect(shortcut, &QShortcut::activated, m_send, &QPushButton::click);
    }
    m_stop = new QPushButton(tr("Stop"));
    m_regenerate = new QPushButton(tr("Regenerate"));
    m_edit = new QPushButton(tr("Edit last"));
    m_new = new QPushButton(tr("New chat"));
    for (auto* b : {m_send, m_stop, m_regenerate, m_edit, m_new})
        buttons->addWidget(b);
    input_row->addLayout(buttons);
    layout->addLayout(input_row);
    m_fit = new QLabel;
    m_fit->setWordWrap(true);
    m_fit->setStyleSheet("color: #c0392b");
    m_fit->hide();
    layout->addWidget(m_fit);
    m_show_prompt = new QCheckBox(tr("Show the exact text and tokens the model receives"));
    layout->addWidget(m_show_prompt);

    connect(m_send, &QPushButton::clicked, this, [this] { send(m_input->toPlainText()); });
    connect(m_stop, &QPushButton::clicked, this, &ChatPanel::stop);
    connect(m_regenerate, &QPushButton::clicked, this, &ChatPanel::regenerate);
    connect(m_edit, &QPushButton::clicked, this, &ChatPanel::editLastUserMessage);
    connect(m_new, &QPushButton::clicked, this, &ChatPanel::newChat);
    connect(m_show_prompt, &QCheckBox::toggled, m_prompt_view, &QWidget::setVisible);
    connect(m_system, &QLineEdit::editingFinished, this, [this] {
        if (m_conversation)
            m_store->setSystemPrompt(m_conversation, m_system->text());
    });

    // Before sending: would the history plus this draft overflow the context? Checked on the engine
    // thread (it has the tokenizer) a moment after typing stops.
    m_fit_timer = new QTimer(this);
    m_fit_timer->setSingleShot(true);
    m_fit_timer->setInterval(400);
    connect(m_input, &QPlainTextEdit::textChanged, m_fit_timer, qOverload<>(&QTimer::start));
    connect(m_fit_timer, &QTimer::timeout, this, [this] {
        if (m_engine->model())
            m_fit_request = m_engine->chat().checkFit(requestTurns(m_input->toPlainText().trimmed()), sampling());
    });
    connect(&m_engine->chat(), &ChatClient::fitChecked, this, [this](quint64 id, const QString& notice) {
        if (id != m_fit_request)
            return;
        m_fit->setText(notice);
        m_fit->setVisible(!notice.isEmpty());
    });
    connect(&m_engine->chat(), &ChatClient::prefillProgress, this, [this](quint64 id, int done, int total) {
        if (id == m_request && done < total)
            m_status->setText(
                tr("Reading the prompt: %1 of %2 new tokens (Stop works between batches)").arg(done).arg(total));
    });

    // Streaming text is shown once per frame, not once per token.
    m_frame = new QTimer(this);
    m_frame->setInterval(16);
    connect(m_frame, &QTimer::timeout, this, &ChatPanel::flushPending);
}

SamplingSettings ChatPanel::sampling() const
{
    SamplingSettings s;
    s.temperature = float(m_temperature->value());
    s.top_k = m_top_k->value();
    s.top_p = float(m_top_p->value());
    s.min_p = float(m_min_p->value());
    s.seed = quint64(m_seed->value());
    s.max_tokens = m_max_tokens->value();
    return s;
}

void ChatPanel::setSampling(const SamplingSettings& s)
{
    m_temperature->setValue(s.temperature);
    m_top_k->setValue(s.top_k);
    m_top_p->setValue(s.top_p);
    m_min_p->setValue(s.min_p);
    m_seed->setValue(int(s.seed));
    m_max_tokens->setValue(s.max_tokens);
}

void ChatPanel::restore()
{
    if (!m_store)
        return;
    if (auto c = m_store->latest()) {
        m_conversation = c->id;
        m_system->setText(c->system_prompt);
        for (const auto& m : c->messages) {
            m_turns.push_back({m.role, m.content});
            m_turn_stats.push_back({m.stats, m.model});
        }
    }
}

bool ChatPanel::send(const QString& raw)
{
    const QString text = raw.trimmed();
    if (text.isEmpty()) {
        m_status->setText(tr("The message is empty: type something first."));
        return false;
    }
    if (m_replying || !m_engine->model())
        return false;
    if (!m_max_tokens->valid()) {
        m_status->setText(tr("Max tokens can be %1: lower it to send.").arg(m_max_tokens->limitText()));
        return false;
    }
    if (!m_conversation)
        m_conversation = m_store->createConversation(m_system->text(), m_engine->model()->path);
    if (m_turns.empty())
        m_store->setTitle(m_conversation, text.left(60));
    m_turns.push_back({"user", text});
    m_turn_stats.emplace_back();
    m_store->appendMessage(m_conversation, "user", text);
    m_input->clear();
    startReply();
    return true;
}

std::vector<ChatTurn> ChatPanel::requestTurns(const QString& draft) const
{
    std::vector<ChatTurn> request;
    if (!m_system->text().trimmed().isEmpty())
        request.push_back({"system", m_system->text().trimmed()});
    request.insert(request.end(), m_turns.begin(), m_turns.end());
    if (!draft.isEmpty())
        request.push_back({"user", draft});
    return request;
}

QString ChatPanel::fitNotice() const
{
    return m_fit->isVisible() ? m_fit->text() : QString();
}

void ChatPanel::startReply()
{
    std::vector<ChatTurn> request = requestTurns({});
    m_streaming.clear();
    m_pending.clear();
    m_replying = true;
    m_request = m_engine->chat().sendChat(std::move(request), sampling());
    m_status->setText(tr("Generating…"));
    m_frame->start();
    render();
    updateButtons();
}

void ChatPanel::stop()
{
    m_engine->cancel(m_request);
} // this reply only: a capture queued behind it still runs

void ChatPanel::regenerate()
{
    if (m_replying || m_turns.empty() || m_turns.back().role != "assistant")
        return;
    m_turns.pop_back();
    m_turn_stats.pop_back();
    m_store->truncate(m_conversation, int(m_turns.size()));
    startReply();
}

void ChatPanel::editLastUserMessage()
{
    if (m_replying)
        return;
    for (int i = int(m_turns.size()) - 1; i >= 0; --i) {
        if (m_turns[std::size_t(i)].role == "user") {
            m_input->setPlainText(m_turns[std::size_t(i)].content);
            m_turns.resize(std::size_t(i));
            m_turn_stats.resize(std::size_t(i));
            m_store->truncate(m_conversation, i);
            render();
            updateButtons();
            return;
        }
    }
}

void ChatPanel::newChat()
{
    if (m_replying)
        return;
    m_turns.clear();
    m_turn_stats.clear();
    m_conversation = 0;
    m_engine->chat().resetConversation();
    m_status->clear();
    render();
    updateButtons();
}

void ChatPanel::onDelta(quint64 id, const QString& text)
{
    if (id == m_request)
        m_pending += text;
}

void ChatPanel::flushPending()
{
    if (m_pending.isEmpty())
        return;
    m_streaming += m_pending;
    m_pending.clear();
    renderStreaming();
}

// The reply so far, re-parsed as Markdown in place of what the last frame showed (a list or a code
// fence is only known once its closing text arrives). Once per frame, never once per token.
void ChatPanel::renderStreaming()
{
    if (m_stream_start < 0)
        return;
    QTextCursor cursor(m_transcript->document());
    cursor.setPosition(m_stream_start);
    cursor.movePosition(QTextCursor::End, QTextCursor::KeepAnchor);
    cursor.removeSelectedText();
    if (!m_streaming.isEmpty()) {
        cursor.insertBlock(QTextBlockFormat(), QTextCharFormat());
        insert_markdown(cursor, m_streaming, palette());
    }
    m_transcript->verticalScrollBar()->setValue(m_transcript->verticalScrollBar()->maximum());
}

void ChatPanel::onFinished(std::shared_ptr<const ReplyStats> stats)
{
    if (!stats || stats->request_id != m_request)
        return;
    flushPending();
    m_frame->stop();
    m_replying = false;
    m_last_stats = stats;
    const QString line = stats_line(*stats);
    const QString model = currentModelName();
    m_turns.push_back({"assistant", m_streaming.trimmed()});
    m_turn_stats.push_back({line, model});
    m_store->appendMessage(m_conversation, "assistant", m_streaming.trimmed(), line, model);
    m_streaming.clear();
    m_status->setText(stats->notice.isEmpty() ? line : stats->notice + "\n" + line);
    m_prompt_view->setPlainText(tr("Text after the chat template (%1):\n%2\n\nTokens:\n%3")
                                    .arg(countText(stats->prompt_tokens, tr("token"), tr("tokens")))
                                    .arg(stats->prompt_text, stats->prompt_pieces.join(" | ")));
    render();
    updateButtons();
    emit replyFinished(stats);
}

void ChatPanel::onFailed(quint64 id, const QString& message)
{
    if (id != m_request && m_replying)
        return;
    m_frame->stop();
    m_replying = false;
    m_status->setText(message);
    if (!m_turns.empty() && m_turns.back().role == "user" && m_streaming.isEmpty()) {
        // The message stays in the input so nothing typed is lost.
        m_input->setPlainText(m_turns.back().content);
        m_turns.pop_back();
        m_turn_stats.pop_back();
        m_store->truncate(m_conversation, int(m_turns.size()));
    }
    render();
    updateButtons();
}

void ChatPanel::render()
{
    QTextDocument* doc = m_transcript->document();
    doc->clear();
    QTextCursor cursor(doc);
    const QString muted = palette().color(QPalette::PlaceholderText).name();
    // A change of model between replies is marked where it happened: the next reply was written by
    // another model, which read the whole conversation so far afresh.
    const auto mark_switch = [&](const QString& to, bool coming) {
        QTextBlockFormat block;
        block.setTopMargin(10);
        cursor.insertBlock(block);
        cursor.insertHtml(QString("<span style='color:%1'>%2</span>")
                              .arg(muted, (coming ? tr("— Model changed to %1: the next reply re-reads the whole "
                                                       "conversation with it —")
                                                  : tr("— Model changed to %1: it read the whole conversation so "
                                                       "far afresh —"))
                                              .arg(to)
                                              .toHtmlEscaped()));
    };
    // The mark goes before the message the new model first answered.
    std::vector<QString> switched_before(m_turns.size());
    QString last_model;
    for (std::size_t i = 0; i < m_turns.size(); ++i) {
        const QString& model = m_turn_stats[i].model;
        if (m_turns[i].role == "user" || model.isEmpty())
            continue;
        if (!last_model.isEmpty() && model != last_model)
            switched_before[i > 0 && m_turns[i - 1].role == "user" ? i - 1 : i] = model;
        last_model = model;
    }
    for (std::size_t i = 0; i < m_turns.size(); ++i) {
        const auto& t = m_turns[i];
        const bool user = t.role == "user";
        if (!switched_before[i].isEmpty())
            mark_switch(switched_before[i], false);
        insert_heading(cursor, user ? tr("You") : tr("Model"), i == 0);
        if (user) {
            insert_plain(cursor, t.content);
            continue;
        }
        cursor.insertBlock(QTextBlockFormat(), QTextCharFormat());
        insert_markdown(cursor, t.content, palette());
        // The statistics line and the reply's Copy link (the raw Markdown, not the rendering).
        cursor.insertBlock(QTextBlockFormat(), QTextCharFormat());
        cursor.insertHtml(
            QString("<span style='color:%1; font-size:small'>%2</span> "
                    "<a href='copy:%3' style='font-size:small'>%4</a>")
                .arg(muted, (m_turn_stats[i].model.isEmpty() ? m_turn_stats[i].stats
                                                             : m_turn_stats[i].model + " · " + m_turn_stats[i].stats)
                                .toHtmlEscaped())
                .arg(i)
                .arg(tr("Copy")));
    }
    m_stream_start = -1;
    if (const QString now = currentModelName();
        !m_replying && !last_model.isEmpty() && !now.isEmpty() && now != last_model)
        mark_switch(now, true);
    if (m_replying) {
        insert_heading(cursor, tr("Model"), m_turns.empty());
        m_stream_start = cursor.position();
        renderStreaming();
    }
    m_transcript->verticalScrollBar()->setValue(m_transcript->verticalScrollBar()->maximum());
}

QString ChatPanel::currentModelName() const
{
    const auto& m = m_engine->model();
    return m ? (m->name.isEmpty() ? QFileInfo(m->path).fileName() : m->name) : QString();
}

const QTextDocument* ChatPanel::transcriptDocument() const
{
    return m_transcript->document();
}

void ChatPanel::copyMessage(int turn)
{
    if (turn >= 0 && turn < int(m_turns.size()))
        QGuiApplication::clipboard()->setText(m_turns[std::size_t(turn)].content);
}

QString ChatPanel::storageNotice() const
{
    return m_storage->isHidden() ? QString() : m_storage->text();
}

void ChatPanel::updateStorageNotice()
{
    QStringList lines;
    if (m_store) {
        if (!m_store->notice().isEmpty())
            lines << m_store->notice();
        if (!m_store->problem().isEmpty())
            lines << m_store->problem();
    }
    m_storage->setText(lines.join('\n'));
    m_storage->setVisible(!lines.isEmpty());
}

QString ChatPanel::baseModelNotice() const
{
    return m_base_notice->isHidden() ? QString() : m_base_notice_text->text();
}

void ChatPanel::updateModelNotice()
{
    const auto model = m_engine->model();
    const bool base = model && !model->instruction_tuned;
    if (base)
        m_base_notice_text->setText(
            model->model_kind_reason.isEmpty()
                ? tr("%1 is a base model: it continues text rather than answering questions.").arg(model->name)
                : tr("%1 is a base model (%2): it continues text rather than answering questions.")
                      .arg(model->name, model->model_kind_reason));
    m_base_notice->setVisible(base);
}

void ChatPanel::updateButtons()
{
    const bool model = m_engine->model() != nullptr;
    m_send->setEnabled(model && !m_replying && m_max_tokens->valid());
    m_send->setToolTip(m_max_tokens->valid()
                           ? QString()
                           : tr("Max tokens can be %1: lower it to send.").arg(m_max_tokens->limitText()));
    m_stop->setEnabled(m_replying);
    m_regenerate->setEnabled(model && !m_replying && !m_turns.empty() && m_turns.back().role == "assistant");
    m_edit->setEnabled(!m_replying && !m_turns.empty());
    m_new->setEnabled(!m_replying);
}

QString ChatPanel::transcriptText() const
{
    return m_transcript->toPlainText();
}

} // namespace tokenscope::ui
