// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
#include "backend/cuda/cuda_device.h"

#include <memory>

namespace engine::cuda {

// The device of cuda_device.h emulated on the host: every kernel body run warp by warp over its
// whole grid with HostLanes, memory in host RAM, a recording kept as a list of calls. It checks
// indexing and summation orders, not speed, races or the device compiler (tests; make_cuda_backend
// with CudaBackendOptions::emulate).
std::unique_ptr<Device> make_emulated_device();

} // namespace engine::cuda
