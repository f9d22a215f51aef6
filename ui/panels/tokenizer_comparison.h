// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <QByteArray>
#include <QString>
#include <QStringList>
#include <QWidget>
#include <memory>
#include <vector>

class QComboBox;
class QLabel;
class QTextBrowser;

namespace engine {
class ComparisonTokenizer;
struct Token;
} // namespace engine

namespace tokenscope::ui {

// The same text through other tokenizers, side by side with the model's: any GGUF file's
// vocabulary (read without its weights) or an OpenAI .tiktoken rank file (cl100k_base,
// o200k_base), with the counts compared. Opening and encoding run on a worker thread; the
// tokenizers are immutable, so results come back as plain values.
class TokenizerComparison : public QWidget {
    Q_OBJECT
public:
    struct Entry {
        QString path;
        QString name;
        QString kind;
        qulonglong vocab_size = 0;
        std::shared_ptr<const engine::ComparisonTokenizer> tokenizer;
        std::vector<std::pair<int, std::pair<int, int>>> tokens; // id, byte span; for the current text
        quint64 generation = 0;                                  // of the text they belong to
    };

    explicit TokenizerComparison(QWidget* parent = nullptr);

    // Opens a tokenizer in the background; answers with changed() or failed().
    void addTokenizer(const QString& path);
    void removeTokenizer(int index);
    // The text now shown and the model's own count (for the comparison line).
    void setText(const QByteArray& utf8, int model_count, const QString& model_name);
    const std::vector<Entry>& entries() const { return m_entries; }
    bool settled() const; // every entry has tokens for the current text
    QString html() const;
    // .tiktoken files in the data directory and other GGUF models found on this machine.
    static QStringList discoverTokenizers();

signals:
    void changed();
    void failed(const QString& message);

private:
    void encode(std::size_t index);
    void render();

    std::vector<Entry> m_entries;
    QByteArray m_utf8;
    int m_model_count = 0;
    QString m_model_name;
    quint64 m_generation = 0;
    QComboBox* m_pick = nullptr;
    QTextBrowser* m_view = nullptr;
    QLabel* m_note = nullptr;
};

} // namespace tokenscope::ui
