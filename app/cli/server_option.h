// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "sampling_option.h"

#include <CLI/CLI.hpp>
#include <string>

// --server URL, --api-key, --server-model and --timeout, for the commands that can run on a model
// served elsewhere (tokenize, generate, chat). The key may come from $TOKENSCOPE_API_KEY instead, which
// keeps it out of the shell's history.
struct ServerArgs {
    std::string url;
    std::string api_key;
    std::string model;
    double timeout_s = 60.0;
    bool used() const { return !url.empty(); }
};

void add_server_options(CLI::App* cmd, ServerArgs& a);

// Each throws engine::Error with the server's problem named (unreachable, 401, no tokenizer, …).
int run_tokenize_on_server(const ServerArgs& server, const std::string& text, bool add_special, bool json,
                           bool ids_only);
int run_generate_on_server(const ServerArgs& server, const std::string& prompt, int32_t n_predict,
                           const engine::SamplingSettings& sampling);
// One chat turn, the template applied by the server; with `json` the reply and its figures as JSON.
int run_chat_on_server(const ServerArgs& server, const std::string& system, const std::string& message,
                       int32_t n_predict, const engine::SamplingSettings& sampling, bool json);
