// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <atomic>
#include <cstddef>
#include <filesystem>
#include <span>
#include <string>

namespace engine {

// A read-only memory mapping of a whole file: opening a model copies nothing; an empty file maps to
// an empty span. The mapping starts on a 2 MiB boundary so that move_to_huge_pages (asked for by the
// CPU backend, which streams the weights) can later put the same bytes, at the same addresses, on
// 2 MiB pages.
class MappedFile {
public:
    explicit MappedFile(const std::filesystem::path& path); // throws IoError
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;

    std::span<const std::byte> bytes() const { return {m_data, m_size}; }
    std::size_t size() const { return m_size; }
    const std::filesystem::path& path() const { return m_path; }

    // Copies the bytes into anonymous memory the kernel may back with 2 MiB pages (transparent huge
    // pages) and moves that memory over the mapping: the same bytes at the same addresses, so every
    // view into the file stays valid, read-only as before. Why: a CPU decode step streams every weight
    // once; on 4 KiB page-cache pages each page is a TLB miss and the hardware prefetchers stop at
    // every page, which costs a memory-bound step several percent (F32 decode of a 2.2 GiB model, two
    // threads: 32.5 → 35 tokens/s on the machine this was measured on). The price is memory the kernel
    // can no longer drop and re-read from the file, so it is done only when the file takes at most
    // half the memory available, and not at all when the kernel's huge pages are off. Done once per
    // file, whoever asks (several backends may share a model); safe while other threads read the
    // bytes. TOKENSCOPE_HUGE_PAGES=off (or 0, no, false) turns it off. Returns whether the bytes now
    // live in such memory; `why_not` says why not.
    bool move_to_huge_pages(std::string* why_not = nullptr) const;
    bool in_huge_page_memory() const { return m_in_huge_pages; }

private:
    void release() noexcept;

    std::filesystem::path m_path;
    const std::byte* m_data = nullptr;
    std::size_t m_size = 0;
    // The address range owned from m_data: m_size rounded up to 2 MiB (less only after a failed move).
    mutable std::size_t m_reserved = 0;
    int m_fd = -1;                                    // the file, open for move_to_huge_pages to read it again
    mutable std::atomic<bool> m_in_huge_pages{false}; // read without the move's lock
};

} // namespace engine
