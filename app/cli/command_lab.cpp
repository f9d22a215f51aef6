// SPDX-License-Identifier: GPL-3.0-or-later
// The interpretability lab from scripts: `patch` (activation patching of a clean into a corrupted
// prompt, layers × positions or heads) and `attribute` (direct logit attribution of the last
// position's logit). JSON contracts are in the README.
#include "backend_option.h"
#include "commands.h"
#include "model_path.h"

#include "lab/attribution.h"
#include "lab/patching.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <spdlog/fmt/fmt.h>

namespace {

using nlohmann::ordered_json;

struct LabArgs {
    std::string model;
    std::string prompt, clean, corrupt;
    std::string tokens; // patch: "A,B"
    std::string token;  // attribute
    std::string versus; // attribute
    std::string over = "residual";
    std::string metric = "logit-diff";
    bool json = false;
    int threads = 0;
    BackendArgs backend;
};

std::vector<engine::TokenId> prompt_ids(const engine::Tokenizer& tok, const std::string& text, const char* what)
{
    if (text.empty())
        throw engine::Error(fmt::format("the {} prompt is empty", what));
    return tok.encode_ids(text);
}

std::string piece(const engine::Tokenizer& tok, engine::TokenId id)
{
    return tok.vocab().tokens[std::size_t(id)];
}

void print_json(const ordered_json& j)
{
    fmt::print("{}\n", j.dump(2, ' ', false, ordered_json::error_handler_t::replace));
}

// NaN (a cell a Stop left) as null.
ordered_json number(double v)
{
    return std::isfinite(v) ? ordered_json(v) : ordered_json(nullptr);
}

int run_patch(const LabArgs& a)
{
    const auto model = engine::Model::load(resolve_model_path(a.model));
    const engine::Tokenizer& tok = model->tokenizer();
    engine::PatchingRequest req;
    req.clean = prompt_ids(tok, a.clean, "clean");
    req.corrupted = prompt_ids(tok, a.corrupt, "corrupted");
    const auto over = engine::parse_patch_over(a.over);
    if (!over)
        throw engine::Error(fmt::format("--over {}: choose residual, attention, mlp, heads or routes (a mixture of "
                                        "experts' routers)",
                                        a.over));
    req.over = *over;
    const auto comma = a.tokens.find(',');
    if (a.metric == "logit-diff") {
        if (comma == std::string::npos)
            throw engine::Error("--tokens A,B: give the two tokens whose logit difference is measured");
        req.metric = {engine::PatchMetric::Kind::LogitDiff, engine::single_token(tok, a.tokens.substr(0, comma)),
                      engine::single_token(tok, a.tokens.substr(comma + 1))};
    } else if (a.metric == "logprob") {
        req.metric = {engine::PatchMetric::Kind::LogProb, engine::single_token(tok, a.tokens.substr(0, comma)), 0};
    } else if (a.metric == "kl") {
        req.metric = {engine::PatchMetric::Kind::KlToClean, 0, 0};
    } else {
        throw engine::Error(fmt::format("--metric {}: choose logit-diff, logprob or kl", a.metric));
    }
    auto backend = make_cli_backend(a.backend, model, uint32_t(req.clean.size()) + 1, a.threads);
    const engine::PatchingResult r = engine::run_patching(*backend, req, [&](uint32_t done, uint32_t total) {
        if (!a.json && done % 16 == 0)
            fmt::print(stderr, "\rpatching: {}/{} runs", done, total);
        return true;
    });
    if (!a.json)
        fmt::print(stderr, "\n");

    if (a.json) {
        ordered_json j;
        j["over"] = engine::patch_over_name(r.over);
        j["metric"] = engine::metric_name(r.metric.kind);
        j["clean_metric"] = r.clean_metric;
        j["corrupted_metric"] = r.corrupted_metric;
        j["layers"] = r.n_layers;
        if (r.over == engine::PatchOver::Heads)
            j["heads"] = r.n_columns;
        else
            j["positions"] = r.n_columns;
        j["tokens"] = ordered_json::array();
        for (engine::TokenId id : req.corrupted)
            j["tokens"].push_back(piece(tok, id));
        auto& effect = j["effect"] = ordered_json::array();
        for (const auto& row : r.effect) {
            ordered_json cells = ordered_json::array();
            for (double v : row)
                cells.push_back(number(v));
            effect.push_back(std::move(cells));
        }
        j["runs"] = r.runs;
        j["ms"] = r.ms;
        print_json(j);
        return 0;
    }
    fmt::print("{} patching, metric {}: clean {:.4f}, corrupted {:.4f} ({} runs, {:.1f} s)\n",
               engine::patch_over_name(r.over), engine::metric_name(r.metric.kind), r.clean_metric, r.corrupted_metric,
               r.runs, r.ms / 1000.0);
    fmt::print("{:>6}", "layer");
    for (uint32_t col = 0; col < r.n_columns; ++col)
        fmt::print(" {:>7}", r.over == engine::PatchOver::Heads ? fmt::format("H{}", col) : fmt::format("p{}", col));
    fmt::print("\n");
    for (uint32_t il = 0; il < r.n_layers; ++il) {
        fmt::print("{:>6}", il);
        for (double v : r.effect[il])
            fmt::print(" {:>7.3f}", v);
        fmt::print("\n");
    }
    return 0;
}

int run_attribute(const LabArgs& a)
{
    const auto model = engine::Model::load(resolve_model_path(a.model));
    const engine::Tokenizer& tok = model->tokenizer();
    const auto ids = prompt_ids(tok, a.prompt, "");
    auto backend = make_cli_backend(a.backend, model, uint32_t(ids.size()) + 1, a.threads);
    engine::TokenId token = 0;
    if (a.token.empty()) { // the token greedy decoding would take
        const auto logits = engine::run_fresh(*backend, ids).logits;
        token = engine::TokenId(std::max_element(logits.begin(), logits.end()) - logits.begin());
    } else {
        token = engine::single_token(tok, a.token);
    }
    std::optional<engine::TokenId> versus;
    if (!a.versus.empty())
        versus = engine::single_token(tok, a.versus);
    const engine::Attribution r = engine::attribute_logit(*backend, ids, token, versus);
    if (a.json) {
        ordered_json j;
        j["token"] = piece(tok, r.token);
        j["token_id"] = r.token;
        if (r.versus) {
            j["versus"] = piece(tok, *r.versus);
            j["versus_id"] = *r.versus;
        }
        j["logit"] = r.logit;
        j["final_norm_scale"] = r.final_norm_scale;
        auto& parts = j["parts"] = ordered_json::array();
        for (const auto& p : r.parts)
            parts.push_back({{"name", p.name},
                             {"layer", p.layer < 0 ? ordered_json(nullptr) : ordered_json(p.layer)},
                             {"head", p.head < 0 ? ordered_json(nullptr) : ordered_json(p.head)},
                             {"value", p.value}});
        print_json(j);
        return 0;
    }
    fmt::print("logit of '{}'{} at the last position: {:.4f}; parts add up to {:.4f}\n", piece(tok, r.token),
               r.versus ? fmt::format(" minus '{}'", piece(tok, *r.versus)) : "", r.logit, engine::sum_of_parts(r));
    std::vector<const engine::AttributionPart*> by_size;
    for (const auto& p : r.parts)
        by_size.push_back(&p);
    std::sort(by_size.begin(), by_size.end(),
              [](const auto* x, const auto* y) { return std::abs(x->value) > std::abs(y->value); });
    fmt::print("largest parts:\n");
    for (std::size_t i = 0; i < std::min<std::size_t>(20, by_size.size()); ++i)
        fmt::print("  {:<28} {:>+9.4f}\n", by_size[i]->name, by_size[i]->value);
    return 0;
}

void add_shared(CLI::App* cmd, LabArgs& a)
{
    cmd->add_option("-m,--model", a.model, "GGUF file (default: the installed default model)");
    cmd->add_flag("--json", a.json, "Print JSON");
    cmd->add_option("-t,--threads", a.threads, "CPU threads (0: all)");
    add_backend_options(cmd, a.backend);
}

} // namespace

CommandRunner add_patch_command(CLI::App& app)
{
    auto* cmd = app.add_subcommand("patch", "Activation patching: how much of a clean prompt's prediction each "
                                            "layer and position (or head) restores in a corrupted one");
    auto a = std::make_shared<LabArgs>();
    add_shared(cmd, *a);
    cmd->add_option("--clean", a->clean, "The clean prompt")->required();
    cmd->add_option("--corrupt", a->corrupt, "The corrupted prompt (the same number of tokens)")->required();
    cmd->add_option("--tokens", a->tokens, "A,B: the metric is logit(A) − logit(B) (#N names a token id)");
    cmd->add_option("--metric", a->metric, "logit-diff (default), logprob (of A) or kl (to the clean run)");
    cmd->add_option("--over", a->over, "residual (default), attention, mlp, heads or routes (MoE models)");
    return [a] { return run_patch(*a); };
}

CommandRunner add_attribute_command(CLI::App& app)
{
    auto* cmd = app.add_subcommand("attribute", "Direct logit attribution: each head's, MLP's and the embedding's "
                                                "part of the last position's logit");
    auto a = std::make_shared<LabArgs>();
    add_shared(cmd, *a);
    cmd->add_option("-p,--prompt", a->prompt, "The prompt")->required();
    cmd->add_option("--token", a->token, "The token whose logit is split (default: the most likely; #N: an id)");
    cmd->add_option("--versus", a->versus, "Split logit(token) − logit(versus) instead");
    return [a] { return run_attribute(*a); };
}
