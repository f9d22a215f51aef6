// SPDX-License-Identifier: GPL-3.0-or-later
#include "run/run_speculation.h"
#include "run/run_json.h"

#include <spdlog/fmt/fmt.h>

namespace engine::run {

namespace {

using L = SpeculationLimits;

json verdict_json(const DraftVerdict& v)
{
    return {{"token", v.token},
            {"q", num(v.q)},
            {"p", num(v.p)},
            {"target_top", v.target_top},
            {"target_top_p", num(v.target_top_p)},
            {"overlap", num(v.overlap)},
            {"kl", num(v.kl)},
            {"accepted", v.accepted}};
}

std::vector<TokenId> ids_from(const json& array, const std::string& path, int64_t limit)
{
    if (int64_t(array.size()) > limit)
        refuse(path, fmt::format("holds {} tokens, more than the limit of {}", array.size(), limit));
    return int_list(array, path);
}

json choice_json(const TokenChoice& c)
{
    return {{"token", c.token},
            {"best", c.best},
            {"best_logit", num(c.best_logit)},
            {"second", c.second},
            {"second_logit", num(c.second_logit)}};
}

TokenChoice choice_from(const Fields& o)
{
    TokenChoice c;
    c.token = TokenId(o.integer("token", 0, 0));
    c.best = TokenId(o.integer("best", 0, 0));
    c.best_logit = float(o.number("best_logit"));
    c.second = TokenId(o.integer("second", 0, 0));
    c.second_logit = float(o.number("second_logit"));
    return c;
}

} // namespace

json speculation_json(const SpeculationDoc& d)
{
    json steps = json::array();
    for (const SpeculativeStep& s : d.result.steps) {
        json verdicts = json::array();
        for (const DraftVerdict& v : s.acceptance.verdicts)
            verdicts.push_back(verdict_json(v));
        steps.push_back({{"opened", s.opened},
                         {"drafted", s.drafted},
                         {"accepted", s.acceptance.accepted},
                         {"next", s.acceptance.next},
                         {"corrected", s.acceptance.corrected},
                         {"draft_ms", num(s.draft_ms)},
                         {"verify_ms", num(s.verify_ms)},
                         {"verdicts", verdicts}});
    }
    return {{"model", d.model},
            {"drafter", d.drafter},
            {"source", d.source},
            {"backend", d.backend},
            {"deterministic", d.deterministic},
            {"cancelled", d.cancelled},
            {"draft_max", d.draft_max},
            {"temperature", num(d.temperature)},
            {"seed", d.seed},
            {"prompt_text", d.prompt_text},
            {"prompt", d.prompt},
            {"tokens", d.result.tokens},
            {"steps", steps},
            {"plain_tokens", d.plain_tokens},
            {"speculative_s", num(d.speculative_s)},
            {"plain_s", num(d.plain_s)},
            {"parted", d.parted},
            {"at_parting", d.parted >= 0 ? json{{"speculative", choice_json(d.parted_speculative)},
                                                {"plain", choice_json(d.parted_plain)}}
                                         : json::object()}};
}

SpeculationDoc speculation_from(const Fields& o)
{
    SpeculationDoc d;
    d.model = o.string("model");
    d.drafter = o.string("drafter");
    d.source = o.string("source");
    d.backend = o.string("backend");
    d.deterministic = o.boolean("deterministic");
    d.cancelled = o.boolean("cancelled");
    d.draft_max = uint32_t(o.integer("draft_max", 1, 1, L::kDraftMax));
    d.temperature = float(o.number("temperature"));
    d.seed = o.count("seed");
    d.prompt_text = o.string("prompt_text");
    d.prompt = ids_from(o.array("prompt"), o.at("prompt"), L::kPrompt);
    d.result.tokens = ids_from(o.array("tokens"), o.at("tokens"), L::kTokens);
    d.plain_tokens = ids_from(o.array("plain_tokens"), o.at("plain_tokens"), L::kTokens);
    d.speculative_s = o.number("speculative_s");
    d.plain_s = o.number("plain_s");
    d.parted = int32_t(o.integer("parted", -1, -1, L::kTokens));
    if (d.parted >= 0) {
        const Fields at = o.object("at_parting");
        d.parted_speculative = choice_from(at.object("speculative"));
        d.parted_plain = choice_from(at.object("plain"));
    }
    const json& steps = o.array("steps");
    if (int64_t(steps.size()) > L::kTokens)
        refuse(o.at("steps"), fmt::format("holds {} steps, more than the limit of {}", steps.size(), L::kTokens));
    for (std::size_t i = 0; i < steps.size(); ++i) {
        const Fields s(steps[i], fmt::format("{}[{}]", o.at("steps"), i));
        SpeculativeStep step;
        step.opened = TokenId(s.integer("opened", 0, 0));
        step.drafted = ids_from(s.array("drafted"), s.at("drafted"), L::kDraftMax);
        step.acceptance.accepted = uint32_t(s.integer("accepted", 0, 0, L::kDraftMax));
        step.acceptance.next = TokenId(s.integer("next", 0, 0));
        step.acceptance.corrected = s.boolean("corrected");
        step.draft_ms = s.number("draft_ms");
        step.verify_ms = s.number("verify_ms");
        const json& verdicts = s.array("verdicts");
        if (int64_t(verdicts.size()) > L::kDraftMax)
            refuse(s.at("verdicts"), fmt::format("holds {} verdicts, more than {}", verdicts.size(), L::kDraftMax));
        for (std::size_t j = 0; j < verdicts.size(); ++j) {
            const Fields v(verdicts[j], fmt::format("{}[{}]", s.at("verdicts"), j));
            DraftVerdict dv;
            dv.token = TokenId(v.integer("token", 0, 0));
            dv.q = float(v.number("q"));
            dv.p = float(v.number("p"));
            dv.target_top = TokenId(v.integer("target_top", 0, 0));
            dv.target_top_p = float(v.number("target_top_p"));
            dv.overlap = float(v.number("overlap"));
            dv.kl = float(v.number("kl", -1.0));
            dv.accepted = v.boolean("accepted");
            step.acceptance.verdicts.push_back(dv);
        }
        d.result.drafted += uint32_t(step.drafted.size());
        d.result.accepted += step.acceptance.accepted;
        d.result.draft_ms += step.draft_ms;
        d.result.verify_ms += step.verify_ms;
        d.result.steps.push_back(std::move(step));
    }
    d.result.passes = uint32_t(d.result.steps.size());
    return d;
}

} // namespace engine::run
