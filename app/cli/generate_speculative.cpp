// SPDX-License-Identifier: GPL-3.0-or-later
#include "generate_speculative.h"

#include "model/model.h"
#include "session/session.h"
#include "speculative/speculative.h"
#include "util/error.h"

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <spdlog/fmt/fmt.h>

void add_speculate_options(CLI::App* cmd, SpeculateArgs& a)
{
    cmd->add_option("--speculate", a.source,
                    "Speculative decoding (greedy, --temp 0): lookup drafts from n-gram matches in the text so far; "
                    "the plain decode loop runs on the same prompt too, for the speedup")
        ->check(CLI::IsMember({"lookup"}));
    cmd->add_option("--draft-max", a.draft_max, "Tokens drafted at most per step (1 to 64)")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    cmd->add_flag("--json", a.json,
                  "With --speculate: the result as JSON on stdout (tokens, drafted, accepted, speeds)");
}

int run_generate_speculative(const SpeculateArgs& s, const BackendArgs& backend,
                             const std::shared_ptr<const engine::Model>& model, const std::string& prompt,
                             uint32_t n_new, uint32_t n_ctx, int threads, float temperature)
{
    if (temperature > 0.0f)
        throw engine::UnsupportedError("--speculate decodes greedily here: give --temp 0");
    if (n_new == 0)
        throw engine::Error("--speculate needs tokens to generate: give -n 1 or more");
    const auto& tok = model->tokenizer();
    const std::vector<engine::TokenId> ids = tok.encode_ids(prompt);
    using clock = std::chrono::steady_clock;
    const auto seconds = [](clock::time_point a, clock::time_point b) {
        return std::chrono::duration<double>(b - a).count();
    };
    // the plain loop: one token per pass
    engine::Session plain(model, make_cli_backend(backend, model, n_ctx, threads));
    plain.set_batch_invariant(backend.deterministic);
    plain.prefill(ids);
    const auto p0 = clock::now();
    const std::vector<engine::TokenId> plain_tokens = engine::generate_plain_greedy(plain, n_new);
    const double plain_s = seconds(p0, clock::now());
    // speculative
    engine::Session target(model, make_cli_backend(backend, model, n_ctx, threads));
    target.set_batch_invariant(backend.deterministic);
    target.prefill(ids);
    const engine::DraftFn draft = [](std::span<const engine::TokenId> context, uint32_t k) {
        return engine::lookup_draft(context, k);
    };
    const auto s0 = clock::now();
    const engine::SpeculativeResult r = engine::generate_speculative_greedy(target, n_new, s.draft_max, draft);
    const double spec_s = seconds(s0, clock::now());
    // where the output parts from the plain loop (default mode: the verification sums in another order,
    // and once one token differs, what follows it does too)
    int parted = -1;
    for (std::size_t i = 0; i < r.tokens.size() && parted < 0; ++i)
        if (r.tokens[i] != plain_tokens[i])
            parted = int(i);
    const std::string text = tok.decode(r.tokens, {.remove_special = false});
    const double plain_tps = plain_s > 0 ? n_new / plain_s : 0, spec_tps = spec_s > 0 ? n_new / spec_s : 0;
    if (s.json) {
        nlohmann::ordered_json j;
        j["model"] = model->file().name();
        j["source"] = s.source;
        j["draft_max"] = s.draft_max;
        j["deterministic"] = backend.deterministic;
        j["prompt_tokens"] = ids.size();
        j["tokens"] = r.tokens;
        j["text"] = text;
        j["drafted"] = r.drafted;
        j["accepted"] = r.accepted;
        j["acceptance"] = r.acceptance();
        j["passes"] = r.passes;
        j["tokens_per_second"] = spec_tps;
        j["plain_tokens_per_second"] = plain_tps;
        j["speedup"] = plain_tps > 0 ? spec_tps / plain_tps : 0.0;
        j["parts_from_plain_at"] = parted >= 0 ? nlohmann::ordered_json(parted) : nlohmann::ordered_json(nullptr);
        nlohmann::ordered_json steps = nlohmann::ordered_json::array();
        for (const engine::SpeculativeStep& st : r.steps)
            steps.push_back({{"chosen", st.chosen}, {"drafted", st.drafted}, {"accepted", st.accepted}});
        j["steps"] = std::move(steps);
        std::printf("%s\n", j.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
        return 0;
    }
    std::printf("%s%s\n\n", prompt.c_str(), text.c_str());
    std::fprintf(stderr,
                 "speculative (%s, up to %u drafted): %u drafted, %u accepted (%.0f%%), %u passes for %u tokens, "
                 "%.1f tokens/s; plain decode %.1f tokens/s: %.2fx%s\n",
                 s.source.c_str(), s.draft_max, r.drafted, r.accepted, 100.0 * r.acceptance(), r.passes, n_new,
                 spec_tps, plain_tps, plain_tps > 0 ? spec_tps / plain_tps : 0.0,
                 parted >= 0 ? fmt::format("; the output parts from the plain loop's at token {} (default mode: the "
                                           "verification sums in another order; --deterministic makes them equal)",
                                           parted)
                                   .c_str()
                             : "");
    return 0;
}
