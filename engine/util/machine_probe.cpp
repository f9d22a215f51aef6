// SPDX-License-Identifier: GPL-3.0-or-later
#include "util/machine_probe.h"

#include "quant/vec_dot.h"
#include "util/simd/probe_kernels.h"
#include "util/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

namespace engine {

// ---- scalar kernels -----------------------------------------------------------------------------

namespace probe {

uint64_t read_words_scalar(const uint32_t* words, std::size_t n)
{
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (std::size_t i = 0; i < n; i += 4) {
        s0 += words[i];
        s1 += words[i + 1];
        s2 += words[i + 2];
        s3 += words[i + 3];
    }
    return s0 + s1 + s2 + s3;
}

float fma_chain_scalar(uint64_t iterations, float m, float a)
{
    float acc[16];
    for (int i = 0; i < 16; ++i)
        acc[i] = static_cast<float>(i) * 0.01f;
    for (uint64_t it = 0; it < iterations; ++it)
        for (float& x : acc)
            x = x * m + a;
    float total = 0.0f;
    for (float x : acc)
        total += x;
    return total;
}

} // namespace probe

namespace {

using Clock = std::chrono::steady_clock;

// Results land here so that no loop is dead code.
std::atomic<uint64_t> g_sink{0};

double seconds_since(Clock::time_point t)
{
    return std::chrono::duration<double>(Clock::now() - t).count();
}

struct AlignedFree {
    void operator()(uint32_t* p) const { ::operator delete[](p, std::align_val_t(64)); }
};

// Every thread reads its slice of the buffer over and over until the deadline; bytes / wall time.
double measure_read(ThreadPool& pool, bool avx2, double budget)
{
    // 256 MiB: far beyond any last-level cache (falls back to 64 MiB where memory is short).
    std::size_t bytes = std::size_t(256) << 20;
    std::unique_ptr<uint32_t[], AlignedFree> buffer;
    while (!buffer) {
        try {
            buffer.reset(static_cast<uint32_t*>(::operator new[](bytes, std::align_val_t(64))));
        } catch (const std::bad_alloc&) {
            if (bytes <= (std::size_t(64) << 20))
                throw;
            bytes /= 2;
        }
    }
    const std::size_t words = bytes / sizeof(uint32_t);
    const auto threads = static_cast<std::size_t>(pool.size());
    // Slices of whole 256-byte lines (64 words), touched first by the thread that reads them.
    const std::size_t per_thread = words / threads / 64 * 64;
    pool.parallel_for(threads, [&](std::size_t begin, std::size_t end) {
        for (std::size_t t = begin; t < end; ++t)
            for (std::size_t i = t * per_thread; i < (t + 1) * per_thread; ++i)
                buffer[i] = static_cast<uint32_t>(i * 2654435761u);
    });

    std::vector<uint64_t> passes(threads, 0), sums(threads, 0);
    const Clock::time_point start = Clock::now();
    pool.parallel_for(threads, [&](std::size_t begin, std::size_t end) {
        for (std::size_t t = begin; t < end; ++t) {
            const uint32_t* slice = buffer.get() + t * per_thread;
            do {
                sums[t] +=
                    avx2 ? probe::read_words_avx2(slice, per_thread) : probe::read_words_scalar(slice, per_thread);
                ++passes[t];
            } while (seconds_since(start) < budget);
        }
    });
    const double elapsed = seconds_since(start);
    uint64_t total_passes = 0, sink = 0;
    for (std::size_t t = 0; t < threads; ++t) {
        total_passes += passes[t];
        sink += sums[t];
    }
    g_sink.fetch_add(sink, std::memory_order_relaxed);
    return static_cast<double>(total_passes) * static_cast<double>(per_thread * sizeof(uint32_t)) / elapsed;
}

// Every thread runs independent multiply-add chains in rounds until the deadline; FLOP / wall time.
double measure_flops(ThreadPool& pool, bool avx2, double budget)
{
    const auto threads = static_cast<std::size_t>(pool.size());
    constexpr uint64_t kRound = 1 << 15;
    // m and a come from memory the compiler cannot see through, so the chains are really run.
    volatile float m_source = 0.999999f, a_source = 1e-6f;
    const float m = m_source, a = a_source;
    std::vector<uint64_t> rounds(threads, 0);
    std::vector<float> sums(threads, 0.0f);
    const Clock::time_point start = Clock::now();
    pool.parallel_for(threads, [&](std::size_t begin, std::size_t end) {
        for (std::size_t t = begin; t < end; ++t) {
            do {
                sums[t] += avx2 ? probe::fma_chain_avx2(kRound, m, a) : probe::fma_chain_scalar(kRound, m, a);
                ++rounds[t];
            } while (seconds_since(start) < budget);
        }
    });
    const double elapsed = seconds_since(start);
    uint64_t total_rounds = 0;
    float sink = 0.0f;
    for (std::size_t t = 0; t < threads; ++t) {
        total_rounds += rounds[t];
        sink += sums[t];
    }
    g_sink.fetch_add(static_cast<uint64_t>(sink), std::memory_order_relaxed);
    const double per_round =
        static_cast<double>(kRound) * (avx2 ? probe::kAvx2FlopsPerIteration : probe::kScalarFlopsPerIteration);
    return static_cast<double>(total_rounds) * per_round / elapsed;
}

} // namespace

MachinePeaks probe_machine(int threads, double seconds, bool scalar)
{
    const Clock::time_point start = Clock::now();
    MachinePeaks p;
    p.threads = threads > 0 ? threads : default_thread_count();
    const bool avx2 = !scalar && simd_level() != SimdLevel::Scalar;
    p.simd = avx2 ? "AVX2" : "scalar";
    const double budget = std::clamp(seconds, 0.02, 60.0) / 2.0;
    ThreadPool pool(p.threads);
    p.read_bytes_per_second = measure_read(pool, avx2, budget);
    p.flops_per_second = measure_flops(pool, avx2, budget);
    p.probe_ms = seconds_since(start) * 1000.0;
    return p;
}

} // namespace engine
