// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// The Vulkan compute backend: the forward pass of backend.h on a Vulkan device, with the weights in
// their GGUF encoding in device memory, the KV cache on the device and the CPU backend's paged
// accounting. Everything here exists in every build; without Vulkan (TOKENSCOPE_HAVE_VULKAN unset)
// the list is empty and make_vulkan_backend throws UnsupportedError.

#include "backend/backend.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace engine {

struct VulkanDeviceInfo {
    uint32_t index = 0;             // as --device / VulkanBackendOptions::device take it
    std::string name, type, driver; // type: "discrete GPU", "integrated GPU", "virtual GPU", "CPU", "other"
    uint64_t device_local_bytes = 0;
    uint64_t budget_bytes = 0; // free device-local memory per VK_EXT_memory_budget, else the heap size
    bool usable = false;       // can run the shaders
    bool float64 = false;      // has shaderFloat64: the exact arithmetic is available
    std::string why_not;       // when not usable
};

// How well a device of this type (VulkanDeviceInfo::type) runs the engine: discrete GPU 4, integrated
// GPU 3, virtual GPU 2, CPU (software, e.g. lavapipe) 1, other 0. The one ranking every choice of
// "the best device" uses.
int vulkan_device_rank(std::string_view type);
// The best usable device of rank `min_rank` or more (the first listed among equals), or -1.
int best_vulkan_device(const std::vector<VulkanDeviceInfo>& devices, int min_rank = 1);

// Every physical device the Vulkan loader lists. Never throws; empty when there is no loader or driver.
std::vector<VulkanDeviceInfo> list_vulkan_devices();

struct VulkanBackendOptions {
    int device = -1;                // -1: the best usable device (discrete, then integrated, virtual, CPU)
    uint32_t n_ctx = 4096;          // positions the KV cache may hold (capped at the model's training context)
    bool validation = false;        // VK_LAYER_KHRONOS_validation with a counting messenger (debug builds, tests)
    uint64_t max_binding_bytes = 0; // 0: the device limit; smaller forces row-range splits (tests)
    // false (the default): f32 arithmetic, agreeing with the CPU to rounding, fast on GPUs. true: the
    // 64-bit shader variants, bit-equal to the CPU backend (needs shaderFloat64; throws
    // UnsupportedError on a device without it). The CLI's --vulkan-exact, the app's backend picker.
    bool exact = false;
};

// Throws UnsupportedError when there is no usable device or the model needs something the shaders
// lack, Error for driver failures (out of device memory, …).
std::unique_ptr<Backend> make_vulkan_backend(std::shared_ptr<const Model> model, const VulkanBackendOptions& options);

// Validation-layer errors and warnings reported so far in this process (tests assert zero).
struct VulkanValidationReport {
    uint64_t errors = 0;
    uint64_t warnings = 0;
};
VulkanValidationReport vulkan_validation_report();

// Decode steps run by resubmitting a recorded command buffer, so far in this process (tests, bench).
uint64_t vulkan_decode_replays();

} // namespace engine
