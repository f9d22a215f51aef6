// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <bit>
#include <cstdint>

namespace engine {

// IEEE-754 binary16 → binary32, exact for every input (subnormals, infinities, NaN payloads).
constexpr float fp16_to_f32(uint16_t h)
{
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t mant = h & 0x3FFu;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {
            // Subnormal half: renormalise into a normal float.
            int e = -1;
            do {
                ++e;
                mant <<= 1;
            } while ((mant & 0x400u) == 0);
            mant &= 0x3FFu;
            bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | (mant << 13);
        }
    } else if (exp == 0x1F) {
        bits = sign | 0x7F800000u | (mant << 13);
    } else {
        bits = sign | ((exp + (127 - 15)) << 23) | (mant << 13);
    }
    return std::bit_cast<float>(bits);
}

// binary32 → binary16, round to nearest even (what F16C's vcvtps2ph and ggml's converter give).
constexpr uint16_t f32_to_fp16(float f)
{
    const uint32_t x = std::bit_cast<uint32_t>(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t abs = x & 0x7FFFFFFFu;
    if (abs > 0x7F800000u) // NaN: keep it quiet
        return static_cast<uint16_t>(sign | 0x7E00u | ((abs >> 13) & 0x3FFu));
    if (abs >= 0x477FF000u) // rounds to or beyond 65520: infinity
        return static_cast<uint16_t>(sign | 0x7C00u);
    if (abs < 0x38800000u) { // result is subnormal or zero
        if (abs < 0x33000000u)
            return static_cast<uint16_t>(sign);
        const uint32_t mant = (abs & 0x7FFFFFu) | 0x800000u;
        const int shift = 126 - static_cast<int>(abs >> 23); // 14..24
        const uint32_t half = mant >> shift;
        const uint32_t rem = mant & ((1u << shift) - 1);
        const uint32_t mid = 1u << (shift - 1);
        const uint32_t rounded = half + ((rem > mid || (rem == mid && (half & 1u))) ? 1u : 0u);
        return static_cast<uint16_t>(sign | rounded);
    }
    uint32_t h = ((abs - 0x38000000u) >> 13);
    const uint32_t rem = abs & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
        ++h;
    return static_cast<uint16_t>(sign | h);
}

// bfloat16 is the upper half of a binary32.
constexpr float bf16_to_f32(uint16_t b)
{
    return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

// binary32 → bfloat16 as ggml rounds it: to nearest, ties to even; a NaN stays a (quiet) NaN.
constexpr uint16_t f32_to_bf16(float f)
{
    const uint32_t u = std::bit_cast<uint32_t>(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return static_cast<uint16_t>((u >> 16) | 64u);
    return static_cast<uint16_t>((u + (0x7FFFu + ((u >> 16) & 1u))) >> 16);
}

} // namespace engine
