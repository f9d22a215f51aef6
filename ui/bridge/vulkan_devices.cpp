// SPDX-License-Identifier: GPL-3.0-or-later
#include "bridge/vulkan_devices.h"

namespace tokenscope::ui {

std::vector<engine::VulkanDeviceInfo> vulkan_devices()
{
    return engine::list_vulkan_devices();
}

} // namespace tokenscope::ui
