// SPDX-License-Identifier: GPL-3.0-or-later
#include "session/generator.h"

#include "util/error.h"

#include <chrono>

namespace engine {

namespace {

using Clock = std::chrono::steady_clock;

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
    case StopReason::None:
        return "none";
    case StopReason::EndOfGeneration:
        return "end of generation";
    case StopReason::MaxTokens:
        return "maximum tokens";
    case StopReason::StopString:
        return "stop string";
    case StopReason::ContextFull:
        return "context full";
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

std::string_view timeline_stage_name(TimelineStage stage)
{
    switch (stage) {
    case TimelineStage::Tokenize:
        return "tokenize";
    case TimelineStage::Prefill:
        return "prefill";
    case TimelineStage::Decode:
        return "decode";
    case TimelineStage::Sample:
        return "sample";
    case TimelineStage::Detokenize:
        return "detokenize";
    case TimelineStage::Draft:
        return "draft";
    case TimelineStage::Verify:
        return "verify";
    }
    return "?";
}

namespace {

// Appends contiguous events: each mark() closes the stretch since the previous mark.
class Timeline {
public:
    explicit Timeline(std::vector<TimelineEvent>& events) : m_events(events), m_start(Clock::now()) {}
    const TimelineEvent& mark(TimelineStage stage, int32_t step)
    {
        const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - m_start).count();
        m_events.push_back({stage, step, m_last, now});
        m_last = now;
        return m_events.back();
    }
    int64_t now_ns() const { return m_last; }

private:
    std::vector<TimelineEvent>& m_events;
    Clock::time_point m_start;
    int64_t m_last = 0;
};

} // namespace

GenerationTrace generate(Session& session, Sampler& sampler, std::string_view prompt, const GenerationOptions& options,
                         const TextCallback& on_text)
{
    GenerationTrace trace;
    Timeline timeline(trace.events);
    const Tokenizer& tokenizer = session.model().tokenizer();
    const std::vector<TokenId> prompt_ids = options.prompt_ids ? *options.prompt_ids : tokenizer.encode_ids(prompt);
    trace.tokenize_ms = timeline.mark(TimelineStage::Tokenize, -1).ms();
    if (prompt_ids.empty())
        throw Error("the prompt is empty: type some text first");
    trace.prompt_tokens = static_cast<uint32_t>(prompt_ids.size());
    trace.prompt_ids = prompt_ids;
    trace.prefill = session.prefill(prompt_ids, options.capture, [&](uint32_t done, uint32_t total) {
        if (options.on_prefill_progress)
            options.on_prefill_progress(done, total);
        return !(options.cancel && options.cancel->load());
    });
    timeline.mark(TimelineStage::Prefill, -1);
    if (trace.prefill.cancelled) {
        trace.cancelled = true;
        return trace;
    }
    if (options.prompt_only) {
        trace.stop = StopReason::MaxTokens; // a budget of none
        return trace;
    }

    const StopCondition stop(tokenizer.vocab().end_of_generation, options.max_tokens, options.stop_strings);
    std::string generated;
    std::size_t shown = 0;
    std::vector<TokenId> history = prompt_ids;
    double forward_ms = 0.0;
    int64_t token_start_ns =
        0; // where this token's latency begins: the generation's start, then the previous token's end
    for (uint32_t step = 0;; ++step) {
        if (options.cancel && options.cancel->load()) {
            trace.cancelled = true;
            break;
        }
        const auto i = static_cast<int32_t>(step);
        const SampleResult r = sampler.sample(session.logits(), history);
        StepTrace st;
        st.step = step;
        st.token = r.token;
        st.probability = r.probability;
        st.ms = forward_ms;
        st.sample_ms = timeline.mark(TimelineStage::Sample, i).ms();
        if (!r.stages.empty()) {
            const auto& final_view = r.stages.back().top;
            st.top.assign(final_view.begin(),
                          final_view.begin() + std::ptrdiff_t(std::min(options.top_candidates, final_view.size())));
        }
        history.push_back(r.token);
        const bool eog =
            std::find(tokenizer.vocab().end_of_generation.begin(), tokenizer.vocab().end_of_generation.end(),
                      r.token) != tokenizer.vocab().end_of_generation.end();
        if (!eog)
            generated += tokenizer.token_to_piece(r.token, false);
        trace.stop = stop.check(r.token, generated, step + 1);
        // The context is a limit too: the token is kept, but no pass could append it.
        if (trace.stop == StopReason::None && session.tokens().size() + 1 > session.backend().kv_cache().config().n_ctx)
            trace.stop = StopReason::ContextFull;
        const std::size_t visible =
            trace.stop == StopReason::StopString
                ? *stop.stop_string_position(generated)
                : complete_utf8_prefix(std::string_view(generated).substr(
                      0, trace.stop == StopReason::None ? stop.safe_prefix_length(generated) : generated.size()));
        if (visible > shown && on_text)
            on_text(std::string_view(generated).substr(shown, visible - shown));
        shown = std::max(shown, visible);
        st.detokenize_ms = timeline.mark(TimelineStage::Detokenize, i).ms();
        trace.detokenize_ms += st.detokenize_ms;
        st.latency_ms = double(timeline.now_ns() - token_start_ns) / 1e6;
        token_start_ns = timeline.now_ns();
        if (step == 0)
            trace.ttft_ms = st.latency_ms;
        st.kv = session.backend().kv_cache().accounting();
        trace.steps.push_back(std::move(st));
        if (trace.stop != StopReason::None) {
            if (options.on_step)
                options.on_step(trace.steps.back(), trace);
            break;
        }
        // The token's own forward pass: its K/V enter the cache and the next token's logits appear.
        // (The on_step callback below runs inside the next sample stretch: keep it short.)
        session.decode(r.token, options.capture);
        forward_ms = timeline.mark(TimelineStage::Decode, i + 1).ms();
        trace.steps.back().kv = session.backend().kv_cache().accounting();
        if (options.on_step)
            options.on_step(trace.steps.back(), trace);
    }
    trace.text = generated.substr(0, shown);
    return trace;
}

} // namespace engine
