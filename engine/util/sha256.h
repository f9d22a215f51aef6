// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// SHA-256 (OpenSSL's libcrypto), as lowercase hex: a model's identity in a saved run, and a run
// file's checksum.

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>

namespace engine {

class Sha256 {
public:
    Sha256();
    ~Sha256();
    Sha256(const Sha256&) = delete;
    Sha256& operator=(const Sha256&) = delete;
    void update(std::span<const std::byte> bytes);
    std::string hex(); // finishes the digest; the object is spent afterwards

private:
    void* m_ctx = nullptr; // EVP_MD_CTX
};

std::string sha256_hex(std::span<const std::byte> bytes);
// Reads the file in 4 MiB pieces (a model is never held whole); throws IoError.
std::string sha256_file(const std::filesystem::path& path);

} // namespace engine
