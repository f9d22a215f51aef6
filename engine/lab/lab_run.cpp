// SPDX-License-Identifier: GPL-3.0-or-later
#include "lab/lab_run.h"

#include "tokenizer/tokenizer.h"
#include "util/error.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <spdlog/fmt/fmt.h>

namespace engine {

LabRun run_fresh(Backend& backend, std::span<const TokenId> tokens, const CaptureRequest* capture,
                 std::span<const Intervention> interventions)
{
    if (tokens.empty())
        throw Error("the prompt is empty: there is nothing to evaluate");
    backend.kv_cache().clear();
    ForwardRequest request;
    request.tokens = tokens;
    request.capture = capture;
    request.interventions = interventions;
    ForwardResult r = backend.forward(request);
    backend.kv_cache().clear();
    return {std::move(r.logits), std::move(r.captures)};
}

TokenId single_token(const Tokenizer& tokenizer, std::string_view text)
{
    const uint32_t n_vocab = uint32_t(tokenizer.vocab().tokens.size());
    if (text.size() > 1 && text.front() == '#') {
        uint32_t id = 0;
        const auto [end, ec] = std::from_chars(text.data() + 1, text.data() + text.size(), id);
        if (ec != std::errc() || end != text.data() + text.size() || id >= n_vocab)
            throw Error(fmt::format("'{}' is not a token id of this model (#0 … #{})", text, n_vocab - 1));
        return TokenId(id);
    }
    const auto ids = tokenizer.encode_ids(text, {.add_special = false, .parse_special = true});
    if (ids.size() != 1) {
        std::string pieces;
        for (TokenId id : ids)
            pieces += fmt::format("{}'{}'", pieces.empty() ? "" : " + ", tokenizer.vocab().tokens[std::size_t(id)]);
        throw Error(fmt::format("'{}' is {} tokens{}{}, not one: choose a single token (or give its id as #N)", text,
                                ids.size(), ids.empty() ? "" : ": ", pieces));
    }
    return ids.front();
}

double log_sum_exp(std::span<const float> logits)
{
    const double m = *std::max_element(logits.begin(), logits.end());
    double s = 0.0;
    for (float l : logits)
        s += std::exp(double(l) - m);
    return m + std::log(s);
}

double kl_divergence(std::span<const float> p, std::span<const float> q)
{
    const double lp = log_sum_exp(p), lq = log_sum_exp(q);
    double kl = 0.0;
    for (std::size_t i = 0; i < p.size(); ++i) {
        const double log_p = double(p[i]) - lp;
        kl += std::exp(log_p) * (log_p - (double(q[i]) - lq));
    }
    return std::max(0.0, kl);
}

} // namespace engine
