// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include <CLI/CLI.hpp>

// Each command registers its options on the app and returns the function that runs it.
#include <functional>
using CommandRunner = std::function<int()>;

CommandRunner add_info_command(CLI::App& app);
CommandRunner add_tokenize_command(CLI::App& app);
CommandRunner add_make_test_model_command(CLI::App& app);
CommandRunner add_generate_command(CLI::App& app);
CommandRunner add_chat_command(CLI::App& app);
CommandRunner add_trace_command(CLI::App& app);
CommandRunner add_bench_command(CLI::App& app);
CommandRunner add_devices_command(CLI::App& app);
CommandRunner add_patch_command(CLI::App& app);
CommandRunner add_attribute_command(CLI::App& app);
CommandRunner add_ablate_command(CLI::App& app);
CommandRunner add_heads_command(CLI::App& app);
CommandRunner add_steer_command(CLI::App& app);
CommandRunner add_perplexity_command(CLI::App& app);
CommandRunner add_compare_command(CLI::App& app);
CommandRunner add_requantize_command(CLI::App& app);
CommandRunner add_check_run_command(CLI::App& app);
CommandRunner add_serve_sim_command(CLI::App& app);
CommandRunner add_experts_command(CLI::App& app);
