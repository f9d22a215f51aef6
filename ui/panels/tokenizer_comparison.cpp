// SPDX-License-Identifier: GPL-3.0-or-later
#include "panels/tokenizer_comparison.h"

#include "bridge/background.h"
#include "bridge/token_text.h"
#include "model/model_discovery.h"
#include "model/model_locator.h"
#include "tokenizer/comparison_tokenizer.h"
#include "widgets/count_text.h"

#include <QComboBox>
#include <QCoreApplication>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QPointer>
#include <QTextBrowser>
#include <QThreadPool>
#include <QUrl>
#include <QVBoxLayout>

namespace tokenscope::ui {

TokenizerComparison::TokenizerComparison(QWidget* parent) : QWidget(parent)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    auto* row = new QHBoxLayout;
    row->addWidget(new QLabel(tr("Compare with:")));
    m_pick = new QComboBox;
    m_pick->setObjectName("comparePick");
    m_pick->setToolTip(
        tr("Another tokenizer for the same text: any GGUF file's vocabulary (its weights are not read) or "
           "an OpenAI .tiktoken rank file (cl100k_base, o200k_base)"));
    row->addWidget(m_pick, 1);
    layout->addLayout(row);
    m_view = new QTextBrowser;
    m_view->setObjectName("compareView");
    m_view->setOpenLinks(false);
    layout->addWidget(m_view, 1);
    m_note = new QLabel;
    m_note->setWordWrap(true);
    layout->addWidget(m_note);

    const auto fill = [this] {
        const QSignalBlocker block(m_pick);
        m_pick->clear();
        m_pick->addItem(tr("— add a tokenizer —"));
        for (const QString& path : discoverTokenizers())
            m_pick->addItem(QFileInfo(path).fileName(), path);
        m_pick->addItem(tr("Open a GGUF or .tiktoken file…"), QString("open"));
    };
    fill();
    connect(m_pick, &QComboBox::activated, this, [this, fill](int i) {
        const QString choice = m_pick->itemData(i).toString();
        if (choice == "open") {
            const QString path = QFileDialog::getOpenFileName(this, tr("Open a tokenizer"), {},
                                                              tr("Tokenizers (*.gguf *.tiktoken);;All files (*)"));
            if (!path.isEmpty())
                addTokenizer(path);
        } else if (!choice.isEmpty()) {
            addTokenizer(choice);
        }
        fill();
    });
    connect(m_view, &QTextBrowser::anchorClicked, this, [this](const QUrl& url) {
        if (url.scheme() == "remove")
            removeTokenizer(url.path().toInt());
    });
    render();
}

QStringList TokenizerComparison::discoverTokenizers()
{
    QStringList found;
    const QDir tokenizers(QString::fromStdString((engine::models_directory().parent_path() / "tokenizers").string()));
    for (const QFileInfo& f : tokenizers.entryInfoList({"*.tiktoken"}, QDir::Files, QDir::Name))
        found << f.absoluteFilePath();
    try {
        for (const auto& m : engine::discover_models(engine::default_discovery_roots()))
            found << QString::fromStdString(m.path.string());
    } catch (const std::exception&) {
        // discovery is a convenience: an unreadable folder must not hide the rest
    }
    found.removeDuplicates();
    return found;
}

void TokenizerComparison::addTokenizer(const QString& path)
{
    for (const Entry& e : m_entries)
        if (e.path == path)
            return;
    m_note->setText(tr("Reading %1…").arg(QFileInfo(path).fileName()));
    struct Opened {
        std::shared_ptr<const engine::ComparisonTokenizer> tokenizer;
        QString error;
    };
    run_in_background(
        this,
        [path] {
            Opened o;
            try {
                o.tokenizer = engine::ComparisonTokenizer::open(path.toStdString());
            } catch (const std::exception& e) {
                o.error = QString::fromUtf8(e.what());
            }
            return o;
        },
        [path](TokenizerComparison& self, Opened o) {
            if (!o.tokenizer) {
                self.m_note->setText(o.error);
                emit self.failed(o.error);
                return;
            }
            Entry e;
            e.path = path;
            e.name = QString::fromStdString(o.tokenizer->name());
            e.kind = QString::fromStdString(o.tokenizer->kind());
            e.vocab_size = o.tokenizer->vocab_size();
            e.tokenizer = o.tokenizer;
            self.m_entries.push_back(std::move(e));
            self.m_note->clear();
            self.encode(self.m_entries.size() - 1);
        });
}

void TokenizerComparison::removeTokenizer(int index)
{
    if (index < 0 || index >= int(m_entries.size()))
        return;
    m_entries.erase(m_entries.begin() + index);
    render();
    emit changed();
}

void TokenizerComparison::setText(const QByteArray& utf8, int model_count, const QString& model_name)
{
    m_utf8 = utf8;
    m_model_count = model_count;
    m_model_name = model_name;
    ++m_generation;
    for (std::size_t i = 0; i < m_entries.size(); ++i)
        encode(i);
    render();
}

bool TokenizerComparison::settled() const
{
    for (const Entry& e : m_entries)
        if (e.generation != m_generation)
            return false;
    return true;
}

void TokenizerComparison::encode(std::size_t index)
{
    const auto tokenizer = m_entries[index].tokenizer;
    const QString path = m_entries[index].path;
    const QByteArray text = m_utf8;
    const quint64 generation = m_generation;
    run_in_background(
        this,
        [tokenizer, text] {
            std::vector<std::pair<int, std::pair<int, int>>> tokens;
            for (const engine::Token& t :
                 tokenizer->encode(std::string_view(text.constData(), std::size_t(text.size()))))
                tokens.push_back({t.id, {int(t.byte_begin), int(t.byte_end)}});
            return tokens;
        },
        [path, generation](TokenizerComparison& self, std::vector<std::pair<int, std::pair<int, int>>> tokens) {
            if (generation != self.m_generation)
                return; // a newer text is on its way
            for (Entry& e : self.m_entries)
                if (e.path == path) {
                    e.tokens = std::move(tokens);
                    e.generation = generation;
                }
            self.render();
            emit self.changed();
        });
}

QString TokenizerComparison::html() const
{
    return m_view->toHtml();
}

void TokenizerComparison::render()
{
    if (m_entries.empty()) {
        m_view->setHtml(
            tr("<p style='color:gray'>Different models cut the same text differently: Gemma's 262K-entry "
               "SentencePiece vocabulary, Llama 3's or Qwen's byte-level BPE, OpenAI's cl100k_base (GPT-4) and "
               "o200k_base (GPT-4o). Fewer tokens means more text per context window and per billed token. "
               "Add a tokenizer above: a GGUF file's vocabulary is read without its weights.</p>"));
        return;
    }
    QString html = "<div style='font-family: monospace; line-height: 160%'>";
    for (std::size_t i = 0; i < m_entries.size(); ++i) {
        const Entry& e = m_entries[i];
        const int n = int(e.tokens.size());
        QString versus;
        if (e.generation == m_generation && m_model_count > 0) {
            const int delta = n - m_model_count;
            versus = tr(" · %1 vs %2 for %3 (%4%5, ×%6)")
                         .arg(numberText(n))
                         .arg(numberText(m_model_count))
                         .arg(m_model_name.toHtmlEscaped())
                         .arg(delta > 0 ? "+" : "")
                         .arg(delta)
                         .arg(decimalText(double(n) / m_model_count, 2));
        }
        html += QString("<p style='margin-top: 8px'><b>%1</b> <span style='color:gray'>%2 · %3 entries%4</span> "
                        "<a href='remove:%5'>remove</a><br>")
                    .arg(e.name.toHtmlEscaped(), e.kind, numberText(e.vocab_size), versus)
                    .arg(i);
        if (e.generation != m_generation) {
            html += tr("<i>tokenizing…</i></p>");
            continue;
        }
        int colour = 0, previous_begin = -1;
        for (const auto& [id, span] : e.tokens) {
            const QByteArray bytes = m_utf8.mid(span.first, span.second - span.first);
            // Byte tokens of one character share its span: show the character once.
            // A byte-level token can hold part of a character: its bytes are shown, not a replacement sign.
            const QString decoded = QString::fromUtf8(bytes);
            const QString text = span.first == previous_begin ? QString("+")
                                 : decoded.toUtf8() != bytes  ? "‹" + QString::fromLatin1(bytes.toHex(' ')) + "›"
                                                              : visible_whitespace(decoded).toHtmlEscaped();
            previous_begin = span.first;
            const QColor c = token_span_colour(colour++);
            html += QString("<span title='id %1' style='background-color: rgba(%2,%3,%4,%5)'>%6</span>")
                        .arg(id)
                        .arg(c.red())
                        .arg(c.green())
                        .arg(c.blue())
                        .arg(c.alpha())
                        .arg(text);
        }
        html += "</p>";
    }
    m_view->setHtml(html + "</div>");
}

} // namespace tokenscope::ui
