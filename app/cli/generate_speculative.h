// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "backend_option.h"

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

namespace engine {
class Model;
}

// `generate --speculate lookup --draft-max K [--json]`: greedy speculative decoding with prompt-lookup
// drafts, beside the plain decode loop on the same prompt (the measured speedup); --json on stdout.
struct SpeculateArgs {
    std::string source; // empty: off; "lookup"
    uint32_t draft_max = 8;
    bool json = false;
    bool used() const { return !source.empty(); }
};

void add_speculate_options(CLI::App* cmd, SpeculateArgs& a);
int run_generate_speculative(const SpeculateArgs& s, const BackendArgs& backend,
                             const std::shared_ptr<const engine::Model>& model, const std::string& prompt,
                             uint32_t n_new, uint32_t n_ctx, int threads, float temperature);
