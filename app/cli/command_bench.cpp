// SPDX-License-Identifier: GPL-3.0-or-later
// `bench MODEL [-p 512] [-n 128] [--threads T] [--reps R]`: prefill and decode speed the way
// llama-bench measures them (pp: one batch of p prompt tokens into an empty cache; tg: n tokens
// decoded one at a time from an empty cache), mean ± standard deviation over R repetitions.
#include "backend_option.h"
#include "commands.h"
#include "model_path.h"

#include "backend/backend.h"
#include "model/model.h"
#include "quant/vec_dot.h"
#include "session/session.h"

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <spdlog/fmt/fmt.h>

namespace {

struct BenchArgs {
    std::string model;
    uint32_t n_prompt = 512;
    uint32_t n_gen = 128;
    int threads = 0;
    int reps = 3;
    bool json = false;
    BackendArgs backend;
};

struct Stat {
    double mean = 0, stddev = 0;
};

Stat stats(const std::vector<double>& v)
{
    Stat s;
    for (double x : v)
        s.mean += x;
    s.mean /= static_cast<double>(v.size());
    for (double x : v)
        s.stddev += (x - s.mean) * (x - s.mean);
    s.stddev = v.size() > 1 ? std::sqrt(s.stddev / static_cast<double>(v.size() - 1)) : 0.0;
    return s;
}

int run_bench(const BenchArgs& a)
{
    using Clock = std::chrono::steady_clock;
    const auto model = engine::Model::load(resolve_model_path(a.model));
    const uint32_t n_ctx = std::max(a.n_prompt, a.n_gen) + 16;
    auto backend = make_cli_backend(a.backend, model, n_ctx, a.threads);
    engine::Backend& be = *backend;
    // Random tokens, as llama-bench uses: content does not change the work.
    std::mt19937 rng(42);
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(model->config().n_vocab) - 1);
    std::vector<engine::TokenId> prompt(a.n_prompt);
    for (auto& t : prompt)
        t = pick(rng);

    std::vector<double> pp, tg;
    const engine::TokenId warm[] = {prompt.empty() ? 0 : prompt[0]};
    be.forward({.tokens = warm});
    for (int r = 0; r < a.reps; ++r) {
        if (a.n_prompt) {
            be.kv_cache().clear();
            const auto t0 = Clock::now();
            be.forward({.tokens = prompt});
            pp.push_back(a.n_prompt / std::chrono::duration<double>(Clock::now() - t0).count());
        }
        if (a.n_gen) {
            be.kv_cache().clear();
            const auto t0 = Clock::now();
            for (uint32_t i = 0; i < a.n_gen; ++i) {
                const engine::TokenId one[] = {pick(rng)};
                be.forward({.tokens = one});
            }
            tg.push_back(a.n_gen / std::chrono::duration<double>(Clock::now() - t0).count());
        }
    }
    const std::string backend_name =
        be.name().starts_with("CPU") ? fmt::format("{} {}", be.name(), engine::simd_level_name(engine::simd_level()))
                                     : be.name();
    if (a.json) {
        nlohmann::ordered_json j{{"model", model->file().name()}, {"backend", backend_name}, {"reps", a.reps}};
        if (!pp.empty())
            j["pp"] = {{"n", a.n_prompt}, {"tokens_per_second", stats(pp).mean}, {"stddev", stats(pp).stddev}};
        if (!tg.empty())
            j["tg"] = {{"n", a.n_gen}, {"tokens_per_second", stats(tg).mean}, {"stddev", stats(tg).stddev}};
        fmt::print("{}\n", j.dump(2));
        return 0;
    }
    const double gib = static_cast<double>(model->weight_bytes()) / (1024.0 * 1024.0 * 1024.0);
    fmt::print("| {:<24} | {:>10} | {:>8} | {:<26} | {:>8} | {:>20} |\n", "model", "size", "params", "backend", "test",
               "t/s");
    fmt::print("| {:-<24} | {:->10} | {:->8} | {:-<26} | {:->8} | {:->20} |\n", "", "", "", "", "", "");
    const std::string name = fmt::format("{} {}", model->config().architecture, model->config().name);
    auto row = [&](const std::string& test, const std::vector<double>& v) {
        const Stat s = stats(v);
        fmt::print("| {:<24} | {:>6.2f} GiB | {:>6.1f} M | {:<26} | {:>8} | {:>12.2f} ± {:>5.2f} |\n",
                   name.substr(0, 24), gib, static_cast<double>(model->parameter_count()) / 1e6, backend_name, test,
                   s.mean, s.stddev);
    };
    if (!pp.empty())
        row(fmt::format("pp{}", a.n_prompt), pp);
    if (!tg.empty())
        row(fmt::format("tg{}", a.n_gen), tg);
    return 0;
}

} // namespace

CommandRunner add_bench_command(CLI::App& app)
{
    auto* cmd = app.add_subcommand("bench", "Measure prefill (pp) and decode (tg) tokens/s like llama-bench");
    auto a = std::make_shared<BenchArgs>();
    cmd->add_option("model", a->model, "GGUF file (default: the installed default model)");
    cmd->add_option("-m,--model", a->model, "GGUF file");
    cmd->add_option("-p,--n-prompt", a->n_prompt, "Prompt tokens for the prefill test (0: skip)")
        ->capture_default_str();
    cmd->add_option("-n,--n-gen", a->n_gen, "Tokens for the decode test (0: skip)")->capture_default_str();
    cmd->add_option("-t,--threads", a->threads, "Threads (0: all cores)")->capture_default_str();
    cmd->add_option("-r,--reps", a->reps, "Repetitions")->capture_default_str()->check(CLI::PositiveNumber);
    add_backend_options(cmd, a->backend);
    cmd->add_flag("--json", a->json, "Print JSON");
    return [a] { return run_bench(*a); };
}
