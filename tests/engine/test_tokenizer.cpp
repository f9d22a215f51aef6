// SPDX-License-Identifier: GPL-3.0-or-later
// Tokenizers against llama.cpp: every text of tests/data/tokenizer/corpus.json, tokenized by the
// default model's SentencePiece vocabulary and by byte-level BPE vocabularies (one per
// pre-tokenizer), must give exactly llama.cpp's ids (fixtures from tests/reference/), decode back
// to the exact text, and carry byte spans that tile the input.
#include "gguf/gguf_file.h"
#include "model/model_locator.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTest>
#include <map>
#include <memory>

using engine::TokenId;
using engine::Tokenizer;

namespace {

QString fixture_dir()
{
    return QString::fromStdString(testsupport::data_dir()) + "/tokenizer";
}

// Vocabulary file of a fixture: the BPE test vocab, the chat model for its fixtures, else the
// default model.
std::string vocab_path(const QJsonObject& fixture)
{
    const QString model = fixture["model"].toString();
    if (model.startsWith("bpe-"))
        return (fixture_dir() + "/" + model).toStdString();
    if (model == engine::kChatModelFileName)
        return testsupport::chat_model_path();
    return testsupport::default_model_path();
}

std::string roundtrip_vocab_path(const QString& vocab)
{
    if (vocab == "default-model")
        return testsupport::default_model_path();
    if (vocab == "chat-model")
        return testsupport::chat_model_path();
    return (fixture_dir() + "/" + vocab).toStdString();
}

const Tokenizer& tokenizer_for(const std::string& path)
{
    static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
    auto& t = cache[path];
    if (!t)
        t = std::make_unique<Tokenizer>(engine::Vocab::from_gguf(*engine::gguf::GgufFile::open(path)));
    return *t;
}

QJsonObject read_json(const QString& path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        return {};
    return QJsonDocument::fromJson(f.readAll()).object();
}

QStringList fixture_files()
{
    return QDir(fixture_dir()).entryList({"fixtures-*.json"}, QDir::Files, QDir::Name);
}

QString ids_string(const std::vector<TokenId>& ids)
{
    QStringList s;
    for (auto id : ids)
        s << QString::number(id);
    return s.join(' ');
}

} // namespace

// An empty path means the default model is not installed (see REQUIRE_DEFAULT_MODEL).
#define REQUIRE_VOCAB_FILE(path)                                                                                       \
    if ((path).empty()) {                                                                                              \
        if (testsupport::model_may_be_missing())                                                                       \
            QSKIP("model not installed (TOKENSCOPE_ALLOW_NO_MODEL=1)");                                                \
        QFAIL("model not installed: run scripts/setup.sh");                                                            \
    }

class TestTokenizer : public QObject {
    Q_OBJECT
private slots:
    void fixturesCoverEveryVocabulary();
    void matchesLlamaCpp_data();
    void matchesLlamaCpp();
    void roundTrip_data();
    void roundTrip();
    void spansTileTheText_data() { roundTrip_data(); }
    void spansTileTheText();
    void controlTokensOnlyWhenParsed();
    void byteFallbackAndDecodeOfPieces();
};

void TestTokenizer::fixturesCoverEveryVocabulary()
{
    const QStringList files = fixture_files();
    for (const char* name : {"gemma3-270m", "qwen2.5-coder-0.5b", "bpe-gpt2", "bpe-llama-bpe", "bpe-qwen2",
                             "bpe-default", "bpe-tekken", "bpe-gpt-4o", "bpe-smaug-bpe", "bpe-dbrx", "bpe-refact"})
        for (const char* mode : {"special", "nospecial"})
            QVERIFY2(files.contains(QString("fixtures-%1-%2.json").arg(name, mode)), name);
    const auto corpus = read_json(fixture_dir() + "/corpus.json")["cases"].toArray();
    QVERIFY(corpus.size() >= 40);
    for (const QString& file : files)
        QCOMPARE(read_json(fixture_dir() + "/" + file)["cases"].toArray().size(), corpus.size());
}

void TestTokenizer::matchesLlamaCpp_data()
{
    QTest::addColumn<QString>("file");
    QTest::addColumn<int>("index");
    for (const QString& file : fixture_files()) {
        const auto cases = read_json(fixture_dir() + "/" + file)["cases"].toArray();
        for (int i = 0; i < cases.size(); ++i)
            QTest::newRow(qPrintable(file.mid(9).chopped(5) + "/" + cases[i].toObject()["name"].toString()))
                << file << i;
    }
}

void TestTokenizer::matchesLlamaCpp()
{
    QFETCH(QString, file);
    QFETCH(int, index);
    const QJsonObject fixture = read_json(fixture_dir() + "/" + file);
    const std::string path = vocab_path(fixture);
    REQUIRE_VOCAB_FILE(path);
    const QJsonObject settings = fixture["settings"].toObject();
    const QJsonObject c = fixture["cases"].toArray()[index].toObject();
    const QByteArray text = c["text"].toString().toUtf8();
    std::vector<TokenId> expected;
    for (const auto& id : c["ids"].toArray())
        expected.push_back(id.toInt());

    const auto ids = tokenizer_for(path).encode_ids(
        std::string_view(text.constData(), static_cast<std::size_t>(text.size())),
        {.add_special = settings["add_special"].toBool(), .parse_special = settings["parse_special"].toBool()});
    QVERIFY2(ids == expected,
             qPrintable("\n  ours:      " + ids_string(ids) + "\n  llama.cpp: " + ids_string(expected)));
}

void TestTokenizer::roundTrip_data()
{
    QTest::addColumn<QString>("vocab");
    QTest::addColumn<QString>("text");
    const auto corpus = read_json(fixture_dir() + "/corpus.json")["cases"].toArray();
    for (const char* vocab :
         {"default-model", "chat-model", "bpe-gpt2.gguf", "bpe-llama-bpe.gguf", "bpe-qwen2.gguf", "bpe-default.gguf",
          "bpe-tekken.gguf", "bpe-gpt-4o.gguf", "bpe-smaug-bpe.gguf", "bpe-dbrx.gguf", "bpe-refact.gguf"})
        for (const auto& c : corpus)
            QTest::newRow(qPrintable(QString(vocab) + "/" + c.toObject()["name"].toString()))
                << QString(vocab) << c.toObject()["text"].toString();
}

void TestTokenizer::roundTrip()
{
    QFETCH(QString, vocab);
    QFETCH(QString, text);
    const std::string path = roundtrip_vocab_path(vocab);
    REQUIRE_VOCAB_FILE(path);
    const Tokenizer& t = tokenizer_for(path);
    const std::string s = text.toStdString();
    // Control-token strings kept as text: the exact text comes back.
    QCOMPARE(t.decode(t.encode_ids(s, {.add_special = true, .parse_special = false})), s);
    // Control-token strings parsed as tokens: the text comes back when they are rendered.
    QCOMPARE(t.decode(t.encode_ids(s, {.add_special = true, .parse_special = true}),
                      {.remove_special = true, .render_special = true}),
             s);
}

void TestTokenizer::spansTileTheText()
{
    QFETCH(QString, vocab);
    QFETCH(QString, text);
    const std::string path = roundtrip_vocab_path(vocab);
    REQUIRE_VOCAB_FILE(path);
    const std::string s = text.toStdString();
    const auto tokens = tokenizer_for(path).encode(s, {.add_special = false, .parse_special = true});
    uint32_t covered = 0;
    const engine::Token* prev = nullptr;
    for (const auto& tok : tokens) {
        // Byte-fallback tokens of one character repeat that character's span; otherwise spans are
        // consecutive and non-empty.
        if (prev && tok.byte_begin == prev->byte_begin && tok.byte_end == prev->byte_end)
            continue;
        QCOMPARE(tok.byte_begin, covered);
        QVERIFY(tok.byte_end > tok.byte_begin);
        covered = tok.byte_end;
        prev = &tok;
    }
    QCOMPARE(covered, uint32_t(s.size()));
}

void TestTokenizer::controlTokensOnlyWhenParsed()
{
    REQUIRE_DEFAULT_MODEL(path);
    const Tokenizer& t = tokenizer_for(path);
    const std::string s = "<start_of_turn>user\nHi<end_of_turn>";
    const auto start = t.vocab().find("<start_of_turn>");
    const auto end = t.vocab().find("<end_of_turn>");
    QVERIFY(start && end);
    const auto parsed = t.encode_ids(s, {.add_special = false, .parse_special = true});
    QCOMPARE(parsed.front(), *start);
    QCOMPARE(parsed.back(), *end);
    const auto plain = t.encode_ids(s, {.add_special = false, .parse_special = false});
    QVERIFY(std::find(plain.begin(), plain.end(), *start) == plain.end());
    QVERIFY(std::find(plain.begin(), plain.end(), *end) == plain.end());
    // BOS comes from the metadata (add_bos_token = true for Gemma).
    QCOMPARE(t.encode_ids("x").front(), *t.vocab().bos);
    QVERIFY(t.encode_ids("").size() == 1);
    QVERIFY(t.encode_ids("", {.add_special = false}).empty());
    // End of generation includes <end_of_turn> and <eos>.
    const auto& eog = t.vocab().end_of_generation;
    QVERIFY(std::find(eog.begin(), eog.end(), *end) != eog.end());
    QVERIFY(std::find(eog.begin(), eog.end(), *t.vocab().eos) != eog.end());
}

void TestTokenizer::byteFallbackAndDecodeOfPieces()
{
    REQUIRE_DEFAULT_MODEL(path);
    const Tokenizer& t = tokenizer_for(path);
    // A plane-16 private-use character is not in Gemma's vocabulary: it falls back to <0xNN> byte tokens.
    const std::string s = "\xF4\x8F\xBF\xBD"; // U+10FFFD
    const auto tokens = t.encode(s, {.add_special = false});
    QCOMPARE(tokens.size(), std::size_t(4));
    for (const auto& tok : tokens) {
        QCOMPARE(t.vocab().type_of(tok.id), engine::TokenType::Byte);
        QCOMPARE(tok.byte_begin, 0u);
        QCOMPARE(tok.byte_end, 4u);
    }
    QCOMPARE(t.vocab().tokens[std::size_t(tokens[0].id)], std::string("<0xF4>"));
    QCOMPARE(t.token_to_piece(tokens[0].id), std::string("\xF4"));
    QCOMPARE(t.decode({tokens[0].id, tokens[1].id, tokens[2].id, tokens[3].id}), s);
    // ▁ in pieces is shown as a space.
    const auto hello = t.encode_ids(" hello", {.add_special = false});
    QCOMPARE(t.token_to_piece(hello.front()).front(), ' ');
}

QTEST_GUILESS_MAIN(TestTokenizer)
#include "test_tokenizer.moc"
