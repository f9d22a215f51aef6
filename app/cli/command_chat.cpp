// SPDX-License-Identifier: GPL-3.0-or-later
// `chat [MODEL] MESSAGE`: one chat turn through the model's chat template, built by the same code as
// the chat panel's (engine::build_chat_prompt); prints the reply, or with --json the rendered prompt,
// its tokens and the reply.
#include "backend_option.h"
#include "commands.h"
#include "model_path.h"
#include "sampling_option.h"
#include "server_option.h"

#include "chat/chat_prompt.h"
#include "model/model.h"
#include "model/model_kind.h"
#include "model/model_locator.h"
#include "session/generator.h"
#include "util/error.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <spdlog/fmt/fmt.h>

namespace {

struct ChatArgs {
    std::vector<std::string> positional; // [MODEL] MESSAGE
    std::string model;
    std::string system;
    int32_t n_predict = 256; // -n: see add_n_predict_option
    engine::SamplingSettings sampling;
    int threads = 0;
    uint32_t n_ctx = 4096;
    bool json = false;
    BackendArgs backend;
    ServerArgs server; // a model served elsewhere (--server URL)
};

// The model named, else the chat model when it is installed, else the default model.
std::filesystem::path chat_model_path(const std::string& given)
{
    if (!given.empty())
        return given;
    if (auto chat = engine::find_chat_model())
        return *chat;
    return resolve_model_path("");
}

int run_chat(ChatArgs a)
{
    if (a.positional.size() == 2)
        a.model = a.positional[0];
    const std::string message = a.positional.empty() ? std::string() : a.positional.back();
    if (message.find_first_not_of(" \t\r\n") == std::string::npos)
        throw engine::Error(
            "the message is empty: give one, e.g. tokenscope-cli chat \"What is the capital of France?\"");
    if (a.server.used()) {
        if (!a.model.empty())
            throw engine::Error("give either a MODEL or --server, not both");
        return run_chat_on_server(a.server, a.system, message, a.n_predict, a.sampling, a.json);
    }

    const auto model = engine::Model::load(chat_model_path(a.model));
    const engine::ModelKindVerdict kind = engine::model_kind_verdict(model->file());
    if (kind.kind == engine::ModelKind::Base)
        std::fprintf(stderr,
                     "note: %s is a base model (%s): it continues text rather than answering (the chat model is %s)\n",
                     model->file().name().c_str(), kind.reason.c_str(), engine::kChatModelFileName);

    std::vector<engine::ChatMessage> messages;
    if (!a.system.empty())
        messages.push_back({"system", a.system});
    messages.push_back({"user", message});
    const engine::ChatPrompt chat =
        engine::build_chat_prompt(*model, messages, a.n_ctx, std::max<uint32_t>(16, max_tokens_of(a.n_predict)));
    if (!chat.fit.fits)
        throw engine::Error(chat.fit.notice);

    engine::Session session(model, make_cli_backend(a.backend, model, a.n_ctx, a.threads));
    engine::Sampler sampler(engine::sampler_config(a.sampling));
    engine::GenerationOptions options;
    options.max_tokens = max_tokens_of(a.n_predict);
    options.prompt_only = a.n_predict == 0;
    options.stop_strings = chat.stop_strings;
    const std::vector<engine::TokenId> prompt_ids = chat.ids(); // tokenized once, while the prompt was built
    options.prompt_ids = &prompt_ids;
    const engine::GenerationTrace trace =
        engine::generate(session, sampler, chat.text, options, [&](std::string_view delta) {
            if (!a.json) {
                fmt::print("{}", delta);
                std::fflush(stdout);
            }
        });
    if (!a.json) {
        fmt::print("\n");
        fmt::print(stderr, "{} prompt tokens, {} generated, decode {:.1f} tokens/s; stopped: {}\n", trace.prompt_tokens,
                   trace.steps.size(), trace.decode_tokens_per_second(), engine::stop_reason_name(trace.stop));
        return 0;
    }
    const auto& tok = model->tokenizer();
    nlohmann::ordered_json j;
    j["model"] = model->file().name();
    j["kind"] = engine::model_kind_name(kind.kind);
    j["model_kind"] = engine::model_kind_name(kind.kind);
    j["model_kind_reason"] = kind.reason;
    j["chat_format"] = engine::chat_format_name(chat.style.format);
    j["chat_template"] = engine::chat_style_description(chat.style); // the model's own, or a fixed layout
    j["template_notice"] = chat.template_notice;                     // why not the model's own, else ""
    j["default_system"] = chat.style.default_system;
    j["prompt"] = chat.text;
    auto& tokens = j["prompt_tokens"] = nlohmann::ordered_json::array();
    for (engine::TokenId id : prompt_ids)
        tokens.push_back({{"id", id}, {"piece", tok.token_to_piece(id)}});
    j["reply"] = trace.text;
    j["generated_tokens"] = trace.steps.size();
    j["stop"] = engine::stop_reason_name(trace.stop);
    j["notice"] = chat.fit.notice;
    fmt::print("{}\n", j.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
    return 0;
}

} // namespace

CommandRunner add_chat_command(CLI::App& app)
{
    auto* cmd =
        app.add_subcommand("chat", "One chat turn through the model's chat template (the chat panel's code path); "
                                   "the model defaults to the installed chat model");
    auto a = std::make_shared<ChatArgs>();
    cmd->add_option("args", a->positional, "[MODEL] MESSAGE")->required()->expected(1, 2);
    cmd->add_option("-m,--model", a->model, "GGUF file (default: the chat model, else the default model)");
    cmd->add_option("--system", a->system, "System message (default: none, or the one the model's template adds)");
    add_n_predict_option(cmd, a->n_predict, "Maximum tokens in the reply");
    add_sampling_options(cmd, a->sampling);
    cmd->add_option("-t,--threads", a->threads, "Threads (0: all cores)")->capture_default_str();
    cmd->add_option("-c,--ctx", a->n_ctx, "Context size in tokens")->capture_default_str();
    cmd->add_flag("--json", a->json, "Print the rendered prompt, its tokens and the reply as JSON");
    add_backend_options(cmd, a->backend);
    add_server_options(cmd, a->server);
    return [a] { return run_chat(*a); };
}
