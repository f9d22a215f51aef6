// SPDX-License-Identifier: GPL-3.0-or-later
// `tokenize [MODEL] TEXT | --file F`: the pieces, ids and byte spans of a text.
#include "commands.h"
#include "model_path.h"
#include "server_option.h"
#include "token_print.h"

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <spdlog/fmt/fmt.h>
#include <sstream>

namespace {

struct TokenizeArgs {
    std::vector<std::string> positional;
    std::string model;
    std::string file;
    bool json = false;
    bool ids_only = false;
    bool no_special = false;
    bool no_parse_special = false;
    ServerArgs server;
};

int run_tokenize(const TokenizeArgs& a)
{
    std::string model = a.model, text;
    std::vector<std::string> pos = a.positional;
    const bool have_file = !a.file.empty();
    if (model.empty() && (pos.size() == 2 || (pos.size() == 1 && have_file))) {
        model = pos.front();
        pos.erase(pos.begin());
    }
    if (have_file) {
        if (!pos.empty())
            throw engine::Error("give the text either as an argument or with --file, not both");
        std::ifstream in(a.file, std::ios::binary);
        if (!in)
            throw engine::Error("cannot read " + a.file);
        std::ostringstream ss;
        ss << in.rdbuf();
        text = ss.str();
    } else if (pos.size() == 1) {
        text = pos.front();
    } else {
        throw engine::Error("nothing to tokenize: give a TEXT argument or --file F");
    }

    if (a.server.used()) {
        if (!model.empty())
            throw engine::Error("give either a MODEL or --server, not both");
        return run_tokenize_on_server(a.server, text, !a.no_special, a.json, a.ids_only);
    }
    const auto path = resolve_model_path(model);
    const auto file = engine::gguf::GgufFile::open(path);
    const engine::Tokenizer tokenizer(engine::Vocab::from_gguf(*file));
    const auto tokens = tokenizer.encode(text, {.add_special = !a.no_special, .parse_special = !a.no_parse_special});

    if (a.ids_only) {
        fmt::print("{}\n", ids_list(tokens, [](const auto& t) { return t.id; }));
        return 0;
    }
    if (a.json) {
        nlohmann::ordered_json j;
        j["model"] = path.string();
        j["count"] = tokens.size();
        auto& arr = j["tokens"] = nlohmann::ordered_json::array();
        for (const auto& t : tokens) {
            arr.push_back({{"id", t.id},
                           {"piece", tokenizer.vocab().tokens[static_cast<std::size_t>(t.id)]},
                           {"type", engine::token_type_name(tokenizer.vocab().type_of(t.id))},
                           {"begin", t.byte_begin},
                           {"end", t.byte_end}});
        }
        // Token texts and pieces may hold invalid UTF-8 (byte tokens): replace rather than throw.
        fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
        return 0;
    }
    fmt::print("{} tokens, {} bytes\n", tokens.size(), text.size());
    fmt::print("{:>5} {:>8}  {:<24} {:<13} {}\n", "#", "id", "piece", "bytes", "text");
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        const auto& t = tokens[i];
        fmt::print("{:>5} {:>8}  {:<24} [{}, {})  {}\n", i, t.id,
                   escape_controls(tokenizer.vocab().tokens[static_cast<std::size_t>(t.id)]), t.byte_begin, t.byte_end,
                   escape_controls(text.substr(t.byte_begin, t.byte_end - t.byte_begin)));
    }
    return 0;
}

} // namespace

CommandRunner add_tokenize_command(CLI::App& app)
{
    auto* cmd = app.add_subcommand("tokenize", "Split a text into tokens: pieces, ids and byte spans");
    auto a = std::make_shared<TokenizeArgs>();
    cmd->add_option("args", a->positional, "[MODEL] TEXT (MODEL defaults to the installed default model)")
        ->expected(0, 2);
    cmd->add_option("-m,--model", a->model, "GGUF file");
    cmd->add_option("-f,--file", a->file, "Read the text from a file (bytes as they are)");
    cmd->add_flag("--json", a->json, "Print JSON");
    cmd->add_flag("--ids", a->ids_only, "Print only the ids, as [1, 2, 3] (the form llama-tokenize --ids prints)");
    cmd->add_flag("--no-special", a->no_special, "Do not add BOS/EOS");
    cmd->add_flag("--no-parse-special", a->no_parse_special, "Treat control-token strings in the text as plain text");
    add_server_options(cmd, a->server);
    return [a] { return run_tokenize(*a); };
}
