// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "backend_option.h"
#include "sampling/sampling_settings.h"

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

namespace engine {
class Model;
}

// `generate --speculate lookup|early-exit:L|draft:FILE --draft-max K [--json]`: speculative decoding
// (greedy at --temp 0, the rejection rule otherwise) beside the plain decode loop on the same prompt and
// seed (the measured speedup); --json on stdout.
struct SpeculateArgs {
    std::string source; // empty: off
    uint32_t draft_max = 8;
    bool json = false;
    bool used() const { return !source.empty(); }
};

void add_speculate_options(CLI::App* cmd, SpeculateArgs& a);
int run_generate_speculative(const SpeculateArgs& s, const BackendArgs& backend,
                             const std::shared_ptr<const engine::Model>& model, const std::string& prompt,
                             uint32_t n_new, uint32_t n_ctx, int threads, const engine::SamplingSettings& sampling);
