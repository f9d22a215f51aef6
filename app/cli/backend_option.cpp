// SPDX-License-Identifier: GPL-3.0-or-later
#include "backend_option.h"

#include "backend/backend_factory.h"

#include <cstdio>

void add_backend_options(CLI::App* cmd, BackendArgs& a)
{
    cmd->add_option("--backend", a.backend, "Compute backend: cpu, vulkan or auto (a Vulkan GPU if there is one)")
        ->check(CLI::IsMember({"cpu", "vulkan", "auto"}, CLI::ignore_case))
        ->capture_default_str();
    cmd->add_option("--device", a.device, "Vulkan device index (see `tokenscope-cli devices`; -1: the best one)")->capture_default_str();
}

std::unique_ptr<engine::Backend> make_cli_backend(const BackendArgs& a, std::shared_ptr<const engine::Model> model, uint32_t n_ctx,
                                                  int threads)
{
    const auto kind = engine::parse_backend_kind(a.backend).value_or(engine::BackendKind::Cpu);
    std::string note;
    auto backend = engine::make_backend(kind, std::move(model), n_ctx, threads, &note, a.device);
    if (!note.empty() && kind == engine::BackendKind::Vulkan)
        std::fprintf(stderr, "note: %s\n", note.c_str());
    return backend;
}
