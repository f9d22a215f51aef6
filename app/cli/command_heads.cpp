// SPDX-License-Identifier: GPL-3.0-or-later
// The lab's head tools from scripts: `ablate` (turn heads off and see the next-token distribution
// move, or --scan every head), `heads` (classification scores of every head on the repeated-tokens
// probe) and `steer` (a direction from two prompts added at a layer: default and steered
// continuations side by side, optionally exported as a llama.cpp control vector).
#include "backend_option.h"
#include "commands.h"
#include "model_path.h"
#include "sampling_option.h"

#include "lab/ablation_scan.h"
#include "lab/head_classes.h"
#include "lab/steering.h"
#include "model/model.h"
#include "session/generator.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <spdlog/fmt/fmt.h>

namespace {

using nlohmann::ordered_json;

struct HeadArgs {
    std::string model, prompt, heads, mode = "zero", reference, plus, minus, export_path;
    bool scan = false, json = false;
    uint32_t layer = 0, repeat = 24, n_predict = 24;
    uint64_t seed = 1;
    float strength = 1.0f;
    int threads = 0;
    int top = 10;
    BackendArgs backend;
};

void print_json(const ordered_json& j)
{
    fmt::print("{}\n", j.dump(2, ' ', false, ordered_json::error_handler_t::replace));
}

std::string piece(const engine::Tokenizer& tok, engine::TokenId id)
{
    return tok.vocab().tokens[std::size_t(id)];
}

std::vector<engine::HeadRef> parse_heads(const std::string& spec)
{
    std::vector<engine::HeadRef> out;
    std::size_t pos = 0;
    while (pos < spec.size()) {
        const std::size_t end = std::min(spec.find(',', pos), spec.size());
        const std::string item = spec.substr(pos, end - pos);
        const auto colon = item.find(':');
        try {
            if (colon == std::string::npos)
                throw std::invalid_argument(item);
            std::size_t used = 0;
            const unsigned long l = std::stoul(item.substr(0, colon), &used);
            const unsigned long h = std::stoul(item.substr(colon + 1));
            out.push_back({uint32_t(l), uint32_t(h)});
        } catch (const std::exception&) {
            throw engine::Error(fmt::format("--heads: '{}' is not LAYER:HEAD", item));
        }
        pos = end + 1;
    }
    if (out.empty())
        throw engine::Error("--heads: name at least one head as LAYER:HEAD");
    return out;
}

ordered_json top_json(const engine::Tokenizer& tok, std::span<const float> logits, int n)
{
    std::vector<int32_t> ids(logits.size());
    for (std::size_t i = 0; i < ids.size(); ++i)
        ids[i] = int32_t(i);
    std::partial_sort(ids.begin(), ids.begin() + n, ids.end(),
                      [&](int32_t a, int32_t b) { return logits[std::size_t(a)] > logits[std::size_t(b)]; });
    const double lse = engine::log_sum_exp(logits);
    ordered_json out = ordered_json::array();
    for (int i = 0; i < n; ++i)
        out.push_back({{"id", ids[std::size_t(i)]},
                       {"piece", piece(tok, ids[std::size_t(i)])},
                       {"p", std::exp(double(logits[std::size_t(ids[std::size_t(i)])]) - lse)}});
    return out;
}

int run_ablate(const HeadArgs& a)
{
    const auto model = engine::Model::load(resolve_model_path(a.model));
    const engine::Tokenizer& tok = model->tokenizer();
    if (a.prompt.empty())
        throw engine::Error("the prompt is empty: give one with -p TEXT");
    const auto ids = tok.encode_ids(a.prompt);
    const auto mode = engine::parse_ablation_mode(a.mode);
    if (!mode)
        throw engine::Error(fmt::format("--mode {}: choose zero, mean or resample", a.mode));
    std::vector<engine::TokenId> reference;
    if (!a.reference.empty())
        reference = tok.encode_ids(a.reference);
    auto backend = make_cli_backend(a.backend, model, uint32_t(std::max(ids.size(), reference.size())) + 1, a.threads);
    if (a.scan) {
        const engine::AblationScan scan = engine::scan_head_ablations(*backend, ids, *mode, reference);
        std::vector<engine::HeadEffect> ranked = scan.heads;
        std::sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) { return x.kl > y.kl; });
        if (a.json) {
            ordered_json j;
            j["token"] = piece(tok, scan.token);
            j["base_logit"] = scan.base_logit;
            j["mode"] = a.mode;
            auto& heads = j["heads"] = ordered_json::array();
            for (const auto& h : ranked)
                heads.push_back({{"layer", h.layer}, {"head", h.head}, {"kl", h.kl}, {"logit_change", h.logit_change}});
            j["runs"] = scan.runs;
            j["ms"] = scan.ms;
            print_json(j);
            return 0;
        }
        fmt::print("{} heads ablated one at a time ({}), {:.1f} s; logit of '{}' {:.4f}\n", scan.runs, a.mode,
                   scan.ms / 1000.0, piece(tok, scan.token), scan.base_logit);
        fmt::print("{:>6} {:>5} {:>10} {:>12}\n", "layer", "head", "KL", "Δlogit");
        for (std::size_t i = 0; i < std::min<std::size_t>(ranked.size(), std::size_t(a.top)); ++i)
            fmt::print("{:>6} {:>5} {:>10.5f} {:>+12.4f}\n", ranked[i].layer, ranked[i].head, ranked[i].kl,
                       ranked[i].logit_change);
        return 0;
    }
    const auto heads = parse_heads(a.heads);
    const std::vector<engine::Intervention> ivs =
        engine::head_ablations(*backend, heads, *mode, uint32_t(ids.size()), reference);
    const auto base = engine::run_fresh(*backend, ids).logits;
    const auto ablated = engine::run_fresh(*backend, ids, nullptr, ivs).logits;
    const auto best = engine::TokenId(std::max_element(base.begin(), base.end()) - base.begin());
    const double kl = engine::kl_divergence(base, ablated);
    if (a.json) {
        ordered_json j;
        j["heads"] = ordered_json::array();
        for (const auto& h : heads)
            j["heads"].push_back(fmt::format("{}:{}", h.layer, h.head));
        j["mode"] = a.mode;
        j["kl"] = kl;
        j["token"] = piece(tok, best);
        j["logit"] = base[std::size_t(best)];
        j["ablated_logit"] = ablated[std::size_t(best)];
        j["base_top"] = top_json(tok, base, a.top);
        j["ablated_top"] = top_json(tok, ablated, a.top);
        print_json(j);
        return 0;
    }
    fmt::print("KL(base ‖ ablated) = {:.5f} nats; logit of '{}' {:.4f} → {:.4f}\n", kl, piece(tok, best),
               base[std::size_t(best)], ablated[std::size_t(best)]);
    return 0;
}

int run_heads(const HeadArgs& a)
{
    const auto model = engine::Model::load(resolve_model_path(a.model));
    const engine::HeadProbe probe = engine::make_head_probe(model->tokenizer(), a.repeat, a.seed);
    auto backend = make_cli_backend(a.backend, model, uint32_t(probe.tokens.size()) + 1, a.threads);
    const auto scores = engine::classify_heads(*backend, probe);
    if (a.json) {
        ordered_json j;
        j["probe"] = {{"repeat", probe.repeat}, {"seed", a.seed}, {"tokens", probe.tokens.size()}};
        j["threshold"] = engine::kClassThreshold;
        auto& heads = j["heads"] = ordered_json::array();
        for (const auto& s : scores) {
            ordered_json h{{"layer", s.layer}, {"head", s.head}, {"class", engine::head_class_name(s.cls)}};
            for (std::size_t k = 0; k < engine::kHeadScoreCount; ++k)
                h[std::string(engine::head_class_name(engine::HeadClass(k)))] = s.score[k];
            h["entropy"] = s.entropy;
            heads.push_back(std::move(h));
        }
        print_json(j);
        return 0;
    }
    fmt::print("{:>6} {:>5} {:>16} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}\n", "layer", "head", "class", "prev", "induct",
               "dup", "first", "self", "entropy");
    for (const auto& s : scores)
        fmt::print("{:>6} {:>5} {:>16} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>8.3f}\n", s.layer, s.head,
                   engine::head_class_name(s.cls), s.score[0], s.score[1], s.score[2], s.score[3], s.score[4],
                   s.entropy);
    return 0;
}

int run_steer(const HeadArgs& a)
{
    const auto model = engine::Model::load(resolve_model_path(a.model));
    const engine::Tokenizer& tok = model->tokenizer();
    if (a.prompt.empty())
        throw engine::Error("the prompt is empty: give one with -p TEXT");
    const auto plus = tok.encode_ids(a.plus), minus = tok.encode_ids(a.minus);
    const uint32_t n_ctx =
        uint32_t(std::max({plus.size(), minus.size(), tok.encode_ids(a.prompt).size()})) + a.n_predict + 8;
    auto lab = make_cli_backend(a.backend, model, n_ctx, a.threads);
    const engine::SteeringVector v = engine::steering_vector(*lab, plus, minus, a.layer);
    if (!a.export_path.empty())
        engine::write_control_vector(a.export_path, v, model->config().architecture, model->config().n_layer);

    engine::SamplerConfig greedy;
    greedy.temperature = 0.0f;
    const auto continue_with = [&](float strength, std::vector<float>& first_logits) {
        engine::Session session(model, make_cli_backend(a.backend, model, n_ctx, a.threads));
        if (strength != 0.0f)
            session.set_interventions({engine::steering_intervention(v, strength)});
        engine::Sampler sampler(greedy);
        engine::GenerationOptions options;
        options.max_tokens = a.n_predict;
        std::vector<float> captured;
        const auto trace = engine::generate(session, sampler, a.prompt, options);
        session.truncate(uint32_t(trace.prompt_ids.size()));
        first_logits.assign(session.logits().begin(), session.logits().end());
        return trace.text;
    };
    std::vector<float> base_logits, steered_logits;
    const std::string base = continue_with(0.0f, base_logits);
    const std::string steered = continue_with(a.strength, steered_logits);
    if (a.json) {
        ordered_json j;
        j["layer"] = v.layer;
        j["strength"] = a.strength;
        double norm = 0;
        for (float x : v.direction)
            norm += double(x) * x;
        j["direction_norm"] = std::sqrt(norm);
        j["default"] = base;
        j["steered"] = steered;
        j["kl"] = engine::kl_divergence(base_logits, steered_logits);
        j["default_top"] = top_json(tok, base_logits, 5);
        j["steered_top"] = top_json(tok, steered_logits, 5);
        if (!a.export_path.empty())
            j["control_vector"] = a.export_path;
        print_json(j);
        return 0;
    }
    fmt::print("default: {}{}\nsteered (layer {}, strength {}): {}{}\n", a.prompt, base, v.layer, a.strength, a.prompt,
               steered);
    if (!a.export_path.empty())
        fmt::print("control vector written to {} (llama.cpp: --control-vector-scaled {}:{})\n", a.export_path,
                   a.export_path, a.strength);
    return 0;
}

void add_shared(CLI::App* cmd, HeadArgs& a)
{
    cmd->add_option("-m,--model", a.model, "GGUF file (default: the installed default model)");
    cmd->add_flag("--json", a.json, "Print JSON");
    cmd->add_option("-t,--threads", a.threads, "CPU threads (0: all)");
    add_backend_options(cmd, a.backend);
}

} // namespace

CommandRunner add_ablate_command(CLI::App& app)
{
    auto* cmd = app.add_subcommand("ablate", "Turn attention heads off (zero, mean or resample) and show how the "
                                             "next-token distribution moves; --scan ranks every head");
    auto a = std::make_shared<HeadArgs>();
    add_shared(cmd, *a);
    cmd->add_option("-p,--prompt", a->prompt, "The prompt")->required();
    cmd->add_option("--heads", a->heads, "LAYER:HEAD,… to ablate together");
    cmd->add_flag("--scan", a->scan, "Ablate every head in turn and rank them by KL");
    cmd->add_option("--mode", a->mode, "zero (default), mean (over --reference) or resample (from --reference)");
    cmd->add_option("--reference", a->reference, "The reference prompt of mean and resample ablation");
    cmd->add_option("--top", a->top, "Rows or candidates to print");
    return [a] {
        if (!a->scan && a->heads.empty())
            throw engine::Error("name heads with --heads LAYER:HEAD,… or rank them all with --scan");
        return run_ablate(*a);
    };
}

CommandRunner add_heads_command(CLI::App& app)
{
    auto* cmd = app.add_subcommand("heads", "Classify every attention head (previous-token, induction, duplicate, "
                                            "first-token, self; entropy) on a probe of repeated random tokens");
    auto a = std::make_shared<HeadArgs>();
    add_shared(cmd, *a);
    cmd->add_option("--repeat", a->repeat, "Random tokens per copy (the probe is BOS + 2 copies)");
    cmd->add_option("--seed", a->seed, "The probe's seed");
    return [a] { return run_heads(*a); };
}

CommandRunner add_steer_command(CLI::App& app)
{
    auto* cmd = app.add_subcommand("steer", "Steer with a direction from two prompts (their residual difference "
                                            "after a layer): default and steered greedy continuations");
    auto a = std::make_shared<HeadArgs>();
    add_shared(cmd, *a);
    cmd->add_option("-p,--prompt", a->prompt, "The prompt to continue")->required();
    cmd->add_option("--plus", a->plus, "The prompt the direction points to")->required();
    cmd->add_option("--minus", a->minus, "The prompt it points away from")->required();
    cmd->add_option("--layer", a->layer, "The layer after which it is added (1 … layers − 1)")->required();
    cmd->add_option("--strength", a->strength, "Multiplier of the direction (default 1)");
    cmd->add_option("-n,--n-predict", a->n_predict, "Tokens to generate (greedy)");
    cmd->add_option("--export", a->export_path, "Also write the direction as a llama.cpp control-vector GGUF");
    return [a] { return run_steer(*a); };
}
