// SPDX-License-Identifier: GPL-3.0-or-later
// `devices [--json]`: the Vulkan devices the loader lists, with type, driver, memory and whether the
// Vulkan backend can use them.
#include "commands.h"

#include "backend/vulkan/vulkan_backend.h"

#include <nlohmann/json.hpp>
#include <spdlog/fmt/fmt.h>

CommandRunner add_devices_command(CLI::App& app)
{
    auto* cmd = app.add_subcommand("devices", "List Vulkan devices (name, type, driver, memory, budget, usable)");
    auto json = std::make_shared<bool>(false);
    cmd->add_flag("--json", *json, "Print JSON");
    return [json] {
        const auto devices = engine::list_vulkan_devices();
        if (*json) {
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
            fmt::print("{}\n", j.dump(1));
            return 0;
        }
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
            fmt::print("{}  {} ({})\n   driver  {}\n   memory  {:.0f} MiB device-local, {:.0f} MiB available\n   {}\n",
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
