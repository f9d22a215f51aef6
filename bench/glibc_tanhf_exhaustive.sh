#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# Every one of the 2^32 floats through engine/util/glibc_tanhf.h (the tanhf the CUDA kernels and, in
# GLSL, the Vulkan attention shader use for gemma2's soft-capped scores) and through this machine's C
# library (what the CPU backend and llama.cpp call): prints how many differ (0 expected on Debian 12's
# glibc 2.36). About 20 s on one core. Usage: bench/glibc_tanhf_exhaustive.sh
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/check.cpp" <<'CPP'
#include "util/glibc_tanhf.h"
#include <bit>
#include <cmath>
#include <cstdio>
int main()
{
    unsigned long long differ = 0;
    for (unsigned long long u = 0; u < 0x100000000ull; ++u) {
        const float x = std::bit_cast<float>(static_cast<unsigned>(u));
        const float ours = engine::glibc_tanhf(x), libc = std::tanh(x);
        if (std::bit_cast<unsigned>(ours) != std::bit_cast<unsigned>(libc) && !(std::isnan(ours) && std::isnan(libc)))
            if (differ++ < 5)
                std::printf("tanhf(%a): %a, the C library %a\n", x, ours, libc);
    }
    std::printf("glibc_tanhf: 4294967296 floats, %llu differ from the C library's tanhf\n", differ);
    return differ != 0;
}
CPP
c++ -O2 -std=c++20 -ffp-contract=off -I"$here/engine" "$work/check.cpp" -o "$work/check"
ldd --version | head -1
"$work/check"
