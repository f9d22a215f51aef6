// SPDX-License-Identifier: GPL-3.0-or-later
// The run is built as the engine's run document (engine/run/run_document.h), the one the app's
// stepper, KV, timeline and attention panels save and read.
#include "trace_run.h"

#include "chat/chat_prompt.h"
#include "chat/chat_template.h"
#include "model/memory_plan.h"
#include "model/model.h"
#include "model/model_kind.h"
#include "model/quant_mix.h"
#include "run/run_document.h"
#include "run/run_file.h"
#include "sampling/stop_condition.h"
#include "session/generator.h"
#include "session/stepper.h"
#include "session/stepper_timeline.h"
#include "tokenizer/token_display.h"
#include "util/error.h"
#include "util/sha256.h"

#include <chrono>
#include <ctime>

namespace {

std::vector<engine::run::TokenDoc> tokens_doc(const engine::Tokenizer& tok, const std::vector<engine::TokenId>& ids,
                                              std::size_t prompt_length)
{
    std::vector<engine::run::TokenDoc> out;
    out.reserve(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i)
        out.push_back({ids[i], engine::token_display_text(tok, ids[i]),
                       std::string(engine::token_type_name(tok.vocab().type_of(ids[i]))), i < prompt_length, false,
                       0.0f});
    return out;
}

} // namespace

std::size_t write_trace_run(const std::shared_ptr<const engine::Model>& model, engine::Session& session,
                            engine::Session& attention_session, const TraceRunRequest& r)
{
    const engine::Tokenizer& tok = model->tokenizer();
    const auto& config = model->config();
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<engine::TokenId> prompt = tok.encode_ids(r.prompt);
    const double tokenize_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (prompt.empty())
        throw engine::Error("the prompt has no tokens");

    engine::SamplerConfig sampling = r.sampling;
    sampling.stage_view_size = 64; // as the app's stepper records them
    engine::Stepper stepper(session);
    stepper.start(prompt, engine::StopCondition(tok.vocab().end_of_generation, r.n_predict, r.stop));
    engine::run::Document doc;
    doc.stepper.emplace();
    engine::run::StepperDoc& st = *doc.stepper;
    std::size_t steps = 0;
    while (steps < r.n_predict && stepper.stop_reason() == engine::StopReason::None) {
        const engine::SampleResult preview = stepper.preview(sampling);
        const engine::StepRecord& record = stepper.step(sampling);
        st.distributions[int(record.position)] = preview;
        ++steps;
    }

    const std::vector<engine::TokenId> ids(session.tokens().begin(), session.tokens().end());
    const std::size_t prompt_length = stepper.prompt_length();
    const engine::KvCache& cache = session.backend().kv_cache();
    const engine::KvAccounting kv = cache.accounting();
    const engine::PrefillReport& p = stepper.prefill_report();

    st.tokens = tokens_doc(tok, ids, prompt_length);
    for (const engine::StepRecord& s : stepper.steps())
        if (s.position < st.tokens.size()) {
            st.tokens[s.position].forced = s.forced;
            st.tokens[s.position].probability = s.probability;
        }
    std::vector<int> kv_layer_tokens, layer_window;
    for (const auto& layer : kv.layers)
        kv_layer_tokens.push_back(int(layer.tokens_in_use));
    for (uint32_t w : cache.config().window)
        layer_window.push_back(int(w));
    const bool greedy = sampling.greedy || sampling.temperature <= 0.0f;
    {
        const std::time_t now = std::time(nullptr);
        std::tm utc{};
        gmtime_r(&now, &utc);
        char stamp[32];
        std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &utc);
        doc.saved_at = stamp;
    }
    const engine::ChatStyle chat_style = engine::model_chat_style(*model);
    const engine::ModelKindVerdict kind = engine::model_kind_verdict(model->file());
    const int n_kv_heads = config.n_head_kv.empty() ? 0 : int(config.n_head_kv.front());
    doc.model = engine::run::ModelInfo{r.model_path.filename().string(), // not the folders of this machine
                                       config.name.empty() ? r.model_path.stem().string() : config.name,
                                       config.architecture,
                                       model->parameter_count(),
                                       model->file().file_size(),
                                       engine::quant_mix(*model),
                                       config.n_ctx_train,
                                       cache.config().n_ctx,
                                       session.backend().name(),
                                       0,
                                       engine::chat_style_description(chat_style),
                                       kind.kind == engine::ModelKind::Instruct,
                                       kind.reason,
                                       int(config.n_layer),
                                       engine::sha256_file(r.model_path)};

    st.settings.sampling = sampling;
    st.settings.sampling.temperature = greedy ? 0.8f : sampling.temperature;
    st.settings.sampling.max_tokens = int32_t(r.n_predict);
    st.settings.greedy = greedy;
    st.settings.stop_strings = r.stop;
    st.action = "step";
    st.prompt_length = int(prompt_length);
    st.steps = int(steps);
    st.prefill_computed = int(p.computed);
    st.prefill_reused = int(p.reused);
    st.prefill_batches = int(p.computed ? (p.computed + 127) / 128 : 0);
    st.prefill_ms = p.ms;
    st.n_layers = int(config.n_layer);
    st.n_kv_heads = n_kv_heads;
    st.kv_tokens = int(kv.tokens_cached);
    st.kv_bytes_in_use = kv.bytes_in_use;
    st.kv_layer_tokens = kv_layer_tokens;
    st.layer_window = layer_window;
    st.last_reused = stepper.steps().empty() ? 0 : int(stepper.steps().back().reused);
    st.last_ms = stepper.steps().empty() ? 0.0 : stepper.steps().back().ms;
    st.history.assign(ids.begin(), ids.end());
    st.stop_reason = stepper.stop_reason() == engine::StopReason::None
                         ? std::string()
                         : std::string(engine::stop_reason_name(stepper.stop_reason()));
    st.generated_text = stepper.generated_text();
    st.logits.assign(session.logits().begin(), session.logits().end());

    const engine::BackendMemory memory = session.backend().memory();
    engine::run::KvDoc& k = doc.kv.emplace();
    for (std::size_t l = 0; l < kv.layers.size(); ++l) {
        const auto& a = kv.layers[l];
        k.layers.push_back({int(a.tokens_in_use), int(a.blocks_allocated), int(a.first_stored),
                            int(l < cache.config().window.size() ? cache.config().window[l] : 0), a.bytes_in_use,
                            a.bytes_allocated});
    }
    const int block_tokens = int(cache.config().block_tokens);
    k.source = "stepper";
    k.n_ctx = int(cache.config().n_ctx);
    k.block_tokens = block_tokens;
    k.blocks_per_layer = (k.n_ctx + block_tokens - 1) / std::max(1, block_tokens);
    k.tokens_cached = int(kv.tokens_cached);
    k.prompt_tokens = int(prompt_length);
    k.reused_tokens = int(p.reused);
    k.n_layers = int(config.n_layer);
    k.n_kv_heads = n_kv_heads;
    k.head_dim = int(cache.config().head_dim);
    k.bytes_per_value = 2;
    k.bytes_in_use = kv.bytes_in_use;
    k.bytes_allocated = kv.bytes_allocated;
    k.bytes_per_block = cache.config().n_layer ? cache.bytes_per_block(0) : 0;
    k.weight_bytes = memory.weight_bytes;
    k.device_total = memory.device_total;
    k.device_available = engine::system_memory().available;
    k.device = memory.device;

    // The timeline as the app's stepper draws it.
    const engine::StepperTimeline timeline = engine::stepper_timeline(*model, stepper, tokenize_ms);
    engine::run::TimelineDoc& t = doc.timeline.emplace();
    t.source = "stepper";
    for (const engine::TimelineEvent& e : timeline.events)
        t.events.push_back({int(e.stage), e.step, e.begin_ns, e.end_ns});
    for (const engine::StepperTimelineStep& s : timeline.steps)
        t.steps.push_back({s.token, engine::token_display_text(tok, s.token), s.forward_ms, s.sample_ms, 0.0,
                           s.latency_ms, s.flops, s.bytes_read});
    t.tokenize_ms = tokenize_ms;
    t.prefill_ms = p.ms;
    t.prompt_tokens = int(prompt_length);
    t.prefill_computed = int(p.computed);
    t.prefill_flops = timeline.prefill_flops;
    t.prefill_bytes = timeline.prefill_bytes;
    t.ttft_ms = timeline.ttft_ms;
    t.note = "tokenscope-cli trace: one step after another, as the stepper takes them.";

    if (!r.attention.empty() && ids.size() > 1) {
        // One fresh pass over the sequence but its last token (whose K/V no pass has written yet),
        // all positions in one batch: each head holds the whole query × key matrix.
        const std::vector<engine::TokenId> seen(ids.begin(), ids.end() - 1);
        attention_session.truncate(0);
        const auto a0 = std::chrono::steady_clock::now();
        attention_session.prefill(seen, &r.attention);
        engine::run::AttentionDoc& a = doc.attention.emplace();
        a.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a0).count();
        if (const auto& captures = attention_session.last_captures())
            for (const engine::AttentionCapture& c : captures->attention) {
                a.bytes += (c.weights.size() + c.q.size() + c.k.size() + c.v.size()) * sizeof(float);
                a.heads.push_back({int(c.layer), int(c.head), int(c.kv_head), c.scale, int(c.n_queries),
                                   int(c.head_dim), c.weights, c.q, c.k, c.v});
            }
        for (uint32_t il = 0; il < config.n_layer; ++il) {
            a.heads_per_layer.push_back(int(config.n_head[il]));
            a.kv_heads_per_layer.push_back(int(config.n_head_kv[il]));
        }
        for (engine::TokenId id : seen)
            a.text += tok.token_to_piece(id);
        a.source = "sequence";
        a.tokens = tokens_doc(tok, seen, prompt_length);
        a.n_layers = int(config.n_layer);
        a.window = layer_window;
    }
    engine::run::RunContents contents = engine::run::to_contents(doc, "tokenscope-cli trace");
    engine::run::write_run_file(r.out, contents, &model->file());
    return steps;
}
