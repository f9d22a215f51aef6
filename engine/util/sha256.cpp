// SPDX-License-Identifier: GPL-3.0-or-later
#include "util/sha256.h"

#include "util/error.h"

#include <fstream>
#include <openssl/evp.h>
#include <vector>

namespace engine {

Sha256::Sha256() : m_ctx(EVP_MD_CTX_new())
{
    if (!m_ctx || EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(m_ctx), EVP_sha256(), nullptr) != 1)
        throw Error("SHA-256 is unavailable (OpenSSL's EVP_sha256 failed to initialise)");
}

Sha256::~Sha256()
{
    EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(m_ctx));
}

void Sha256::update(std::span<const std::byte> bytes)
{
    if (!bytes.empty())
        EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(m_ctx), bytes.data(), bytes.size());
}

std::string Sha256::hex()
{
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(m_ctx), digest, &n);
    static const char* const kHex = "0123456789abcdef";
    std::string out;
    out.reserve(2 * n);
    for (unsigned int i = 0; i < n; ++i) {
        out.push_back(kHex[digest[i] >> 4]);
        out.push_back(kHex[digest[i] & 15]);
    }
    return out;
}

std::string sha256_hex(std::span<const std::byte> bytes)
{
    Sha256 h;
    h.update(bytes);
    return h.hex();
}

std::string sha256_file(const std::filesystem::path& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw IoError("cannot read " + path.string() + " to compute its SHA-256");
    Sha256 h;
    std::vector<char> buffer(std::size_t(4) << 20);
    while (in) {
        in.read(buffer.data(), std::streamsize(buffer.size()));
        const auto got = in.gcount();
        if (got > 0)
            h.update(std::as_bytes(std::span(buffer.data(), std::size_t(got))));
    }
    if (in.bad())
        throw IoError("reading " + path.string() + " failed while computing its SHA-256");
    return h.hex();
}

} // namespace engine
