// SPDX-License-Identifier: GPL-3.0-or-later
#ifdef TOKENSCOPE_HAVE_VULKAN

#include "backend/vulkan/vk_context.h"
#include "backend/vulkan/vulkan_backend.h"

#include "backend/vulkan/vk_shaders.h"
#include "util/error.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <stdexcept>
#include <string_view>
#include <utility>

namespace engine::vk {

namespace {

std::atomic<uint64_t> g_errors{0}, g_warnings{0};

VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                     VkDebugUtilsMessageTypeFlagsEXT,
                                                     const VkDebugUtilsMessengerCallbackDataEXT* data, void*)
{
    const char* text = data && data->pMessage ? data->pMessage : "(no message)";
    if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
        ++g_errors;
        spdlog::error("Vulkan validation: {}", text);
    } else if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
        ++g_warnings;
        spdlog::warn("Vulkan validation: {}", text);
    }
    return VK_FALSE;
}

const char* result_name(VkResult r)
{
    switch (r) {
    case VK_ERROR_OUT_OF_HOST_MEMORY:
        return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
        return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED:
        return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST:
        return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED:
        return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT:
        return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT:
        return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT:
        return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
        return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS:
        return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_OUT_OF_POOL_MEMORY:
        return "VK_ERROR_OUT_OF_POOL_MEMORY";
    case VK_TIMEOUT:
        return "VK_TIMEOUT";
    default:
        return "VkResult";
    }
}

std::string type_name(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
        return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
        return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
        return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
        return "CPU";
    default:
        return "other";
    }
}

bool has_layer(const char* name)
{
    uint32_t n = 0;
    if (vkEnumerateInstanceLayerProperties(&n, nullptr) != VK_SUCCESS)
        return false;
    std::vector<VkLayerProperties> layers(n);
    vkEnumerateInstanceLayerProperties(&n, layers.data());
    return std::any_of(layers.begin(), layers.end(),
                       [&](const VkLayerProperties& l) { return std::strcmp(l.layerName, name) == 0; });
}

bool has_instance_extension(const char* name, const char* layer = nullptr)
{
    uint32_t n = 0;
    if (vkEnumerateInstanceExtensionProperties(layer, &n, nullptr) != VK_SUCCESS)
        return false;
    std::vector<VkExtensionProperties> ext(n);
    vkEnumerateInstanceExtensionProperties(layer, &n, ext.data());
    return std::any_of(ext.begin(), ext.end(),
                       [&](const VkExtensionProperties& e) { return std::strcmp(e.extensionName, name) == 0; });
}

bool has_device_extension(VkPhysicalDevice dev, const char* name)
{
    uint32_t n = 0;
    if (vkEnumerateDeviceExtensionProperties(dev, nullptr, &n, nullptr) != VK_SUCCESS)
        return false;
    std::vector<VkExtensionProperties> ext(n);
    vkEnumerateDeviceExtensionProperties(dev, nullptr, &n, ext.data());
    return std::any_of(ext.begin(), ext.end(),
                       [&](const VkExtensionProperties& e) { return std::strcmp(e.extensionName, name) == 0; });
}

uint32_t instance_api()
{
    uint32_t v = VK_API_VERSION_1_0;
    if (vkEnumerateInstanceVersion(&v) != VK_SUCCESS)
        v = VK_API_VERSION_1_0;
    return v >= VK_API_VERSION_1_2   ? VK_API_VERSION_1_2
           : v >= VK_API_VERSION_1_1 ? VK_API_VERSION_1_1
                                     : VK_API_VERSION_1_0;
}

// An instance (validation on when asked and installed). Returns VK_NULL_HANDLE when there is no
// loader or driver; `messenger` is set when validation is active.
VkInstance create_instance(bool validation, VkDebugUtilsMessengerEXT* messenger, std::string* error)
{
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "Tokenscope";
    app.pEngineName = "Tokenscope";
    app.apiVersion = instance_api();
    std::vector<const char*> layers, extensions;
    const char* kValidation = "VK_LAYER_KHRONOS_validation";
    bool debug_utils = false;
    if (validation) {
        if (has_layer(kValidation)) {
            layers.push_back(kValidation);
            if (has_instance_extension(VK_EXT_DEBUG_UTILS_EXTENSION_NAME) ||
                has_instance_extension(VK_EXT_DEBUG_UTILS_EXTENSION_NAME, kValidation)) {
                extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
                debug_utils = true;
            }
        } else {
            spdlog::warn("Vulkan: validation requested but VK_LAYER_KHRONOS_validation is not installed");
        }
    }
    VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    info.pApplicationInfo = &app;
    info.enabledLayerCount = static_cast<uint32_t>(layers.size());
    info.ppEnabledLayerNames = layers.data();
    info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
    info.ppEnabledExtensionNames = extensions.data();
    VkDebugUtilsMessengerCreateInfoEXT dbg{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    dbg.messageSeverity =
        VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    dbg.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    dbg.pfnUserCallback = on_validation_message;
    if (debug_utils)
        info.pNext = &dbg; // messages from vkCreateInstance/vkDestroyInstance too
    VkInstance instance = VK_NULL_HANDLE;
    const VkResult r = vkCreateInstance(&info, nullptr, &instance);
    if (r != VK_SUCCESS) {
        if (error)
            *error = r == VK_ERROR_INCOMPATIBLE_DRIVER ? "no Vulkan driver (ICD) is installed"
                                                       : fmt::format("vkCreateInstance failed ({})", result_name(r));
        return VK_NULL_HANDLE;
    }
    if (debug_utils && messenger) {
        auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
            vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT"));
        if (create)
            create(instance, &dbg, nullptr, messenger);
    }
    return instance;
}

void destroy_instance(VkInstance instance, VkDebugUtilsMessengerEXT messenger)
{
    if (!instance)
        return;
    if (messenger) {
        auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
            vkGetInstanceProcAddr(instance, "vkDestroyDebugUtilsMessengerEXT"));
        if (destroy)
            destroy(instance, messenger, nullptr);
    }
    vkDestroyInstance(instance, nullptr);
}

std::optional<uint32_t> compute_queue_family(VkPhysicalDevice dev)
{
    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(dev, &n, nullptr);
    std::vector<VkQueueFamilyProperties> fams(n);
    vkGetPhysicalDeviceQueueFamilyProperties(dev, &n, fams.data());
    // A compute family; one that also graphics is fine (most devices), a compute-only one preferred.
    std::optional<uint32_t> any;
    for (uint32_t i = 0; i < n; ++i) {
        if (!(fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT) || fams[i].queueCount == 0)
            continue;
        if (!(fams[i].queueFlags & VK_QUEUE_GRAPHICS_BIT))
            return i;
        if (!any)
            any = i;
    }
    return any;
}

bool has_coherent_host_memory(const VkPhysicalDeviceMemoryProperties& mem)
{
    for (uint32_t i = 0; i < mem.memoryTypeCount; ++i) {
        const auto f = mem.memoryTypes[i].propertyFlags;
        if ((f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) && (f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT))
            return true;
    }
    return false;
}

// Empty when the device has what the shaders need, else the reason.
std::string why_unusable(VkPhysicalDevice dev)
{
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(dev, &props);
    VkPhysicalDeviceMemoryProperties mem;
    vkGetPhysicalDeviceMemoryProperties(dev, &mem);
    const auto& l = props.limits;
    if (!compute_queue_family(dev))
        return "it has no compute queue";
    if (l.maxComputeWorkGroupInvocations < 128 || l.maxComputeWorkGroupSize[0] < 128)
        return fmt::format("its workgroups hold {} invocations, the shaders need 128",
                           l.maxComputeWorkGroupInvocations);
    if (l.maxComputeSharedMemorySize < 8192)
        return fmt::format("it has {} bytes of shared memory, the shaders need 8192", l.maxComputeSharedMemorySize);
    if (l.maxPushConstantsSize < 64)
        return fmt::format("it allows {} bytes of push constants, the shaders need 64", l.maxPushConstantsSize);
    if (l.maxStorageBufferRange < (16u << 20))
        return fmt::format("a storage buffer may cover {} bytes, the backend needs 16 MiB", l.maxStorageBufferRange);
    if (!has_coherent_host_memory(mem))
        return "it has no host-visible coherent memory";
    return {};
}

PhysicalDeviceReport describe(VkPhysicalDevice dev, uint32_t index, uint32_t instance_version)
{
    PhysicalDeviceReport r;
    r.index = index;
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(dev, &props);
    r.name = props.deviceName;
    r.vk_type = props.deviceType;
    r.type = type_name(props.deviceType);
    const bool v11 = instance_version >= VK_API_VERSION_1_1 && props.apiVersion >= VK_API_VERSION_1_1;
    const bool v12 = instance_version >= VK_API_VERSION_1_2 && props.apiVersion >= VK_API_VERSION_1_2;
    r.driver = fmt::format("Vulkan {}.{}.{}, driver version {:#x}", VK_API_VERSION_MAJOR(props.apiVersion),
                           VK_API_VERSION_MINOR(props.apiVersion), VK_API_VERSION_PATCH(props.apiVersion),
                           props.driverVersion);
    if (v12) {
        VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
        VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
        p2.pNext = &driver;
        vkGetPhysicalDeviceProperties2(dev, &p2);
        r.driver = fmt::format("{} {} (Vulkan {}.{}.{})", driver.driverName, driver.driverInfo,
                               VK_API_VERSION_MAJOR(props.apiVersion), VK_API_VERSION_MINOR(props.apiVersion),
                               VK_API_VERSION_PATCH(props.apiVersion));
    }
    VkPhysicalDeviceMemoryProperties mem;
    vkGetPhysicalDeviceMemoryProperties(dev, &mem);
    for (uint32_t h = 0; h < mem.memoryHeapCount; ++h)
        if (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
            r.device_local_bytes += mem.memoryHeaps[h].size;
    r.budget_bytes = r.device_local_bytes;
    if (v11 && has_device_extension(dev, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME)) {
        VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{
            VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
        VkPhysicalDeviceMemoryProperties2 m2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2};
        m2.pNext = &budget;
        vkGetPhysicalDeviceMemoryProperties2(dev, &m2);
        r.budget_bytes = 0;
        for (uint32_t h = 0; h < mem.memoryHeapCount; ++h)
            if (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
                r.budget_bytes +=
                    budget.heapBudget[h] > budget.heapUsage[h] ? budget.heapBudget[h] - budget.heapUsage[h] : 0;
    }
    VkPhysicalDeviceFeatures features{};
    vkGetPhysicalDeviceFeatures(dev, &features);
    r.float64 = features.shaderFloat64 == VK_TRUE;
    r.why_not = why_unusable(dev);
    r.usable = r.why_not.empty();
    return r;
}

std::vector<VkPhysicalDevice> physical_devices(VkInstance instance)
{
    uint32_t n = 0;
    if (vkEnumeratePhysicalDevices(instance, &n, nullptr) != VK_SUCCESS)
        return {};
    std::vector<VkPhysicalDevice> devs(n);
    if (vkEnumeratePhysicalDevices(instance, &n, devs.data()) != VK_SUCCESS)
        return {};
    devs.resize(n);
    return devs;
}

} // namespace

ValidationCounts validation_counts()
{
    return {g_errors.load(), g_warnings.load()};
}

std::vector<PhysicalDeviceReport> enumerate_devices()
{
    try {
        VkInstance instance = create_instance(false, nullptr, nullptr);
        if (!instance)
            return {};
        std::vector<PhysicalDeviceReport> out;
        const auto devs = physical_devices(instance);
        for (uint32_t i = 0; i < devs.size(); ++i)
            out.push_back(describe(devs[i], i, instance_api()));
        destroy_instance(instance, VK_NULL_HANDLE);
        return out;
    } catch (...) {
        return {};
    }
}

// =============================================================================================
// Context
// =============================================================================================

Context::Context(const ContextOptions& options)
{
    std::string error;
    m_instance = create_instance(options.validation, &m_messenger, &error);
    if (!m_instance)
        throw UnsupportedError("Vulkan is not available: " + error + "; use the CPU backend");
    try {
        const auto devs = physical_devices(m_instance);
        if (devs.empty())
            throw UnsupportedError("Vulkan is installed but lists no device; use the CPU backend");
        int chosen = -1;
        if (options.device >= 0) {
            if (static_cast<std::size_t>(options.device) >= devs.size())
                throw UnsupportedError(
                    fmt::format("there is no Vulkan device {} (the system has {})", options.device, devs.size()));
            const auto why = why_unusable(devs[static_cast<std::size_t>(options.device)]);
            if (!why.empty())
                throw UnsupportedError(
                    fmt::format("Vulkan device {} cannot run Tokenscope's shaders: {}", options.device, why));
            chosen = options.device;
        } else {
            int best_rank = -1;
            for (std::size_t i = 0; i < devs.size(); ++i) {
                const auto rep = describe(devs[i], uint32_t(i), instance_api());
                if (rep.usable && vulkan_device_rank(rep.type) > best_rank) { // the one ranking
                    best_rank = vulkan_device_rank(rep.type);
                    chosen = int(i);
                }
            }
            if (chosen < 0)
                throw UnsupportedError("no Vulkan device can run Tokenscope's shaders (see `tokenscope-cli devices`)");
        }
        m_physical = devs[static_cast<std::size_t>(chosen)];
        const PhysicalDeviceReport rep = describe(m_physical, uint32_t(chosen), instance_api());
        m_name = rep.name;
        // The f32 matmul's layout: eight invocations per row (one per SIMD lane: neighbouring
        // invocations read neighbouring bytes, as a GPU's memory wants) on GPUs; one invocation per
        // row on a CPU-type device (lavapipe), whose invocations are SIMD lanes of CPU threads.
        // TOKENSCOPE_VULKAN_MATMUL=lanes|rows overrides it (tests run both on lavapipe).
        m_matmul_lanes = rep.vk_type != VK_PHYSICAL_DEVICE_TYPE_CPU;
        if (const char* env = std::getenv("TOKENSCOPE_VULKAN_MATMUL")) {
            if (std::string_view(env) == "lanes" || std::string_view(env) == "rows")
                m_matmul_lanes = std::string_view(env) == "lanes";
        }
        m_device_local = rep.device_local_bytes;
        m_queue_family = *compute_queue_family(m_physical);

        const float priority = 1.0f;
        VkDeviceQueueCreateInfo q{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
        q.queueFamilyIndex = m_queue_family;
        q.queueCount = 1;
        q.pQueuePriorities = &priority;
        // 64-bit floats let the shaders round each fused multiply-add once and sum in double where the
        // CPU backend does: results bit-equal to the CPU's, at the price of GPUs' slow 64-bit units.
        // Only when asked for; the f32 path is the default on every device.
        VkPhysicalDeviceFeatures supported{};
        vkGetPhysicalDeviceFeatures(m_physical, &supported);
        if (options.exact && !supported.shaderFloat64)
            throw UnsupportedError(
                fmt::format("exact Vulkan arithmetic needs 64-bit floats (shaderFloat64), which {} lacks; without "
                            "--vulkan-exact the f32 path runs on it",
                            rep.name));
        VkPhysicalDeviceFeatures enabled{};
        enabled.shaderFloat64 = options.exact ? VK_TRUE : VK_FALSE;
        m_float64 = options.exact;
        VkDeviceCreateInfo dinfo{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
        dinfo.queueCreateInfoCount = 1;
        dinfo.pQueueCreateInfos = &q;
        dinfo.pEnabledFeatures = &enabled;
        check(vkCreateDevice(m_physical, &dinfo, nullptr, &m_device), "creating the Vulkan device");
        vkGetDeviceQueue(m_device, m_queue_family, 0, &m_queue);
        vkGetPhysicalDeviceMemoryProperties(m_physical, &m_memory);

        VkPhysicalDeviceProperties props;
        vkGetPhysicalDeviceProperties(m_physical, &props);
        const auto& l = props.limits;
        m_limits.max_storage_buffer_range = l.maxStorageBufferRange;
        m_limits.max_allocation = uint64_t(1) << 30; // the Vulkan 1.1 minimum, when the device cannot say
        m_limits.min_storage_offset_alignment = l.minStorageBufferOffsetAlignment;
        m_limits.max_shared_memory = l.maxComputeSharedMemorySize;
        m_limits.max_invocations = l.maxComputeWorkGroupInvocations;
        for (int i = 0; i < 3; ++i) {
            m_limits.max_group_size[i] = l.maxComputeWorkGroupSize[i];
            m_limits.max_group_count[i] = l.maxComputeWorkGroupCount[i];
        }
        m_limits.max_push_constants = l.maxPushConstantsSize;
        m_limits.max_allocations = l.maxMemoryAllocationCount;
        if (instance_api() >= VK_API_VERSION_1_1 && props.apiVersion >= VK_API_VERSION_1_1) {
            VkPhysicalDeviceMaintenance3Properties m3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
            VkPhysicalDeviceSubgroupProperties sg{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
            m3.pNext = &sg;
            VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
            p2.pNext = &m3;
            vkGetPhysicalDeviceProperties2(m_physical, &p2);
            m_limits.max_allocation = m3.maxMemoryAllocationSize;
            m_limits.subgroup_size = sg.subgroupSize;
            // The f32 matmul's lanes meet by subgroup shuffles when a row's eight invocations fit
            // in one subgroup of a 64-invocation workgroup. TOKENSCOPE_VULKAN_SUBGROUPS=0: through
            // shared memory instead (tests of that path; a driver whose subgroups misbehave).
            const char* sg_env = std::getenv("TOKENSCOPE_VULKAN_SUBGROUPS");
            m_subgroup_shuffle = (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0 &&
                                 (sg.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT) != 0 &&
                                 sg.subgroupSize >= 8 && sg.subgroupSize <= 64 && 64 % sg.subgroupSize == 0 &&
                                 !(sg_env && std::string_view(sg_env) == "0");
        }
        m_max_binding = std::min<uint64_t>(m_limits.max_storage_buffer_range, m_limits.max_allocation);
        if (options.max_binding_bytes)
            m_max_binding = std::min(m_max_binding, options.max_binding_bytes);
        m_max_binding &= ~uint64_t(3);

        spdlog::info("Vulkan: device {} \"{}\" ({}), {}; {:.0f} MiB device-local, budget {:.0f} MiB; validation {}",
                     chosen, rep.name, rep.type, rep.driver, double(rep.device_local_bytes) / 1048576.0,
                     double(rep.budget_bytes) / 1048576.0, validation_active() ? "on" : "off");
        spdlog::info(
            "Vulkan limits: maxStorageBufferRange {} B (binding used: {} B), maxMemoryAllocationSize {} B, "
            "minStorageBufferOffsetAlignment {}, maxComputeSharedMemorySize {} B, maxComputeWorkGroupInvocations {}, "
            "maxComputeWorkGroupSize {}×{}×{}, maxComputeWorkGroupCount {}×{}×{}, maxPushConstantsSize {} B, "
            "maxMemoryAllocationCount {}, subgroup size {}; arithmetic: {}",
            m_limits.max_storage_buffer_range, m_max_binding, m_limits.max_allocation,
            m_limits.min_storage_offset_alignment, m_limits.max_shared_memory, m_limits.max_invocations,
            m_limits.max_group_size[0], m_limits.max_group_size[1], m_limits.max_group_size[2],
            m_limits.max_group_count[0], m_limits.max_group_count[1], m_limits.max_group_count[2],
            m_limits.max_push_constants, m_limits.max_allocations, m_limits.subgroup_size, m_float64 ? "exact" : "f32");
        if (!m_float64)
            probe_fma();
        if (m_float64)
            spdlog::info("Vulkan arithmetic: exact (64-bit floats, results bit-equal to the CPU backend's; slow "
                         "where 64-bit floats are)");
        else
            spdlog::info(
                "Vulkan arithmetic: f32 (the default; fma {}; matmul lanes meet by {}; --vulkan-exact "
                "for 64-bit arithmetic{})",
                std::getenv("TOKENSCOPE_VULKAN_FMA")
                    ? (m_fma_rounds_once ? "the device's (TOKENSCOPE_VULKAN_FMA=native)"
                                         : "emulated (TOKENSCOPE_VULKAN_FMA=emulated)")
                    : (m_fma_rounds_once ? "rounded once by the device" : "emulated (the device's rounds twice)"),
                m_subgroup_shuffle ? "subgroup shuffles" : "shared memory",
                supported.shaderFloat64 ? "" : ", which this device cannot do");
    } catch (...) {
        if (m_device)
            vkDestroyDevice(m_device, nullptr);
        destroy_instance(m_instance, m_messenger);
        throw;
    }
}

Context::~Context()
{
    if (m_device) {
        vkDeviceWaitIdle(m_device);
        for (auto& [name, p] : m_pipelines) {
            vkDestroyPipeline(m_device, p->pipeline, nullptr);
            vkDestroyPipelineLayout(m_device, p->layout, nullptr);
            vkDestroyDescriptorSetLayout(m_device, p->set_layout, nullptr);
        }
        vkDestroyDevice(m_device, nullptr);
    }
    destroy_instance(m_instance, m_messenger);
}

void Context::check(VkResult result, const char* what)
{
    if (result == VK_SUCCESS)
        return;
    if (result == VK_ERROR_DEVICE_LOST)
        m_lost = true;
    switch (result) {
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
        throw Error(fmt::format(
            "the Vulkan device ({}) ran out of memory while {}: use a smaller context or model, or the CPU backend",
            m_name, what));
    case VK_ERROR_OUT_OF_HOST_MEMORY:
        throw Error(fmt::format("the Vulkan driver ran out of host memory while {}", what));
    case VK_ERROR_DEVICE_LOST:
        throw Error(fmt::format(
            "the Vulkan device ({}) was lost while {} (the driver reset or crashed); reopen the model or use "
            "the CPU backend",
            m_name, what));
    default:
        throw Error(fmt::format("Vulkan error {} ({}) while {}", result_name(result), int(result), what));
    }
}

uint32_t Context::memory_type(uint32_t type_bits, Memory memory) const
{
    auto find = [&](VkMemoryPropertyFlags want) -> int {
        for (uint32_t i = 0; i < m_memory.memoryTypeCount; ++i)
            if ((type_bits & (1u << i)) && (m_memory.memoryTypes[i].propertyFlags & want) == want)
                return int(i);
        return -1;
    };
    int t = -1;
    switch (memory) {
    case Memory::Device:
        t = find(VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
        if (t < 0)
            t = find(0);
        break;
    case Memory::Upload:
        t = find(VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
        break;
    case Memory::Download:
        t = find(VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT |
                 VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
        if (t < 0)
            t = find(VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
        break;
    }
    if (t < 0)
        throw Error(fmt::format("the Vulkan device ({}) has no suitable memory type for a buffer", m_name));
    return uint32_t(t);
}

// Runs probe_fma.comp on triples whose fused and unfused results differ and sets m_fma_rounds_once
// when every result equals std::fma's. TOKENSCOPE_VULKAN_FMA=native|emulated overrides it (tests).
void Context::probe_fma()
{
    if (const char* env = std::getenv("TOKENSCOPE_VULKAN_FMA")) {
        if (std::string_view(env) == "native" || std::string_view(env) == "emulated") {
            m_fma_rounds_once = std::string_view(env) == "native";
            return;
        }
    }
    constexpr uint32_t n = 64;
    std::vector<float> abc(3 * n), expected(n);
    uint32_t state = 12345;
    auto next = [&] {
        state = state * 1664525u + 1013904223u;
        return float(state >> 8) / float(1u << 24) + 0.5f; // [0.5, 1.5)
    };
    for (uint32_t i = 0; i < n; ++i) {
        // a·b with bits below f32's precision, c cancelling its leading part
        const float a = i == 0 ? 1.0f + 0x1p-12f : next(), b = i == 0 ? 1.0f + 0x1p-12f : next();
        const float c = -(a * b);
        abc[3 * i] = a;
        abc[3 * i + 1] = b;
        abc[3 * i + 2] = i % 2 ? c : -1.0f;
        expected[i] = std::fma(a, b, abc[3 * i + 2]);
    }
    Buffer in(this, abc.size() * sizeof(float), Memory::Upload), out(this, n * sizeof(float), Memory::Download);
    std::memcpy(in.mapped(), abc.data(), abc.size() * sizeof(float));
    Recorder rec(*this);
    rec.begin();
    rec.dispatch(pipeline("probe_fma", 2, 0, {}), {whole(in), whole(out)}, nullptr, 0, 1);
    rec.submit();
    m_fma_rounds_once = std::memcmp(out.mapped(), expected.data(), n * sizeof(float)) == 0;
}

Pipeline& Context::pipeline(const std::string& name, uint32_t n_bindings, uint32_t push_bytes,
                            std::vector<uint32_t> spec)
{
    std::string key = name;
    for (uint32_t s : spec)
        key += fmt::format(":{}", s);
    for (auto& [k, p] : m_pipelines)
        if (k == key)
            return *p;
    const auto code = shader_spirv(name);
    if (code.empty())
        throw Error(fmt::format("internal error: no embedded shader named {}", name));
    if (push_bytes > m_limits.max_push_constants)
        throw UnsupportedError(fmt::format("shader {} needs {} bytes of push constants, the device allows {}", name,
                                           push_bytes, m_limits.max_push_constants));
    auto p = std::make_unique<Pipeline>();
    p->n_bindings = n_bindings;
    p->push_bytes = push_bytes;
    p->local_size[0] = spec.size() > 0 ? spec[0] : 1;
    p->local_size[1] = spec.size() > 1 ? spec[1] : 1;

    std::vector<VkDescriptorSetLayoutBinding> bindings(n_bindings);
    for (uint32_t i = 0; i < n_bindings; ++i)
        bindings[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
    VkDescriptorSetLayoutCreateInfo sl{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    sl.bindingCount = n_bindings;
    sl.pBindings = bindings.data();
    check(vkCreateDescriptorSetLayout(m_device, &sl, nullptr, &p->set_layout), "creating a descriptor set layout");
    VkPushConstantRange pc{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
    VkPipelineLayoutCreateInfo pl{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    pl.setLayoutCount = 1;
    pl.pSetLayouts = &p->set_layout;
    pl.pushConstantRangeCount = push_bytes ? 1 : 0;
    pl.pPushConstantRanges = &pc;
    check(vkCreatePipelineLayout(m_device, &pl, nullptr, &p->layout), "creating a pipeline layout");

    VkShaderModuleCreateInfo sm{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    sm.codeSize = code.size() * sizeof(uint32_t);
    sm.pCode = code.data();
    VkShaderModule module = VK_NULL_HANDLE;
    check(vkCreateShaderModule(m_device, &sm, nullptr, &module), "creating a shader module");
    // constants 0, 1, … from `spec`; constant 8 is cpu_math.glsl's FMA_ROUNDS_ONCE in every shader
    // that has it (an entry for a constant a shader lacks is ignored)
    std::vector<VkSpecializationMapEntry> entries(spec.size());
    for (uint32_t i = 0; i < spec.size(); ++i)
        entries[i] = {i, i * uint32_t(sizeof(uint32_t)), sizeof(uint32_t)};
    entries.push_back({8, uint32_t(spec.size() * sizeof(uint32_t)), sizeof(uint32_t)});
    spec.push_back(m_fma_rounds_once ? 1u : 0u);
    VkSpecializationInfo si{uint32_t(entries.size()), entries.data(), spec.size() * sizeof(uint32_t), spec.data()};
    VkComputePipelineCreateInfo cp{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    cp.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
    cp.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    cp.stage.module = module;
    cp.stage.pName = "main";
    cp.stage.pSpecializationInfo = &si;
    cp.layout = p->layout;
    const VkResult r = vkCreateComputePipelines(m_device, VK_NULL_HANDLE, 1, &cp, nullptr, &p->pipeline);
    vkDestroyShaderModule(m_device, module, nullptr);
    check(r, fmt::format("building the pipeline of shader {}", name).c_str());
    m_pipelines.emplace_back(key, std::move(p));
    return *m_pipelines.back().second;
}

// =============================================================================================
// Buffer
// =============================================================================================

Buffer::Buffer(Context* ctx, uint64_t size, Memory memory)
    : m_ctx(ctx), m_size(std::max<uint64_t>(4, (size + 3) & ~uint64_t(3)))
{
    VkDevice dev = ctx->device();
    VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    info.size = m_size;
    info.usage =
        VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    const auto what = fmt::format("creating a buffer of {} bytes", m_size);
    ctx->check(vkCreateBuffer(dev, &info, nullptr, &m_buffer), what.c_str());
    try {
        VkMemoryRequirements req;
        vkGetBufferMemoryRequirements(dev, m_buffer, &req);
        if (req.size > ctx->limits().max_allocation)
            throw Error(fmt::format("a buffer of {} bytes exceeds the device's largest allocation ({} bytes)", req.size,
                                    ctx->limits().max_allocation));
        if (ctx->allocations() + 1 > ctx->limits().max_allocations)
            throw Error(fmt::format("the Vulkan device allows {} memory allocations, all in use",
                                    ctx->limits().max_allocations));
        VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
        alloc.allocationSize = req.size;
        alloc.memoryTypeIndex = ctx->memory_type(req.memoryTypeBits, memory);
        ctx->check(vkAllocateMemory(dev, &alloc, nullptr, &m_memory),
                   fmt::format("allocating {} bytes", req.size).c_str());
        ctx->count_allocation(1);
        ctx->check(vkBindBufferMemory(dev, m_buffer, m_memory, 0), "binding buffer memory");
        if (memory != Memory::Device)
            ctx->check(vkMapMemory(dev, m_memory, 0, VK_WHOLE_SIZE, 0, &m_mapped), "mapping buffer memory");
    } catch (...) {
        release();
        throw;
    }
}

Buffer::~Buffer()
{
    release();
}

Buffer::Buffer(Buffer&& o) noexcept
{
    *this = std::move(o);
}

Buffer& Buffer::operator=(Buffer&& o) noexcept
{
    if (this != &o) {
        release();
        m_ctx = std::exchange(o.m_ctx, nullptr);
        m_buffer = std::exchange(o.m_buffer, VkBuffer(VK_NULL_HANDLE));
        m_memory = std::exchange(o.m_memory, VkDeviceMemory(VK_NULL_HANDLE));
        m_size = std::exchange(o.m_size, 0);
        m_mapped = std::exchange(o.m_mapped, nullptr);
    }
    return *this;
}

void Buffer::release()
{
    if (!m_ctx)
        return;
    VkDevice dev = m_ctx->device();
    if (m_buffer)
        vkDestroyBuffer(dev, m_buffer, nullptr);
    if (m_memory) {
        vkFreeMemory(dev, m_memory, nullptr);
        m_ctx->count_allocation(-1);
    }
    m_buffer = VK_NULL_HANDLE;
    m_memory = VK_NULL_HANDLE;
    m_mapped = nullptr;
    m_ctx = nullptr;
}

// =============================================================================================
// Recorder
// =============================================================================================

Recorder::Recorder(Context& ctx) : m_ctx(ctx)
{
    VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pool.queueFamilyIndex = ctx.queue_family();
    ctx.check(vkCreateCommandPool(ctx.device(), &pool, nullptr, &m_pool), "creating a command pool");
    VkCommandBufferAllocateInfo cb{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    cb.commandPool = m_pool;
    cb.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cb.commandBufferCount = 1;
    ctx.check(vkAllocateCommandBuffers(ctx.device(), &cb, &m_cmd), "allocating a command buffer");
    VkFenceCreateInfo fence{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    ctx.check(vkCreateFence(ctx.device(), &fence, nullptr, &m_fence), "creating a fence");
}

Recorder::~Recorder()
{
    VkDevice dev = m_ctx.device();
    vkDeviceWaitIdle(dev);
    for (VkDescriptorPool p : m_descriptor_pools)
        vkDestroyDescriptorPool(dev, p, nullptr);
    vkDestroyFence(dev, m_fence, nullptr);
    vkDestroyCommandPool(dev, m_pool, nullptr);
}

void Recorder::begin(bool reusable)
{
    m_reusable = false;
    for (VkDescriptorPool p : m_descriptor_pools)
        vkResetDescriptorPool(m_ctx.device(), p, 0);
    m_pool_in_use = 0;
    m_ctx.check(vkResetCommandBuffer(m_cmd, 0), "resetting a command buffer");
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = reusable ? 0 : VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    m_ctx.check(vkBeginCommandBuffer(m_cmd, &bi), "recording a command buffer");
    m_recording = true;
    m_reusable = reusable;
}

VkDescriptorSet Recorder::allocate_set(const Pipeline& p)
{
    constexpr uint32_t kSets = 512, kMaxBindings = 8;
    for (;;) {
        if (m_pool_in_use == m_descriptor_pools.size()) {
            VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSets * kMaxBindings};
            VkDescriptorPoolCreateInfo info{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
            info.maxSets = kSets;
            info.poolSizeCount = 1;
            info.pPoolSizes = &size;
            VkDescriptorPool pool = VK_NULL_HANDLE;
            m_ctx.check(vkCreateDescriptorPool(m_ctx.device(), &info, nullptr, &pool), "creating a descriptor pool");
            m_descriptor_pools.push_back(pool);
        }
        VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
        ai.descriptorPool = m_descriptor_pools[m_pool_in_use];
        ai.descriptorSetCount = 1;
        ai.pSetLayouts = &p.set_layout;
        VkDescriptorSet set = VK_NULL_HANDLE;
        const VkResult r = vkAllocateDescriptorSets(m_ctx.device(), &ai, &set);
        if (r == VK_SUCCESS)
            return set;
        if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL)
            m_ctx.check(r, "allocating a descriptor set");
        ++m_pool_in_use;
    }
}

uint32_t Recorder::split_groups(uint64_t groups, uint32_t* gy) const
{
    const uint64_t max_x = m_ctx.limits().max_group_count[0];
    if (groups <= max_x) {
        *gy = 1;
        return uint32_t(std::max<uint64_t>(groups, 1));
    }
    const uint64_t y = (groups + max_x - 1) / max_x;
    if (y > m_ctx.limits().max_group_count[1])
        throw Error(fmt::format("a dispatch of {} workgroups exceeds the device's limits", groups));
    *gy = uint32_t(y);
    return uint32_t((groups + y - 1) / y);
}

void Recorder::dispatch(const Pipeline& p, std::initializer_list<Range> bindings, const void* push, uint32_t push_bytes,
                        uint32_t groups_x, uint32_t groups_y, uint32_t groups_z)
{
    if (bindings.size() != p.n_bindings || push_bytes != p.push_bytes)
        throw Error("internal error: a dispatch does not match its pipeline's bindings");
    VkDescriptorSet set = allocate_set(p);
    std::vector<VkDescriptorBufferInfo> infos;
    std::vector<VkWriteDescriptorSet> writes;
    infos.reserve(bindings.size());
    for (const Range& r : bindings) {
        if (r.size != VK_WHOLE_SIZE && r.size > m_ctx.limits().max_storage_buffer_range)
            throw Error("internal error: a binding exceeds maxStorageBufferRange");
        infos.push_back({r.buffer, r.offset, r.size});
    }
    for (uint32_t i = 0; i < infos.size(); ++i) {
        VkWriteDescriptorSet w{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
        w.dstSet = set;
        w.dstBinding = i;
        w.descriptorCount = 1;
        w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        w.pBufferInfo = &infos[i];
        writes.push_back(w);
    }
    vkUpdateDescriptorSets(m_ctx.device(), uint32_t(writes.size()), writes.data(), 0, nullptr);
    vkCmdBindPipeline(m_cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
    vkCmdBindDescriptorSets(m_cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
    if (push_bytes)
        vkCmdPushConstants(m_cmd, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
    vkCmdDispatch(m_cmd, groups_x, groups_y, groups_z);
    barrier();
}

void Recorder::copy(VkBuffer src, uint64_t src_offset, VkBuffer dst, uint64_t dst_offset, uint64_t bytes)
{
    if (bytes == 0)
        return;
    VkBufferCopy region{src_offset, dst_offset, bytes};
    vkCmdCopyBuffer(m_cmd, src, dst, 1, &region);
    barrier();
}

void Recorder::copy_regions(VkBuffer src, VkBuffer dst, const std::vector<VkBufferCopy>& regions)
{
    if (regions.empty())
        return;
    vkCmdCopyBuffer(m_cmd, src, dst, uint32_t(regions.size()), regions.data());
    barrier();
}

void Recorder::fill(VkBuffer dst, uint64_t offset, uint64_t bytes, uint32_t value)
{
    if (bytes == 0)
        return;
    vkCmdFillBuffer(m_cmd, dst, offset, bytes, value);
    barrier();
}

void Recorder::barrier()
{
    VkMemoryBarrier b{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    b.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    b.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                      VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(m_cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
                             VK_PIPELINE_STAGE_HOST_BIT,
                         0, 1, &b, 0, nullptr, 0, nullptr);
}

void Recorder::submit()
{
    if (!m_recording)
        return;
    m_recording = false;
    m_ctx.check(vkEndCommandBuffer(m_cmd), "finishing a command buffer");
    run();
}

void Recorder::resubmit()
{
    if (m_recording || !m_reusable)
        throw std::logic_error("resubmitting a command buffer that is not a finished reusable recording");
    run();
}

void Recorder::run()
{
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &m_cmd;
    m_ctx.check(vkQueueSubmit(m_ctx.queue(), 1, &si, m_fence), "submitting work to the device");
    m_ctx.check(vkWaitForFences(m_ctx.device(), 1, &m_fence, VK_TRUE, UINT64_MAX), "waiting for the device");
    m_ctx.check(vkResetFences(m_ctx.device(), 1, &m_fence), "resetting a fence");
}

} // namespace engine::vk

#endif // TOKENSCOPE_HAVE_VULKAN
