// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "backend/vulkan/vulkan_backend.h"

#include <vector>

namespace tokenscope::ui {

// The Vulkan devices the loader lists, with each one's free memory as of now (the memory planner
// compares a file against it, so it is asked afresh each time). Takes 30–130 ms: call it from a
// background job (run_in_background), never from the UI thread.
std::vector<engine::VulkanDeviceInfo> vulkan_devices();

} // namespace tokenscope::ui
