// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// A short built-in probe of this machine's peaks, for the roofline of the latency timeline:
// memory read bandwidth and multiply-add throughput, all threads.

#include <string>

namespace engine {

struct MachinePeaks {
    double read_bytes_per_second = 0.0; // streaming read of a buffer much larger than the caches, all threads
    double flops_per_second = 0.0;      // FMA throughput, all threads (one FMA = 2 FLOP)
    int threads = 0;
    std::string simd;      // "AVX2", "scalar"
    double probe_ms = 0.0; // the whole probe, buffer set-up included
};

// Runs for about `seconds` (half reading a 256 MiB buffer, half multiply-adds) on `threads`
// threads (≤ 0: all hardware threads). AVX2 + FMA kernels when simd_level() allows them
// (TOKENSCOPE_SIMD=scalar forbids them), the portable scalar loops when it does not or when
// `scalar` is true. The caller caches the result; calling again re-runs it.
MachinePeaks probe_machine(int threads, double seconds = 0.3, bool scalar = false);

} // namespace engine
