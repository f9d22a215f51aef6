// SPDX-License-Identifier: GPL-3.0-or-later
// Saved runs (engine/run/run_file.h): what is written reads back — the document, the model's
// identity, F32 arrays bit for bit, F16 arrays as their F16 roundings, the model's vocabulary
// (which tokenizes as the model does) — and the size announced before saving is the file's; a file
// damaged anywhere (a flipped byte at 200 places, truncated at any length), one written by a newer
// or older version, or a model opened as a run is refused with a message that says which and names
// the file, never read as if it were right. SHA-256 against the standard's test vectors.
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "run/run_file.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/fp16.h"
#include "util/sha256.h"

#include <QFile>
#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

using namespace engine;

namespace {

std::vector<std::byte> read_all(const QString& path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        return {};
    const QByteArray b = f.readAll();
    const auto* p = reinterpret_cast<const std::byte*>(b.constData());
    return {p, p + b.size()};
}

void write_all(const QString& path, std::span<const std::byte> bytes)
{
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    QCOMPARE(f.write(reinterpret_cast<const char*>(bytes.data()), qint64(bytes.size())), qint64(bytes.size()));
}

run::RunContents sample_contents()
{
    run::RunContents c;
    c.writer = "test_run_file";
    c.model = {"model.gguf", "gemma3", std::string(64, 'a'), 12345};
    c.document = R"({"format":1,"stepper":{"tokens":[{"id":2,"text":"<bos>"}],"logits":"stepper.logits"}})";
    std::vector<float> logits;
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 8.0f);
    for (int i = 0; i < 6 * 50; ++i)
        logits.push_back(normal(rng));
    logits[3] = -0.0f;
    logits[4] = std::numeric_limits<float>::denorm_min();
    c.arrays.push_back({"stepper.logits", false, {6, 50}, logits});
    std::vector<float> weights;
    for (int i = 0; i < 16 * 16; ++i)
        weights.push_back(std::uniform_real_distribution<float>(0.0f, 1.0f)(rng));
    c.arrays.push_back({"attention.3.1.weights", true, {16, 16}, weights});
    return c;
}

bool message_is_clear(const std::string& message, const std::string& file)
{
    if (message.find(file) == std::string::npos)
        return false;
    for (const char* why : {"damaged", "not a saved Tokenscope run", "newer Tokenscope", "older Tokenscope"})
        if (message.find(why) != std::string::npos)
            return true;
    return false;
}

} // namespace

class TestRunFile : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void sha256KnownVectors();
    void roundTrip();
    void withoutVocabulary();
    void damagedFilesAreRefused();
    void truncatedFilesAreRefused();
    void otherVersionsAreNamed();
    void aModelIsNotARun();
    void badContentsAreRefusedBeforeWriting();

private:
    QTemporaryDir m_dir;
    std::shared_ptr<const gguf::GgufFile> m_model;
    QString m_run; // written once by roundTrip, damaged by later cases (in copies)
};

void TestRunFile::initTestCase()
{
    REQUIRE_DEFAULT_MODEL(path);
    QVERIFY(m_dir.isValid());
    m_model = gguf::GgufFile::open(path);
    m_run = m_dir.filePath("run.tsrun");
}

void TestRunFile::sha256KnownVectors()
{
    QCOMPARE(sha256_hex({}), std::string("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
    const std::string abc = "abc";
    QCOMPARE(sha256_hex(std::as_bytes(std::span(abc.data(), abc.size()))),
             std::string("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    // A file longer than one 4 MiB read: the pieces hash as the whole.
    std::vector<std::byte> big(std::size_t(9) << 20);
    std::mt19937 rng(3);
    for (auto& b : big)
        b = std::byte(rng() & 0xff);
    const QString path = m_dir.filePath("big.bin");
    write_all(path, big);
    QCOMPARE(sha256_file(path.toStdString()), sha256_hex(big));
    QVERIFY_THROWS_EXCEPTION(IoError, sha256_file(m_dir.filePath("missing").toStdString()));
}

void TestRunFile::roundTrip()
{
    const run::RunContents c = sample_contents();
    const uint64_t announced = run::run_file_size(c, m_model.get());
    run::write_run_file(m_run.toStdString(), c, m_model.get());
    QCOMPARE(uint64_t(QFile(m_run).size()), announced);

    const run::OpenedRun r = run::read_run_file(m_run.toStdString());
    QCOMPARE(r.format, run::kFormatVersion);
    QCOMPARE(r.file_size, announced);
    QCOMPARE(r.contents.document, c.document);
    QCOMPARE(r.contents.writer, c.writer);
    QCOMPARE(r.contents.model.name, c.model.name);
    QCOMPARE(r.contents.model.architecture, c.model.architecture);
    QCOMPARE(r.contents.model.sha256, c.model.sha256);
    QCOMPARE(r.contents.model.file_size, c.model.file_size);
    QCOMPARE(r.contents.arrays.size(), c.arrays.size());
    const run::RunArray* logits = r.contents.find("stepper.logits");
    QVERIFY(logits && !logits->f16);
    QCOMPARE(logits->dims, (std::vector<uint64_t>{6, 50}));
    QCOMPARE(std::memcmp(logits->values.data(), c.arrays[0].values.data(), logits->values.size() * 4), 0);
    QVERIFY(std::signbit(logits->values[3]));
    const run::RunArray* weights = r.contents.find("attention.3.1.weights");
    QVERIFY(weights && weights->f16);
    QCOMPARE(weights->dims, (std::vector<uint64_t>{16, 16}));
    double largest_change = 0.0;
    for (std::size_t i = 0; i < weights->values.size(); ++i) {
        const float original = c.arrays[1].values[i];
        QCOMPARE(weights->values[i], fp16_to_f32(f32_to_fp16(original)));
        largest_change = std::max(largest_change, double(std::fabs(weights->values[i] - original)));
    }
    QVERIFY(largest_change > 0.0 && largest_change < 1e-3); // really F16, and only its rounding
    // The vocabulary came along: the run tokenizes as the model does.
    QVERIFY(r.tokenizer);
    const Tokenizer model_tokenizer(Vocab::from_gguf(*m_model));
    for (const std::string text : {"The river bank was steep.", "  naïve café — 東京\n\tx", "<start_of_turn>user"})
        QCOMPARE(r.tokenizer->encode_ids(text), model_tokenizer.encode_ids(text));
    QCOMPARE(r.tokenizer->vocab().size(), model_tokenizer.vocab().size());
}

void TestRunFile::withoutVocabulary()
{
    const QString path = m_dir.filePath("bare.tsrun");
    const run::RunContents c = sample_contents();
    run::write_run_file(path.toStdString(), c, nullptr);
    QCOMPARE(uint64_t(QFile(path).size()), run::run_file_size(c, nullptr));
    const run::OpenedRun r = run::read_run_file(path.toStdString());
    QVERIFY(!r.tokenizer);
    QCOMPARE(r.contents.document, c.document);
    QVERIFY(QFile(path).size() < QFile(m_run).size() / 10); // the vocabulary is most of a small run
}

void TestRunFile::damagedFilesAreRefused()
{
    const std::vector<std::byte> good = read_all(m_run);
    QVERIFY(good.size() > 1000);
    const QString path = m_dir.filePath("damaged.tsrun");
    // 200 places spread over the file (header, metadata, the vocabulary, the document, the arrays)
    // and the last byte; each one flipped on its own.
    std::vector<std::size_t> places;
    for (std::size_t i = 0; i < 200; ++i)
        places.push_back(i * (good.size() - 1) / 199);
    int refused = 0;
    for (std::size_t at : places) {
        std::vector<std::byte> bad = good;
        bad[at] ^= std::byte{0x5a};
        write_all(path, bad);
        try {
            (void)run::read_run_file(path.toStdString());
            QFAIL(qPrintable(QString("a byte changed at offset %1 of %2 went unnoticed").arg(at).arg(good.size())));
        } catch (const Error& e) {
            if (!message_is_clear(e.what(), "damaged.tsrun"))
                QFAIL(qPrintable(QString("offset %1: unclear message: %2").arg(at).arg(e.what())));
            ++refused;
        }
    }
    QCOMPARE(refused, 200);
}

void TestRunFile::truncatedFilesAreRefused()
{
    const std::vector<std::byte> good = read_all(m_run);
    const QString path = m_dir.filePath("short.tsrun");
    for (std::size_t length : {std::size_t(0), std::size_t(3), std::size_t(24), std::size_t(1000), good.size() / 3,
                               good.size() / 2, good.size() - 100, good.size() - 1}) {
        write_all(path, std::span(good).first(length));
        try {
            (void)run::read_run_file(path.toStdString());
            QFAIL(qPrintable(QString("a file cut to %1 of %2 bytes was read").arg(length).arg(good.size())));
        } catch (const FormatError& e) {
            QVERIFY2(std::string(e.what()).find("damaged") != std::string::npos, e.what());
            QVERIFY2(std::string(e.what()).find("short.tsrun") != std::string::npos, e.what());
        }
    }
}

void TestRunFile::otherVersionsAreNamed()
{
    for (uint32_t format : {run::kFormatVersion + 1, run::kOldestReadableFormat - 1}) {
        gguf::GgufWriter w;
        w.set_string("general.type", run::kFileType);
        w.set_u32("tokenscope.run.format", format);
        w.set_string("tokenscope.run.writer", "Tokenscope 9.9");
        w.set_string("tokenscope.run.document", "{}");
        const QString path = m_dir.filePath("other.tsrun");
        w.write(path.toStdString());
        try {
            (void)run::read_run_file(path.toStdString());
            QFAIL("a run of another format was read");
        } catch (const FormatError& e) {
            const std::string m = e.what();
            const bool newer = format > run::kFormatVersion;
            QVERIFY2(m.find(newer ? "newer Tokenscope" : "older Tokenscope") != std::string::npos, e.what());
            QVERIFY2(m.find("format " + std::to_string(format)) != std::string::npos, e.what());
            QVERIFY2(m.find("Tokenscope 9.9") != std::string::npos, e.what());
        }
    }
}

void TestRunFile::aModelIsNotARun()
{
    try {
        (void)run::read_run_file(testsupport::default_model_path());
        QFAIL("a model was read as a run");
    } catch (const FormatError& e) {
        QVERIFY2(std::string(e.what()).find("not a saved Tokenscope run (it is a model") != std::string::npos,
                 e.what());
    }
}

void TestRunFile::badContentsAreRefusedBeforeWriting()
{
    const QString path = m_dir.filePath("refused.tsrun");
    run::RunContents c = sample_contents();
    c.document = "{not json";
    QVERIFY_THROWS_EXCEPTION(Error, run::write_run_file(path.toStdString(), c, nullptr));
    c = sample_contents();
    c.document = "\"" + std::string(run::kMaxDocumentBytes, 'x') + "\""; // valid JSON, too long to read back
    QVERIFY_THROWS_EXCEPTION(Error, run::write_run_file(path.toStdString(), c, nullptr));
    c = sample_contents();
    c.arrays[0].dims = {7, 50}; // 350 values announced, 300 given
    QVERIFY_THROWS_EXCEPTION(Error, run::write_run_file(path.toStdString(), c, nullptr));
    QVERIFY(!QFile::exists(path));
    // A folder that does not exist: an I/O error, nothing written.
    QVERIFY_THROWS_EXCEPTION(
        IoError, run::write_run_file(m_dir.filePath("no/such/dir/x.tsrun").toStdString(), sample_contents(), nullptr));
}

QTEST_GUILESS_MAIN(TestRunFile)
#include "test_run_file.moc"
