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
                    "Speculative decoding with drafts from: lookup (n-gram matches in the text so far), early-exit:L "
                    "(the model's own first L layers), draft:FILE (a draft model with the same vocabulary); the "
                    "plain decode loop runs on the same prompt and seed too, for the speedup");
    cmd->add_option("--draft-max", a.draft_max, "Tokens drafted at most per step (1 to 64)")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    cmd->add_flag("--json", a.json,
                  "With --speculate: the result as JSON on stdout (tokens, drafted, accepted, per step and position, "
                  "speeds)");
}

namespace {

nlohmann::ordered_json choice_json(const engine::TokenChoice& c)
{
    return {{"token", c.token},
            {"best", c.best},
            {"best_logit", c.best_logit},
            {"second", c.second},
            {"second_logit", c.second_logit}};
}

nlohmann::ordered_json steps_json(const engine::SpeculativeResult& r)
{
    nlohmann::ordered_json steps = nlohmann::ordered_json::array();
    for (const engine::SpeculativeStep& st : r.steps) {
        nlohmann::ordered_json verdicts = nlohmann::ordered_json::array();
        for (const engine::DraftVerdict& v : st.acceptance.verdicts) {
            nlohmann::ordered_json j{{"token", v.token},
                                     {"q", v.q},
                                     {"p", v.p},
                                     {"target_top", v.target_top},
                                     {"target_top_p", v.target_top_p},
                                     {"overlap", v.overlap},
                                     {"accepted", v.accepted}};
            if (v.kl >= 0)
                j["kl"] = v.kl;
            verdicts.push_back(std::move(j));
        }
        steps.push_back({{"opened", st.opened},
                         {"drafted", st.drafted},
                         {"accepted", st.acceptance.accepted},
                         {"next", st.acceptance.next},
                         {"corrected", st.acceptance.corrected},
                         {"verdicts", std::move(verdicts)},
                         {"draft_ms", st.draft_ms},
                         {"verify_ms", st.verify_ms}});
    }
    return steps;
}

} // namespace

int run_generate_speculative(const SpeculateArgs& s, const BackendArgs& backend,
                             const std::shared_ptr<const engine::Model>& model, const std::string& prompt,
                             uint32_t n_new, uint32_t n_ctx, int threads, const engine::SamplingSettings& sampling)
{
    if (n_new == 0)
        throw engine::Error("--speculate needs tokens to generate: give -n 1 or more");
    if (prompt.find_first_not_of(" \t\r\n") == std::string::npos)
        throw engine::Error("the prompt is empty: speculative decoding needs text to continue");
    const engine::DraftSource source = engine::parse_draft_source(s.source);
    const auto& tok = model->tokenizer();
    const std::vector<engine::TokenId> ids = tok.encode_ids(prompt);
    if (ids.empty())
        throw engine::Error("the prompt is empty: speculative decoding needs text to continue");
    engine::SamplerConfig config = engine::sampler_config(sampling);
    config.stage_view_size = 0;
    engine::validate_sampler_config(config);
    const bool greedy = sampling.temperature <= 0.0f;
    const engine::BackendFactory backend_for = [&](std::shared_ptr<const engine::Model> m) {
        return make_cli_backend(backend, std::move(m), n_ctx, threads);
    };
    // the drafter first: a refused draft model or depth stops before anything runs (the early exit
    // drafts on the target's own session and cache)
    engine::Session target(model, backend_for(model));
    std::unique_ptr<engine::Drafter> drafter = engine::make_drafter(source, model, backend_for, config, &target);
    using clock = std::chrono::steady_clock;
    const auto seconds = [](clock::time_point a, clock::time_point b) {
        return std::chrono::duration<double>(b - a).count();
    };
    // the plain loop: one token per pass, the same seed
    engine::Session plain(model, backend_for(model));
    plain.set_batch_invariant(backend.deterministic);
    plain.prefill(ids);
    engine::Sampler plain_sampler(config);
    std::vector<engine::TokenChoice> plain_choices;
    const auto p0 = clock::now();
    const std::vector<engine::TokenId> plain_tokens =
        engine::generate_plain(plain, n_new, plain_sampler, &plain_choices);
    const double plain_s = seconds(p0, clock::now());
    // speculative
    target.set_batch_invariant(backend.deterministic);
    target.prefill(ids);
    engine::Sampler sampler(config);
    const auto s0 = clock::now();
    const engine::SpeculativeResult r =
        engine::generate_speculative(target, n_new, *drafter, sampler, {.draft_max = s.draft_max, .record_kl = s.json});
    const double spec_s = seconds(s0, clock::now());
    // Greedy: where the output parts from the plain loop (default mode: the verification sums in another
    // order, and once one token differs what follows does too). Sampled runs draw differently by design.
    int parted = -1;
    if (greedy)
        for (std::size_t i = 0; i < r.tokens.size() && parted < 0; ++i)
            if (r.tokens[i] != plain_tokens[i])
                parted = int(i);
    const std::string text = tok.decode(r.tokens, {.remove_special = false});
    const double plain_tps = plain_s > 0 ? n_new / plain_s : 0, spec_tps = spec_s > 0 ? n_new / spec_s : 0;
    if (s.json) {
        nlohmann::ordered_json j;
        j["model"] = model->file().name();
        j["source"] = source.text();
        j["drafter"] = drafter->name();
        j["draft_max"] = s.draft_max;
        j["deterministic"] = backend.deterministic;
        j["temperature"] = greedy ? 0.0f : sampling.temperature;
        j["seed"] = sampling.seed;
        j["prompt_tokens"] = ids.size();
        j["tokens"] = r.tokens;
        j["text"] = text;
        j["drafted"] = r.drafted;
        j["accepted"] = r.accepted;
        j["acceptance"] = r.acceptance();
        j["passes"] = r.passes;
        j["draft_ms"] = r.draft_ms;
        j["verify_ms"] = r.verify_ms;
        j["tokens_per_second"] = spec_tps;
        j["plain_tokens_per_second"] = plain_tps;
        j["speedup"] = plain_tps > 0 ? spec_tps / plain_tps : 0.0;
        nlohmann::ordered_json positions = nlohmann::ordered_json::array();
        for (const engine::PositionAcceptance& p : engine::acceptance_by_position(r))
            positions.push_back({{"drafted", p.drafted}, {"accepted", p.accepted}});
        j["acceptance_by_position"] = std::move(positions);
        j["parts_from_plain_at"] = parted >= 0 ? nlohmann::ordered_json(parted) : nlohmann::ordered_json(nullptr);
        if (parted >= 0)
            j["at_parting"] = {{"speculative", choice_json(r.choices[std::size_t(parted)])},
                               {"plain", choice_json(plain_choices[std::size_t(parted)])}};
        j["steps"] = steps_json(r);
        std::printf("%s\n", j.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
        return 0;
    }
    std::printf("%s%s\n\n", prompt.c_str(), text.c_str());
    std::string parting;
    if (parted >= 0) {
        const engine::TokenChoice& a = r.choices[std::size_t(parted)];
        const engine::TokenChoice& b = plain_choices[std::size_t(parted)];
        parting = fmt::format("; the output parts from the plain loop's at token {}: speculative chose {} (logits {} "
                              "{:.6f}, {} {:.6f}), plain {} ({} {:.6f}, {} {:.6f}) — default mode: the verification "
                              "sums in another order; --deterministic makes them equal",
                              parted, a.token, a.best, a.best_logit, a.second, a.second_logit, b.token, b.best,
                              b.best_logit, b.second, b.second_logit);
    }
    std::fprintf(stderr,
                 "speculative (%s, up to %u drafted): %u drafted, %u accepted (%.0f%%), %u passes for %u tokens, "
                 "%.1f tokens/s; plain decode %.1f tokens/s: %.2fx%s\n",
                 drafter->name().c_str(), s.draft_max, r.drafted, r.accepted, 100.0 * r.acceptance(), r.passes, n_new,
                 spec_tps, plain_tps, plain_tps > 0 ? spec_tps / plain_tps : 0.0, parting.c_str());
    return 0;
}
