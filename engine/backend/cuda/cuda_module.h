// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// Finding and loading libtokenscope-cuda.so, the separately built CUDA module (module/): it links
// NVIDIA's runtime, so the app and the CLI never depend on it and start without it.
#include "backend/cuda/cuda_device.h"

#include <memory>
#include <string>

namespace engine::cuda {

struct Module {
    ModuleListFn list = nullptr;
    ModuleOpenFn open = nullptr;
    std::string path;
};

// The loaded module, or null with `why` saying why not (not built, not installed, unloadable).
// Loaded once per process; TOKENSCOPE_CUDA_MODULE names the file to load instead of the search.
const Module* load_module(std::string& why);

// Device `index` of the module (for the backend and the kernel suites). Throws UnsupportedError when
// there is no module or no such device, Error when it cannot be opened.
std::unique_ptr<Device> open_device(int index);

} // namespace engine::cuda
