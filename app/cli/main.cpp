// SPDX-License-Identifier: GPL-3.0-or-later
// tokenscope-cli: the headless face of the engine, used by tests, benchmarks and scripts.
#include "commands.h"

#include "util/error.h"

#include <cstdio>
#include <map>
#include <spdlog/spdlog.h>

int main(int argc, char** argv)
{
    spdlog::set_level(spdlog::level::warn);
    CLI::App app{"Tokenscope command-line tool: inspect GGUF models and tokenization"};
    app.require_subcommand(1);
    std::map<CLI::App*, CommandRunner> runners;
    for (auto add :
         {add_info_command, add_tokenize_command, add_generate_command, add_chat_command, add_trace_command,
          add_bench_command, add_make_test_model_command, add_devices_command, add_patch_command, add_attribute_command,
          add_ablate_command, add_heads_command, add_steer_command, add_perplexity_command, add_compare_command,
          add_requantize_command, add_check_run_command, add_serve_sim_command, add_experts_command}) {
        const std::size_t before = app.get_subcommands({}).size();
        CommandRunner run = add(app);
        runners.emplace(app.get_subcommands({}).at(before), std::move(run));
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    for (auto& [sub, run] : runners) {
        if (!sub->parsed())
            continue;
        try {
            return run();
        } catch (const engine::Error& e) {
            std::fprintf(stderr, "error: %s\n", e.what());
            return 1;
        } catch (const std::exception& e) {
            std::fprintf(stderr, "error: %s\n", e.what());
            return 1;
        }
    }
    return 1;
}
