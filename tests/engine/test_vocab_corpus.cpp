// SPDX-License-Identifier: GPL-3.0-or-later
// llama.cpp's own tokenizer test sets: every models/ggml-vocab-*.gguf of the llama.cpp source tree
// (TOKENSCOPE_LLAMA_CPP_SRC, unpacked by scripts/setup.sh test) is a row, so a vocabulary added
// upstream becomes a case here without an edit. A vocabulary with <file>.inp/.out must give exactly
// the .out ids for every case, tokenized as llama.cpp's test-tokenizer-0 does (no BOS/EOS, control
// tokens' text stays text). The tokenizer models Tokenscope refuses by design are named below and
// their refusal is asserted; a vocabulary without cases must load and round-trip a text.
#include "gguf/gguf_file.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QTest>
#include <map>
#include <memory>
#include <optional>

using engine::TokenId;
using engine::Tokenizer;

namespace {

// Vocabularies refused on purpose, with the tokenizer model the refusal must name: both are
// encoder (embedding) tokenizers, and Tokenscope runs decoder language models.
const std::map<QString, std::string> kRefused = {
    {"ggml-vocab-bert-bge.gguf", "bert"},     // WordPiece
    {"ggml-vocab-nomic-bert-moe.gguf", "t5"}, // Unigram
};

struct Case {
    std::string text;
    std::vector<TokenId> ids;
};

QByteArray read_all(const QString& path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

// The .inp/.out format of llama.cpp's tests: inputs separated by "\n__ggml_vocab_test__\n" (a
// trailing separator ends the list), one output line per input with space-separated ids.
std::optional<std::vector<Case>> read_cases(const QString& vocab_path, QString& error)
{
    const QString inp_path = vocab_path + ".inp", out_path = vocab_path + ".out";
    if (!QFile::exists(inp_path) && !QFile::exists(out_path))
        return std::nullopt;
    const std::string raw = read_all(inp_path).toStdString();
    const std::string sep = "\n__ggml_vocab_test__\n";
    std::vector<Case> cases;
    for (std::size_t pos = 0; pos < raw.size();) {
        const std::size_t next = raw.find(sep, pos);
        cases.push_back({raw.substr(pos, next == std::string::npos ? std::string::npos : next - pos), {}});
        if (next == std::string::npos)
            break;
        pos = next + sep.size();
    }
    const QList<QByteArray> lines = read_all(out_path).split('\n');
    const qsizetype n_lines = lines.size() - (lines.isEmpty() || lines.last().isEmpty() ? 1 : 0);
    if (cases.empty() || n_lines != static_cast<qsizetype>(cases.size())) {
        error = QString("%1 has %2 inputs but %3 has %4 output lines")
                    .arg(inp_path)
                    .arg(cases.size())
                    .arg(out_path)
                    .arg(n_lines);
        return std::vector<Case>{};
    }
    for (std::size_t i = 0; i < cases.size(); ++i) {
        for (const QByteArray& id : lines[static_cast<qsizetype>(i)].trimmed().split(' ')) {
            bool ok = id.isEmpty();
            if (!ok)
                cases[i].ids.push_back(id.toInt(&ok));
            if (!ok) {
                error = QString("%1 line %2: '%3' is not a token id").arg(out_path).arg(i + 1).arg(id);
                return std::vector<Case>{};
            }
        }
    }
    return cases;
}

QString ids_string(const std::vector<TokenId>& ids)
{
    QStringList s;
    for (auto id : ids)
        s << QString::number(id);
    return s.join(' ');
}

// The text with newlines and tabs visible, for failure messages.
QString visible(const std::string& text)
{
    QString s = QString::fromUtf8(text.data(), static_cast<qsizetype>(text.size()));
    s.replace('\n', "\\n").replace('\t', "\\t").replace('\r', "\\r");
    return s;
}

} // namespace

class TestVocabCorpus : public QObject {
    Q_OBJECT

private:
    QString m_models; // <llama.cpp>/models

private slots:
    void initTestCase()
    {
        REQUIRE_REFERENCE_DIR(root, "TOKENSCOPE_LLAMA_CPP_SRC");
        m_models = QString::fromStdString(root) + "/models";
        QVERIFY2(
            !QDir(m_models).entryList({"ggml-vocab-*.gguf"}, QDir::Files).isEmpty(),
            qPrintable(m_models + " holds no ggml-vocab-*.gguf: is TOKENSCOPE_LLAMA_CPP_SRC llama.cpp's source root?"));
    }

    void vocabulary_data()
    {
        QTest::addColumn<QString>("path");
        for (const QString& file : QDir(m_models).entryList({"ggml-vocab-*.gguf"}, QDir::Files, QDir::Name)) {
            const QString name = file.mid(int(strlen("ggml-vocab-"))).chopped(int(strlen(".gguf")));
            QTest::newRow(qPrintable(name)) << m_models + "/" + file;
        }
    }

    void vocabulary()
    {
        QFETCH(QString, path);
        const QString file = QFileInfo(path).fileName();
        const QByteArray tag = QTest::currentDataTag();
        QElapsedTimer timer;
        timer.start();

        std::unique_ptr<Tokenizer> tokenizer;
        std::string error;
        bool unsupported = false;
        try {
            tokenizer = std::make_unique<Tokenizer>(
                engine::Vocab::from_gguf(*engine::gguf::GgufFile::open(path.toStdString())));
        } catch (const engine::UnsupportedError& e) {
            error = e.what();
            unsupported = true;
        } catch (const engine::Error& e) {
            error = e.what();
        }

        if (auto refused = kRefused.find(file); refused != kRefused.end()) {
            QVERIFY2(!tokenizer, qPrintable(file + " loads now: take it off the refused list and check its cases"));
            QVERIFY2(unsupported && error.find("'" + refused->second + "'") != std::string::npos, error.c_str());
            qInfo("%s: refused as expected: %s", tag.constData(), error.c_str());
            return;
        }
        QVERIFY2(tokenizer, error.c_str());

        QString format_error;
        const auto cases = read_cases(path, format_error);
        QVERIFY2(format_error.isEmpty(), qPrintable(format_error));
        if (!cases) {
            // No reference ids: the vocabulary must at least tokenize and decode a text back.
            const std::string text = "Hello world, it's 2024!";
            QCOMPARE(tokenizer->decode(tokenizer->encode_ids(text, {.add_special = false, .parse_special = false})),
                     text);
            qInfo("%s: loads and round-trips (no .inp/.out cases)", tag.constData());
            return;
        }

        int passed = 0;
        QStringList failures;
        for (const Case& c : *cases) {
            // llama.cpp's test-tokenizer-0 tokenizes with add_special = false, parse_special = false.
            const auto ids = tokenizer->encode_ids(c.text, {.add_special = false, .parse_special = false});
            if (ids == c.ids) {
                ++passed;
                continue;
            }
            if (failures.size() < 5)
                failures << QString("  '%1'\n    expected %2\n    got      %3")
                                .arg(visible(c.text), ids_string(c.ids), ids_string(ids));
        }
        qInfo("%s: %d/%d cases pass (%lld ms)", tag.constData(), passed, int(cases->size()), timer.elapsed());
        QVERIFY2(passed == int(cases->size()), qPrintable("first failures:\n" + failures.join('\n')));
    }
};

QTEST_GUILESS_MAIN(TestVocabCorpus)
#include "test_vocab_corpus.moc"
