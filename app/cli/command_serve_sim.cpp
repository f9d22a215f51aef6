// SPDX-License-Identifier: GPL-3.0-or-later
// `serve-sim MODEL [workload] [engine] [--mode all] [--json]`: the serving lab without a window.
// Simulated clients (arrival rate, prompt and reply lengths, a common system prompt, or a file of real
// prompts) served by the engine for real — one at a time, in static batches and by continuous
// batching — with each run's throughput, time to first token and inter-token latency.
#include "backend_option.h"
#include "commands.h"
#include "model_path.h"

#include "model/model.h"
#include "serve/serve_run.h"
#include "serve/workload.h"
#include "util/atomic_file.h"
#include "util/error.h"

#include <fstream>
#include <spdlog/fmt/fmt.h>

namespace {

struct ServeSimArgs {
    std::string model;
    engine::WorkloadSpec workload;
    std::string prompts_file;
    std::string mode = "all";
    uint32_t max_running = 16;
    uint32_t step_tokens = 256;
    uint32_t pool_blocks = 0; // 0: enough for every request at once
    uint32_t block_tokens = 32;
    std::string preemption = "recompute";
    uint64_t host_store_mib = 256;
    bool no_prefix_cache = false;
    int threads = 0;
    bool json = false;
    std::string csv;
    BackendArgs backend;
};

std::vector<std::string> read_prompts(const std::string& path)
{
    std::ifstream in(path);
    if (!in)
        throw engine::Error(fmt::format("cannot read the prompts file {}", path));
    std::vector<std::string> prompts;
    for (std::string line; std::getline(in, line);)
        if (!line.empty())
            prompts.push_back(line);
    if (prompts.empty())
        throw engine::Error(fmt::format("{} holds no prompt (one per line)", path));
    return prompts;
}

std::string ms(double s)
{
    return fmt::format("{:.0f}", s * 1e3);
}

int run_serve_sim(ServeSimArgs a)
{
    if (!a.prompts_file.empty())
        a.workload.prompts = read_prompts(a.prompts_file);
    engine::validate_workload(a.workload);
    std::vector<engine::BatchingMode> modes;
    if (a.mode == "all")
        modes = {engine::BatchingMode::OneAtATime, engine::BatchingMode::Static, engine::BatchingMode::Continuous};
    else
        modes = {engine::parse_batching_mode(a.mode)};
    const auto model = engine::Model::load(resolve_model_path(a.model));
    const std::vector<engine::ServeRequest> requests = engine::make_workload(a.workload, model->tokenizer());
    const engine::WorkloadRoom room = engine::room_for(requests, a.block_tokens);
    engine::ServingOptions options;
    options.max_running = a.max_running;
    options.step_tokens = a.step_tokens;
    options.block_tokens = a.block_tokens;
    options.pool_blocks = a.pool_blocks ? a.pool_blocks : room.blocks;
    options.preemption = engine::parse_preemption(a.preemption);
    options.host_store_bytes = a.host_store_mib << 20;
    options.prefix_caching = !a.no_prefix_cache;
    options.deterministic = a.backend.deterministic;
    options.n_ctx = room.longest;
    if (kv_cache_types_of(a.backend).quantized())
        throw engine::UnsupportedError("serve-sim: the serving lab's block pool holds F16 keys and values; "
                                       "--cache-type-k/--cache-type-v apply to generate, chat, trace and bench");
    auto backend = make_cli_backend(a.backend, model, room.longest, a.threads);

    std::vector<engine::ServeRunResult> runs;
    for (const engine::BatchingMode mode : modes) {
        options.mode = mode;
        if (!a.json)
            std::fprintf(stderr, "serving %zu requests %s …\n", requests.size(),
                         std::string(engine::batching_mode_name(mode)).c_str());
        runs.push_back(engine::run_serving(*backend, options, requests));
    }
    if (!a.csv.empty())
        engine::write_file_atomically(a.csv, engine::serve_runs_csv(runs));
    if (a.json) {
        fmt::print("{}\n", engine::serve_runs_json(runs));
        return 0;
    }
    fmt::print("{} on {}; {} requests, {} prompt tokens, a pool of {} blocks × {} tokens, up to {} sequences and {} "
               "tokens per pass, preemption by {}{}\n",
               model->config().architecture, backend->name(), requests.size(), runs.front().prompt_tokens,
               options.pool_blocks, options.block_tokens, options.max_running, options.step_tokens,
               engine::preemption_name(options.preemption), options.deterministic ? ", deterministic" : "");
    fmt::print("| {:<13} | {:>9} | {:>11} | {:>16} | {:>11} | {:>9} | {:>11} | {:>9} |\n", "mode", "time (s)",
               "generated/s", "TTFT p50/p90/p99", "ITL p50/p99", "max batch", "preemptions", "reused");
    fmt::print("|{:-<15}|{:->11}|{:->13}|{:->18}|{:->13}|{:->11}|{:->13}|{:->11}|\n", "", "", "", "", "", "", "", "");
    for (const auto& run : runs)
        fmt::print("| {:<13} | {:>9.2f} | {:>11.1f} | {:>16} | {:>11} | {:>9} | {:>11} | {:>9} |\n",
                   engine::batching_mode_name(run.options.mode), run.makespan_s, run.generated_per_s(),
                   fmt::format("{}/{}/{} ms", ms(run.ttft.p50), ms(run.ttft.p90), ms(run.ttft.p99)),
                   fmt::format("{}/{} ms", ms(run.itl.p50), ms(run.itl.p99)), run.max_batch_sequences, run.preemptions,
                   run.reused_tokens);
    return 0;
}

} // namespace

CommandRunner add_serve_sim_command(CLI::App& app)
{
    auto* cmd = app.add_subcommand("serve-sim", "Serve simulated clients on one engine (the serving lab): one at a "
                                                "time, static batches and continuous batching, side by side");
    auto a = std::make_shared<ServeSimArgs>();
    engine::WorkloadSpec& w = a->workload;
    cmd->add_option("model", a->model, "GGUF file (default: the installed default model)");
    cmd->add_option("-m,--model", a->model, "GGUF file");
    cmd->add_option("--clients", w.clients, "Requests sent")->capture_default_str();
    cmd->add_option("--rate", w.arrival_rate, "Arrivals per second (exponential gaps; 0: all at once)")
        ->capture_default_str();
    cmd->add_option("--prompt-min", w.prompt_min, "Shortest generated prompt, in tokens")->capture_default_str();
    cmd->add_option("--prompt-max", w.prompt_max, "Longest generated prompt, in tokens")->capture_default_str();
    cmd->add_option("--output-min", w.output_min, "Shortest reply, in tokens")->capture_default_str();
    cmd->add_option("--output-max", w.output_max, "Longest reply, in tokens")->capture_default_str();
    cmd->add_option("--shared-fraction", w.shared_fraction,
                    "Share of requests that begin with the common system prompt (0 … 1)")
        ->capture_default_str();
    cmd->add_option("--shared-tokens", w.shared_tokens, "Length of the common system prompt, in tokens")
        ->capture_default_str();
    cmd->add_option("--prompts", a->prompts_file, "A file of real prompts, one per line (cycled over the clients)");
    cmd->add_option("--temperature", w.temperature, "Sampling temperature (0: greedy)")->capture_default_str();
    cmd->add_option("--samples", w.samples,
                    "Replies drawn from each prompt (parallel sampling: they share its blocks, copy on write)")
        ->capture_default_str();
    cmd->add_option("--seed", w.seed, "Seed of the workload and of each request's sampler")->capture_default_str();
    cmd->add_option("--mode", a->mode, "one-at-a-time, static, continuous or all")
        ->check(CLI::IsMember({"one-at-a-time", "static", "continuous", "all"}))
        ->capture_default_str();
    cmd->add_option("--max-running", a->max_running, "Sequences in one pass at most")->capture_default_str();
    cmd->add_option("--step-tokens", a->step_tokens,
                    "Tokens one pass holds at most: decode steps first, prompt chunks the rest (chunked prefill)")
        ->capture_default_str();
    cmd->add_option("--pool-blocks", a->pool_blocks, "KV blocks in the shared pool (0: room for every request)")
        ->capture_default_str();
    cmd->add_option("--block-tokens", a->block_tokens, "Positions per KV block")->capture_default_str();
    cmd->add_option("--preempt", a->preemption, "When the pool is full: recompute or swap")
        ->check(CLI::IsMember({"recompute", "swap"}))
        ->capture_default_str();
    cmd->add_option("--host-store-mib", a->host_store_mib, "The swap store's budget in MiB")->capture_default_str();
    cmd->add_flag("--no-prefix-cache", a->no_prefix_cache, "Compute every prompt in full (no shared blocks)");
    cmd->add_option("-t,--threads", a->threads, "Threads (0: all cores)")->capture_default_str();
    add_backend_options(cmd, a->backend);
    cmd->add_flag("--json", a->json,
                  "Print JSON: each run's options and summary, each request's tokens, TTFT and "
                  "finish reason");
    cmd->add_option("--csv", a->csv, "Also write one CSV row per request and run to this file");
    return [a] { return run_serve_sim(*a); };
}
