// SPDX-License-Identifier: GPL-3.0-or-later
// `generate MODEL -p PROMPT`: streams the continuation, then TTFT and speeds; `trace` writes the
// same run as JSON (tokens, top candidates per step, timings, KV accounting, attention weights).
#include "backend_option.h"
#include "commands.h"
#include "generate_speculative.h"
#include "model_path.h"
#include "sampling_option.h"
#include "server_option.h"
#include "trace_run.h"

#include "backend/backend.h"
#include "model/model.h"
#include "session/generator.h"
#include "util/atomic_file.h"
#include "util/error.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <spdlog/fmt/fmt.h>

namespace {

struct GenerateArgs {
    std::string model;
    std::string prompt;
    std::string prompt_file;
    int32_t n_predict = 128; // -n: see add_n_predict_option
    engine::SamplingSettings sampling;
    int threads = 0;
    uint32_t n_ctx = 4096;
    std::vector<std::string> stop;
    // trace only
    std::string json_out;
    std::string run_out;   // a saved run (.tsrun) the app opens
    std::string attention; // "all" or "L:H,L:H"
    BackendArgs backend;
    ServerArgs server;       // generate only
    SpeculateArgs speculate; // generate only
};

std::string read_prompt(const GenerateArgs& a)
{
    if (!a.prompt_file.empty()) {
        std::ifstream in(a.prompt_file, std::ios::binary);
        if (!in)
            throw engine::Error("cannot read " + a.prompt_file);
        return std::string(std::istreambuf_iterator<char>(in), {});
    }
    if (a.prompt.empty())
        throw engine::Error("the prompt is empty: give one with -p TEXT or --file F");
    return a.prompt;
}

engine::CaptureRequest parse_attention(const std::string& spec, const engine::ModelConfig& c)
{
    engine::CaptureRequest r;
    if (spec.empty())
        return r;
    if (spec == "all") {
        r.all_heads = true;
        return r;
    }
    std::size_t pos = 0;
    while (pos < spec.size()) {
        const std::size_t comma = spec.find(',', pos);
        const std::string item = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        const std::size_t colon = item.find(':');
        if (colon == std::string::npos)
            throw engine::Error("--attention expects LAYER:HEAD pairs separated by commas, or 'all'");
        const auto layer = static_cast<uint32_t>(std::stoul(item.substr(0, colon)));
        const auto head = static_cast<uint32_t>(std::stoul(item.substr(colon + 1)));
        if (layer >= c.n_layer || head >= c.n_head[layer])
            throw engine::Error(fmt::format("--attention {}:{} is outside the model ({} layers, {} heads)", layer, head,
                                            c.n_layer, c.n_head[0]));
        r.heads.emplace_back(layer, head);
        if (comma == std::string::npos)
            break;
        pos = comma + 1;
    }
    return r;
}

int run_generate(const GenerateArgs& a, bool trace_mode)
{
    const std::string prompt = read_prompt(a);
    if (a.server.used()) {
        if (!a.model.empty())
            throw engine::Error("give either a MODEL or --server, not both");
        return run_generate_on_server(a.server, prompt, a.n_predict, a.sampling);
    }
    if (trace_mode && a.json_out.empty() && a.run_out.empty())
        throw engine::Error("trace writes --json FILE, --run FILE.tsrun or both: give at least one");
    const std::filesystem::path model_path = resolve_model_path(a.model);
    const auto model = engine::Model::load(model_path);
    if (a.speculate.used())
        return run_generate_speculative(a.speculate, a.backend, model, prompt, max_tokens_of(a.n_predict), a.n_ctx,
                                        a.threads, a.sampling);
    if (trace_mode && !a.run_out.empty()) {
        TraceRunRequest r;
        r.model_path = model_path;
        r.prompt = prompt;
        r.sampling = engine::sampler_config(a.sampling);
        // -1: until the end of text or a full context (the trace steps one token at a time).
        r.n_predict = a.n_predict < 0 ? a.n_ctx : uint32_t(a.n_predict);
        r.stop = a.stop;
        r.attention = parse_attention(a.attention, model->config());
        r.out = a.run_out;
        engine::Session stepper(model, make_cli_backend(a.backend, model, a.n_ctx, a.threads));
        engine::Session attention(model, make_cli_backend(a.backend, model, a.n_ctx, a.threads));
        const std::size_t steps = write_trace_run(model, stepper, attention, r);
        fmt::print("wrote {} ({} steps, a saved run: File → Open run in the app)\n", a.run_out, steps);
        if (a.json_out.empty())
            return 0;
    }
    engine::Session session(model, make_cli_backend(a.backend, model, a.n_ctx, a.threads));
    session.set_batch_invariant(a.backend.deterministic);
    engine::Sampler sampler(engine::sampler_config(a.sampling));
    engine::GenerationOptions options;
    options.max_tokens = max_tokens_of(a.n_predict);
    options.prompt_only = a.n_predict == 0;
    options.stop_strings = a.stop;
    const engine::CaptureRequest capture = parse_attention(a.attention, model->config());

    if (!trace_mode) {
        fmt::print("{}", prompt);
        std::fflush(stdout);
    }
    const engine::GenerationTrace trace =
        engine::generate(session, sampler, prompt, options, [&](std::string_view delta) {
            if (!trace_mode) {
                fmt::print("{}", delta);
                std::fflush(stdout);
            }
        });
    if (!trace_mode) {
        fmt::print("\n\n");
        fmt::print(stderr,
                   "prompt {} tokens ({} reused) in {:.1f} ms ({:.1f} tokens/s); TTFT {:.1f} ms; {} tokens generated, "
                   "decode {:.1f} tokens/s; stopped: {}; backend {}\n",
                   trace.prompt_tokens, trace.prefill.reused, trace.prefill.ms, trace.prefill_tokens_per_second(),
                   trace.ttft_ms, trace.steps.size(), trace.decode_tokens_per_second(),
                   engine::stop_reason_name(trace.stop), session.backend().name());
        return 0;
    }

    // trace: run once more over the same tokens to collect attention, if asked (the generation loop
    // keeps no captures); the forward pass is deterministic, so the numbers are those of the run.
    nlohmann::ordered_json j;
    const auto& tok = model->tokenizer();
    j["model"] = model->file().name();
    j["prompt"] = prompt;
    j["prompt_tokens"] = trace.prompt_tokens;
    j["timings_ms"] = {{"tokenize", trace.tokenize_ms},
                       {"prefill", trace.prefill.ms},
                       {"ttft", trace.ttft_ms},
                       {"detokenize", trace.detokenize_ms}};
    j["prefill_tokens_per_second"] = trace.prefill_tokens_per_second();
    j["decode_tokens_per_second"] = trace.decode_tokens_per_second();
    j["stop"] = engine::stop_reason_name(trace.stop);
    j["text"] = trace.text;
    auto& steps = j["steps"] = nlohmann::ordered_json::array();
    for (const auto& s : trace.steps) {
        nlohmann::ordered_json st{{"step", s.step},
                                  {"token", s.token},
                                  {"piece", tok.token_to_piece(s.token)},
                                  {"probability", s.probability},
                                  {"ms", s.ms},
                                  {"sample_ms", s.sample_ms},
                                  {"detokenize_ms", s.detokenize_ms},
                                  {"latency_ms", s.latency_ms}};
        auto& top = st["top"] = nlohmann::ordered_json::array();
        for (const auto& c : s.top)
            top.push_back({{"id", c.id},
                           {"piece", tok.token_to_piece(c.id)},
                           {"probability", c.probability},
                           {"logit", c.logit}});
        st["kv"] = {{"tokens_cached", s.kv.tokens_cached},
                    {"bytes_in_use", s.kv.bytes_in_use},
                    {"bytes_allocated", s.kv.bytes_allocated},
                    {"blocks_allocated", s.kv.blocks_allocated}};
        steps.push_back(std::move(st));
    }
    auto& events = j["timeline"] = nlohmann::ordered_json::array();
    for (const auto& e : trace.events)
        events.push_back({{"stage", engine::timeline_stage_name(e.stage)},
                          {"step", e.step},
                          {"begin_ns", e.begin_ns},
                          {"end_ns", e.end_ns}});
    if (!capture.empty()) {
        std::vector<engine::TokenId> all = tok.encode_ids(prompt);
        for (const auto& s : trace.steps)
            all.push_back(s.token);
        engine::Session replay(model, make_cli_backend(a.backend, model, a.n_ctx, a.threads));
        replay.prefill(std::span<const engine::TokenId>(all).first(all.size() - 1), &capture);
        auto& att = j["attention"] = nlohmann::ordered_json::array();
        for (const auto& c : replay.last_captures()->attention)
            att.push_back({{"layer", c.layer},
                           {"head", c.head},
                           {"kv_head", c.kv_head},
                           {"n_queries", c.n_queries},
                           {"n_keys", c.n_keys},
                           {"weights", c.weights}});
    }
    // Whole or not at all: on a full disk this is an error (exit 1) and an older file stays as it was.
    engine::write_file_atomically(a.json_out,
                                  j.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n");
    fmt::print("wrote {} ({} steps)\n", a.json_out, trace.steps.size());
    return 0;
}

void add_common(CLI::App* cmd, GenerateArgs& a)
{
    cmd->add_option("model", a.model, "GGUF file (default: the installed default model)");
    cmd->add_option("-m,--model", a.model, "GGUF file");
    cmd->add_option("-p,--prompt", a.prompt, "Prompt text");
    cmd->add_option("-f,--file", a.prompt_file, "Read the prompt from a file");
    add_n_predict_option(cmd, a.n_predict, "Maximum tokens to generate");
    add_sampling_options(cmd, a.sampling);
    cmd->add_option("-t,--threads", a.threads, "Threads (0: all cores)")->capture_default_str();
    cmd->add_option("-c,--ctx", a.n_ctx, "Context size in tokens")->capture_default_str();
    cmd->add_option("--stop", a.stop, "Stop string (repeatable)");
    add_backend_options(cmd, a.backend);
}

} // namespace

CommandRunner add_generate_command(CLI::App& app)
{
    auto* cmd = app.add_subcommand("generate", "Generate text from a prompt, streaming, with TTFT and tokens/s");
    auto a = std::make_shared<GenerateArgs>();
    add_common(cmd, *a);
    add_server_options(cmd, a->server);
    add_speculate_options(cmd, a->speculate);
    return [a] { return run_generate(*a, false); };
}

CommandRunner add_trace_command(CLI::App& app)
{
    auto* cmd = app.add_subcommand("trace", "Generate and write tokens, top-k per step, timings, KV accounting "
                                            "and attention weights as JSON and/or as a saved run the app opens");
    auto a = std::make_shared<GenerateArgs>();
    add_common(cmd, *a);
    cmd->add_option("--json", a->json_out, "Write the trace as JSON to this file");
    cmd->add_option("--run", a->run_out,
                    "Write a saved run (.tsrun: the stepper's every step with its sampling stages, KV, timeline, "
                    "attention) that the app opens without the model");
    cmd->add_option("--attention", a->attention, "Attention to record: LAYER:HEAD,... or 'all'");
    return [a] { return run_generate(*a, true); };
}
