// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace engine {

// The hardware threads this machine runs at once (at least 1).
int max_thread_count();
// The thread count to use for a request: 0 or less means the default, anything above
// max_thread_count() is clamped to it.
int clamp_thread_count(int requested);

// A fixed set of worker threads for data-parallel kernels. parallel_for splits [0, n) into one
// contiguous chunk per thread (the caller's thread takes the first) and returns when all are done.
// A decode step issues a few hundred parallel_for calls, so workers spin briefly between calls
// before they sleep: waking a sleeping thread costs more than most of the kernels.
// Not re-entrant: one parallel_for at a time.
class ThreadPool {
public:
    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return static_cast<int>(m_workers.size()) + 1; }
    void parallel_for(std::size_t n, const std::function<void(std::size_t begin, std::size_t end)>& fn);
    // The same, but threads take ranges of `grain` indices from a shared counter until none is left:
    // for work whose items differ in cost (attention rows: a row sees as many keys as its position)
    // or whose threads may be slowed (a shared machine), where equal contiguous shares leave a thread
    // waiting. Which thread runs an index differs from run to run: use it only where each index's
    // result is computed on its own.
    void parallel_for_dynamic(std::size_t n, std::size_t grain,
                              const std::function<void(std::size_t begin, std::size_t end)>& fn);

private:
    void worker_loop(int index);
    void run_share(int index, const std::function<void(std::size_t, std::size_t)>& fn, std::size_t n,
                   std::size_t grain);
    void dispatch(std::size_t n, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& fn);

    std::vector<std::thread> m_workers;
    std::mutex m_mutex;
    std::condition_variable m_wake;
    const std::function<void(std::size_t, std::size_t)>* m_fn = nullptr;
    std::size_t m_n = 0;
    std::size_t m_grain = 0;            // 0: one contiguous chunk per thread
    std::atomic<std::size_t> m_next{0}; // parallel_for_dynamic: the next index to hand out
    std::atomic<uint64_t> m_generation{0};
    std::atomic<int> m_pending{0};
    std::atomic<bool> m_stop{false};
};

// The threads a request that names none (0) gets: $TOKENSCOPE_THREADS when it is a positive number
// (at most max_thread_count()), else the cores, at most 16.
int default_thread_count();

} // namespace engine
