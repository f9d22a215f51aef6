// SPDX-License-Identifier: GPL-3.0-or-later
// The GGUF reader on well-formed files: every value type, nested arrays, v2 and v3, custom
// alignment, out-of-order tensor data, and the real default model.
#include "gguf/gguf_file.h"
#include "gguf_builder.h"
#include "test_paths.h"
#include "util/error.h"

#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <list>

using engine::gguf::GgufFile;
using engine::gguf::ValueType;
using testsupport::GgufBuilder;

namespace {

// The parsed file views the bytes, so they are kept for the whole run.
std::shared_ptr<const GgufFile> parse(std::vector<uint8_t> bytes)
{
    static std::list<std::vector<uint8_t>> kept;
    const auto& b = kept.emplace_back(std::move(bytes));
    return GgufFile::parse({reinterpret_cast<const std::byte*>(b.data()), b.size()}, "test.gguf");
}

std::vector<uint8_t> f32_bytes(std::initializer_list<float> v)
{
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), std::data(v), b.size());
    return b;
}

} // namespace

class TestGgufReader : public QObject {
    Q_OBJECT
private slots:
    void everyValueType();
    void nestedArrays();
    void version2IsAccepted();
    void customAlignmentAndOutOfOrderTensors();
    void zeroTensorsFileHasNoDataSection();
    void openFromDiskMatchesParse();
    void defaultModel();
};

void TestGgufReader::everyValueType()
{
    GgufBuilder b;
    b.add_string("general.architecture", "test");
    b.add_u8("v.u8", 250);
    b.add_i8("v.i8", -7);
    b.add_u16("v.u16", 65000);
    b.add_i16("v.i16", -30000);
    b.add_u32("v.u32", 4000000000u);
    b.add_i32("v.i32", -2000000000);
    b.add_f32("v.f32", 1.5f);
    b.add_bool("v.bool", true);
    b.add_u64("v.u64", 1ull << 40);
    b.add_i64("v.i64", -(1ll << 40));
    b.add_f64("v.f64", 2.25);
    b.add_string("v.string", "héllo ▁ world");
    b.add_string("v.empty", "");
    b.add_string_array("v.strings", {"a", "", "ccc"});
    b.add_f32_array("v.floats", {0.5f, -1.0f});
    b.add_i32_array("v.ints", {3, -4, 5});
    const auto f = parse(b.build());

    QCOMPARE(f->metadata().size(), std::size_t(17));
    QCOMPARE(*f->get_int("v.u8"), 250);
    QCOMPARE(*f->get_int("v.i8"), -7);
    QCOMPARE(*f->get_int("v.u16"), 65000);
    QCOMPARE(*f->get_int("v.i16"), -30000);
    QCOMPARE(*f->get_int("v.u32"), 4000000000ll);
    QCOMPARE(*f->get_int("v.i32"), -2000000000ll);
    QCOMPARE(*f->get_float("v.f32"), 1.5);
    QCOMPARE(*f->get_bool("v.bool"), true);
    QCOMPARE(*f->get_int("v.u64"), 1ll << 40);
    QCOMPARE(*f->get_int("v.i64"), -(1ll << 40));
    QCOMPARE(*f->get_float("v.f64"), 2.25);
    QCOMPARE(std::string(*f->get_string("v.string")), std::string("héllo ▁ world"));
    QCOMPARE(std::string(*f->get_string("v.empty")), std::string());
    QCOMPARE(f->find("v.f32")->type, ValueType::Float32);
    QVERIFY(!f->get_int("v.string"));
    QVERIFY(!f->get_string("v.u8"));
    QVERIFY(!f->find("v.missing"));

    const auto* strings = f->get_array("v.strings");
    QVERIFY(strings);
    QCOMPARE(strings->count, uint64_t(3));
    QCOMPARE(std::string(strings->strings[2]), std::string("ccc"));
    QCOMPARE(std::string(strings->strings[1]), std::string());
    const auto floats = f->get_array("v.floats")->to_floats();
    QVERIFY(floats);
    QCOMPARE(floats->at(1), -1.0f);
    const auto ints = f->get_array("v.ints")->to_ints();
    QCOMPARE(*ints, (std::vector<int64_t>{3, -4, 5}));
    QVERIFY(!f->get_array("v.strings")->to_ints());
}

void TestGgufReader::nestedArrays()
{
    // array<array<u32>>: [[1, 2], [3]]
    std::vector<uint8_t> v = GgufBuilder::pod<uint32_t>(9);
    auto append = [&](const std::vector<uint8_t>& x) { v.insert(v.end(), x.begin(), x.end()); };
    append(GgufBuilder::pod<uint64_t>(2));
    append(GgufBuilder::pod<uint32_t>(4));
    append(GgufBuilder::pod<uint64_t>(2));
    append(GgufBuilder::pod<uint32_t>(1));
    append(GgufBuilder::pod<uint32_t>(2));
    append(GgufBuilder::pod<uint32_t>(4));
    append(GgufBuilder::pod<uint64_t>(1));
    append(GgufBuilder::pod<uint32_t>(3));
    GgufBuilder b;
    b.add_raw("v.nested", 9, v);
    b.add_u32("v.after", 77); // parsing continues correctly after the nested value
    const auto f = parse(b.build());
    const auto* outer = f->get_array("v.nested");
    QVERIFY(outer);
    QCOMPARE(outer->element_type, ValueType::Array);
    QCOMPARE(outer->arrays.size(), std::size_t(2));
    QCOMPARE(*outer->arrays[0].to_ints(), (std::vector<int64_t>{1, 2}));
    QCOMPARE(*outer->arrays[1].to_ints(), (std::vector<int64_t>{3}));
    QCOMPARE(*f->get_int("v.after"), 77);
}

void TestGgufReader::version2IsAccepted()
{
    GgufBuilder b;
    b.version = 2;
    b.add_string("general.architecture", "test");
    b.add_tensor({"w", 0, {4}, f32_bytes({1, 2, 3, 4})});
    const auto f = parse(b.build());
    QCOMPARE(f->version(), 2u);
    QCOMPARE(f->tensors().size(), std::size_t(1));
}

void TestGgufReader::customAlignmentAndOutOfOrderTensors()
{
    GgufBuilder b;
    b.alignment = 64;
    b.add_u32("general.alignment", 64);
    // "b" lies before "a" in the data section although its record comes second.
    b.add_tensor({"a", 0, {2, 2}, f32_bytes({1, 2, 3, 4}), 64});
    b.add_tensor({"b", 0, {3}, f32_bytes({5, 6, 7}), 0});
    std::map<std::string, std::size_t> marks;
    const auto bytes = b.build(&marks);
    const auto f = parse(bytes);
    QCOMPARE(f->alignment(), 64u);
    QCOMPARE(f->data_offset() % 64, uint64_t(0));
    QCOMPARE(f->data_offset(), uint64_t(marks["data"]));
    const auto* a = f->find_tensor("a");
    const auto* bt = f->find_tensor("b");
    QVERIFY(a && bt);
    QCOMPARE(a->ne[0], uint64_t(2));
    QCOMPARE(a->ne[1], uint64_t(2));
    QCOMPARE(a->n_bytes, uint64_t(16));
    QCOMPARE(a->shape_string(), std::string("2 × 2"));
    float first_b = 0, last_a = 0;
    std::memcpy(&first_b, f->tensor_data(*bt).data(), 4);
    std::memcpy(&last_a, f->tensor_data(*a).data() + 12, 4);
    QCOMPARE(first_b, 5.0f);
    QCOMPARE(last_a, 4.0f);
}

void TestGgufReader::zeroTensorsFileHasNoDataSection()
{
    GgufBuilder b;
    b.add_string("general.architecture", "vocab-only");
    auto bytes = b.build();
    while (bytes.size() % 32) // the builder pads; a real vocab-only file may end right after the metadata
        bytes.pop_back();
    const auto f = parse(bytes);
    QVERIFY(f->tensors().empty());
    QCOMPARE(std::string(*f->get_string("general.architecture")), std::string("vocab-only"));
}

void TestGgufReader::openFromDiskMatchesParse()
{
    QTemporaryDir dir;
    GgufBuilder b;
    b.add_string("general.architecture", "test");
    b.add_tensor({"w", 1, {8}, std::vector<uint8_t>(16, 0x3C)});
    const std::string path = dir.filePath("disk.gguf").toStdString();
    QVERIFY(testsupport::write_file(path, b.build()));
    const auto f = GgufFile::open(path);
    QCOMPARE(f->name(), path);
    QCOMPARE(f->tensors()[0].type.name, std::string_view("F16"));
    QCOMPARE(f->tensor_data(f->tensors()[0]).size(), std::size_t(16));
    QVERIFY_THROWS_EXCEPTION(engine::IoError, GgufFile::open(dir.filePath("missing.gguf").toStdString()));
}

void TestGgufReader::defaultModel()
{
    REQUIRE_DEFAULT_MODEL(path);
    const auto f = GgufFile::open(path);
    QCOMPARE(f->version(), 3u);
    QCOMPARE(std::string(*f->get_string("general.architecture")), std::string("gemma3"));
    QCOMPARE(f->tensors().size(), std::size_t(236)); // 2 global + 18 layers × 13
    const auto* embd = f->find_tensor("token_embd.weight");
    QVERIFY(embd);
    QCOMPARE(embd->ne[0], uint64_t(640));
    QCOMPARE(embd->ne[1], uint64_t(262144));
    QCOMPARE(embd->type.name, std::string_view("Q8_0"));
    // Every tensor's data lies inside the file, after the data offset.
    uint64_t total = 0;
    for (const auto& t : f->tensors()) {
        QVERIFY(f->data_offset() + t.offset + t.n_bytes <= f->file_size());
        total += t.n_bytes;
    }
    QVERIFY(total <= f->file_size() - f->data_offset());
    QCOMPARE(f->get_array("tokenizer.ggml.tokens")->count, uint64_t(262144));
}

QTEST_GUILESS_MAIN(TestGgufReader)
#include "test_gguf_reader.moc"
