// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// Choosing a backend: the CPU, a Vulkan device, or "auto" (a Vulkan GPU when one is usable, else the
// CPU; a software Vulkan device such as lavapipe is only used when asked for explicitly).

#include "backend/backend.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace engine {

enum class BackendKind { Cpu, Vulkan, Auto };

std::string_view backend_kind_name(BackendKind kind);
// "cpu", "vulkan", "auto" (case-insensitive); nullopt otherwise.
std::optional<BackendKind> parse_backend_kind(std::string_view text);

// Vulkan requested explicitly but unavailable falls back to the CPU too; `fallback_note` (when not
// null) is set to the reason whenever the result is not the kind asked for, and cleared otherwise.
// `device`: a Vulkan device index, -1 for the best one.
std::unique_ptr<Backend> make_backend(BackendKind kind, std::shared_ptr<const Model> model, uint32_t n_ctx, int threads,
                                      std::string* fallback_note, int device = -1);

} // namespace engine
