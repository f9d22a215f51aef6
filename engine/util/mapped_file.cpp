// SPDX-License-Identifier: GPL-3.0-or-later
#include "util/mapped_file.h"

#include "util/error.h"
#include "util/system_memory.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <mutex>
#include <spdlog/spdlog.h>
#include <string_view>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace engine {

namespace {

constexpr std::size_t kHugePage = std::size_t(2) << 20;

std::size_t round_up(std::size_t n, std::size_t to)
{
    return (n + to - 1) / to * to;
}

std::byte* align_up(void* p, std::size_t to)
{
    return reinterpret_cast<std::byte*>(round_up(reinterpret_cast<uintptr_t>(p), to));
}

// Unmaps [from, to) when it is not empty (the slack an aligned reservation leaves).
void unmap_range(std::byte* from, std::byte* to)
{
    if (to > from)
        ::munmap(from, static_cast<std::size_t>(to - from));
}

// An anonymous range of `bytes` (a multiple of 2 MiB) starting on a 2 MiB boundary, or nullptr.
std::byte* map_aligned(std::size_t bytes, int prot, int extra_flags)
{
    void* raw = ::mmap(nullptr, bytes + kHugePage, prot, MAP_PRIVATE | MAP_ANONYMOUS | extra_flags, -1, 0);
    if (raw == MAP_FAILED)
        return nullptr;
    std::byte* begin = align_up(raw, kHugePage);
    unmap_range(static_cast<std::byte*>(raw), begin);
    unmap_range(begin + bytes, static_cast<std::byte*>(raw) + bytes + kHugePage);
    return begin;
}

// Whether the kernel hands out transparent huge pages to a range that asks for them (its policy is
// "always" or "madvise", not "never" or absent).
bool huge_pages_available()
{
    std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string policy;
    std::getline(in, policy);
    return policy.find("[always]") != std::string::npos || policy.find("[madvise]") != std::string::npos;
}

std::mutex& huge_page_move_mutex()
{
    static std::mutex m;
    return m;
}

} // namespace

MappedFile::MappedFile(const std::filesystem::path& path) : m_path(path)
{
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        throw IoError(path.string() + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        throw IoError(path.string() + ": cannot stat: " + std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        throw IoError(path.string() + ": not a regular file");
    }
    m_size = static_cast<std::size_t>(st.st_size);
    if (m_size > 0) {
        // Reserve the file's size rounded up to 2 MiB, on a 2 MiB boundary, and map the file at its
        // start; the reservation's tail stays inaccessible, and ours, for move_to_huge_pages.
        m_reserved = round_up(m_size, kHugePage);
        std::byte* base = map_aligned(m_reserved, PROT_NONE, MAP_NORESERVE);
        void* p = base ? ::mmap(base, m_size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0) : MAP_FAILED;
        if (p == MAP_FAILED) {
            const int err = errno;
            if (base)
                ::munmap(base, m_reserved);
            ::close(fd);
            m_reserved = 0;
            throw IoError(path.string() + ": cannot map into memory: " + std::strerror(err));
        }
        m_data = static_cast<const std::byte*>(p);
    }
    m_fd = fd; // kept for move_to_huge_pages
}

bool MappedFile::move_to_huge_pages(std::string* why_not) const
{
    const auto refuse = [&](std::string why) {
        if (why_not)
            *why_not = std::move(why);
        return false;
    };
    const std::lock_guard lock(huge_page_move_mutex());
    if (m_in_huge_pages.load())
        return true;
    if (!m_data)
        return refuse("the file is empty");
    // An escape hatch for a machine short of memory and for measuring what the move brings.
    if (const char* env = std::getenv("TOKENSCOPE_HUGE_PAGES")) {
        const std::string_view v(env);
        if (v == "off" || v == "0" || v == "no" || v == "false")
            return refuse("TOKENSCOPE_HUGE_PAGES=" + std::string(v));
    }
    if (!huge_pages_available())
        return refuse("the kernel's transparent huge pages are off");
    const uint64_t available = system_memory().available;
    if (available == 0)
        return refuse("the memory available is unknown (no MemAvailable in /proc/meminfo)");
    if (uint64_t(m_reserved) > available / 2)
        return refuse("the file (" + std::to_string(m_size >> 20) + " MiB) is more than half the memory available (" +
                      std::to_string(available >> 20) + " MiB): it stays in the page cache, which can be dropped");

    const auto start = std::chrono::steady_clock::now();
    std::byte* copy = map_aligned(m_reserved, PROT_READ | PROT_WRITE, 0);
    if (!copy)
        return refuse(std::string("no memory for the copy: ") + std::strerror(errno));
    ::madvise(copy, m_reserved, MADV_HUGEPAGE);
    // Read from the file a chunk at a time, not through the mapping, and let go of each chunk's pages
    // in the mapping as its copy is made: a model's loading has touched all of them (its scales are
    // checked), and holding them beside the whole copy would double the process's peak memory. The
    // pages stay in the page cache; a thread reading the mapping meanwhile maps them again.
    constexpr std::size_t kChunk = std::size_t(32) << 20;
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    for (std::size_t done = 0; done < m_size;) {
        const std::size_t chunk_end = std::min(m_size, done + kChunk);
        const ssize_t got = ::pread(m_fd, copy + done, chunk_end - done, static_cast<off_t>(done));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            const std::string why = got < 0 ? std::strerror(errno) : "it is shorter than when it was opened";
            ::munmap(copy, m_reserved);
            return refuse("cannot read the file again: " + why);
        }
        const std::size_t next = done + static_cast<std::size_t>(got);
        // Whole pages only (the chunk's bounds are page multiples but the end of the file need not be).
        ::madvise(const_cast<std::byte*>(m_data) + done, round_up(next, page) - done, MADV_DONTNEED);
        done = next;
    }
    if (::mprotect(copy, m_reserved, PROT_READ) != 0) {
        const int err = errno;
        ::munmap(copy, m_reserved);
        return refuse(std::string("cannot make the copy read-only: ") + std::strerror(err));
    }
    // Replace the mapping in one step: the kernel swaps the page tables under its lock, so a thread
    // reading the bytes meanwhile sees the file's pages or the copy's, never a hole.
    auto* target = const_cast<std::byte*>(m_data);
    if (::mremap(copy, m_reserved, m_reserved, MREMAP_MAYMOVE | MREMAP_FIXED, target) == MAP_FAILED) {
        const int err = errno;
        ::munmap(copy, m_reserved);
        // A failed move may already have unmapped the target: map the file there again (over itself if
        // it is still there) and take back the reserved tail, or release() would unmap whatever
        // another mapping put there.
        ::mmap(target, m_size, PROT_READ, MAP_PRIVATE | MAP_FIXED, m_fd, 0);
        const std::size_t mapped = round_up(m_size, page);
        if (mapped < m_reserved &&
            ::mmap(target + mapped, m_reserved - mapped, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0) == MAP_FAILED &&
            errno != EEXIST)
            m_reserved = mapped;
        return refuse(std::string("cannot move the copy over the mapping: ") + std::strerror(err));
    }
    m_in_huge_pages = true;
    spdlog::debug("{}: {} MiB moved into huge-page memory in {:.2f} s", m_path.string(), m_size >> 20,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return true;
}

MappedFile::~MappedFile()
{
    release();
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : m_path(std::move(other.m_path)), m_data(std::exchange(other.m_data, nullptr)),
      m_size(std::exchange(other.m_size, 0)), m_reserved(std::exchange(other.m_reserved, 0)),
      m_fd(std::exchange(other.m_fd, -1)), m_in_huge_pages(other.m_in_huge_pages.exchange(false))
{
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept
{
    if (this != &other) {
        release();
        m_path = std::move(other.m_path);
        m_data = std::exchange(other.m_data, nullptr);
        m_size = std::exchange(other.m_size, 0);
        m_reserved = std::exchange(other.m_reserved, 0);
        m_fd = std::exchange(other.m_fd, -1);
        m_in_huge_pages = other.m_in_huge_pages.exchange(false);
    }
    return *this;
}

void MappedFile::release() noexcept
{
    if (m_data)
        ::munmap(const_cast<std::byte*>(m_data), m_reserved);
    m_data = nullptr;
    m_size = 0;
    m_reserved = 0;
    m_in_huge_pages = false;
    if (m_fd >= 0)
        ::close(m_fd);
    m_fd = -1;
}

} // namespace engine
