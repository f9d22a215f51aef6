// SPDX-License-Identifier: GPL-3.0-or-later
// The GGUF writer: files it writes read back through GgufFile with the same metadata (every value
// type, arrays, values cloned from another file) and the same tensor bytes; its layout matches the
// test builder's byte for byte; alignment, replacement of keys, bad input and atomic replacement.
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gguf_builder.h"
#include "gguf_compare.h"
#include "util/error.h"

#include <QDir>
#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <fstream>
#include <list>

using engine::GgmlType;
using engine::gguf::GgufFile;
using engine::gguf::GgufWriter;
using engine::gguf::ValueType;
using testsupport::GgufBuilder;

namespace {

std::vector<std::byte> pattern_bytes(std::size_t n, uint8_t seed)
{
    std::vector<std::byte> b(n);
    for (std::size_t i = 0; i < n; ++i)
        b[i] = static_cast<std::byte>(static_cast<uint8_t>(seed + i * 7));
    return b;
}

std::vector<uint8_t> read_bytes(const std::string& path)
{
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

bool same_bytes(std::span<const std::byte> a, const std::vector<std::byte>& b)
{
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

// The parsed file views the bytes, so they are kept for the whole run.
std::shared_ptr<const GgufFile> parse(std::vector<uint8_t> bytes)
{
    static std::list<std::vector<uint8_t>> kept;
    const auto& b = kept.emplace_back(std::move(bytes));
    return GgufFile::parse({reinterpret_cast<const std::byte*>(b.data()), b.size()}, "source.gguf");
}

} // namespace

class TestGgufWriter : public QObject {
    Q_OBJECT
private slots:
    void everyValueTypeRoundTrips();
    void tensorsRoundTrip();
    void layoutMatchesBuilder();
    void clonedMetadataIsIdentical();
    void customAlignment();
    void setReplacesInPlace();
    void rejectsBadInput();
    void writeIsAtomic();

private:
    QTemporaryDir m_dir;
    std::string path(const char* name) const { return m_dir.filePath(name).toStdString(); }
};

void TestGgufWriter::everyValueTypeRoundTrips()
{
    GgufWriter w;
    w.set_string("general.architecture", "test");
    w.set_u8("v.u8", 250);
    w.set_i8("v.i8", -7);
    w.set_u16("v.u16", 65000);
    w.set_i16("v.i16", -30000);
    w.set_u32("v.u32", 4000000000u);
    w.set_i32("v.i32", -2000000000);
    w.set_u64("v.u64", 1ull << 40);
    w.set_i64("v.i64", -(1ll << 40));
    w.set_f32("v.f32", 1.5f);
    w.set_f64("v.f64", 2.25);
    w.set_bool("v.true", true);
    w.set_bool("v.false", false);
    w.set_string("v.string", "héllo ▁ world");
    w.set_string("v.empty", "");
    const std::vector<std::string> strings{"a", "", "ccc"};
    w.set_string_array("v.strings", strings);
    const std::vector<std::string_view> views{"x", "yy"};
    w.set_string_array("v.views", views);
    const std::vector<int32_t> ints{3, -4, 5};
    w.set_i32_array("v.ints", ints);
    const std::vector<uint32_t> uints{7, 4000000000u};
    w.set_u32_array("v.uints", uints);
    const std::vector<float> floats{0.5f, -1.0f, 1e-6f};
    w.set_f32_array("v.floats", floats);
    const std::vector<double> doubles{0.25, -8.0};
    w.set_packed_array("v.doubles", ValueType::Float64, doubles.size(), std::as_bytes(std::span(doubles)));
    const std::vector<uint8_t> bools{1, 0, 1};
    w.set_packed_array("v.bools", ValueType::Bool, bools.size(), std::as_bytes(std::span(bools)));
    w.set_i32_array("v.no_ints", std::span<const int32_t>());
    QCOMPARE(w.metadata_count(), std::size_t(23));
    w.write(path("values.gguf"));

    const auto f = GgufFile::open(path("values.gguf"));
    QCOMPARE(f->version(), 3u);
    QCOMPARE(f->metadata().size(), std::size_t(23));
    QCOMPARE(f->metadata()[1].key, std::string("v.u8")); // written in the order set
    QCOMPARE(f->find("v.u8")->type, ValueType::UInt8);
    QCOMPARE(*f->get_int("v.u8"), 250);
    QCOMPARE(f->find("v.i8")->type, ValueType::Int8);
    QCOMPARE(*f->get_int("v.i8"), -7);
    QCOMPARE(f->find("v.u16")->type, ValueType::UInt16);
    QCOMPARE(*f->get_int("v.u16"), 65000);
    QCOMPARE(*f->get_int("v.i16"), -30000);
    QCOMPARE(f->find("v.u32")->type, ValueType::UInt32);
    QCOMPARE(*f->get_int("v.u32"), 4000000000ll);
    QCOMPARE(*f->get_int("v.i32"), -2000000000ll);
    QCOMPARE(f->find("v.u64")->type, ValueType::UInt64);
    QCOMPARE(*f->get_int("v.u64"), 1ll << 40);
    QCOMPARE(f->find("v.i64")->type, ValueType::Int64);
    QCOMPARE(*f->get_int("v.i64"), -(1ll << 40));
    QCOMPARE(f->find("v.f32")->type, ValueType::Float32);
    QCOMPARE(*f->get_float("v.f32"), 1.5);
    QCOMPARE(f->find("v.f64")->type, ValueType::Float64);
    QCOMPARE(*f->get_float("v.f64"), 2.25);
    QCOMPARE(*f->get_bool("v.true"), true);
    QCOMPARE(*f->get_bool("v.false"), false);
    QCOMPARE(std::string(*f->get_string("v.string")), std::string("héllo ▁ world"));
    QCOMPARE(std::string(*f->get_string("v.empty")), std::string());

    const auto* s = f->get_array("v.strings");
    QVERIFY(s);
    QCOMPARE(s->element_type, ValueType::String);
    QCOMPARE(s->count, uint64_t(3));
    QCOMPARE(std::string(s->strings[0]), std::string("a"));
    QCOMPARE(std::string(s->strings[1]), std::string());
    QCOMPARE(std::string(s->strings[2]), std::string("ccc"));
    QCOMPARE(std::string(f->get_array("v.views")->strings[1]), std::string("yy"));
    QCOMPARE(f->get_array("v.ints")->element_type, ValueType::Int32);
    QCOMPARE(*f->get_array("v.ints")->to_ints(), (std::vector<int64_t>{3, -4, 5}));
    QCOMPARE(f->get_array("v.uints")->element_type, ValueType::UInt32);
    QCOMPARE(*f->get_array("v.uints")->to_ints(), (std::vector<int64_t>{7, 4000000000ll}));
    QCOMPARE(*f->get_array("v.floats")->to_floats(), floats);
    QCOMPARE(f->get_array("v.doubles")->element_type, ValueType::Float64);
    QCOMPARE(*f->get_array("v.doubles")->float_at(1), -8.0);
    QCOMPARE(f->get_array("v.bools")->element_type, ValueType::Bool);
    QCOMPARE(f->get_array("v.bools")->count, uint64_t(3));
    QCOMPARE(f->get_array("v.no_ints")->count, uint64_t(0));
    QVERIFY(f->tensors().empty());
}

void TestGgufWriter::tensorsRoundTrip()
{
    GgufWriter w;
    w.set_string("general.architecture", "test");
    const std::vector<uint64_t> vec{5};
    const std::vector<uint64_t> mat{64, 3};
    const std::vector<uint64_t> kq{256, 2, 1};
    const std::vector<uint64_t> four{2, 3, 4, 5};
    const auto f32 = pattern_bytes(5 * 4, 1); // 20 bytes: the next tensor needs padding
    const auto q80 = pattern_bytes(2 * 3 * 34, 2);
    const auto q4k = pattern_bytes(2 * 144, 3);
    const auto f16 = pattern_bytes(120 * 2, 4);
    w.add_tensor("a.f32", GgmlType::F32, vec, f32);
    w.add_tensor("b.q8_0", GgmlType::Q8_0, mat, q80);
    w.add_tensor("c.q4_k", GgmlType::Q4_K, kq, GgufWriter::TensorFill([&](std::span<std::byte> out) {
                     QCOMPARE(out.size(), q4k.size());
                     std::copy(q4k.begin(), q4k.end(), out.begin());
                 }));
    w.add_tensor("d.f16", GgmlType::F16, four, f16);
    QCOMPARE(w.tensor_count(), std::size_t(4));
    w.write(path("tensors.gguf"));

    const auto f = GgufFile::open(path("tensors.gguf"));
    QCOMPARE(f->alignment(), 32u);
    QCOMPARE(f->data_offset() % 32, uint64_t(0));
    QCOMPARE(f->tensors().size(), std::size_t(4));
    const char* names[] = {"a.f32", "b.q8_0", "c.q4_k", "d.f16"};
    const std::vector<std::byte>* data[] = {&f32, &q80, &q4k, &f16};
    uint64_t expected_offset = 0;
    for (int i = 0; i < 4; ++i) {
        const auto& t = f->tensors()[static_cast<std::size_t>(i)];
        QCOMPARE(t.name, std::string(names[i]));
        QCOMPARE(t.offset, expected_offset); // sequential, each start aligned (what ggml requires)
        QVERIFY(same_bytes(f->tensor_data(t), *data[i]));
        expected_offset += (t.n_bytes + 31) / 32 * 32;
    }
    QCOMPARE(f->tensors()[1].type.type, GgmlType::Q8_0);
    QCOMPARE(f->tensors()[1].n_dims, 2u);
    QCOMPARE(f->tensors()[1].ne[0], uint64_t(64));
    QCOMPARE(f->tensors()[1].ne[1], uint64_t(3));
    QCOMPARE(f->tensors()[2].n_dims, 3u);
    QCOMPARE(f->tensors()[3].n_dims, 4u);
    QCOMPARE(f->tensors()[3].ne[3], uint64_t(5));
    // The last tensor is padded too, as ggml and gguf-py write it.
    QCOMPARE(f->file_size(), f->data_offset() + expected_offset);
}

void TestGgufWriter::layoutMatchesBuilder()
{
    // The test builder is an independent encoder of the same format: equal bytes, except that
    // the writer pads the last tensor to the alignment.
    GgufBuilder b;
    GgufWriter w;
    b.add_string("general.architecture", "llama");
    w.set_string("general.architecture", "llama");
    b.add_u32("llama.block_count", 2);
    w.set_u32("llama.block_count", 2);
    b.add_f32("llama.rope.freq_base", 10000.0f);
    w.set_f32("llama.rope.freq_base", 10000.0f);
    b.add_string_array("tokenizer.ggml.tokens", {"a", "b"});
    const std::vector<std::string> tokens{"a", "b"};
    w.set_string_array("tokenizer.ggml.tokens", tokens);
    b.add_i32_array("tokenizer.ggml.token_type", {1, 3});
    const std::vector<int32_t> types{1, 3};
    w.set_i32_array("tokenizer.ggml.token_type", types);
    const auto t1 = pattern_bytes(3 * 4, 9);
    const auto t2 = pattern_bytes(34, 10);
    b.add_tensor({"x",
                  0,
                  {3},
                  std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(t1.data()),
                                       reinterpret_cast<const uint8_t*>(t1.data()) + t1.size())});
    b.add_tensor({"y",
                  8,
                  {32},
                  std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(t2.data()),
                                       reinterpret_cast<const uint8_t*>(t2.data()) + t2.size())});
    w.add_tensor("x", GgmlType::F32, std::vector<uint64_t>{3}, t1);
    w.add_tensor("y", GgmlType::Q8_0, std::vector<uint64_t>{32}, t2);
    w.write(path("layout.gguf"));

    const auto expected = b.build();
    const auto written = read_bytes(path("layout.gguf"));
    QCOMPARE(written.size(), (expected.size() + 31) / 32 * 32);
    QVERIFY(std::equal(expected.begin(), expected.end(), written.begin()));
    QVERIFY(std::all_of(written.begin() + static_cast<std::ptrdiff_t>(expected.size()), written.end(),
                        [](uint8_t c) { return c == 0; }));
}

void TestGgufWriter::clonedMetadataIsIdentical()
{
    // A source file with every value type, including an array of arrays, cloned key by key.
    GgufBuilder b;
    b.add_string("general.architecture", "test");
    b.add_u8("v.u8", 1);
    b.add_i8("v.i8", -1);
    b.add_u16("v.u16", 2);
    b.add_i16("v.i16", -2);
    b.add_u32("v.u32", 3);
    b.add_i32("v.i32", -3);
    b.add_u64("v.u64", 4);
    b.add_i64("v.i64", -4);
    b.add_f32("v.f32", 0.1f);
    b.add_f64("v.f64", 0.2);
    b.add_bool("v.bool", true);
    b.add_string("v.string", "text");
    b.add_string_array("v.strings", {"p", "", "q"});
    b.add_f32_array("v.floats", {1.0f, -0.0f, 3.5f});
    b.add_i32_array("v.ints", {});
    std::vector<uint8_t> nested = GgufBuilder::pod<uint32_t>(9); // [[1, 2], [3]] of u32
    for (auto part : {GgufBuilder::pod<uint64_t>(2), GgufBuilder::pod<uint32_t>(4), GgufBuilder::pod<uint64_t>(2),
                      GgufBuilder::pod<uint32_t>(1), GgufBuilder::pod<uint32_t>(2), GgufBuilder::pod<uint32_t>(4),
                      GgufBuilder::pod<uint64_t>(1), GgufBuilder::pod<uint32_t>(3)})
        nested.insert(nested.end(), part.begin(), part.end());
    b.add_raw("v.nested", 9, nested);
    b.add_raw("v.u8s", 9, GgufBuilder::pod_array<uint8_t>(0, {9, 8, 7}));
    b.add_raw("v.i64s", 9, GgufBuilder::pod_array<int64_t>(11, {-1, 1ll << 50}));
    const auto source = parse(b.build());

    GgufWriter w;
    for (const auto& e : source->metadata())
        w.set_value(e.key, e.value);
    w.write(path("clone.gguf"));

    const auto f = GgufFile::open(path("clone.gguf"));
    QCOMPARE(f->metadata().size(), source->metadata().size());
    for (std::size_t i = 0; i < source->metadata().size(); ++i) {
        const auto& want = source->metadata()[i];
        const auto& got = f->metadata()[i];
        QCOMPARE(got.key, want.key);
        QVERIFY2(testsupport::same_value(got.value, want.value), want.key.c_str());
    }
    QCOMPARE(*f->get_array("v.nested")->arrays[1].to_ints(), (std::vector<int64_t>{3}));
}

void TestGgufWriter::customAlignment()
{
    GgufWriter w;
    w.set_u32("general.alignment", 64);
    QCOMPARE(w.alignment(), 64u);
    w.add_tensor("a", GgmlType::F32, std::vector<uint64_t>{3}, pattern_bytes(12, 1));
    w.add_tensor("b", GgmlType::F32, std::vector<uint64_t>{5}, pattern_bytes(20, 2));
    w.write(path("align64.gguf"));
    const auto f = GgufFile::open(path("align64.gguf"));
    QCOMPARE(f->alignment(), 64u);
    QCOMPARE(f->data_offset() % 64, uint64_t(0));
    QCOMPARE(f->tensors()[1].offset, uint64_t(64));
    QVERIFY(same_bytes(f->tensor_data(f->tensors()[1]), pattern_bytes(20, 2)));

    GgufWriter bad;
    bad.set_u32("general.alignment", 48);
    QVERIFY_THROWS_EXCEPTION(engine::Error, bad.write(path("bad-align.gguf")));
    bad.set_u64("general.alignment", 64); // ggml accepts only UINT32
    QVERIFY_THROWS_EXCEPTION(engine::Error, bad.write(path("bad-align.gguf")));
    QVERIFY(!QFile::exists(QString::fromStdString(path("bad-align.gguf"))));
}

void TestGgufWriter::setReplacesInPlace()
{
    GgufWriter w;
    w.set_string("general.architecture", "a");
    w.set_u32("k.one", 1);
    w.set_u32("k.two", 2);
    w.set_string("k.one", "replaced"); // a new type is fine: the key keeps its place
    QVERIFY(w.has("k.two"));
    QVERIFY(w.remove("k.two"));
    QVERIFY(!w.remove("k.two"));
    QVERIFY(!w.has("k.two"));
    w.write(path("replace.gguf"));
    const auto f = GgufFile::open(path("replace.gguf"));
    QCOMPARE(f->metadata().size(), std::size_t(2));
    QCOMPARE(f->metadata()[1].key, std::string("k.one"));
    QCOMPARE(std::string(*f->get_string("k.one")), std::string("replaced"));
}

void TestGgufWriter::rejectsBadInput()
{
    GgufWriter w;
    const std::vector<uint64_t> v32{32};
    w.add_tensor("t", GgmlType::F32, v32, pattern_bytes(128, 0));
    QVERIFY_THROWS_EXCEPTION(engine::Error, w.add_tensor("t", GgmlType::F32, v32, pattern_bytes(128, 0)));
    QVERIFY_THROWS_EXCEPTION(engine::Error, w.add_tensor("size", GgmlType::F32, v32, pattern_bytes(127, 0)));
    QVERIFY_THROWS_EXCEPTION(engine::Error,
                             w.add_tensor("block", GgmlType::Q4_K, std::vector<uint64_t>{100}, pattern_bytes(0, 0)));
    QVERIFY_THROWS_EXCEPTION(engine::Error,
                             w.add_tensor(std::string(64, 'n'), GgmlType::F32, v32, pattern_bytes(128, 0)));
    QVERIFY_THROWS_EXCEPTION(
        engine::Error, w.add_tensor("rank", GgmlType::F32, std::vector<uint64_t>{1, 1, 1, 1, 1}, pattern_bytes(4, 0)));
    QVERIFY_THROWS_EXCEPTION(engine::Error,
                             w.add_tensor("none", GgmlType::F32, std::vector<uint64_t>{}, pattern_bytes(4, 0)));
    QVERIFY_THROWS_EXCEPTION(engine::Error,
                             w.add_tensor("zero", GgmlType::F32, std::vector<uint64_t>{0}, pattern_bytes(0, 0)));
    QVERIFY_THROWS_EXCEPTION(engine::Error, w.set_u32("", 1));
    QVERIFY_THROWS_EXCEPTION(engine::Error, w.set_packed_array("k", ValueType::Int32, 3, pattern_bytes(8, 0)));
    QVERIFY_THROWS_EXCEPTION(engine::Error, w.set_packed_array("k", ValueType::String, 0, {}));
    QCOMPARE(w.tensor_count(), std::size_t(1)); // failed adds leave nothing behind
    QCOMPARE(w.metadata_count(), std::size_t(0));
}

void TestGgufWriter::writeIsAtomic()
{
    QTemporaryDir dir;
    const std::string target = dir.filePath("model.gguf").toStdString();
    QVERIFY(testsupport::write_file(target, std::vector<uint8_t>(10, 0xAB)));

    GgufWriter w;
    w.set_string("general.architecture", "test");
    w.add_tensor("t", GgmlType::F32, std::vector<uint64_t>{4}, pattern_bytes(16, 5));
    w.write(target); // replaces the old file
    QCOMPARE(std::string(*GgufFile::open(target)->get_string("general.architecture")), std::string("test"));

    // A fill that fails mid-write leaves the old file as it was and no temporary behind.
    const auto before = read_bytes(target);
    GgufWriter failing;
    failing.set_string("general.architecture", "broken");
    failing.add_tensor("t", GgmlType::F32, std::vector<uint64_t>{4},
                       GgufWriter::TensorFill([](std::span<std::byte>) { throw engine::Error("fill failed"); }));
    QVERIFY_THROWS_EXCEPTION(engine::Error, failing.write(target));
    QCOMPARE(read_bytes(target), before);
    QCOMPARE(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden), QStringList{"model.gguf"});

    // A directory that does not exist is an IoError, not a crash.
    QVERIFY_THROWS_EXCEPTION(engine::IoError, w.write(dir.filePath("missing/model.gguf").toStdString()));
}

QTEST_GUILESS_MAIN(TestGgufWriter)
#include "test_gguf_writer.moc"
