// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace engine {

// A read-only memory mapping of a whole file. Model weights stay in the page cache instead of
// being copied; an empty file maps to an empty span.
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

private:
    void release() noexcept;

    std::filesystem::path m_path;
    const std::byte* m_data = nullptr;
    std::size_t m_size = 0;
};

} // namespace engine
