// SPDX-License-Identifier: GPL-3.0-or-later
#include "session/generator.h"

#include "util/error.h"

#include <chrono>

namespace engine {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// Length of the longest prefix of s that does not end inside a UTF-8 sequence.
std::size_t complete_utf8_prefix(std::string_view s)
{
    std::size_t end = s.size();
    for (std::size_t back = 1; back <= 4 && back <= s.size(); ++back) {
        const auto c = static_cast<unsigned char>(s[s.size() - back]);
        if ((c & 0xC0) == 0x80)
            continue; // continuation byte: keep looking for the lead
        const std::size_t need = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
        if (need > back)
            end = s.size() - back;
        break;
    }
    return end;
}

} // namespace

std::string_view stop_reason_name(StopReason reason)
{
    switch (reason) {
    case StopReason::None: return "none";
    case StopReason::EndOfGeneration: return "end of generation";
    case StopReason::MaxTokens: return "maximum tokens";
    case StopReason::StopString: return "stop string";
    }
    return "?";
}

double GenerationTrace::decode_tokens_per_second() const
{
    double ms = 0.0;
    std::size_t n = 0;
    for (const auto& s : steps)
        if (s.ms > 0.0) {
            ms += s.ms;
            ++n;
        }
    return ms > 0.0 ? 1000.0 * static_cast<double>(n) / ms : 0.0;
}

double GenerationTrace::prefill_tokens_per_second() const
{
    return prefill.ms > 0.0 ? 1000.0 * prefill.computed / prefill.ms : 0.0;
}

GenerationTrace generate(Session& session, Sampler& sampler, std::string_view prompt, const GenerationOptions& options,
                         const TextCallback& on_text)
{
    GenerationTrace trace;
    const Tokenizer& tokenizer = session.model().tokenizer();
    const auto start = Clock::now();
    const std::vector<TokenId> prompt_ids = tokenizer.encode_ids(prompt);
    trace.tokenize_ms = ms_since(start);
    if (prompt_ids.empty())
        throw Error("the prompt is empty: type some text first");
    trace.prompt_tokens = static_cast<uint32_t>(prompt_ids.size());
    trace.prefill = session.prefill(prompt_ids, nullptr, [&](uint32_t done, uint32_t total) {
        if (options.on_prefill_progress)
            options.on_prefill_progress(done, total);
        return !(options.cancel && options.cancel->load());
    });
    if (trace.prefill.cancelled) {
        trace.cancelled = true;
        return trace;
    }

    const StopCondition stop(tokenizer.vocab().end_of_generation, options.max_tokens, options.stop_strings);
    std::string generated;
    std::size_t shown = 0;
    std::vector<TokenId> history = prompt_ids;
    double step_ms = trace.prefill.ms;
    for (uint32_t step = 0;; ++step) {
        if (options.cancel && options.cancel->load()) {
            trace.cancelled = true;
            break;
        }
        const SampleResult r = sampler.sample(session.logits(), history);
        if (step == 0)
            trace.ttft_ms = ms_since(start);
        StepTrace st;
        st.step = step;
        st.token = r.token;
        st.probability = r.probability;
        st.ms = step == 0 ? 0.0 : step_ms;
        if (!r.stages.empty()) {
            const auto& final_view = r.stages.back().top;
            st.top.assign(final_view.begin(), final_view.begin() + std::ptrdiff_t(std::min(options.top_candidates, final_view.size())));
        }
        history.push_back(r.token);
        const bool eog = std::find(tokenizer.vocab().end_of_generation.begin(), tokenizer.vocab().end_of_generation.end(),
                                   r.token) != tokenizer.vocab().end_of_generation.end();
        if (!eog) {
            const auto t0 = Clock::now();
            generated += tokenizer.token_to_piece(r.token, false);
            trace.detokenize_ms += ms_since(t0);
        }
        trace.stop = stop.check(r.token, generated, step + 1);
        const std::size_t visible = trace.stop == StopReason::StopString
                                        ? *stop.stop_string_position(generated)
                                        : complete_utf8_prefix(std::string_view(generated).substr(
                                              0, trace.stop == StopReason::None ? stop.safe_prefix_length(generated)
                                                                                : generated.size()));
        if (visible > shown && on_text)
            on_text(std::string_view(generated).substr(shown, visible - shown));
        shown = std::max(shown, visible);
        if (trace.stop != StopReason::None) {
            st.kv = session.backend().kv_cache().accounting();
            trace.steps.push_back(std::move(st));
            break;
        }
        const auto t0 = Clock::now();
        session.decode(r.token);
        step_ms = ms_since(t0);
        st.kv = session.backend().kv_cache().accounting();
        trace.steps.push_back(std::move(st));
    }
    trace.text = generated.substr(0, shown);
    return trace;
}

} // namespace engine
