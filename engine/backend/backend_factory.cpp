// SPDX-License-Identifier: GPL-3.0-or-later
#include "backend/backend_factory.h"

#include "backend/cuda/cuda_backend.h"
#include "backend/vulkan/vulkan_backend.h"
#include "util/error.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <string>
#include <vector>

namespace engine {

std::string_view backend_kind_name(BackendKind kind)
{
    switch (kind) {
    case BackendKind::Cpu:
        return "cpu";
    case BackendKind::Vulkan:
        return "vulkan";
    case BackendKind::Cuda:
        return "cuda";
    case BackendKind::Auto:
        return "auto";
    }
    return "cpu";
}

std::optional<BackendKind> parse_backend_kind(std::string_view text)
{
    std::string t(text);
    std::transform(t.begin(), t.end(), t.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
    if (t == "cpu")
        return BackendKind::Cpu;
    if (t == "vulkan")
        return BackendKind::Vulkan;
    if (t == "cuda")
        return BackendKind::Cuda;
    if (t == "auto")
        return BackendKind::Auto;
    return std::nullopt;
}

std::optional<BackendChoice> parse_backend_choice(std::string_view text)
{
    if (text == "cpu-plain")
        return BackendChoice{BackendKind::Cpu, false, WeightOrder::Plain, false, false};
    if (text == "cpu-deterministic")
        return BackendChoice{BackendKind::Cpu, false, WeightOrder::LlamaCppDefault, true};
    constexpr std::string_view exact = "-exact";
    const bool is_exact = text.size() > exact.size() && text.substr(text.size() - exact.size()) == exact;
    const auto kind = parse_backend_kind(is_exact ? text.substr(0, text.size() - exact.size()) : text);
    if (!kind || (is_exact && (*kind == BackendKind::Cpu || *kind == BackendKind::Cuda)))
        return std::nullopt;
    return BackendChoice{*kind, is_exact};
}

namespace {

bool auto_accepts_software()
{
    const char* v = std::getenv("TOKENSCOPE_VULKAN_AUTO_SOFTWARE");
    return v && std::string(v) == "1";
}

bool validation_wanted()
{
#ifndef NDEBUG
    return true; // debug builds run with the validation layer
#else
    const char* v = std::getenv("TOKENSCOPE_VULKAN_VALIDATION");
    return v && std::string(v) == "1";
#endif
}

} // namespace

std::unique_ptr<Backend> make_backend(BackendKind kind, std::shared_ptr<const Model> model, uint32_t n_ctx, int threads,
                                      std::string* fallback_note, int device, bool vulkan_exact, WeightOrder cpu_order,
                                      KvCacheTypes kv_types, bool flash_attention)
{
    if (fallback_note)
        fallback_note->clear();
    auto cpu = [&](const std::string& why) {
        if (fallback_note)
            *fallback_note = why;
        if (!why.empty())
            spdlog::warn("{}", why);
        return make_cpu_backend(model, {.threads = threads,
                                        .n_ctx = n_ctx,
                                        .order = cpu_order,
                                        .kv_types = kv_types,
                                        .flash_attention = flash_attention});
    };
    if (kind == BackendKind::Cpu)
        return cpu({});
    if (kv_types.quantized())
        return cpu(fmt::format("a quantized KV cache ({}) runs on the CPU backend only (the {} backend keeps F16 "
                               "keys and values); using the CPU",
                               kv_cache_types_name(kv_types),
                               kind == BackendKind::Auto ? "GPU" : backend_kind_name(kind)));

    std::string no_cuda; // why auto did not take CUDA
    if (kind == BackendKind::Cuda || (kind == BackendKind::Auto && device < 0)) {
        const CudaDeviceListing cuda = list_cuda_devices();
        if (!cuda.devices.empty()) {
            try {
                auto b = make_cuda_backend(model, {.device = kind == BackendKind::Cuda ? device : -1, .n_ctx = n_ctx});
                spdlog::info("backend ({}): {}{}", backend_kind_name(kind), b->name(),
                             kind == BackendKind::Auto ? " — CUDA first: an NVIDIA GPU is usable" : "");
                return b;
            } catch (const Error& e) {
                no_cuda = e.what();
            }
        } else {
            no_cuda = cuda.why_unavailable;
        }
        if (kind == BackendKind::Cuda)
            return cpu(fmt::format("CUDA backend unavailable ({}); using the CPU", no_cuda));
        spdlog::info("backend (auto): no CUDA ({}); trying Vulkan", no_cuda);
    }

    int chosen = device;
    if (kind == BackendKind::Auto && device < 0) {
        // A hardware GPU only: a software device (lavapipe) is slower than the CPU backend.
        const auto devices = list_vulkan_devices();
        chosen = best_vulkan_device(devices, auto_accepts_software() ? vulkan_device_rank("CPU")
                                                                     : vulkan_device_rank("integrated GPU"));
        if (chosen < 0) {
            std::string why =
                no_cuda + "; " + (devices.empty() ? "no Vulkan device found" : "no usable Vulkan GPU found");
            // Auto choosing the CPU is not a fallback the user needs to hear about, but say why.
            auto b = make_cpu_backend(
                model, {.threads = threads, .n_ctx = n_ctx, .order = cpu_order, .flash_attention = flash_attention});
            if (fallback_note)
                *fallback_note = why + "; using the CPU";
            return b;
        }
    }
    try {
        auto b = make_vulkan_backend(
            model, {.device = chosen, .n_ctx = n_ctx, .validation = validation_wanted(), .exact = vulkan_exact});
        spdlog::info("backend ({}): {} — {}", backend_kind_name(kind), b->name(),
                     vulkan_exact ? "exact arithmetic, bit-equal to the CPU backend (asked for)"
                                  : "f32 arithmetic, the default (exact arithmetic only when asked for)");
        return b;
    } catch (const Error& e) {
        return cpu(fmt::format("Vulkan backend unavailable ({}); using the CPU", e.what()));
    }
}

} // namespace engine
