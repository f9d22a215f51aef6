// SPDX-License-Identifier: GPL-3.0-or-later
// llama.cpp's own tokenizer test sets: every models/ggml-vocab-*.gguf of the llama.cpp source tree
// (TOKENSCOPE_LLAMA_CPP_SRC, unpacked by scripts/setup.sh test) is a row, so a vocabulary added
// upstream becomes a case here without an edit. A vocabulary with <file>.inp/.out must give exactly
// the .out ids for every case, tokenized as llama.cpp's test-tokenizer-0 does (no BOS/EOS, control
// tokens' text stays text). The tokenizer models Tokenscope refuses by design are named below and
// their refusal is asserted; a vocabulary without cases must load and round-trip a text.
#include "chat/chat_prompt.h"
#include "gguf/gguf_file.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QTest>
#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <random>

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

// Tokens compared whole: ids and byte spans.
bool same_tokens(const std::vector<engine::Token>& a, const std::vector<engine::Token>& b)
{
    if (a.size() != b.size())
        return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i].id != b[i].id || a[i].byte_begin != b[i].byte_begin || a[i].byte_end != b[i].byte_end)
            return false;
    return true;
}

std::string read_text(const QString& path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll().toStdString() : std::string();
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

    // Tokenizer::encode_after: a text edited the way a chat prompt changes while it is typed and sent
    // (typed on, a character deleted, an edit anywhere, a new turn) encodes exactly as encode() does,
    // for every vocabulary; with control tokens in the text, the edits reuse the tokens before them.
    void resumedEncoding_data() { vocabulary_data(); }

    void resumedEncoding()
    {
        QFETCH(QString, path);
        std::unique_ptr<Tokenizer> tokenizer;
        try {
            tokenizer = std::make_unique<Tokenizer>(
                engine::Vocab::from_gguf(*engine::gguf::GgufFile::open(path.toStdString())));
        } catch (const engine::Error& e) {
            QSKIP(qPrintable(QString("refused: %1 (the vocabulary test says so)").arg(e.what())));
        }
        const engine::Vocab& vocab = tokenizer->vocab();
        std::vector<std::string> controls; // a few of its control tokens, as a chat template writes them
        for (std::size_t id = 0; id < vocab.tokens.size() && controls.size() < 3; ++id) {
            const auto t = engine::TokenId(id);
            if (vocab.type_of(t) == engine::TokenType::Control && vocab.tokens[id].size() > 2 && vocab.bos != t &&
                vocab.eos != t)
                controls.push_back(vocab.tokens[id]);
        }
        std::vector<std::string> texts = {"Hello world, it's 2024!", " Ünïcödé — 東京 🙂",
                                          "\n\tint x = 42;\n"};
        QString format_error;
        if (const auto cases = read_cases(path, format_error))
            for (const Case& c : *cases)
                if (!c.text.empty() && texts.size() < 16)
                    texts.push_back(c.text);
        std::string text;
        for (std::size_t i = 0; i < texts.size(); ++i)
            text += (controls.empty() ? std::string() : controls[i % controls.size()]) + texts[i];
        std::vector<engine::Token> tokens = tokenizer->encode(text);
        std::mt19937 rng(7);
        int resumed = 0;
        for (int round = 0; round < 48; ++round) {
            std::string next = text;
            switch (round % 4) {
            case 0: // typed on
                next += texts[std::size_t(round) % texts.size()].substr(0, 4);
                break;
            case 1: // a character deleted (ASCII: the text stays UTF-8)
                if (!next.empty() && static_cast<unsigned char>(next.back()) < 0x80)
                    next.pop_back();
                break;
            case 2: { // an edit anywhere, at a character boundary
                std::size_t at = rng() % (next.size() + 1);
                while (at < next.size() && (static_cast<unsigned char>(next[at]) & 0xC0) == 0x80)
                    ++at;
                next.insert(at, "x y");
                break;
            }
            default: // a new turn
                next += controls.empty() ? std::string("\n") : controls[std::size_t(round) % controls.size()];
            }
            std::size_t reused = 0;
            const auto again = tokenizer->encode_after(next, text, tokens, {}, &reused);
            const auto full = tokenizer->encode(next);
            QVERIFY2(same_tokens(again, full), qPrintable(QString("round %1: resumed encoding differs").arg(round)));
            resumed += reused > 0 ? 1 : 0;
            text = next;
            tokens = full;
        }
        if (!controls.empty())
            QVERIFY2(resumed > 0, "no edit reused the tokens before a control token");
        qInfo("%s: 48 edits encode as a whole encoding does; %d reused earlier tokens", QTest::currentDataTag(),
              resumed);
    }

    // A template that rewrites earlier turns (Qwen3 drops an answered turn's <think> block once a
    // newer question follows): the chat prompt is tokenized again from the control token before the
    // first changed byte — not only its new end — and equals a whole encoding; asked again for the
    // same conversation (the fit check, then the reply), nothing is rendered or tokenized.
    void rewritingTemplateResumesBeforeTheChange()
    {
        const std::string source = read_text(m_models + "/templates/Qwen-Qwen3-0.6B.jinja");
        QVERIFY2(!source.empty(), "models/templates/Qwen-Qwen3-0.6B.jinja is missing");
        const Tokenizer tokenizer(engine::Vocab::from_gguf(
            *engine::gguf::GgufFile::open((m_models + "/ggml-vocab-qwen2.gguf").toStdString())));
        engine::TemplateTokens special;
        if (tokenizer.vocab().eos)
            special.eos = tokenizer.vocab().tokens[std::size_t(*tokenizer.vocab().eos)];
        const engine::ChatStyle style = engine::model_chat_style(source, "qwen3", special);
        QVERIFY2(style.notice.empty(), style.notice.c_str());

        const engine::ChatMessage question{"user", "What is 2+2?"};
        const engine::ChatMessage answer{"assistant", "<think>\nA small sum.\n</think>\n\n4"};
        engine::ChatPromptBuilder builder;
        const auto before = builder.build(tokenizer, style, {question, answer}, 4096, 64);
        QVERIFY(before->text.find("A small sum.") != std::string::npos); // the latest answer keeps its reasoning
        const auto counted = builder.counters();
        const auto after = builder.build(tokenizer, style, {question, answer, {"user", "And 3+3?"}}, 4096, 64);
        QVERIFY(after->text.find("A small sum.") == std::string::npos); // …which goes once a question follows

        QVERIFY(same_tokens(after->tokens, tokenizer.encode(after->text)));
        const std::size_t differ = std::size_t(
            std::mismatch(before->text.begin(), before->text.end(), after->text.begin()).first - before->text.begin());
        QVERIFY(differ < before->text.size()); // the history changed, not only its end
        const std::size_t tokenized = builder.counters().bytes_tokenized - counted.bytes_tokenized;
        QVERIFY2(tokenized < after->text.size(), "the whole prompt was tokenized again");
        QVERIFY2(tokenized >= after->text.size() - differ, "tokenizing resumed after the first changed byte");
        QCOMPARE(builder.counters().renders - counted.renders, std::size_t(1));
        QCOMPARE(builder.counters().tokenizations - counted.tokenizations, std::size_t(1));

        const auto again = builder.build(tokenizer, style, {question, answer, {"user", "And 3+3?"}}, 4096, 64);
        QCOMPARE(again.get(), after.get());
        QCOMPARE(builder.counters().renders - counted.renders, std::size_t(1));
        QCOMPARE(builder.counters().tokenizations - counted.tokenizations, std::size_t(1));
        qInfo("Qwen3: %zu of %zu bytes tokenized again after the history changed at byte %zu", tokenized,
              after->text.size(), differ);
    }
};

QTEST_GUILESS_MAIN(TestVocabCorpus)
#include "test_vocab_corpus.moc"
