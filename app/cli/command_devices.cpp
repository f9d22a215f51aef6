// SPDX-License-Identifier: GPL-3.0-or-later
// `devices [--json]`: the CUDA devices the NVIDIA driver lists (or why there are none) and the Vulkan
// devices the loader lists, with type, driver, memory and whether the backends can use them.
#include "commands.h"

#include "backend/cuda/cuda_backend.h"
#include "backend/vulkan/vulkan_backend.h"

#include <nlohmann/json.hpp>
#include <spdlog/fmt/fmt.h>

CommandRunner add_devices_command(CLI::App& app)
{
    auto* cmd = app.add_subcommand("devices", "List CUDA and Vulkan devices (name, type, driver, memory, usable)");
    auto json = std::make_shared<bool>(false);
    cmd->add_flag("--json", *json, "Print JSON");
    return [json] {
        const auto cuda = engine::list_cuda_devices();
        const auto devices = engine::list_vulkan_devices();
        if (*json) {
            auto c = nlohmann::ordered_json::array();
            for (const auto& d : cuda.devices)
                c.push_back({{"index", d.index},
                             {"name", d.name},
                             {"compute_capability", fmt::format("{}.{}", d.compute_major, d.compute_minor)},
                             {"total_bytes", d.total_bytes},
                             {"free_bytes", d.free_bytes},
                             {"multiprocessors", d.multiprocessors},
                             {"memory_bandwidth", d.memory_bandwidth}});
            auto j = nlohmann::ordered_json::array();
            for (const auto& d : devices)
                j.push_back({{"index", d.index},
                             {"name", d.name},
                             {"type", d.type},
                             {"driver", d.driver},
                             {"device_local_bytes", d.device_local_bytes},
                             {"budget_bytes", d.budget_bytes},
                             {"usable", d.usable},
                             {"exact_arithmetic", d.float64},
                             {"why_not", d.why_not}});
            nlohmann::ordered_json all{{"cuda", c}, {"vulkan", j}};
            if (cuda.devices.empty())
                all["cuda_unavailable"] = cuda.why_unavailable;
            fmt::print("{}\n", all.dump(1));
            return 0;
        }
        if (cuda.devices.empty())
            fmt::print("CUDA: unavailable ({})\n", cuda.why_unavailable);
        for (const auto& d : cuda.devices)
            fmt::print(
                "CUDA {}  {} (compute capability {}.{}, {} multiprocessors)\n   memory  {:.0f} MiB, {:.0f} GB/s\n"
                "   usable: --backend cuda --device {}\n",
                d.index, d.name, d.compute_major, d.compute_minor, d.multiprocessors, double(d.total_bytes) / 1048576.0,
                d.memory_bandwidth / 1e9, d.index);
        if (devices.empty()) {
            fmt::print("no Vulkan devices (no Vulkan loader or driver{}); the CPU backend is used\n",
#ifdef TOKENSCOPE_HAVE_VULKAN
                       ""
#else
                       ", or Tokenscope was built without Vulkan"
#endif
            );
            return 0;
        }
        for (const auto& d : devices) {
            fmt::print(
                "Vulkan {}  {} ({})\n   driver  {}\n   memory  {:.0f} MiB device-local, {:.0f} MiB available\n   {}\n",
                d.index, d.name, d.type, d.driver, double(d.device_local_bytes) / 1048576.0,
                double(d.budget_bytes) / 1048576.0,
                d.usable ? std::string("usable: --backend vulkan --device ") + std::to_string(d.index) +
                               (d.float64 ? " (f32; --vulkan-exact for 64-bit arithmetic)"
                                          : " (f32; no 64-bit floats, so no --vulkan-exact)")
                         : "not usable: " + d.why_not);
        }
        return 0;
    };
}
