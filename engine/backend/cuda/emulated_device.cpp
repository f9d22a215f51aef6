// SPDX-License-Identifier: GPL-3.0-or-later
#include "backend/cuda/emulated_device.h"

#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <set>
#include <stdexcept>
#include <vector>

namespace engine::cuda {

namespace {

template <class K> void run_grid(const typename K::Args& args)
{
    const uint64_t n = K::warps(args);
    for (uint64_t w = 0; w < n; ++w)
        K::template warp<HostLanes>(args, w);
}

class EmulatedDevice final : public Device {
public:
    ~EmulatedDevice() override
    {
        for (void* p : m_blocks)
            std::free(p);
    }

    DeviceInfo info() const override
    {
        DeviceInfo d;
        std::strncpy(d.name, "emulated CUDA device (host)", sizeof d.name - 1);
        d.compute_major = 9;
        d.total_bytes = d.free_bytes = uint64_t(1) << 34;
        return d;
    }
    void* alloc(std::size_t bytes) override
    {
        void* p = std::calloc(1, bytes ? bytes : 1);
        if (!p)
            throw std::runtime_error("the emulated device ran out of host memory");
        m_blocks.insert(p);
        return p;
    }
    void release(void* p) override
    {
        if (p && m_blocks.erase(p))
            std::free(p);
    }
    void* alloc_host(std::size_t bytes) override { return alloc(bytes); }
    void release_host(void* p) override { release(p); }

    void copy_to_device(void* dst, const void* src, std::size_t bytes) override { copy(dst, src, bytes); }
    void copy_to_host(void* dst, const void* src, std::size_t bytes) override { copy(dst, src, bytes); }
    void zero(void* dst, std::size_t bytes) override
    {
        issue([=] { std::memset(dst, 0, bytes); });
    }
    void synchronize() override {}

    void begin_recording() override
    {
        m_recording = true;
        m_recorded.clear();
    }
    void end_recording() override
    {
        m_recording = false;
        // what was recorded runs now, as a captured CUDA graph is launched once when it is made
        replay_calls();
    }
    void replay() override
    {
        replay_calls();
        ++m_replays;
    }
    void drop_recording() override
    {
        m_recording = false;
        m_recorded.clear();
    }
    uint64_t replays() const override { return m_replays; }

#define TOKENSCOPE_CUDA_EMULATE(K)                                                                                     \
    void launch(const K::Args& args) override                                                                          \
    {                                                                                                                  \
        issue([args] { run_grid<K>(args); });                                                                          \
    }
    TOKENSCOPE_CUDA_KERNELS(TOKENSCOPE_CUDA_EMULATE)
#undef TOKENSCOPE_CUDA_EMULATE

private:
    void copy(void* dst, const void* src, std::size_t bytes)
    {
        issue([=] { std::memmove(dst, src, bytes); });
    }
    void issue(std::function<void()> call)
    {
        if (m_recording)
            m_recorded.push_back(std::move(call));
        else
            call();
    }
    void replay_calls()
    {
        for (const auto& call : m_recorded)
            call();
    }

    std::set<void*> m_blocks;
    bool m_recording = false;
    std::vector<std::function<void()>> m_recorded;
    uint64_t m_replays = 0;
};

} // namespace

std::unique_ptr<Device> make_emulated_device()
{
    return std::make_unique<EmulatedDevice>();
}

} // namespace engine::cuda
