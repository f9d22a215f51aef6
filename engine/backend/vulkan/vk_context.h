// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// The Vulkan plumbing under the backend: instance and device (with the validation layer and a
// messenger that counts what it reports), the limits read from the device, buffers, compute
// pipelines from the embedded SPIR-V, and a recorder that puts dispatches and copies into one
// command buffer, submitted once and waited on with a fence. Driver errors become engine::Error with
// a sentence saying what failed.
#ifdef TOKENSCOPE_HAVE_VULKAN

#include <vulkan/vulkan.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace engine::vk {

// Every limit the backend relies on, read from the device (logged at creation).
struct DeviceLimits {
    uint64_t max_storage_buffer_range = 0; // one binding (128 MiB on lavapipe)
    uint64_t max_allocation = 0;           // one allocation (maxMemoryAllocationSize)
    uint64_t min_storage_offset_alignment = 0;
    uint32_t max_shared_memory = 0;
    uint32_t max_invocations = 0;
    uint32_t max_group_size[3] = {};
    uint32_t max_group_count[3] = {};
    uint32_t max_push_constants = 0;
    uint32_t max_allocations = 0;
    uint32_t subgroup_size = 0; // 0 when the device cannot say (Vulkan 1.0)
};

struct ContextOptions {
    int device = -1;                // index in vkEnumeratePhysicalDevices; -1: the best usable
    bool validation = false;        // VK_LAYER_KHRONOS_validation + a counting messenger
    uint64_t max_binding_bytes = 0; // 0: the device limit; smaller values force row-range splits (tests)
    // The 64-bit "_f64" shader variants, bit-equal to the CPU backend (needs shaderFloat64; slow on
    // GPUs, which run 64-bit floats at 1/32–1/64 of their f32 rate). Off: the f32 path.
    bool exact = false;
};

// Errors and warnings the validation layer has reported in this process (all contexts together).
struct ValidationCounts {
    uint64_t errors = 0;
    uint64_t warnings = 0;
};
ValidationCounts validation_counts();

enum class Memory { Device, Upload, Download };

class Context;

// A buffer with its own memory; host-visible ones stay mapped.
class Buffer {
public:
    Buffer() = default;
    Buffer(Context* ctx, uint64_t size, Memory memory);
    ~Buffer();
    Buffer(Buffer&& o) noexcept;
    Buffer& operator=(Buffer&& o) noexcept;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;

    VkBuffer handle() const { return m_buffer; }
    uint64_t size() const { return m_size; }
    void* mapped() const { return m_mapped; }
    explicit operator bool() const { return m_buffer != VK_NULL_HANDLE; }

private:
    void release();
    Context* m_ctx = nullptr;
    VkBuffer m_buffer = VK_NULL_HANDLE;
    VkDeviceMemory m_memory = VK_NULL_HANDLE;
    uint64_t m_size = 0;
    void* m_mapped = nullptr;
};

// A part of a buffer bound to one storage-buffer binding.
struct Range {
    VkBuffer buffer = VK_NULL_HANDLE;
    uint64_t offset = 0;
    uint64_t size = VK_WHOLE_SIZE;
};
inline Range whole(const Buffer& b)
{
    return {b.handle(), 0, b.size()};
}

class Pipeline {
public:
    VkPipeline pipeline = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    uint32_t n_bindings = 0;
    uint32_t push_bytes = 0;
    uint32_t local_size[2] = {1, 1};
};

class Context {
public:
    explicit Context(const ContextOptions& options);
    ~Context();
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    VkDevice device() const { return m_device; }
    VkPhysicalDevice physical() const { return m_physical; }
    const DeviceLimits& limits() const { return m_limits; }
    const std::string& device_name() const { return m_name; }
    uint64_t device_local_bytes() const { return m_device_local; }
    bool validation_active() const { return m_messenger != VK_NULL_HANDLE; }
    bool lost() const { return m_lost; }
    // shaderFloat64 is enabled: the "_f64" shader variants (bit-equal to the CPU backend) are used.
    bool has_float64() const { return m_float64; }
    // Subgroup shuffles in compute shaders (Vulkan 1.1, subgroups of 8–64): the f32 matmul's lanes
    // meet without shared memory or barriers.
    bool has_subgroup_shuffle() const { return m_subgroup_shuffle; }
    // The f32 matmul spreads a row over eight invocations (GPUs) rather than one (CPU-type devices).
    bool matmul_lanes() const { return m_matmul_lanes; }
    // The f32 shaders use the device's fma as it is (it rounds once); else they emulate it.
    bool fma_rounds_once() const { return m_fma_rounds_once; }
    // "exact" or "f32", as the log and the backend's name say it.
    const char* arithmetic() const { return m_float64 ? "exact" : "f32"; }
    // The largest range one storage-buffer binding may cover (device limit or the option, whole words).
    uint64_t max_binding() const { return m_max_binding; }
    // The device's own limit for one binding (ignores ContextOptions::max_binding_bytes).
    uint64_t device_max_binding() const
    {
        return std::min<uint64_t>(m_limits.max_storage_buffer_range, m_limits.max_allocation) & ~uint64_t(3);
    }

    // Builds a compute pipeline from an embedded shader; spec constants 0, 1, … get `spec` in order
    // (constant 0 is the workgroup size where a shader takes it from a constant).
    Pipeline& pipeline(const std::string& name, uint32_t n_bindings, uint32_t push_bytes, std::vector<uint32_t> spec);

    // Throws engine::Error for a failed call; `what` completes "… while <what>".
    void check(VkResult result, const char* what);

    uint32_t queue_family() const { return m_queue_family; }
    VkQueue queue() const { return m_queue; }
    uint32_t memory_type(uint32_t type_bits, Memory memory) const;
    uint64_t allocations() const { return m_allocations; }
    void count_allocation(int delta) { m_allocations = uint64_t(int64_t(m_allocations) + delta); }

private:
    void probe_fma();
    VkInstance m_instance = VK_NULL_HANDLE;
    VkDebugUtilsMessengerEXT m_messenger = VK_NULL_HANDLE;
    VkPhysicalDevice m_physical = VK_NULL_HANDLE;
    VkDevice m_device = VK_NULL_HANDLE;
    VkQueue m_queue = VK_NULL_HANDLE;
    uint32_t m_queue_family = 0;
    DeviceLimits m_limits;
    std::string m_name;
    uint64_t m_device_local = 0;
    uint64_t m_max_binding = 0;
    uint64_t m_allocations = 0;
    bool m_lost = false;
    bool m_float64 = false;
    bool m_subgroup_shuffle = false;
    bool m_fma_rounds_once = false;
    bool m_matmul_lanes = true;
    VkPhysicalDeviceMemoryProperties m_memory{};
    std::vector<std::pair<std::string, std::unique_ptr<Pipeline>>> m_pipelines;
};

// One command buffer of dispatches and copies: record, then submit() waits for the fence. A full
// memory barrier follows every dispatch and copy (simple, and correct for any order of operations).
class Recorder {
public:
    explicit Recorder(Context& ctx);
    ~Recorder();
    Recorder(const Recorder&) = delete;
    Recorder& operator=(const Recorder&) = delete;

    // reusable: the recording may be submitted again with resubmit() (until the next begin())
    void begin(bool reusable = false);
    // groups may exceed the device's per-dimension count: x is split over y, and the shader gets
    // the x count in its `groups_x` push constant (written at push_groups_x_at when given).
    void dispatch(const Pipeline& p, std::initializer_list<Range> bindings, const void* push, uint32_t push_bytes,
                  uint32_t groups_x, uint32_t groups_y = 1, uint32_t groups_z = 1);
    // Like dispatch, for shaders that take a flat count of workgroups split into x·y; returns the
    // x count the shader must be told (its groups_x push constant) — call before filling `push`.
    uint32_t split_groups(uint64_t groups, uint32_t* gy) const;
    void copy(VkBuffer src, uint64_t src_offset, VkBuffer dst, uint64_t dst_offset, uint64_t bytes);
    // Several regions of one buffer into another, one barrier after them all.
    void copy_regions(VkBuffer src, VkBuffer dst, const std::vector<VkBufferCopy>& regions);
    void fill(VkBuffer dst, uint64_t offset, uint64_t bytes, uint32_t value);
    void submit();
    // Submits the last reusable recording again and waits (the buffers it names must still live).
    void resubmit();

private:
    void run(); // submit m_cmd and wait
    void barrier();
    VkDescriptorSet allocate_set(const Pipeline& p);
    Context& m_ctx;
    VkCommandPool m_pool = VK_NULL_HANDLE;
    VkCommandBuffer m_cmd = VK_NULL_HANDLE;
    VkFence m_fence = VK_NULL_HANDLE;
    std::vector<VkDescriptorPool> m_descriptor_pools;
    std::size_t m_pool_in_use = 0;
    bool m_recording = false;
    bool m_reusable = false; // the ended recording may be resubmitted
};

// Physical devices as the loader lists them (used by list_vulkan_devices).
struct PhysicalDeviceReport {
    uint32_t index = 0;
    std::string name, type, driver;
    uint64_t device_local_bytes = 0, budget_bytes = 0;
    bool usable = false;
    bool float64 = false; // shaderFloat64: the exact arithmetic is available
    std::string why_not;
    VkPhysicalDeviceType vk_type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
};
std::vector<PhysicalDeviceReport> enumerate_devices(); // never throws

} // namespace engine::vk

#endif // TOKENSCOPE_HAVE_VULKAN
