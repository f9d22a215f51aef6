// SPDX-License-Identifier: GPL-3.0-or-later
// The file mapping under every model: it starts on a 2 MiB boundary, and move_to_huge_pages puts the
// same bytes at the same addresses in anonymous memory on 2 MiB pages — read-only, safe for threads
// reading meanwhile, refused with a reason when it should not happen — and the CPU backend asks for it.

#include "backend/backend.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "model/test_model.h"
#include "process_status.h"
#include "util/mapped_file.h"

#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

using namespace engine;

namespace {

constexpr uintptr_t kHugePage = uintptr_t(2) << 20;

std::vector<char> random_bytes(std::size_t n, uint32_t seed)
{
    std::mt19937 rng(seed);
    std::vector<char> bytes(n);
    for (std::size_t i = 0; i < n; i += 4) {
        const auto r = static_cast<uint32_t>(rng());
        std::memcpy(bytes.data() + i, &r, std::min<std::size_t>(4, n - i));
    }
    return bytes;
}

std::string write_file(const QTemporaryDir& dir, const char* name, const std::vector<char>& bytes)
{
    const std::string path = dir.filePath(name).toStdString();
    std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
    return path;
}

bool same_bytes(const MappedFile& file, const std::vector<char>& bytes)
{
    return file.size() == bytes.size() && std::memcmp(file.bytes().data(), bytes.data(), bytes.size()) == 0;
}

// The /proc/self/smaps entry of the mapping that holds `p`: its header line (range, permissions, offset,
// device, inode, path) and its VmFlags line.
struct Vma {
    std::string header, flags;
};
Vma vma_of(const void* p)
{
    std::ifstream smaps("/proc/self/smaps");
    const auto at = reinterpret_cast<uintptr_t>(p);
    Vma found;
    bool inside = false;
    for (std::string line; std::getline(smaps, line);) {
        unsigned long long begin = 0, end = 0;
        char dash = 0;
        // A header line starts with "begin-end " in hexadecimal; the other lines with a field name.
        if (std::sscanf(line.c_str(), "%llx%c%llx", &begin, &dash, &end) == 3 && dash == '-') {
            inside = at >= begin && at < end;
            if (inside)
                found.header = line;
        } else if (inside && line.rfind("VmFlags:", 0) == 0) {
            found.flags = line;
        }
    }
    return found;
}

bool maps_file(const Vma& vma, const std::string& path)
{
    return vma.header.find(path) != std::string::npos;
}

// The permissions column of the header ("r--p").
std::string permissions(const Vma& vma)
{
    const auto space = vma.header.find(' ');
    return space == std::string::npos ? std::string() : vma.header.substr(space + 1, 4);
}

// Moves `file`, or skips the calling test when this kernel gives out no huge pages (its policy is
// "never": nothing to move onto). Any other refusal fails.
#define MOVE_OR_SKIP(file)                                                                                             \
    do {                                                                                                               \
        std::string why;                                                                                               \
        if (!(file).move_to_huge_pages(&why)) {                                                                        \
            if (why.find("transparent huge pages are off") != std::string::npos)                                       \
                QSKIP(("this kernel's transparent huge pages are off: " + why).c_str());                               \
            QFAIL(("refused: " + why).c_str());                                                                        \
        }                                                                                                              \
    } while (false)

} // namespace

class TestMappedFile : public QObject {
    Q_OBJECT
private slots:
    void init() { qunsetenv("TOKENSCOPE_HUGE_PAGES"); }
    void mapsOnATwoMebibyteBoundary();
    void movesOntoHugePagesInPlace();
    void readersDuringTheMoveSeeTheSameBytes();
    void movingDoesNotHoldTheFileTwice();
    void refusedByTheEnvironmentOrAnEmptyFile();
    void theCpuBackendMovesItsModel();
};

void TestMappedFile::mapsOnATwoMebibyteBoundary()
{
    QTemporaryDir dir;
    for (const std::size_t size :
         {std::size_t(1), std::size_t(4096), std::size_t(kHugePage), std::size_t(5 << 20) + 123}) {
        const auto bytes = random_bytes(size, uint32_t(size));
        const std::string path = write_file(dir, "f.bin", bytes);
        const MappedFile file(path);
        QCOMPARE(reinterpret_cast<uintptr_t>(file.bytes().data()) % kHugePage, uintptr_t(0));
        QVERIFY(same_bytes(file, bytes));
        QVERIFY(!file.in_huge_page_memory());
        QVERIFY(maps_file(vma_of(file.bytes().data()), path));
    }
}

void TestMappedFile::movesOntoHugePagesInPlace()
{
    QTemporaryDir dir;
    // Not a whole number of pages: the copy's tail past the file stays inside the reservation.
    const auto bytes = random_bytes((std::size_t(5) << 20) + 123, 7);
    const std::string path = write_file(dir, "weights.bin", bytes);
    const MappedFile file(path);
    const std::byte* before = file.bytes().data();
    MOVE_OR_SKIP(file);
    QVERIFY(file.in_huge_page_memory());
    QCOMPARE(file.bytes().data(), before);
    QVERIFY(same_bytes(file, bytes));
    // Anonymous now (no file behind the range), read-only as the mapping was, and asking for huge pages.
    const Vma vma = vma_of(before);
    QVERIFY2(!maps_file(vma, path), vma.header.c_str());
    QCOMPARE(permissions(vma), std::string("r--p"));
    QVERIFY2(vma.flags.find(" hg") != std::string::npos, vma.flags.c_str());
    // The last byte's range is the same one: the whole file moved.
    QCOMPARE(vma_of(before + bytes.size() - 1).header, vma.header);
    // Once is enough: asking again keeps the bytes where they are.
    QVERIFY(file.move_to_huge_pages());
    QCOMPARE(file.bytes().data(), before);
    QVERIFY(same_bytes(file, bytes));
}

void TestMappedFile::readersDuringTheMoveSeeTheSameBytes()
{
    QTemporaryDir dir;
    const auto bytes = random_bytes(std::size_t(48) << 20, 11);
    uint64_t expected = 0;
    for (const char b : bytes)
        expected += static_cast<unsigned char>(b);
    const MappedFile file(write_file(dir, "weights.bin", bytes));
    const auto* data = reinterpret_cast<const unsigned char*>(file.bytes().data());

    // A reader sums every byte over and over while the mapping is replaced under it.
    std::atomic<bool> stop{false};
    std::atomic<int> passes{0}, wrong{0};
    std::thread reader([&] {
        while (!stop.load()) {
            uint64_t sum = 0;
            for (std::size_t i = 0; i < bytes.size(); ++i)
                sum += data[i];
            wrong += sum != expected;
            ++passes;
        }
    });
    while (passes.load() < 1)
        std::this_thread::yield();
    std::string why;
    const bool moved = file.move_to_huge_pages(&why);
    const int after_move = passes.load();
    while (passes.load() < after_move + 2) // at least one whole pass over the moved bytes
        std::this_thread::yield();
    stop = true;
    reader.join();
    QCOMPARE(wrong.load(), 0);
    if (!moved) {
        QVERIFY2(why.find("transparent huge pages are off") != std::string::npos, why.c_str());
        QSKIP(("this kernel's transparent huge pages are off: " + why).c_str());
    }
    QVERIFY(file.in_huge_page_memory());
}

void TestMappedFile::movingDoesNotHoldTheFileTwice()
{
    QTemporaryDir dir;
    const std::size_t size = std::size_t(128) << 20;
    std::string path;
    {
        const auto bytes = random_bytes(size, 5);
        path = write_file(dir, "weights.bin", bytes);
    }
    const MappedFile file(path);
    // As a model's loading leaves it: every page of the mapping touched (its scales are checked).
    uint64_t sum = 0;
    for (std::size_t i = 0; i < size; i += 4096)
        sum += static_cast<unsigned char>(file.bytes()[i]);
    QVERIFY(sum > 0);
    const uint64_t before = testsupport::process_status_bytes("VmRSS");
    QVERIFY(before >= size);
    // Reset the peak to what is resident now (proc(5): writing 5 to clear_refs).
    std::ofstream("/proc/self/clear_refs") << "5";
    MOVE_OR_SKIP(file);
    const uint64_t peak = testsupport::process_status_bytes("VmHWM");
    qInfo("resident before %.0f MiB, peak during the move %.0f MiB, after %.0f MiB", double(before) / 1048576.0,
          double(peak) / 1048576.0, double(testsupport::process_status_bytes("VmRSS")) / 1048576.0);
    // The copy replaces the mapping's pages as it grows: at most one chunk of both at once.
    QVERIFY(peak < before + size / 2);
}

void TestMappedFile::refusedByTheEnvironmentOrAnEmptyFile()
{
    QTemporaryDir dir;
    const auto bytes = random_bytes(100000, 3);
    const std::string path = write_file(dir, "weights.bin", bytes);
    const MappedFile file(path);
    std::string why;
    for (const char* off : {"off", "0", "no", "false"}) {
        qputenv("TOKENSCOPE_HUGE_PAGES", off);
        QVERIFY(!file.move_to_huge_pages(&why));
        QVERIFY2(why == std::string("TOKENSCOPE_HUGE_PAGES=") + off, why.c_str());
        QVERIFY(!file.in_huge_page_memory());
        QVERIFY(maps_file(vma_of(file.bytes().data()), path));
        QVERIFY(same_bytes(file, bytes));
    }
    qunsetenv("TOKENSCOPE_HUGE_PAGES");

    const MappedFile empty(write_file(dir, "empty.bin", {}));
    QVERIFY(!empty.move_to_huge_pages(&why));
    QVERIFY2(why.find("empty") != std::string::npos, why.c_str());
}

void TestMappedFile::theCpuBackendMovesItsModel()
{
    QTemporaryDir dir;
    const std::string path = dir.filePath("llama.gguf").toStdString();
    make_test_model("llama", 5, TestModelShape{}).write(path);

    // Bytes parsed from memory have no mapping to move.
    std::ifstream in(path, std::ios::binary);
    const std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto parsed = gguf::GgufFile::parse(std::as_bytes(std::span(raw)), "in memory");
    std::string why;
    QVERIFY(!parsed->move_to_huge_pages(&why));
    QVERIFY2(why.find("not mapped") != std::string::npos, why.c_str());

    const auto model = Model::load(path);
    const std::byte* weights = model->file().bytes().data();
    QVERIFY(maps_file(vma_of(weights), path));

    // Off: the backend leaves the mapping alone.
    auto mapped = make_cpu_backend(model, {.threads = 1, .n_ctx = 64, .huge_page_weights = false});
    QVERIFY(!model->file().in_huge_page_memory());
    QVERIFY(maps_file(vma_of(weights), path));

    // On (the default): the file is moved, in place.
    const auto moved = make_cpu_backend(model, {.threads = 1, .n_ctx = 64});
    if (!model->file().in_huge_page_memory()) {
        QVERIFY(!model->file().move_to_huge_pages(&why));
        QVERIFY2(why.find("transparent huge pages are off") != std::string::npos, why.c_str());
        QSKIP(("this kernel's transparent huge pages are off: " + why).c_str());
    }
    QCOMPARE(model->file().bytes().data(), weights);
    QVERIFY(!maps_file(vma_of(weights), path));
}

QTEST_GUILESS_MAIN(TestMappedFile)
#include "test_mapped_file.moc"
