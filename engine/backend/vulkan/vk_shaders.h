// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace engine::vk {

// The SPIR-V of one embedded shader variant ("matmul_q4_k", "rmsnorm", …; see shaders/shaders.cmake),
// or an empty span when there is no such variant.
std::span<const uint32_t> shader_spirv(std::string_view name);

} // namespace engine::vk
