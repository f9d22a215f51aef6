// SPDX-License-Identifier: GPL-3.0-or-later
// `bench MODEL [-p 512] [-n 128] [-d 0] [--threads T] [--reps R]`: prefill and decode speed the way
// llama-bench measures them (pp: one batch of p prompt tokens; tg: n tokens decoded one at a time;
// both after d tokens already in the cache, untimed, as llama-bench -d), mean ± standard deviation
// over R repetitions. Decode also reports the bytes it reads per token (the weights it streams —
// the embedding table only one row unless it is the LM head too — and the KV cache attention reads)
// and, with --probe-threads, that traffic as a share of this machine's measured read bandwidth.
#include "backend_option.h"
#include "commands.h"
#include "model_path.h"

#include "backend/backend.h"
#include "model/model.h"
#include "quant/vec_dot.h"
#include "session/session.h"
#include "util/machine_probe.h"

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
    uint32_t depth = 0;
    int probe_threads = 0;
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
    const uint32_t n_ctx = a.depth + std::max(a.n_prompt, a.n_gen) + 16;
    auto backend = make_cli_backend(a.backend, model, n_ctx, a.threads);
    engine::Backend& be = *backend;
    // Random tokens, as llama-bench uses: content does not change the work.
    std::mt19937 rng(42);
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(model->config().n_vocab) - 1);
    std::vector<engine::TokenId> prompt(a.n_prompt), context(a.depth);
    for (auto& t : prompt)
        t = pick(rng);
    for (auto& t : context)
        t = pick(rng);
    // An empty cache, then the depth's tokens in it (not timed).
    const auto reset = [&] {
        be.kv_cache().clear();
        if (!context.empty())
            be.forward({.tokens = context, .batch_invariant = a.backend.deterministic});
    };
    // Decode's traffic per token: every weight matrix once (of a mixture of experts, the k experts
    // chosen); the embedding table one row, unless it is the LM head as well; plus the keys and values
    // attention reads (KV bytes in use).
    const engine::ModelWeights& w = model->weights();
    const uint64_t embd_bytes = w.token_embd.info ? w.token_embd.info->n_bytes : 0;
    // A mixture of experts reads only the k experts a token goes through in each layer.
    const engine::ModelConfig& mc = model->config();
    const uint64_t unread_experts =
        mc.is_moe() ? model->expert_bytes_per_layer() * (mc.n_expert - mc.n_expert_used) * mc.n_layer : 0;
    const uint64_t weight_traffic = model->weight_bytes() - (w.tied_output ? 0 : embd_bytes) +
                                    (w.tied_output ? 0 : w.token_embd.row_bytes) - unread_experts;
    double kv_traffic = 0.0;

    std::vector<double> pp, tg;
    const engine::TokenId warm[] = {prompt.empty() ? 0 : prompt[0]};
    be.forward({.tokens = warm, .batch_invariant = a.backend.deterministic});
    for (int r = 0; r < a.reps; ++r) {
        if (a.n_prompt) {
            reset();
            const auto t0 = Clock::now();
            be.forward({.tokens = prompt, .batch_invariant = a.backend.deterministic});
            pp.push_back(a.n_prompt / std::chrono::duration<double>(Clock::now() - t0).count());
        }
        if (a.n_gen) {
            reset();
            double seconds = 0.0;
            kv_traffic = 0.0;
            for (uint32_t i = 0; i < a.n_gen; ++i) {
                const engine::TokenId one[] = {pick(rng)};
                const auto t0 = Clock::now();
                be.forward({.tokens = one, .batch_invariant = a.backend.deterministic});
                seconds += std::chrono::duration<double>(Clock::now() - t0).count();
                kv_traffic += static_cast<double>(be.kv_cache().accounting().bytes_in_use); // outside the timing
            }
            kv_traffic /= a.n_gen;
            tg.push_back(a.n_gen / seconds);
        }
    }
    const std::string backend_name =
        (be.kind() == "cpu" ? fmt::format("{} {}", be.name(), engine::simd_level_name(engine::simd_level()))
                            : be.name()) +
        (a.backend.deterministic ? ", deterministic (batch-invariant)" : "");
    const double bytes_per_token = static_cast<double>(weight_traffic) + kv_traffic;
    const double achieved = tg.empty() ? 0.0 : bytes_per_token * stats(tg).mean;
    engine::MachinePeaks peaks;
    if (a.probe_threads > 0)
        peaks = engine::probe_machine(a.probe_threads, 2.0);
    if (a.json) {
        nlohmann::ordered_json j{
            {"model", model->file().name()}, {"backend", backend_name}, {"reps", a.reps}, {"depth", a.depth}};
        if (!pp.empty())
            j["pp"] = {{"n", a.n_prompt}, {"tokens_per_second", stats(pp).mean}, {"stddev", stats(pp).stddev}};
        if (!tg.empty()) {
            j["tg"] = {{"n", a.n_gen},
                       {"tokens_per_second", stats(tg).mean},
                       {"stddev", stats(tg).stddev},
                       {"bytes_per_token", bytes_per_token},
                       {"read_bytes_per_second", achieved}};
            if (a.probe_threads > 0) {
                j["tg"]["probe"] = {{"threads", peaks.threads}, {"read_bytes_per_second", peaks.read_bytes_per_second}};
                j["tg"]["bandwidth_share"] = achieved / peaks.read_bytes_per_second;
            }
        }
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
    const std::string at = a.depth ? fmt::format(" @ d{}", a.depth) : "";
    if (!pp.empty())
        row(fmt::format("pp{}{}", a.n_prompt, at), pp);
    if (!tg.empty()) {
        row(fmt::format("tg{}{}", a.n_gen, at), tg);
        fmt::print("decode reads {:.1f} MiB per token: {:.2f} GB/s", bytes_per_token / (1024.0 * 1024.0),
                   achieved / 1e9);
        if (a.probe_threads > 0)
            fmt::print(", {:.0f}% of the {:.2f} GB/s this machine reads on {} threads",
                       100.0 * achieved / peaks.read_bytes_per_second, peaks.read_bytes_per_second / 1e9,
                       peaks.threads);
        fmt::print("\n");
    }
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
    cmd->add_option("-d,--depth", a->depth,
                    "Tokens already in the context before each test (untimed), as llama-bench -d")
        ->capture_default_str();
    cmd->add_option("--probe-threads", a->probe_threads,
                    "Also measure this machine's read bandwidth on this many threads and report decode's share of it");
    add_backend_options(cmd, a->backend);
    cmd->add_flag("--json", a->json, "Print JSON");
    return [a] { return run_bench(*a); };
}
