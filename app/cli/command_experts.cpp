// SPDX-License-Identifier: GPL-3.0-or-later
// `experts`: a mixture-of-experts model's routing of a prompt — per token and layer the chosen experts
// and their weights, as text or JSON; optionally with an expert removed or zeroed (`--remove E`,
// `--zero E`, in `--layer L` or every layer), to see the route and the next token move.
#include "backend_option.h"
#include "commands.h"
#include "model_path.h"

#include "backend/backend.h"
#include "model/model.h"
#include "moe/expert_scan.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <spdlog/fmt/fmt.h>

namespace {

using nlohmann::ordered_json;

struct ExpertsArgs {
    std::string model, prompt;
    int layer = -1;
    int remove = -1, zero = -1;
    bool json = false, scan = false, scan_zero = false;
    int top = 12;
    int threads = 0;
    BackendArgs backend;
};

// Every expert of every layer removed (or zeroed) in turn, ranked by the next token's KL.
int run_scan(const ExpertsArgs& a, const std::shared_ptr<const engine::Model>& model,
             const std::vector<engine::TokenId>& ids)
{
    auto backend = make_cli_backend(a.backend, model, uint32_t(ids.size() + 1), a.threads);
    const engine::ExpertScan scan = engine::scan_experts(
        *backend, ids,
        a.scan_zero ? engine::ExpertIntervention::Kind::ZeroOutput : engine::ExpertIntervention::Kind::Remove,
        [](uint32_t passes, double ms) {
            fmt::print(stderr, "{} passes (one per expert some token chose), about {:.1f} s\n", passes, ms / 1000.0);
        });
    std::vector<engine::ExpertEffect> ranked = scan.effects;
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const engine::ExpertEffect& x, const engine::ExpertEffect& y) { return x.kl > y.kl; });
    const auto& tok = model->tokenizer();
    if (a.json) {
        ordered_json out;
        out["mode"] = a.scan_zero ? "zero-output" : "remove";
        out["token"] = {{"id", scan.token}, {"piece", tok.vocab().tokens[std::size_t(scan.token)]}};
        out["passes"] = scan.runs;
        out["ms"] = scan.ms;
        ordered_json effects = ordered_json::array();
        for (const engine::ExpertEffect& e : ranked)
            effects.push_back({{"layer", e.layer},
                               {"expert", e.expert},
                               {"tokens", e.tokens},
                               {"kl", e.kl},
                               {"logit_change", e.logit_change}});
        out["effects"] = effects;
        fmt::print("{}\n", out.dump(2, ' ', false, ordered_json::error_handler_t::replace));
        return 0;
    }
    fmt::print("{} passes in {:.1f} s; the next token {:?}; experts {} one at a time, by the next token's KL:\n",
               scan.runs, scan.ms / 1000.0, tok.vocab().tokens[std::size_t(scan.token)],
               a.scan_zero ? "zeroed" : "removed");
    fmt::print("{:>6} {:>7} {:>7} {:>10} {:>12}\n", "layer", "expert", "tokens", "KL", "logit Δ");
    for (std::size_t i = 0; i < ranked.size() && int(i) < a.top; ++i)
        fmt::print("{:>6} {:>7} {:>7} {:>10.5f} {:>+12.4f}\n", ranked[i].layer, ranked[i].expert, ranked[i].tokens,
                   ranked[i].kl, ranked[i].logit_change);
    return 0;
}

int run_experts(const ExpertsArgs& a)
{
    const auto model = engine::Model::load(resolve_model_path(a.model));
    const engine::ModelConfig& c = model->config();
    if (!c.is_moe())
        throw engine::Error(fmt::format("{} is a dense model ({}): it has no router and no experts to show",
                                        model->file().name(), c.architecture));
    if (a.layer >= int(c.n_layer))
        throw engine::Error(
            fmt::format("--layer {}: the model has {} layers (0 … {})", a.layer, c.n_layer, c.n_layer - 1));
    if (a.prompt.empty())
        throw engine::Error("the prompt is empty: give a text with -p to route");
    const engine::Tokenizer& tok = model->tokenizer();
    const std::vector<engine::TokenId> ids = tok.encode_ids(a.prompt);
    if (ids.empty())
        throw engine::Error("the prompt gave no tokens to route");
    if (a.scan || a.scan_zero)
        return run_scan(a, model, ids);
    std::vector<engine::ExpertIntervention> change;
    for (const auto& [expert, kind] : {std::pair{a.remove, engine::ExpertIntervention::Kind::Remove},
                                       std::pair{a.zero, engine::ExpertIntervention::Kind::ZeroOutput}})
        if (expert >= 0) {
            engine::ExpertIntervention iv;
            iv.kind = kind;
            iv.layer = a.layer;
            iv.experts = {uint32_t(expert)};
            change.push_back(iv);
        }
    auto backend = make_cli_backend(a.backend, model, uint32_t(ids.size() + 1), a.threads);
    const engine::ForwardResult r = engine::forward_routed(*backend, ids, change);
    const auto next = int32_t(std::max_element(r.logits.begin(), r.logits.end()) - r.logits.begin());

    const auto piece = [&](engine::TokenId id) { return tok.vocab().tokens[std::size_t(id)]; };
    if (a.json) {
        ordered_json out;
        out["model"] = model->file().name();
        out["architecture"] = c.architecture;
        out["n_expert"] = c.n_expert;
        out["n_expert_used"] = c.n_expert_used;
        out["weights_normalized"] = model->traits().moe_normalize_weights;
        out["backend"] = backend->name();
        ordered_json tokens = ordered_json::array();
        for (const engine::TokenId id : ids)
            tokens.push_back({{"id", id}, {"piece", piece(id)}});
        out["tokens"] = tokens;
        ordered_json layers = ordered_json::array();
        for (const engine::RoutingCapture& rc : r.captures->routing) {
            if (a.layer >= 0 && int(rc.layer) != a.layer)
                continue;
            ordered_json per_token = ordered_json::array();
            for (uint32_t t = 0; t < rc.n_tokens; ++t) {
                ordered_json route = ordered_json::array();
                for (uint32_t s = 0; s < rc.k; ++s)
                    route.push_back({{"expert", rc.experts[t * rc.k + s]}, {"weight", rc.weights[t * rc.k + s]}});
                per_token.push_back(route);
            }
            layers.push_back({{"layer", rc.layer}, {"routes", per_token}});
        }
        out["layers"] = layers;
        out["next_token"] = {{"id", next}, {"piece", piece(next)}};
        fmt::print("{}\n", out.dump(2, ' ', false, ordered_json::error_handler_t::replace));
        return 0;
    }
    fmt::print("{} ({}): {} experts, {} per token{}; {} tokens on {}\n", model->file().name(), c.architecture,
               c.n_expert, c.n_expert_used, model->traits().moe_normalize_weights ? ", weights normalised" : "",
               ids.size(), backend->name());
    for (const engine::RoutingCapture& rc : r.captures->routing) {
        if (a.layer >= 0 && int(rc.layer) != a.layer)
            continue;
        fmt::print("layer {}\n", rc.layer);
        for (uint32_t t = 0; t < rc.n_tokens; ++t) {
            std::string line = fmt::format("  {:4} {:<16}", t, fmt::format("{:?}", piece(ids[t])));
            for (uint32_t s = 0; s < rc.k; ++s)
                line += fmt::format(" e{}:{:.3f}", rc.experts[t * rc.k + s], rc.weights[t * rc.k + s]);
            fmt::print("{}\n", line);
        }
    }
    fmt::print("next token: {:?}\n", piece(next));
    return 0;
}

} // namespace

CommandRunner add_experts_command(CLI::App& app)
{
    auto* cmd = app.add_subcommand("experts", "A mixture-of-experts model's routing of a prompt: per token and layer "
                                              "the chosen experts and their weights");
    auto a = std::make_shared<ExpertsArgs>();
    cmd->add_option("model", a->model, "GGUF model (default: the installed default model)");
    cmd->add_option("-p,--prompt", a->prompt, "The text to route")->required();
    cmd->add_option("--layer", a->layer, "Only this layer (and --remove/--zero only there)");
    cmd->add_option("--remove", a->remove, "Remove this expert (the next best take its place)");
    cmd->add_option("--zero", a->zero, "Zero this expert's output (its route kept)");
    cmd->add_flag("--scan", a->scan, "Remove every expert of every layer in turn and rank them by the next token's KL");
    cmd->add_flag("--scan-zero", a->scan_zero, "The same with each expert's output zeroed instead");
    cmd->add_option("--top", a->top, "Rows of the scan to print");
    cmd->add_flag("--json", a->json, "Machine-readable output");
    cmd->add_option("-t,--threads", a->threads, "CPU threads (default: all)");
    add_backend_options(cmd, a->backend);
    return [a] { return run_experts(*a); };
}
