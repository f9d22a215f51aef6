// SPDX-License-Identifier: GPL-3.0-or-later
// libtokenscope-cuda.so: the cuda::Device of cuda_device.h on an NVIDIA GPU. Every kernel of
// kernels/kernels.h runs as blocks of four warps on one non-blocking stream; a recording is a CUDA
// graph captured from that stream. Launch errors are kept and reported at the next synchronize, so
// that a failure surfaces where the backend can say what it was doing.
//
// Licensing: this module links NVIDIA's CUDA runtime (statically, under NVIDIA's license); it is
// loaded at run time and never needed by the rest of Tokenscope, which stays GPL-3.0-or-later.
#include "backend/cuda/cuda_device.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

namespace engine::cuda {

namespace {

constexpr uint32_t kWarpsPerBlock = 4;

template <class K> __global__ void __launch_bounds__(kWarpsPerBlock* kWarp) run_kernel(const typename K::Args args)
{
    const uint64_t w = uint64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
    if (w < K::warps(args)) // a whole warp leaves or stays: the shuffles see all 32 lanes
        K::template warp<DeviceLanes>(args, w);
}

std::string describe(cudaError_t e)
{
    return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

// A failed call's error is cleared (so that no later launch reports it) and thrown.
void check(cudaError_t e, const char* what)
{
    if (e != cudaSuccess) {
        cudaGetLastError();
        throw std::runtime_error(std::string(what) + " failed (" + describe(e) + ")");
    }
}

// What the driver says of device `index`, without creating a context on it (listing every device
// must not open each one). free_bytes is filled by an opened device.
DeviceInfo describe_device(int index)
{
    DeviceInfo d;
    d.index = index;
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, index) == cudaSuccess) {
        std::strncpy(d.name, p.name, sizeof d.name - 1);
        d.compute_major = p.major;
        d.compute_minor = p.minor;
        d.total_bytes = p.totalGlobalMem;
        d.multiprocessors = p.multiProcessorCount;
        int clock_khz = 0, bus_bits = 0;
        if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, index) == cudaSuccess &&
            cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, index) == cudaSuccess)
            d.memory_bandwidth = 2.0 * clock_khz * 1e3 * bus_bits / 8.0; // double data rate
    }
    cudaGetLastError(); // a failed query leaves nothing for a later call to report
    return d;
}

class NvidiaDevice final : public Device {
public:
    explicit NvidiaDevice(int index) : m_index(index)
    {
        check(cudaSetDevice(index), "selecting the device");
        check(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking), "creating a stream");
    }
    ~NvidiaDevice() override
    {
        drop_recording();
        cudaStreamDestroy(m_stream);
    }

    DeviceInfo info() const override
    {
        use();
        DeviceInfo d = describe_device(m_index);
        size_t free_bytes = 0, total = 0;
        if (cudaMemGetInfo(&free_bytes, &total) == cudaSuccess)
            d.free_bytes = free_bytes;
        cudaGetLastError();
        return d;
    }

    void* alloc(std::size_t bytes) override
    {
        use();
        void* p = nullptr;
        const cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
        if (e != cudaSuccess) {
            cudaGetLastError();
            throw std::runtime_error("allocating " + std::to_string(bytes >> 20) + " MiB of device memory failed (" +
                                     describe(e) + ")");
        }
        return p;
    }
    void release(void* p) override
    {
        use();
        cudaFree(p);
    }
    void* alloc_host(std::size_t bytes) override
    {
        use();
        void* p = nullptr;
        check(cudaMallocHost(&p, bytes ? bytes : 1), "allocating pinned host memory");
        return p;
    }
    void release_host(void* p) override
    {
        use();
        cudaFreeHost(p);
    }

    void copy_to_device(void* dst, const void* src, std::size_t bytes) override
    {
        use();
        keep(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, m_stream));
    }
    void copy_to_host(void* dst, const void* src, std::size_t bytes) override
    {
        use();
        keep(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, m_stream));
    }
    void zero(void* dst, std::size_t bytes) override
    {
        use();
        keep(cudaMemsetAsync(dst, 0, bytes, m_stream));
    }
    void synchronize() override
    {
        use();
        keep(cudaStreamSynchronize(m_stream));
        if (m_error != cudaSuccess) {
            const cudaError_t e = m_error;
            m_error = cudaSuccess;
            throw std::runtime_error(describe(e));
        }
    }

    void begin_recording() override
    {
        use();
        drop_recording();
        keep(cudaStreamBeginCapture(m_stream, cudaStreamCaptureModeThreadLocal));
    }
    void end_recording() override
    {
        use();
        cudaGraph_t graph = nullptr;
        keep(cudaStreamEndCapture(m_stream, &graph));
        if (graph) {
            keep(cudaGraphInstantiate(&m_exec, graph, 0));
            cudaGraphDestroy(graph);
        }
        if (m_exec)
            keep(cudaGraphLaunch(m_exec, m_stream));
    }
    void replay() override
    {
        use();
        if (!m_exec)
            throw std::runtime_error("no recorded step to replay");
        keep(cudaGraphLaunch(m_exec, m_stream));
        ++m_replays;
    }
    // Also ends a capture left open (a chunk that stopped with an error), discarding what it held.
    void drop_recording() override
    {
        use();
        cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
        if (cudaStreamIsCapturing(m_stream, &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
            cudaGraph_t graph = nullptr;
            cudaStreamEndCapture(m_stream, &graph);
            if (graph)
                cudaGraphDestroy(graph);
        }
        cudaGetLastError();
        if (m_exec)
            cudaGraphExecDestroy(m_exec);
        m_exec = nullptr;
    }
    uint64_t replays() const override { return m_replays; }

#define TOKENSCOPE_CUDA_RUN(K)                                                                                         \
    void launch(const K::Args& args) override                                                                          \
    {                                                                                                                  \
        const uint64_t blocks = (K::warps(args) + kWarpsPerBlock - 1) / kWarpsPerBlock;                                \
        if (blocks == 0)                                                                                               \
            return;                                                                                                    \
        if (blocks > 0x7FFFFFFFu) {                                                                                    \
            keep(cudaErrorInvalidConfiguration);                                                                       \
            return;                                                                                                    \
        }                                                                                                              \
        use();                                                                                                         \
        run_kernel<K><<<unsigned(blocks), kWarpsPerBlock * kWarp, 0, m_stream>>>(args);                                \
        keep(cudaGetLastError());                                                                                      \
    }
    TOKENSCOPE_CUDA_KERNELS(TOKENSCOPE_CUDA_RUN)
#undef TOKENSCOPE_CUDA_RUN

private:
    // The runtime's current device is per thread: the engine may call from another thread than the
    // one that opened the device, and another device may be current there.
    void use() const
    {
        cudaSetDevice(m_index);
    }
    // The first error since the last synchronize is what synchronize reports.
    void keep(cudaError_t e)
    {
        if (e != cudaSuccess && m_error == cudaSuccess)
            m_error = e;
    }

    int m_index = 0;
    cudaStream_t m_stream = nullptr;
    cudaGraphExec_t m_exec = nullptr;
    cudaError_t m_error = cudaSuccess;
    uint64_t m_replays = 0;
};

void set_error(char* error, std::size_t size, const std::string& text)
{
    if (error && size)
        std::snprintf(error, size, "%s", text.c_str());
}

} // namespace

} // namespace engine::cuda

using engine::cuda::Device;
using engine::cuda::DeviceInfo;

extern "C" __attribute__((visibility("default"))) int tokenscope_cuda_abi()
{
    return engine::cuda::kModuleAbi;
}

extern "C" __attribute__((visibility("default"))) int tokenscope_cuda_list(DeviceInfo* out, int max, char* error,
                                                                           std::size_t error_size)
{
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        const bool no_driver = e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice;
        engine::cuda::set_error(error, error_size,
                                no_driver && e == cudaErrorInsufficientDriver
                                    ? "no NVIDIA driver is installed (libcuda.so.1 not found or too old)"
                                : e == cudaErrorNoDevice ? "the NVIDIA driver finds no CUDA device"
                                                         : "the CUDA runtime failed: " + engine::cuda::describe(e));
        return -1;
    }
    int written = 0;
    for (int i = 0; i < count && written < max; ++i)
        out[written++] = engine::cuda::describe_device(i);
    return written;
}

extern "C" __attribute__((visibility("default"))) Device* tokenscope_cuda_open(int index, char* error,
                                                                               std::size_t error_size)
{
    try {
        return new engine::cuda::NvidiaDevice(index);
    } catch (const std::exception& ex) {
        engine::cuda::set_error(error, error_size, ex.what());
        return nullptr;
    }
}
