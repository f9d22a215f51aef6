// SPDX-License-Identifier: GPL-3.0-or-later
#include "panels/tokenizer_panel.h"
#include "bridge/analysis_client.h"

#include "bridge/engine_controller.h"
#include "bridge/token_selection.h"
#include "bridge/token_text.h"
#include "panels/tokenizer_comparison.h"
#include "storage/atomic_save.h"
#include "tokenizer/token_diff.h"
#include "widgets/count_text.h"
#include "widgets/flow_layout.h"

#include <QApplication>
#include <QCheckBox>
#include <QClipboard>
#include <QElapsedTimer>
#include <QFile>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLocale>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollBar>
#include <QSplitter>
#include <QTextBrowser>
#include <QTextCursor>
#include <QTimer>
#include <QUrl>
#include <QVBoxLayout>
#include <algorithm>

namespace tokenscope::ui {

namespace {

QString visible_text(const QByteArray& bytes)
{
    QString s = QString::fromUtf8(bytes).toHtmlEscaped();
    s.replace(' ', QChar(0x00B7));                    // ·
    s.replace('\t', QChar(0x2192));                   // →
    s.replace('\n', QString(QChar(0x21B5)) + "<br>"); // ↵
    return s;
}

} // namespace

TokenizerPanel::TokenizerPanel(EngineController* engine, TokenSelection* selection, QWidget* parent)
    : QWidget(parent), m_engine(engine), m_selection(selection)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(6, 6, 6, 6);
    auto* split = new QSplitter(Qt::Vertical);
    m_input = new QPlainTextEdit;
    m_input->setObjectName("tokenizerInput");
    m_input->setPlaceholderText(tr("Type or paste text: it is split into tokens as you type, exactly as the model will "
                                   "see it. Try a misspelling, a number, code, or another language."));
    split->addWidget(m_input);
    m_view = new QTextBrowser;
    m_view->setObjectName("tokenizerView");
    m_view->setOpenLinks(false);
    m_view->setMouseTracking(true);
    split->addWidget(m_view);
    m_comparison = new TokenizerComparison;
    split->addWidget(m_comparison);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 2);
    split->setStretchFactor(2, 2);
    layout->addWidget(split, 1);
    m_changes = new QLabel;
    m_changes->setObjectName("tokenizerChanges");
    m_changes->setWordWrap(true);
    m_changes->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_changes);
    auto* row = new FlowLayout; // the counts, then the buttons: on a second line in a narrow dock
    m_counts = new QLabel;
    row->addWidget(m_counts);
    m_show_ids = new QCheckBox(tr("Show ids"));
    row->addWidget(m_show_ids);
    auto* copy_json = new QPushButton(tr("Copy JSON"));
    copy_json->setToolTip(tr("Copy the tokens (id, piece, type, byte offsets, bytes) as JSON"));
    connect(copy_json, &QPushButton::clicked, this, [this] { QApplication::clipboard()->setText(tokensJson()); });
    row->addWidget(copy_json);
    auto* copy_csv = new QPushButton(tr("Copy CSV"));
    connect(copy_csv, &QPushButton::clicked, this, [this] { QApplication::clipboard()->setText(tokensCsv()); });
    row->addWidget(copy_csv);
    auto* save = new QPushButton(tr("Export…"));
    save->setShortcut(QKeySequence("Ctrl+E"));
    connect(save, &QPushButton::clicked, this, [this] {
        const QString path =
            QFileDialog::getSaveFileName(this, tr("Export tokens"), "tokens.csv", tr("CSV (*.csv);;JSON (*.json)"));
        QString error;
        if (!path.isEmpty() && !exportTo(path, &error))
            m_detail->setText(error);
    });
    row->addWidget(save);
    layout->addLayout(row);
    m_detail = new QLabel(tr("Point at a token to see its id, bytes and type."));
    m_detail->setWordWrap(true);
    m_detail->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_detail);

    m_debounce = new QTimer(this);
    m_debounce->setSingleShot(true);
    m_debounce->setInterval(120);
    connect(m_input, &QPlainTextEdit::textChanged, m_debounce, qOverload<>(&QTimer::start));
    connect(m_debounce, &QTimer::timeout, this, &TokenizerPanel::request);
    connect(m_show_ids, &QCheckBox::toggled, this, &TokenizerPanel::render);
    connect(m_view, &QTextBrowser::highlighted, this, [this](const QUrl& url) {
        if (url.scheme() == "tok")
            showDetails(url.path().toInt());
    });
    connect(m_view, &QTextBrowser::anchorClicked, this, [this](const QUrl& url) {
        if (url.scheme() == "tok")
            selectToken(url.path().toInt());
    });
    connect(m_selection, &TokenSelection::changed, this, [this](int position) {
        render();
        showDetails(position);
    });
    connect(&m_engine->analysis(), &AnalysisClient::tokenized, this, [this](std::shared_ptr<const Tokenization> t) {
        if (t->request_id != m_request)
            return;                // a newer request is on its way
        if (!t->error.isEmpty()) { // a server that does not tokenize, or failed to
            m_current.reset();
            m_view->setHtml(QString("<p>%1</p>").arg(t->error.toHtmlEscaped()));
            m_counts->setText(tr("no tokens: %1").arg(t->error));
            m_detail->setText(t->error);
            emit updated();
            return;
        }
        // The first text (typed into an empty box, or after a model change) is not a change of anything.
        if (m_current && !m_current->text.isEmpty())
            describeChanges(*m_current, *t);
        else
            clearChanges();
        m_current = std::move(t);
        render();
        m_comparison->setText(m_current->utf8, int(m_current->tokens.size()),
                              m_engine->model() ? m_engine->model()->name : tr("this model"));
        emit updated();
    });
    connect(m_engine, &EngineController::modelLoaded, this, [this] {
        m_current.reset(); // another vocabulary: its tokens are not an edit of the last ones
        request();
    });
}

void TokenizerPanel::setText(const QString& text)
{
    m_input->setPlainText(text);
    request();
}

void TokenizerPanel::request()
{
    if (m_engine->model())
        m_request = m_engine->analysis().tokenize(m_input->toPlainText());
}

void TokenizerPanel::selectToken(int token_index)
{
    m_selection->select(token_index);
}

QString TokenizerPanel::viewHtml() const
{
    return m_view->toHtml();
}

QString TokenizerPanel::tokensJson() const
{
    QJsonObject root;
    QJsonArray tokens;
    if (m_current) {
        root["model"] = m_engine->model() ? m_engine->model()->name : QString();
        root["text"] = m_current->text;
        root["characters"] = int(m_current->text.size());
        root["bytes"] = int(m_current->utf8.size());
        for (std::size_t i = 0; i < m_current->tokens.size(); ++i) {
            const TokenSpan& t = m_current->tokens[i];
            const QByteArray bytes = m_current->utf8.mid(t.begin, t.end - t.begin);
            tokens.append(QJsonObject{{"index", int(i)},
                                      {"id", t.id},
                                      {"piece", t.piece},
                                      {"type", t.type},
                                      {"begin", t.begin},
                                      {"end", t.end},
                                      {"bytes", QString::fromLatin1(bytes.toHex())},
                                      {"text", QString::fromUtf8(bytes)}});
        }
    }
    root["count"] = int(tokens.size());
    root["tokens"] = tokens;
    return QString::fromUtf8(QJsonDocument(root).toJson(QJsonDocument::Indented));
}

QString TokenizerPanel::tokensCsv() const
{
    // RFC 4180: fields with a comma, quote or line break are quoted, quotes doubled.
    const auto field = [](QString s) {
        if (s.contains(',') || s.contains('"') || s.contains('\n') || s.contains('\r'))
            s = '"' + s.replace("\"", "\"\"") + '"';
        return s;
    };
    QString csv = "index,id,piece,type,begin,end,bytes,text\r\n";
    if (!m_current)
        return csv;
    for (std::size_t i = 0; i < m_current->tokens.size(); ++i) {
        const TokenSpan& t = m_current->tokens[i];
        const QByteArray bytes = m_current->utf8.mid(t.begin, t.end - t.begin);
        csv += QStringList{QString::number(i),
                           QString::number(t.id),
                           field(t.piece),
                           field(t.type),
                           QString::number(t.begin),
                           QString::number(t.end),
                           QString::fromLatin1(bytes.toHex()),
                           field(QString::fromUtf8(bytes))}
                   .join(',') +
               "\r\n";
    }
    return csv;
}

bool TokenizerPanel::exportTo(const QString& path, QString* error) const
{
    return save_atomically(path, (path.endsWith(".json", Qt::CaseInsensitive) ? tokensJson() : tokensCsv()).toUtf8(),
                           error);
}

namespace {

std::vector<engine::Token> engine_tokens(const Tokenization& t)
{
    std::vector<engine::Token> out;
    for (const TokenSpan& s : t.tokens)
        out.push_back({s.id, uint32_t(s.begin), uint32_t(s.end)});
    return out;
}

// The pieces of a change, the first eight of them: a paste changes thousands of tokens at once, and
// the line that names them must stay a line.
QString pieces(const Tokenization& t, uint32_t first, uint32_t count)
{
    constexpr uint32_t kNamed = 8;
    QStringList out;
    for (uint32_t i = first; i < first + std::min(count, kNamed) && i < t.tokens.size(); ++i) {
        const TokenSpan& s = t.tokens[i];
        out << "“" + visible_whitespace(QString::fromUtf8(t.utf8.mid(s.begin, s.end - s.begin))) + "”";
    }
    if (count > kNamed)
        out << QObject::tr("%1 more").arg(numberText(count - kNamed));
    return out.join(" + ");
}

} // namespace

void TokenizerPanel::describeChanges(const Tokenization& before, const Tokenization& after)
{
    if (before.text == after.text)
        return; // the same text again (a re-request): the last edit's changes still stand
    m_changed.clear();
    const auto a = engine_tokens(before), b = engine_tokens(after);
    const engine::TokenDiff diff =
        engine::diff_tokens(std::string_view(before.utf8.constData(), std::size_t(before.utf8.size())), a,
                            std::string_view(after.utf8.constData(), std::size_t(after.utf8.size())), b);
    QStringList lines;
    for (const engine::TokenChange& c : diff.changes) {
        m_changed.push_back({int(c.new_first), int(c.new_count)});
        if (lines.size() == 3)
            continue;
        const QString from = pieces(before, c.old_first, c.old_count), to = pieces(after, c.new_first, c.new_count);
        switch (c.kind) {
        case engine::TokenChangeKind::Split:
            lines << tr("%1 split into %2").arg(from, to);
            break;
        case engine::TokenChangeKind::Merged:
            lines << tr("%1 merged into %2").arg(from, to);
            break;
        case engine::TokenChangeKind::Inserted:
            lines << tr("%1 added").arg(to);
            break;
        case engine::TokenChangeKind::Deleted:
            lines << tr("%1 removed").arg(from);
            break;
        case engine::TokenChangeKind::Replaced:
            lines << tr("%1 became %2").arg(from, to);
            break;
        }
    }
    if (diff.changes.size() > 3)
        lines << tr("and %1").arg(countText(qint64(diff.changes.size()) - 3, tr("more change"), tr("more changes")));
    m_changes->setText(tr("<b>What changed:</b> %1 · %2 → %3 tokens (%4%5)")
                           .arg(lines.isEmpty() ? tr("the same tokens") : lines.join("; ").toHtmlEscaped())
                           .arg(numberText(qint64(a.size())), numberText(qint64(b.size())),
                                diff.count_delta > 0 ? "+" : "", numberText(diff.count_delta)));
}

void TokenizerPanel::clearChanges()
{
    m_changed.clear();
    m_changes->setText(tr("<b>What changed:</b> edit the text to see which tokens split, merge or change."));
}

QString TokenizerPanel::changesText() const
{
    return m_changes->text();
}

QString TokenizerPanel::countsText() const
{
    return m_counts->text();
}
QString TokenizerPanel::detailText() const
{
    return m_detail->text();
}

void TokenizerPanel::showDetails(int i)
{
    if (!m_current || i < 0 || i >= int(m_current->tokens.size()))
        return;
    const TokenSpan& t = m_current->tokens[std::size_t(i)];
    const QByteArray bytes = m_current->utf8.mid(t.begin, t.end - t.begin);
    m_detail->setText(
        tr("Token %1 of %2 · id %3 · piece “%4” · %5 · bytes %6 · offsets [%7, %8)")
            .arg(i + 1)
            .arg(m_current->tokens.size())
            .arg(t.id)
            .arg(t.piece, t.type,
                 bytes.isEmpty() ? tr("none (added by the tokenizer)") : QString::fromLatin1(bytes.toHex(' ')))
            .arg(t.begin)
            .arg(t.end));
}

// The spans are drawn in chunks of kChunkTokens, one chunk per turn of the event loop, so that a
// paste of any length never holds the UI for more than a chunk (~15 ms); past kMaxDrawnTokens the
// rest are counted but not drawn. A new render (typing, a click) abandons the chunks still queued.
void TokenizerPanel::render()
{
    if (!m_current)
        return;
    QElapsedTimer timer;
    timer.start();
    ++m_render_generation;
    const int n = int(m_current->tokens.size());
    const int first = std::min(n, kChunkTokens);
    const int scroll = m_view->verticalScrollBar()->value(); // a click re-renders: stay where the user is
    m_view->setHtml("<div style='font-family: monospace; line-height: 160%'>" + spansHtml(0, first) + "</div>");
    m_view->verticalScrollBar()->setValue(scroll);
    m_render_ms = double(timer.nsecsElapsed()) / 1e6;
    m_drawn = first;
    if (first < n)
        QTimer::singleShot(0, this, [this, generation = m_render_generation] { renderMore(generation); });
    else
        emit rendered();
    const auto& t = *m_current;
    const int chars = int(t.text.size());
    m_counts->setText(tr("%1 · %2 · %3 · %4 characters per token · %5 ms")
                          .arg(countText(n, tr("token"), tr("tokens")))
                          .arg(countText(chars, tr("character"), tr("characters")))
                          .arg(countText(t.utf8.size(), tr("byte"), tr("bytes")))
                          .arg(decimalText(n ? double(chars) / n : 0.0, 2))
                          .arg(decimalText(t.ms, 1)) +
                      (t.source.isEmpty() ? QString() : tr(" · tokenized by %1").arg(t.source)));
}

void TokenizerPanel::renderMore(quint64 generation)
{
    if (generation != m_render_generation || !m_current)
        return;
    const int n = int(m_current->tokens.size());
    const int end = std::min({n, m_drawn + kChunkTokens, kMaxDrawnTokens});
    QTextCursor cursor(m_view->document());
    cursor.movePosition(QTextCursor::End);
    cursor.insertHtml("<span style='font-family: monospace'>" + spansHtml(m_drawn, end) + "</span>");
    m_drawn = end;
    if (m_drawn >= n) {
        emit rendered();
        return;
    }
    if (m_drawn >= kMaxDrawnTokens) {
        cursor.insertHtml(tr("<br><i>… %1 more tokens are not drawn (the counts below include them); the token list "
                             "exports hold every token.</i>")
                              .arg(numberText(n - m_drawn)));
        emit rendered();
        return;
    }
    QTimer::singleShot(0, this, [this, generation] { renderMore(generation); });
}

QString TokenizerPanel::spansHtml(int begin, int end) const
{
    const auto& t = *m_current;
    QString html;
    const bool ids = m_show_ids->isChecked();
    int previous_begin = begin > 0 ? t.tokens[std::size_t(begin - 1)].begin : -1;
    QString previous_text;
    for (int i = begin; i < end; ++i) {
        const TokenSpan& s = t.tokens[std::size_t(i)];
        const bool special = s.type == "control" || s.type == "user-defined" || s.type == "unknown";
        const bool byte = s.type == "byte";
        // Byte-fallback tokens of one character share its span: show the character once.
        const QString text = ids                                   ? QString::number(s.id)
                             : special                             ? s.piece.toHtmlEscaped()
                             : (byte && s.begin == previous_begin) ? QString("+")
                                                                   : visible_text(t.utf8.mid(s.begin, s.end - s.begin));
        previous_begin = s.begin;
        QColor c = token_span_colour(i);
        if (i == m_selection->position())
            c = palette().color(QPalette::Highlight);
        bool changed = false;
        for (const auto& [first, count] : m_changed)
            changed |= i >= first && i < first + count;
        // Tokens the last edit created: red and underlined, so a split or merge stands out.
        const QString style = QString("background-color: rgba(%1,%2,%3,%4); %5%6")
                                  .arg(c.red())
                                  .arg(c.green())
                                  .arg(c.blue())
                                  .arg(c.alpha())
                                  .arg(changed ? "color: #d0453a; text-decoration: underline;"
                                               : "color: palette(text); text-decoration: none;",
                                       special ? " font-weight: bold; border: 1px solid gray;"
                                       : byte  ? " font-style: italic;"
                                               : "");
        const QString shown = text.isEmpty() ? QString("∅") : text;
        html += word_break_before(previous_text, shown); // lines break between words, never inside one
        previous_text = shown;
        html += QString("<a href='tok:%1' style='%2'>%3</a>%4").arg(i).arg(style, shown, ids ? " " : "");
    }
    return html;
}

} // namespace tokenscope::ui
