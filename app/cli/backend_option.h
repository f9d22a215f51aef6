// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "backend/backend.h"

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

// --backend cpu|vulkan|auto and --device N, shared by the commands that run a model.
struct BackendArgs {
    std::string backend = "cpu";
    int device = -1;
};

void add_backend_options(CLI::App* cmd, BackendArgs& a);
// The backend asked for; a fallback to the CPU is reported on stderr.
std::unique_ptr<engine::Backend> make_cli_backend(const BackendArgs& a, std::shared_ptr<const engine::Model> model,
                                                  uint32_t n_ctx, int threads);
