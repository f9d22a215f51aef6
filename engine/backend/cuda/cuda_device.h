// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// What the CUDA backend needs of a device: memory, copies, the kernels of kernels/kernels.h, and a
// recording of a decode step to replay. Two implementations: the NVIDIA device in the separately
// loaded module (module/cuda_device.cu, CUDA runtime, stream-ordered, the decode step a CUDA graph)
// and the emulated device (emulated_device.cpp: host memory, every kernel run over its whole grid on
// the CPU), which lets the tests run the backend, its kernels and its replays without a GPU.
//
// This header is the module's whole interface: plain data and virtual calls, no engine types that
// need the engine's code. Calls report failures as std::runtime_error (the module's own copy of an
// engine type would not be the engine's); the backend turns them into engine errors.
#include "backend/cuda/kernels/kernels.h"

#include <cstddef>
#include <cstdint>

namespace engine::cuda {

struct DeviceInfo {
    char name[256] = {};
    int index = 0;
    int compute_major = 0, compute_minor = 0;
    uint64_t total_bytes = 0, free_bytes = 0;
    int multiprocessors = 0;
    double memory_bandwidth = 0.0; // bytes/s from the memory clock and bus width (0 if unknown)
};

class Device {
public:
    virtual ~Device() = default;
    virtual DeviceInfo info() const = 0;
    // Device memory; throws std::runtime_error naming the size when the device has too little.
    virtual void* alloc(std::size_t bytes) = 0;
    virtual void release(void* p) = 0;
    // Host memory the device reads and writes directly (pinned on a GPU).
    virtual void* alloc_host(std::size_t bytes) = 0;
    virtual void release_host(void* p) = 0;
    // Queued in order with the kernels; a copy to the host is complete after synchronize().
    virtual void copy_to_device(void* dst, const void* src, std::size_t bytes) = 0;
    virtual void copy_to_host(void* dst, const void* src, std::size_t bytes) = 0;
    virtual void zero(void* dst, std::size_t bytes) = 0;
    virtual void synchronize() = 0;
    // Between begin_recording and end_recording the calls above (but synchronize) and the launches
    // are recorded instead of run; replay() runs the recording again with whatever the host wrote
    // into the buffers it reads (the decode step: the token, the position, the angles).
    virtual void begin_recording() = 0;
    virtual void end_recording() = 0;
    virtual void replay() = 0;
    virtual void drop_recording() = 0;
    // How many times a recording was replayed.
    virtual uint64_t replays() const = 0;

#define TOKENSCOPE_CUDA_LAUNCH(K) virtual void launch(const K::Args& args) = 0;
    TOKENSCOPE_CUDA_KERNELS(TOKENSCOPE_CUDA_LAUNCH)
#undef TOKENSCOPE_CUDA_LAUNCH
};

// The module's entry points (extern "C", looked up by name after dlopen).
constexpr int kModuleAbi = 1;
extern "C" {
using ModuleAbiFn = int (*)();
// Devices the driver lists; returns their number (≤ max written), or −1 with `error` set.
using ModuleListFn = int (*)(DeviceInfo* out, int max, char* error, std::size_t error_size);
// Opens device `index`; null with `error` set on failure. The caller deletes it.
using ModuleOpenFn = Device* (*)(int index, char* error, std::size_t error_size);
}

} // namespace engine::cuda
