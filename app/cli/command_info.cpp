// SPDX-License-Identifier: GPL-3.0-or-later
// `info MODEL`: architecture and hyperparameters, tensor table and type mix, tokenizer summary.
#include "commands.h"
#include "model_path.h"

#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "model/model_kind.h"
#include "tokenizer/vocab.h"
#include "util/error.h"

#include <map>
#include <nlohmann/json.hpp>
#include <spdlog/fmt/fmt.h>

namespace {

std::string human_bytes(uint64_t bytes)
{
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(bytes);
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        ++u;
    }
    return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.2f} {}", v, units[u]);
}

// "3 × 640" for a uniform per-layer value, else the distinct values.
std::string per_layer_string(const std::vector<uint32_t>& v)
{
    if (v.empty())
        return "-";
    bool uniform = std::all_of(v.begin(), v.end(), [&](uint32_t x) { return x == v[0]; });
    if (uniform)
        return std::to_string(v[0]);
    std::string s;
    for (std::size_t i = 0; i < v.size(); ++i)
        s += (i ? "," : "") + std::to_string(v[i]);
    return "per layer [" + s + "]";
}

// Base or instruct, and the rule that decided: "instruct (general.finetune says \"Instruct-AWQ\")".
std::string tuning_of(const engine::gguf::GgufFile& f)
{
    const engine::ModelKindVerdict v = engine::model_kind_verdict(f);
    return fmt::format("{} ({})", engine::model_kind_name(v.kind), v.reason);
}

int run_info(const std::string& model_arg, bool json, bool all_metadata)
{
    const auto path = resolve_model_path(model_arg);
    const auto file = engine::gguf::GgufFile::open(path);
    const auto config = engine::ModelConfig::from_gguf(*file);

    std::map<std::string, std::pair<uint64_t, uint64_t>> mix; // type → (tensors, bytes)
    uint64_t n_params = 0;
    std::vector<std::string> unsupported;
    uint64_t inactive_params = 0;
    for (const auto& t : file->tensors()) {
        auto& m = mix[std::string(t.type.name)];
        ++m.first;
        m.second += t.n_bytes;
        n_params += t.n_elements();
        if (config.is_moe() &&
            config.n_expert_used <= config.n_expert &&  // (the loader refuses more used than there are)
            t.name.find("_exps.") != std::string::npos) // experts a token does not go through
            inactive_params += t.n_elements() / config.n_expert * (config.n_expert - config.n_expert_used);
        if (!t.type.dequantizable)
            unsupported.push_back(fmt::format("{} ({})", t.name, t.type.name));
    }

    std::string tokenizer_summary;
    std::optional<engine::Vocab> vocab;
    try {
        vocab = engine::Vocab::from_gguf(*file);
    } catch (const engine::Error& e) {
        tokenizer_summary = std::string("unavailable: ") + e.what();
    }

    if (json) {
        nlohmann::ordered_json j;
        j["file"] = path.string();
        j["file_size"] = file->file_size();
        j["gguf_version"] = file->version();
        j["alignment"] = file->alignment();
        j["architecture"] = config.architecture;
        j["name"] = config.name;
        const engine::ModelKindVerdict kind = engine::model_kind_verdict(*file);
        j["tuning"] = tuning_of(*file);
        j["model_kind"] = engine::model_kind_name(kind.kind);
        j["model_kind_reason"] = kind.reason;
        j["parameters"] = n_params;
        if (config.is_moe()) {
            j["active_parameters"] = n_params - inactive_params;
            j["experts"] = config.n_expert;
            j["experts_used"] = config.n_expert_used;
            j["expert_feed_forward"] = config.n_ff_exp;
            j["shared_expert_feed_forward"] = config.n_ff_shexp;
        }
        j["n_layer"] = config.n_layer;
        j["n_embd"] = config.n_embd;
        j["n_ctx_train"] = config.n_ctx_train;
        j["n_vocab"] = config.n_vocab;
        j["n_head"] = config.n_head;
        j["n_head_kv"] = config.n_head_kv;
        j["n_ff"] = config.n_ff;
        j["head_dim_k"] = config.head_dim_k;
        j["head_dim_v"] = config.head_dim_v;
        j["n_rot"] = config.n_rot;
        j["rope_freq_base"] = config.rope_freq_base;
        if (config.rope_freq_base_swa)
            j["rope_freq_base_swa"] = *config.rope_freq_base_swa;
        j["rope_freq_scale"] = config.rope_freq_scale;
        j["norm_eps"] = config.norm_eps;
        j["sliding_window"] = config.sliding_window;
        j["layer_is_swa"] = config.layer_is_swa;
        auto& jt = j["tensors"] = nlohmann::ordered_json::array();
        for (const auto& t : file->tensors())
            jt.push_back(
                {{"name", t.name},
                 {"type", t.type.name},
                 {"shape", std::vector<uint64_t>(t.ne.begin(), t.ne.begin() + std::max<uint32_t>(t.n_dims, 1))},
                 {"bytes", t.n_bytes}});
        auto& jm = j["type_mix"] = nlohmann::ordered_json::object();
        for (const auto& [type, m] : mix)
            jm[type] = {{"tensors", m.first}, {"bytes", m.second}};
        if (vocab) {
            j["tokenizer"] = {{"model", vocab->model_name},
                              {"pre", vocab->pre},
                              {"tokens", vocab->size()},
                              {"merges", vocab->merge_rank.size()},
                              {"add_bos", vocab->add_bos},
                              {"add_eos", vocab->add_eos},
                              {"add_space_prefix", vocab->add_space_prefix},
                              {"bos", vocab->bos ? *vocab->bos : -1},
                              {"eos", vocab->eos ? *vocab->eos : -1},
                              {"end_of_generation", vocab->end_of_generation},
                              {"chat_template", vocab->chat_template.has_value()}};
        } else {
            j["tokenizer"] = {{"error", tokenizer_summary}};
        }
        j["unsupported_tensors"] = unsupported;
        fmt::print("{}\n", j.dump(2));
        return 0;
    }

    fmt::print("file              {}\n", path.string());
    fmt::print("size              {} ({} bytes), GGUF v{}, alignment {}\n", human_bytes(file->file_size()),
               file->file_size(), file->version(), file->alignment());
    fmt::print("architecture      {}\n", config.architecture);
    if (!config.name.empty())
        fmt::print("name              {}\n", config.name);
    fmt::print("tuning            {}\n", tuning_of(*file));
    fmt::print("parameters        {} ({:.1f} M)\n", n_params, static_cast<double>(n_params) / 1e6);
    fmt::print("layers            {}\n", config.n_layer);
    fmt::print("embedding         {}\n", config.n_embd);
    fmt::print("heads             {} (query), {} (key/value)\n", per_layer_string(config.n_head),
               per_layer_string(config.n_head_kv));
    fmt::print("head dimension    {} (key), {} (value), {} rotated\n", config.head_dim_k, config.head_dim_v,
               config.n_rot);
    if (config.is_moe()) {
        fmt::print("experts           {} of {} per token, each {} wide{}\n", config.n_expert_used, config.n_expert,
                   config.n_ff_exp,
                   config.n_ff_shexp ? fmt::format(", and a shared expert {} wide", config.n_ff_shexp) : "");
        fmt::print("active parameters {} ({:.1f} M of {:.1f} M per token)\n", n_params - inactive_params,
                   static_cast<double>(n_params - inactive_params) / 1e6, static_cast<double>(n_params) / 1e6);
    } else {
        fmt::print("feed-forward      {}\n", per_layer_string(config.n_ff));
    }
    fmt::print("context length    {}\n", config.n_ctx_train);
    fmt::print("vocabulary        {}\n", config.n_vocab);
    fmt::print("rope              base {}{}, scale {}, scaling {}\n", config.rope_freq_base,
               config.rope_freq_base_swa ? fmt::format(" (sliding-window layers {})", *config.rope_freq_base_swa) : "",
               config.rope_freq_scale, config.rope_scaling_type);
    fmt::print("norm epsilon      {:g}\n", config.norm_eps);
    if (config.sliding_window) {
        std::string global;
        for (uint32_t il = 0; il < config.n_layer; ++il)
            if (!config.layer_is_swa[il])
                global += (global.empty() ? "" : ", ") + std::to_string(il);
        const auto n_swa = std::count(config.layer_is_swa.begin(), config.layer_is_swa.end(), true);
        fmt::print("sliding window    {} tokens on {} layers; global layers: {}\n", config.sliding_window, n_swa,
                   global.empty() ? "none" : global);
    } else {
        fmt::print("sliding window    none\n");
    }
    if (config.attn_logit_softcap)
        fmt::print("attn softcap      {}\n", *config.attn_logit_softcap);
    if (config.final_logit_softcap)
        fmt::print("final softcap     {}\n", *config.final_logit_softcap);

    fmt::print("\ntensor types      ");
    bool first = true;
    for (const auto& [type, m] : mix) {
        fmt::print("{}{} × {} ({})", first ? "" : ", ", m.first, type, human_bytes(m.second));
        first = false;
    }
    fmt::print("\n");
    if (!unsupported.empty())
        fmt::print("unsupported       {} tensors cannot be decoded, e.g. {}\n", unsupported.size(),
                   unsupported.front());

    fmt::print("\ntokenizer         ");
    if (vocab) {
        fmt::print("{} ({}), {} tokens",
                   vocab->model == engine::TokenizerModel::Spm ? "SentencePiece"
                   : vocab->byte_encode                        ? "byte-level BPE"
                                                               : "BPE over UTF-8 with byte fallback", // Gemma 4
                   vocab->model_name, vocab->size());
        if (vocab->model == engine::TokenizerModel::Bpe)
            fmt::print(", {} merges, pre-tokenizer {}", vocab->merge_rank.size(), vocab->pre);
        fmt::print("\n                  BOS {} (add: {}), EOS {} (add: {}), space prefix: {}\n",
                   vocab->bos ? vocab->tokens[static_cast<std::size_t>(*vocab->bos)] : "-", vocab->add_bos,
                   vocab->eos ? vocab->tokens[static_cast<std::size_t>(*vocab->eos)] : "-", vocab->add_eos,
                   vocab->add_space_prefix);
        std::string eog;
        for (auto id : vocab->end_of_generation)
            eog += (eog.empty() ? "" : " ") + vocab->tokens[static_cast<std::size_t>(id)];
        fmt::print("                  end of generation: {}\n", eog);
        fmt::print("chat template     {}\n",
                   vocab->chat_template ? fmt::format("present ({} bytes)", vocab->chat_template->size()) : "absent");
    } else {
        fmt::print("{}\n", tokenizer_summary);
    }

    if (all_metadata) {
        fmt::print("\nmetadata ({} keys)\n", file->metadata().size());
        for (const auto& e : file->metadata())
            fmt::print("  {:<44} {:<6} {}\n", e.key, engine::gguf::value_type_name(e.value.type),
                       e.value.to_display_string());
    }

    fmt::print("\n{:<4} {:<36} {:<7} {:<16} {:>12}\n", "#", "tensor", "type", "shape", "bytes");
    std::size_t i = 0;
    for (const auto& t : file->tensors())
        fmt::print("{:<4} {:<36} {:<7} {:<16} {:>12}\n", i++, t.name, t.type.name, t.shape_string(), t.n_bytes);
    return 0;
}

} // namespace

CommandRunner add_info_command(CLI::App& app)
{
    auto* cmd = app.add_subcommand("info", "Print a model's architecture, hyperparameters, tensors and tokenizer");
    auto model = std::make_shared<std::string>();
    auto json = std::make_shared<bool>(false);
    auto metadata = std::make_shared<bool>(false);
    cmd->add_option("model", *model, "GGUF file (default: the installed default model)");
    cmd->add_flag("--json", *json, "Print JSON");
    cmd->add_flag("--metadata", *metadata, "Also list every metadata key");
    return [=] { return run_info(*model, *json, *metadata); };
}
