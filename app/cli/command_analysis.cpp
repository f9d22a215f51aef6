// SPDX-License-Identifier: GPL-3.0-or-later
// Any text through the model: `perplexity` (each token's surprisal and rank, and the text's
// perplexity), `compare` (two models or two quantizations position by position: KL, agreement,
// the real token's probability under each) and `requantize` (a Q8_0 or Q4_0 copy of a model).
#include "backend_option.h"
#include "commands.h"
#include "model_path.h"

#include "analysis/chunked_scores.h"
#include "analysis/text_analysis.h"
#include "model/model.h"
#include "model/requantize.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <spdlog/fmt/fmt.h>

namespace {

using nlohmann::ordered_json;

struct AnalysisArgs {
    std::vector<std::string> models;
    std::string file, type = "q8_0", out;
    uint32_t n_ctx = 2048;
    uint32_t chunks = 0; // > 0: llama-perplexity's conventions, chunks of this many tokens
    bool json = false;
    int threads = 0;
    BackendArgs backend;
};

std::string read_text(const std::string& path)
{
    if (path.empty())
        throw engine::Error("give the text with --file F");
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw engine::Error("cannot read " + path);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

void print_json(const ordered_json& j)
{
    fmt::print("{}\n", j.dump(2, ' ', false, ordered_json::error_handler_t::replace));
}

int run_perplexity(const AnalysisArgs& a)
{
    const auto model = engine::Model::load(resolve_model_path(a.models.empty() ? "" : a.models[0]));
    const auto ids = model->tokenizer().encode_ids(read_text(a.file));
    if (a.chunks > 0) {
        auto backend = make_cli_backend(a.backend, model, a.chunks, a.threads);
        const engine::ChunkedScores r = engine::perplexity_in_chunks(*backend, ids, a.chunks);
        if (a.json) {
            print_json({{"perplexity", r.perplexity}, {"n_ctx", r.n_ctx}, {"chunks", r.chunks}, {"scored", r.count}});
            return 0;
        }
        fmt::print("{} tokens, {} chunks of {}, {} scored (llama-perplexity's conventions); perplexity {:.4f}\n",
                   ids.size(), r.chunks, r.n_ctx, r.count, r.perplexity);
        return 0;
    }
    auto backend = make_cli_backend(a.backend, model, a.n_ctx, a.threads);
    const engine::TextAnalysis r = engine::analyze_text(*backend, ids);
    const auto& vocab = model->tokenizer().vocab();
    if (a.json) {
        ordered_json j;
        j["perplexity"] = r.perplexity;
        j["n_tokens"] = ids.size();
        auto& tokens = j["tokens"] = ordered_json::array();
        for (const auto& t : r.predictions)
            tokens.push_back({{"id", t.id},
                              {"piece", vocab.tokens[std::size_t(t.id)]},
                              {"surprisal_bits", t.surprisal_bits},
                              {"rank", t.rank},
                              {"p", t.p},
                              {"entropy_bits", t.entropy_bits}});
        print_json(j);
        return 0;
    }
    fmt::print("{} tokens, {} predicted; perplexity {:.4f}\n", ids.size(), r.predictions.size(), r.perplexity);
    return 0;
}

int run_compare(const AnalysisArgs& a)
{
    if (a.models.size() != 2)
        throw engine::Error("compare takes two models: MODEL_A MODEL_B");
    const auto ma = engine::Model::load(resolve_model_path(a.models[0]));
    const auto mb = engine::Model::load(resolve_model_path(a.models[1]));
    engine::check_same_vocabulary(ma->tokenizer(), mb->tokenizer());
    const auto ids = ma->tokenizer().encode_ids(read_text(a.file));
    if (a.chunks > 0) {
        auto ba = make_cli_backend(a.backend, ma, a.chunks, a.threads);
        auto bb = make_cli_backend(a.backend, mb, a.chunks, a.threads);
        const engine::ChunkedScores r = engine::compare_in_chunks(*ba, *bb, ids, a.chunks);
        if (a.json) {
            print_json({{"mean_kl", r.mean_kl},
                        {"same_top", r.same_top},
                        {"rms_dp", r.rms_dp},
                        {"perplexity_a", r.base_perplexity},
                        {"perplexity_b", r.perplexity},
                        {"n_ctx", r.n_ctx},
                        {"chunks", r.chunks},
                        {"scored", r.count}});
            return 0;
        }
        fmt::print("{} chunks of {}, {} positions scored (llama-perplexity's conventions, A's log-probabilities in 16 "
                   "bits): mean KLD {:.6f}, same top {:.3f}%, RMS Δp {:.3f}%; PPL(A) {:.4f}, PPL(B) {:.4f}\n",
                   r.chunks, r.n_ctx, r.count, r.mean_kl, 100.0 * r.same_top, 100.0 * r.rms_dp, r.base_perplexity,
                   r.perplexity);
        return 0;
    }
    auto ba = make_cli_backend(a.backend, ma, a.n_ctx, a.threads);
    auto bb = make_cli_backend(a.backend, mb, a.n_ctx, a.threads);
    const engine::ModelComparison r = engine::compare_models(*ba, *bb, ids);
    if (a.json) {
        ordered_json j;
        j["mean_kl"] = r.mean_kl;
        j["mean_reverse_kl"] = r.mean_reverse_kl;
        j["same_top"] = r.same_top;
        j["rms_dp"] = r.rms_dp;
        auto& pos = j["positions"] = ordered_json::array();
        for (const auto& c : r.positions)
            pos.push_back({{"id", c.id}, {"kl", c.kl}, {"p_a", c.p_a}, {"p_b", c.p_b}, {"same_top", c.same_top}});
        print_json(j);
        return 0;
    }
    fmt::print("{} positions: mean KLD {:.6f} (reverse {:.6f}), same top {:.2f}%, RMS Δp {:.4f}%\n", r.positions.size(),
               r.mean_kl, r.mean_reverse_kl, 100.0 * r.same_top, 100.0 * r.rms_dp);
    return 0;
}

int run_requantize(const AnalysisArgs& a)
{
    const auto in = resolve_model_path(a.models.empty() ? "" : a.models[0]);
    engine::GgmlType type;
    if (a.type == "q8_0" || a.type == "Q8_0")
        type = engine::GgmlType::Q8_0;
    else if (a.type == "q4_0" || a.type == "Q4_0")
        type = engine::GgmlType::Q4_0;
    else
        throw engine::Error(fmt::format("--type {}: choose q8_0 or q4_0", a.type));
    if (a.out.empty())
        throw engine::Error("give the output file with --out FILE");
    const auto r = engine::requantize_model(in, a.out, type);
    fmt::print("{}: {} tensors requantized to {}, {} kept; {:.1f} MiB → {:.1f} MiB\n", a.out, r.tensors_requantized,
               a.type, r.tensors_kept, double(r.bytes_before) / 1048576.0, double(r.bytes_after) / 1048576.0);
    return 0;
}

// The options perplexity and compare share: the text, how it is read, the output and the backend.
void add_text_options(CLI::App* cmd, AnalysisArgs& a)
{
    cmd->add_option("-f,--file", a.file, "The text")->required();
    cmd->add_option("-c,--ctx", a.n_ctx, "Context: longer texts are read in windows of this many tokens");
    cmd->add_option("--chunks", a.chunks,
                    "N: score as llama-perplexity does (chunks of N tokens from an empty cache, BOS first, the "
                    "second half of each scored) instead of every token");
    cmd->add_flag("--json", a.json, "Print JSON");
    cmd->add_option("-t,--threads", a.threads, "CPU threads (0: all)");
    add_backend_options(cmd, a.backend);
}

} // namespace

CommandRunner add_perplexity_command(CLI::App& app)
{
    auto* cmd =
        app.add_subcommand("perplexity", "Each token of a text's surprisal (bits) and rank, and its perplexity");
    auto a = std::make_shared<AnalysisArgs>();
    cmd->add_option("model", a->models, "MODEL (default: the installed default model)")->expected(0, 1);
    add_text_options(cmd, *a);
    return [a] { return run_perplexity(*a); };
}

CommandRunner add_compare_command(CLI::App& app)
{
    auto* cmd = app.add_subcommand("compare", "Two models or two quantizations on the same text: KL divergence, "
                                              "top-1 agreement and the real token's probability, position by position");
    auto a = std::make_shared<AnalysisArgs>();
    cmd->add_option("models", a->models, "MODEL_A MODEL_B")->expected(2);
    add_text_options(cmd, *a);
    return [a] { return run_compare(*a); };
}

CommandRunner add_requantize_command(CLI::App& app)
{
    auto* cmd = app.add_subcommand("requantize", "Write a Q8_0 or Q4_0 copy of a model (weight matrices requantized)");
    auto a = std::make_shared<AnalysisArgs>();
    cmd->add_option("model", a->models, "MODEL (default: the installed default model)")->expected(0, 1);
    cmd->add_option("--type", a->type, "q8_0 (default) or q4_0");
    cmd->add_option("-o,--out", a->out, "The file to write")->required();
    return [a] { return run_requantize(*a); };
}
