// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// The CUDA backend: the forward pass of backend.h on an NVIDIA GPU through Tokenscope's CUDA module
// (libtokenscope-cuda.so, loaded when asked for: the app runs without it and without a driver), or
// on the emulated device (tests). Weights stay in their GGUF encoding in device memory, the KV cache
// is F16 on the device with the CPU backend's paged accounting, the decode step is a CUDA graph.
// Its kernels follow the CPU backend's summation orders (fixed orders, no atomics): on the emulated
// device they give the CPU's bits in every suite; on a GPU the parity suites hold them to the
// tolerance criteria.

#include "backend/backend.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace engine {

struct CudaDeviceInfo {
    int index = 0;
    std::string name;
    int compute_major = 0, compute_minor = 0;
    uint64_t total_bytes = 0, free_bytes = 0; // free_bytes: 0 in a listing (it would open every device)
    int multiprocessors = 0;
    double memory_bandwidth = 0.0; // bytes/s (0: unknown)
};

struct CudaDeviceListing {
    std::vector<CudaDeviceInfo> devices;
    std::string why_unavailable; // when `devices` is empty: no module, no driver, no device
};

// Never throws.
CudaDeviceListing list_cuda_devices();

struct CudaBackendOptions {
    int device = -1;       // -1: device 0
    uint32_t n_ctx = 4096; // positions the KV cache may hold (capped at the model's training context)
    bool emulate = false;  // the emulated device (kernels run on the host): tests
};

// Throws UnsupportedError when CUDA is unavailable (saying why) or the model needs what the kernels
// lack, Error for driver failures (out of device memory, …).
std::unique_ptr<Backend> make_cuda_backend(std::shared_ptr<const Model> model, const CudaBackendOptions& options);

// Decode steps run by replaying a recorded step (a CUDA graph), so far in this process.
uint64_t cuda_decode_replays();

} // namespace engine
