// SPDX-License-Identifier: GPL-3.0-or-later
// Float arithmetic as the references do it, in f32: Q8_0 d = amax / 127, q = round-half-away(x / d)
// (as x · (1 / d)); Q4_0 d = m / −8 with m the element of largest magnitude (the first one),
// q = min(15, trunc(x · (1 / d) + 8.5)). Scales are stored as F16.
#include "quant/quantize.h"

#include "util/error.h"
#include "util/fp16.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <spdlog/fmt/fmt.h>

namespace engine {

namespace {

void q8_0(const float* x, std::byte* out, int64_t n)
{
    for (int64_t b = 0; b < n / 32; ++b, x += 32, out += 34) {
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j)
            amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        const uint16_t dh = f32_to_fp16(d);
        std::memcpy(out, &dh, 2);
        for (int j = 0; j < 32; ++j) {
            const auto q = static_cast<int8_t>(std::round(x[j] * id));
            std::memcpy(out + 2 + j, &q, 1);
        }
    }
}

void q4_0(const float* x, std::byte* out, int64_t n)
{
    for (int64_t b = 0; b < n / 32; ++b, x += 32, out += 18) {
        float amax = 0.0f, m = 0.0f;
        for (int j = 0; j < 32; ++j)
            if (std::fabs(x[j]) > amax) {
                amax = std::fabs(x[j]);
                m = x[j];
            }
        const float d = m / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        const uint16_t dh = f32_to_fp16(d);
        std::memcpy(out, &dh, 2);
        for (int j = 0; j < 16; ++j) {
            const auto lo = static_cast<uint8_t>(std::min(15.0f, std::trunc(x[j] * id + 8.5f)));
            const auto hi = static_cast<uint8_t>(std::min(15.0f, std::trunc(x[j + 16] * id + 8.5f)));
            const auto byte = static_cast<uint8_t>(lo | (hi << 4));
            std::memcpy(out + 2 + j, &byte, 1);
        }
    }
}

} // namespace

bool can_quantize_to(GgmlType type)
{
    return type == GgmlType::Q8_0 || type == GgmlType::Q4_0;
}

void quantize_row(GgmlType type, const float* x, void* out, int64_t n)
{
    if (n % 32 != 0)
        throw Error(fmt::format("{} values do not fill whole blocks of 32", n));
    auto* o = static_cast<std::byte*>(out);
    switch (type) {
    case GgmlType::Q8_0:
        return q8_0(x, o, n);
    case GgmlType::Q4_0:
        return q4_0(x, o, n);
    default:
        throw UnsupportedError("requantizing writes Q8_0 or Q4_0");
    }
}

} // namespace engine
