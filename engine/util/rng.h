// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <cstdint>

namespace engine {

// A self-contained PRNG whose output is fixed by this file alone: std:: distributions (and
// std::mt19937's seeding helpers) differ between standard libraries, and generated test models
// must be byte-identical on every machine.

// splitmix64 (Steele, Lea, Flood 2014; public-domain reference by Vigna): used to expand a seed.
constexpr uint64_t splitmix64(uint64_t& state)
{
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// xoshiro256** 1.0 (Blackman, Vigna 2018), seeded with splitmix64 as its authors recommend.
class Xoshiro256 {
public:
    constexpr explicit Xoshiro256(uint64_t seed)
    {
        for (auto& w : m_s)
            w = splitmix64(seed);
    }

    constexpr uint64_t next()
    {
        const uint64_t result = rotl(m_s[1] * 5, 7) * 9;
        const uint64_t t = m_s[1] << 17;
        m_s[2] ^= m_s[0];
        m_s[3] ^= m_s[1];
        m_s[1] ^= m_s[2];
        m_s[0] ^= m_s[3];
        m_s[2] ^= t;
        m_s[3] = rotl(m_s[3], 45);
        return result;
    }

    // An integer in [0, n) from the high bits (multiply-shift; the bias of at most n / 2^32 does
    // not matter for test data, and it keeps the output free of data-dependent loops).
    constexpr uint32_t below(uint32_t n) { return static_cast<uint32_t>(((next() >> 32) * n) >> 32); }

private:
    static constexpr uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    uint64_t m_s[4]{};
};

} // namespace engine
