// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "backend/vulkan/vulkan_backend.h"

#include <vector>

namespace tokenscope::ui {

// The Vulkan devices the loader lists, asked once per process (it takes 30–130 ms) and then
// shared by the backend picker and the memory planner. Blocks on the first call: call it from a
// background job (run_in_background), never from the UI thread.
const std::vector<engine::VulkanDeviceInfo>& vulkan_devices();

} // namespace tokenscope::ui
