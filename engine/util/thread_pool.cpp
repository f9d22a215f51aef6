// SPDX-License-Identifier: GPL-3.0-or-later
#include "util/thread_pool.h"

#include <cstdlib>

#include <algorithm>
#include <spdlog/spdlog.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace engine {

namespace {

inline void cpu_relax()
{
#if defined(__x86_64__)
    _mm_pause();
#else
    std::this_thread::yield();
#endif
}

constexpr int kSpinIterations = 50000; // ~ a millisecond of spinning before a worker sleeps

std::pair<std::size_t, std::size_t> chunk(std::size_t n, int parts, int index)
{
    const std::size_t per = n / static_cast<std::size_t>(parts);
    const std::size_t extra = n % static_cast<std::size_t>(parts);
    const auto i = static_cast<std::size_t>(index);
    const std::size_t begin = i * per + std::min(i, extra);
    return {begin, begin + per + (i < extra ? 1 : 0)};
}

} // namespace

int default_thread_count()
{
    // $TOKENSCOPE_THREADS: the default for this process (several processes sharing the cores, as
    // the test runner's parallel suites do, each take a share instead of all of them: workers that
    // outnumber the cores wait on each other at every parallel step). Capped at the cores.
    if (const char* env = std::getenv("TOKENSCOPE_THREADS"); env && *env) {
        char* end = nullptr;
        const long v = std::strtol(env, &end, 10);
        if (end && *end == '\0' && v > 0)
            return static_cast<int>(std::min<long>(v, max_thread_count()));
    }
    const unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1 : static_cast<int>(std::min(n, 16u));
}

int max_thread_count()
{
    const unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1 : static_cast<int>(n);
}

int clamp_thread_count(int requested)
{
    if (requested <= 0)
        return default_thread_count();
    return std::min(requested, max_thread_count());
}

ThreadPool::ThreadPool(int n_threads)
{
    // Never more threads than the machine runs at once: a flag or setting asking for 100,000 gets
    // the core count (the caller says so), not a process table full of threads.
    const int n = clamp_thread_count(n_threads);
    if (n_threads > n)
        spdlog::warn("{} threads asked for, this machine runs {} at once: using {}", n_threads, max_thread_count(), n);
    for (int i = 1; i < n; ++i)
        m_workers.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool()
{
    {
        std::lock_guard lock(m_mutex);
        m_stop = true;
        m_generation.fetch_add(1);
    }
    m_wake.notify_all();
    for (auto& t : m_workers)
        t.join();
}

void ThreadPool::parallel_for(std::size_t n, const std::function<void(std::size_t, std::size_t)>& fn)
{
    dispatch(n, 0, fn);
}

void ThreadPool::parallel_for_dynamic(std::size_t n, std::size_t grain,
                                      const std::function<void(std::size_t, std::size_t)>& fn)
{
    dispatch(n, std::max<std::size_t>(grain, 1), fn);
}

void ThreadPool::run_share(int index, const std::function<void(std::size_t, std::size_t)>& fn, std::size_t n,
                           std::size_t grain)
{
    if (grain == 0) {
        const auto [b, e] = chunk(n, size(), index);
        if (b < e)
            fn(b, e);
        return;
    }
    for (;;) {
        const std::size_t b = m_next.fetch_add(grain, std::memory_order_relaxed);
        if (b >= n)
            return;
        fn(b, std::min(n, b + grain));
    }
}

void ThreadPool::dispatch(std::size_t n, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& fn)
{
    if (n == 0)
        return;
    if (m_workers.empty() || n == 1) {
        fn(0, n);
        return;
    }
    {
        std::lock_guard lock(m_mutex);
        m_fn = &fn;
        m_n = n;
        m_grain = grain;
        m_next.store(0, std::memory_order_relaxed);
        m_pending.store(static_cast<int>(m_workers.size()));
        m_generation.fetch_add(1, std::memory_order_release);
    }
    m_wake.notify_all();
    run_share(0, fn, n, grain);
    // Spin briefly, then yield: when the machine is oversubscribed the worker we wait for may need
    // this core.
    for (int spins = 0; m_pending.load(std::memory_order_acquire) != 0; ++spins) {
        if (spins < 2000)
            cpu_relax();
        else
            std::this_thread::yield();
    }
}

void ThreadPool::worker_loop(int index)
{
    uint64_t seen = 0;
    for (;;) {
        int spins = 0;
        while (m_generation.load(std::memory_order_acquire) == seen && spins < kSpinIterations) {
            cpu_relax();
            ++spins;
        }
        if (m_generation.load(std::memory_order_acquire) == seen) {
            std::unique_lock lock(m_mutex);
            m_wake.wait(lock, [&] { return m_generation.load() != seen; });
        }
        if (m_stop.load())
            return;
        const std::function<void(std::size_t, std::size_t)>* fn;
        std::size_t n, grain;
        {
            std::lock_guard lock(m_mutex);
            seen = m_generation.load();
            fn = m_fn;
            n = m_n;
            grain = m_grain;
        }
        run_share(index, *fn, n, grain);
        m_pending.fetch_sub(1, std::memory_order_acq_rel);
    }
}

} // namespace engine
