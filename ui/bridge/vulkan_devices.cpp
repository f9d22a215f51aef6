// SPDX-License-Identifier: GPL-3.0-or-later
#include "bridge/vulkan_devices.h"

namespace tokenscope::ui {

const std::vector<engine::VulkanDeviceInfo>& vulkan_devices()
{
    static const std::vector<engine::VulkanDeviceInfo> devices = engine::list_vulkan_devices(); // thread-safe once
    return devices;
}

} // namespace tokenscope::ui
