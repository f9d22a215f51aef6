// SPDX-License-Identifier: GPL-3.0-or-later
#include "backend/cuda/cuda_module.h"

#include "util/error.h"

#include <cstdlib>
#include <dlfcn.h>
#include <filesystem>
#include <mutex>
#include <spdlog/fmt/fmt.h>
#include <vector>

namespace engine::cuda {

namespace {

constexpr const char* kModuleName = "libtokenscope-cuda.so";

std::vector<std::filesystem::path> candidates()
{
    namespace fs = std::filesystem;
    std::vector<fs::path> out;
    if (const char* env = std::getenv("TOKENSCOPE_CUDA_MODULE"); env && *env) {
        out.emplace_back(env);
        return out;
    }
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        out.push_back(exe.parent_path() / kModuleName);                                      // build tree, tarball
        out.push_back(exe.parent_path().parent_path() / "lib" / "tokenscope" / kModuleName); // installed
    }
#ifdef TOKENSCOPE_CUDA_MODULE_BUILD_PATH
    out.emplace_back(TOKENSCOPE_CUDA_MODULE_BUILD_PATH); // the suites in the build tree
#endif
    return out;
}

struct Loaded {
    Module module;
    std::string why;
    bool ok = false;
};

Loaded load()
{
    Loaded r;
#ifndef TOKENSCOPE_HAVE_CUDA
    if (!std::getenv("TOKENSCOPE_CUDA_MODULE")) {
        r.why = "this build of Tokenscope has no CUDA backend (no CUDA toolkit when it was built)";
        return r;
    }
#endif
    std::string tried;
    for (const auto& path : candidates()) {
        std::error_code ec;
        if (!std::filesystem::exists(path, ec)) {
            tried += (tried.empty() ? "" : ", ") + path.string();
            continue;
        }
        void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!handle) {
            const char* e = dlerror();
            r.why = fmt::format("the CUDA module {} could not be loaded: {}", path.string(), e ? e : "unknown error");
            return r;
        }
        auto abi = reinterpret_cast<ModuleAbiFn>(dlsym(handle, "tokenscope_cuda_abi"));
        r.module.list = reinterpret_cast<ModuleListFn>(dlsym(handle, "tokenscope_cuda_list"));
        r.module.open = reinterpret_cast<ModuleOpenFn>(dlsym(handle, "tokenscope_cuda_open"));
        if (!abi || !r.module.list || !r.module.open || abi() != kModuleAbi) {
            r.why = fmt::format("{} is not a CUDA module of this Tokenscope version", path.string());
            dlclose(handle);
            return r;
        }
        // kept loaded for the process: devices and their code live in it
        r.module.path = path.string();
        r.ok = true;
        return r;
    }
    r.why = fmt::format("Tokenscope's CUDA module ({}) is not installed (looked in {})", kModuleName, tried);
    return r;
}

} // namespace

const Module* load_module(std::string& why)
{
    static std::once_flag once;
    static Loaded loaded;
    std::call_once(once, [] { loaded = load(); });
    why = loaded.why;
    return loaded.ok ? &loaded.module : nullptr;
}

std::unique_ptr<Device> open_device(int index)
{
    std::string why;
    const Module* module = load_module(why);
    if (!module)
        throw UnsupportedError("CUDA is unavailable: " + why);
    DeviceInfo infos[16];
    char error[512] = {};
    const int n = module->list(infos, 16, error, sizeof error);
    if (n < 0)
        throw UnsupportedError(std::string("CUDA is unavailable: ") + error);
    if (index < 0 || index >= n)
        throw UnsupportedError(fmt::format("there is no CUDA device {} ({} listed)", index, n));
    std::unique_ptr<Device> device(module->open(index, error, sizeof error));
    if (!device)
        throw Error(fmt::format("CUDA device {} could not be opened: {}", index, error));
    return device;
}

} // namespace engine::cuda
