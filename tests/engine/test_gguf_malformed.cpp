// SPDX-License-Identifier: GPL-3.0-or-later
// The malformed-GGUF corpus: truncations at every structural boundary, bad magic and versions,
// absurd counts and lengths, bad tensor records, out-of-range and overlapping tensor data, unknown
// types. Each must give a FormatError naming the file, the offset and the fault — never a crash,
// a hang or a huge allocation (the suite also runs under ASan/UBSan in the sanitizer tree).
#include "gguf/gguf_file.h"
#include "gguf_builder.h"
#include "util/error.h"

#include <QDir>
#include <QTemporaryDir>
#include <QTest>

using engine::gguf::GgufFile;
using testsupport::GgufBuilder;
using testsupport::patch;

namespace {

// A small valid file with metadata of several kinds and two tensors; the corpus mutates it.
GgufBuilder base_builder()
{
    GgufBuilder b;
    b.add_string("general.architecture", "llama");
    b.add_u32("llama.block_count", 1);
    b.add_string_array("tokenizer.ggml.tokens", {"<unk>", "a", "b"});
    b.add_f32_array("tokenizer.ggml.scores", {0.f, -1.f, -2.f});
    b.add_tensor({"w0", 0, {4, 2}, std::vector<uint8_t>(32, 1)});
    b.add_tensor({"w1", 2, {32}, std::vector<uint8_t>(18, 2)}); // one Q4_0 block
    return b;
}

struct Case {
    QByteArray bytes;
    QString expected; // a phrase the message must contain
};

QByteArray to_qba(const std::vector<uint8_t>& v)
{
    return QByteArray(reinterpret_cast<const char*>(v.data()), static_cast<qsizetype>(v.size()));
}

std::vector<std::pair<std::string, Case>> corpus()
{
    std::vector<std::pair<std::string, Case>> cases;
    std::map<std::string, std::size_t> m;
    const std::vector<uint8_t> valid = base_builder().build(&m);
    auto add = [&](const std::string& name, const std::vector<uint8_t>& bytes, const char* expected) {
        cases.push_back({name, {to_qba(bytes), QString::fromUtf8(expected)}});
    };
    auto mutated = [&](auto&& fn) {
        auto b = valid;
        fn(b);
        return b;
    };

    // -- truncation at every structural boundary (and one byte into it) --
    add("empty file", {}, "not a GGUF file");
    add("three bytes", {'G', 'G', 'U'}, "not a GGUF file");
    for (const auto& [mark, offset] : m) {
        if (mark == "end" || offset == 0 || offset >= valid.size())
            continue;
        if (mark == "padding" && m["padding"] == m["data"])
            continue;
        add("truncated at " + mark, std::vector<uint8_t>(valid.begin(), valid.begin() + static_cast<long>(offset)),
            "truncated");
        if (offset + 1 < valid.size() && mark != "data" && mark.find(".data") == std::string::npos)
            add("truncated one byte into " + mark,
                std::vector<uint8_t>(valid.begin(), valid.begin() + static_cast<long>(offset) + 1), "truncated");
    }
    add("last data byte missing", std::vector<uint8_t>(valid.begin(), valid.end() - 1), "extends past the end");

    // -- header --
    add("bad magic", mutated([&](auto& b) { b[0] = 'X'; }), "magic");
    add("version 0", mutated([&](auto& b) { patch<uint32_t>(b, m["version"], 0); }), "unsupported GGUF version 0");
    add("version 1", mutated([&](auto& b) { patch<uint32_t>(b, m["version"], 1); }),
        "version 1 is no longer supported");
    add("version 4", mutated([&](auto& b) { patch<uint32_t>(b, m["version"], 4); }), "unsupported GGUF version 4");
    add("byte-swapped version", mutated([&](auto& b) { patch<uint32_t>(b, m["version"], 0x03000000); }), "big-endian");
    add("absurd metadata count", mutated([&](auto& b) { patch<uint64_t>(b, m["kv_count"], 1ull << 60); }),
        "metadata count");
    add("absurd tensor count", mutated([&](auto& b) { patch<uint64_t>(b, m["tensor_count"], 1ull << 60); }),
        "tensor count");

    // -- metadata --
    add("absurd key length", mutated([&](auto& b) { patch<uint64_t>(b, m["kv0"], 1ull << 60); }), "length");
    add("unknown value type", mutated([&](auto& b) { patch<uint32_t>(b, m["kv1.type"], 13); }),
        "unknown value type 13");
    add("absurd string length", mutated([&](auto& b) { patch<uint64_t>(b, m["kv0.value"], 0xFFFFFFFFFFFFFFF0ull); }),
        "more than the limit");
    // A string longer than the limit that the file really holds is refused before anything copies it.
    {
        GgufBuilder b;
        b.add_string("general.architecture", "llama");
        b.add_string("general.name", std::string((16u << 20) + 1, 'n'));
        add("metadata string over 16 MiB", b.build(),
            "string value of 'general.name' has length 16777217, more than the limit");
    }
    add("absurd array length 2^60", mutated([&](auto& b) { patch<uint64_t>(b, m["kv2.value"] + 4, 1ull << 60); }),
        "array elements");
    add("array of unknown element type", mutated([&](auto& b) { patch<uint32_t>(b, m["kv2.value"], 77); }),
        "array of unknown value type 77");
    {
        GgufBuilder b;
        b.add_raw("x.flag", 7, {2});
        add("bool with value 2", b.build(), "invalid value 2");
    }
    {
        GgufBuilder b;
        b.add_string("", "no key");
        add("empty key", b.build(), "empty key");
    }
    {
        GgufBuilder b;
        b.add_u32("dup.key", 1);
        b.add_u32("dup.key", 2);
        add("duplicate key", b.build(), "appears twice");
    }
    {
        // 40 levels of array<array<...>> each holding one element
        std::vector<uint8_t> v;
        for (int i = 0; i < 40; ++i) {
            auto t = GgufBuilder::pod<uint32_t>(9);
            auto n = GgufBuilder::pod<uint64_t>(1);
            v.insert(v.end(), t.begin(), t.end());
            v.insert(v.end(), n.begin(), n.end());
        }
        auto leaf = GgufBuilder::pod<uint32_t>(4);
        auto zero = GgufBuilder::pod<uint64_t>(0);
        v.insert(v.end(), leaf.begin(), leaf.end());
        v.insert(v.end(), zero.begin(), zero.end());
        GgufBuilder b;
        b.add_raw("deep", 9, v);
        add("arrays nested 40 deep", b.build(), "deeper than");
    }
    {
        GgufBuilder b = base_builder();
        b.add_u32("general.alignment", 48);
        b.alignment = 48;
        add("alignment not a power of two", b.build(), "power of two");
    }
    {
        GgufBuilder b = base_builder();
        b.add_string("general.alignment", "32");
        add("alignment of the wrong type", b.build(), "general.alignment");
    }

    // -- tensor records --
    auto tensor_case = [&](const std::string& name, GgufBuilder::Tensor t, const char* expected) {
        GgufBuilder b;
        b.add_string("general.architecture", "test");
        b.add_tensor(std::move(t));
        add(name, b.build(), expected);
    };
    tensor_case("tensor name of 64 bytes", {std::string(64, 'n'), 0, {1}, {0, 0, 0, 0}}, "more than the limit");
    tensor_case("empty tensor name", {"", 0, {1}, {0, 0, 0, 0}}, "empty name");
    tensor_case("five dimensions", {"t", 0, {1, 1, 1, 1, 1}, {0, 0, 0, 0}}, "dimensions");
    tensor_case("dimension 2^63", {"t", 0, {1ull << 63}, {}}, "absurd shape");
    tensor_case("dimension product overflows", {"t", 0, {1ull << 32, 1ull << 32}, {}}, "absurd shape");
    tensor_case("unknown tensor type 99", {"t", 99, {4}, std::vector<uint8_t>(16)}, "unknown type id 99");
    tensor_case("removed tensor type 4 (Q4_2)", {"t", 4, {32}, std::vector<uint8_t>(20)}, "unknown type id 4");
    tensor_case("row not a multiple of the block size", {"t", 2, {33}, std::vector<uint8_t>(36)}, "block size");
    tensor_case("misaligned tensor offset", {"t", 0, {4}, std::vector<uint8_t>(16), 8},
                "not a multiple of the alignment");
    tensor_case("tensor data past the end", {"t", 0, {4}, {}, 1 << 20}, "extends past the end");
    tensor_case("huge tensor in a small file", {"t", 0, {1ull << 40}, std::vector<uint8_t>(16)},
                "extends past the end");
    {
        GgufBuilder b;
        b.add_tensor({"a", 0, {16}, std::vector<uint8_t>(64), 0});
        b.add_tensor({"b", 0, {16}, std::vector<uint8_t>(64), 32});
        add("overlapping tensors", b.build(), "overlaps");
    }
    {
        GgufBuilder b;
        b.add_tensor({"a", 0, {8}, std::vector<uint8_t>(32), 64});
        b.add_tensor({"b", 0, {24}, std::vector<uint8_t>(96), 0}); // ends at 96, inside "a"
        add("overlapping tensors out of order", b.build(), "overlaps");
    }
    {
        GgufBuilder b;
        b.add_tensor({"same", 0, {4}, std::vector<uint8_t>(16)});
        b.add_tensor({"same", 0, {4}, std::vector<uint8_t>(16)});
        add("duplicate tensor name", b.build(), "appears twice");
    }
    return cases;
}

} // namespace

class TestGgufMalformed : public QObject {
    Q_OBJECT
private slots:
    void corpusIsLargeEnough();
    void rejectsCleanly_data();
    void rejectsCleanly();
    void rejectsCleanlyFromDisk_data() { rejectsCleanly_data(); }
    void rejectsCleanlyFromDisk();
};

void TestGgufMalformed::corpusIsLargeEnough()
{
    const auto c = corpus();
    QVERIFY2(c.size() >= 30, qPrintable(QString("only %1 malformed files").arg(c.size())));
    // The unmodified base file is valid: every failure below comes from the mutation alone.
    const auto valid = base_builder().build();
    QCOMPARE(
        GgufFile::parse({reinterpret_cast<const std::byte*>(valid.data()), valid.size()}, "base")->tensors().size(),
        std::size_t(2));
    // Optionally keep the corpus as seeds for the fuzzer.
    if (const char* dir = std::getenv("TOKENSCOPE_WRITE_MALFORMED_CORPUS")) {
        QDir().mkpath(dir);
        int i = 0;
        for (const auto& [name, c2] : c) {
            std::vector<uint8_t> v(c2.bytes.begin(), c2.bytes.end());
            QVERIFY(testsupport::write_file(std::string(dir) + "/malformed-" + std::to_string(i++) + ".gguf", v));
        }
    }
}

void TestGgufMalformed::rejectsCleanly_data()
{
    QTest::addColumn<QByteArray>("bytes");
    QTest::addColumn<QString>("expected");
    for (const auto& [name, c] : corpus())
        QTest::newRow(name.c_str()) << c.bytes << c.expected;
}

void TestGgufMalformed::rejectsCleanly()
{
    QFETCH(QByteArray, bytes);
    QFETCH(QString, expected);
    try {
        GgufFile::parse({reinterpret_cast<const std::byte*>(bytes.constData()), static_cast<std::size_t>(bytes.size())},
                        "corpus.gguf");
        QFAIL("the malformed file was accepted");
    } catch (const engine::FormatError& e) {
        const QString message = QString::fromUtf8(e.what());
        QVERIFY2(message.startsWith("corpus.gguf: offset "), qPrintable(message));
        QVERIFY2(message.contains(expected), qPrintable(message + "  (expected: " + expected + ")"));
    }
}

void TestGgufMalformed::rejectsCleanlyFromDisk()
{
    QFETCH(QByteArray, bytes);
    QFETCH(QString, expected);
    QTemporaryDir dir;
    const QString path = dir.filePath("bad.gguf");
    QVERIFY(testsupport::write_file(path.toStdString(), std::vector<uint8_t>(bytes.begin(), bytes.end())));
    try {
        GgufFile::open(path.toStdString());
        QFAIL("the malformed file was accepted");
    } catch (const engine::FormatError& e) {
        const QString message = QString::fromUtf8(e.what());
        QVERIFY2(message.startsWith(path + ": offset "), qPrintable(message));
        QVERIFY2(message.contains(expected), qPrintable(message));
    }
}

QTEST_GUILESS_MAIN(TestGgufMalformed)
#include "test_gguf_malformed.moc"
