// SPDX-License-Identifier: GPL-3.0-or-later
// The document written here follows the README's "Saved runs" schema, field for field what the
// app's stepper, KV, timeline and attention panels save (ui/storage/run_document.cpp reads both).
#include "trace_run.h"

#include "chat/chat_prompt.h"
#include "chat/chat_template.h"
#include "model/memory_plan.h"
#include "model/model.h"
#include "model/model_kind.h"
#include "model/quant_mix.h"
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
#include <nlohmann/json.hpp>

namespace {

using json = nlohmann::ordered_json;

json tokens_json(const engine::Tokenizer& tok, const std::vector<engine::TokenId>& ids, std::size_t prompt_length)
{
    json out = json::array();
    for (std::size_t i = 0; i < ids.size(); ++i)
        out.push_back({{"id", ids[i]},
                       {"text", engine::token_display_text(tok, ids[i])},
                       {"type", std::string(engine::token_type_name(tok.vocab().type_of(ids[i])))},
                       {"prompt", i < prompt_length},
                       {"forced", false},
                       {"probability", 0.0}});
    return out;
}

json sample_json(const engine::SampleResult& r)
{
    json stages = json::array();
    for (const auto& s : r.stages) {
        json top = json::array();
        for (const auto& c : s.top)
            top.push_back({c.id, c.logit, c.probability});
        stages.push_back({{"name", s.name}, {"applied", s.applied}, {"survivors", s.survivors}, {"top", top}});
    }
    return {{"token", r.token}, {"probability", r.probability}, {"stages", stages}};
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
    json distributions = json::array();
    std::size_t steps = 0;
    while (steps < r.n_predict && stepper.stop_reason() == engine::StopReason::None) {
        const engine::SampleResult preview = stepper.preview(sampling);
        const engine::StepRecord& record = stepper.step(sampling);
        json d = sample_json(preview);
        d["position"] = record.position;
        distributions.push_back(std::move(d));
        ++steps;
    }

    const std::vector<engine::TokenId> ids(session.tokens().begin(), session.tokens().end());
    const std::size_t prompt_length = stepper.prompt_length();
    const engine::KvCache& cache = session.backend().kv_cache();
    const engine::KvAccounting kv = cache.accounting();
    const engine::PrefillReport& p = stepper.prefill_report();

    json tokens = tokens_json(tok, ids, prompt_length);
    for (const engine::StepRecord& s : stepper.steps())
        if (s.position < tokens.size()) {
            tokens[s.position]["forced"] = s.forced;
            tokens[s.position]["probability"] = s.probability;
        }
    std::vector<int> kv_layer_tokens, layer_window;
    for (const auto& layer : kv.layers)
        kv_layer_tokens.push_back(int(layer.tokens_in_use));
    for (uint32_t w : cache.config().window)
        layer_window.push_back(int(w));
    const bool greedy = sampling.greedy || sampling.temperature <= 0.0f;
    json doc;
    doc["format"] = engine::run::kFormatVersion;
    {
        const std::time_t now = std::time(nullptr);
        std::tm utc{};
        gmtime_r(&now, &utc);
        char stamp[32];
        std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &utc);
        doc["saved_at"] = stamp;
    }
    const std::string name = config.name.empty() ? r.model_path.stem().string() : config.name;
    engine::run::RunContents contents;
    contents.model = {r.model_path.filename().string(), config.architecture, engine::sha256_file(r.model_path),
                      model->file().file_size()};
    const engine::ChatStyle chat_style = engine::model_chat_style(*model);
    const engine::ModelKindVerdict kind = engine::model_kind_verdict(model->file());
    doc["model"] = {{"path", r.model_path.filename().string()}, // not the folders of this machine
                    {"name", name},
                    {"architecture", config.architecture},
                    {"parameters", model->parameter_count()},
                    {"file_size", model->file().file_size()},
                    {"quant_types", engine::quant_mix(*model)},
                    {"context_length", config.n_ctx_train},
                    {"n_ctx", cache.config().n_ctx},
                    {"backend", session.backend().name()},
                    {"threads", 0},
                    {"chat_format", engine::chat_style_description(chat_style)},
                    {"instruction_tuned", kind.kind == engine::ModelKind::Instruct},
                    {"model_kind_reason", kind.reason},
                    {"n_layers", config.n_layer},
                    {"sha256", contents.model.sha256}};
    json stop_strings = json::array();
    for (const auto& s : r.stop)
        stop_strings.push_back(s);
    const std::vector<float> logits(session.logits().begin(), session.logits().end());
    contents.arrays.push_back({"stepper.logits", false, {logits.size()}, logits});
    std::string generated_text = stepper.generated_text();
    doc["stepper"] = {{"settings",
                       {{"sampling",
                         {{"temperature", greedy ? 0.8f : sampling.temperature},
                          {"top_k", sampling.top_k},
                          {"top_p", sampling.top_p},
                          {"min_p", sampling.min_p},
                          {"repeat_penalty", sampling.repeat_penalty},
                          {"seed", std::to_string(sampling.seed)},
                          {"max_tokens", r.n_predict}}},
                        {"greedy", greedy},
                        {"stop_strings", stop_strings},
                        {"logit_lens", false},
                        {"lens_top", 5}}},
                      {"action", "step"},
                      {"tokens", tokens},
                      {"prompt_length", prompt_length},
                      {"steps", steps},
                      {"prefill_computed", p.computed},
                      {"prefill_reused", p.reused},
                      {"prefill_batches", p.computed ? (p.computed + 127) / 128 : 0},
                      {"prefill_ms", p.ms},
                      {"n_layers", config.n_layer},
                      {"n_kv_heads", config.n_head_kv.empty() ? 0 : config.n_head_kv.front()},
                      {"kv_tokens", kv.tokens_cached},
                      {"kv_bytes_in_use", kv.bytes_in_use},
                      {"kv_layer_tokens", kv_layer_tokens},
                      {"layer_window", layer_window},
                      {"last_reused", stepper.steps().empty() ? 0 : stepper.steps().back().reused},
                      {"last_ms", stepper.steps().empty() ? 0.0 : stepper.steps().back().ms},
                      {"history", ids},
                      {"lens", json::array()},
                      {"branches", json::array()},
                      {"stop_reason", stepper.stop_reason() == engine::StopReason::None
                                          ? std::string()
                                          : std::string(engine::stop_reason_name(stepper.stop_reason()))},
                      {"generated_text", generated_text},
                      {"distributions", distributions},
                      {"logits", "stepper.logits"}};

    const engine::BackendMemory memory = session.backend().memory();
    json layers = json::array();
    for (std::size_t l = 0; l < kv.layers.size(); ++l) {
        const auto& a = kv.layers[l];
        layers.push_back({{"tokens_in_use", a.tokens_in_use},
                          {"blocks", a.blocks_allocated},
                          {"first_stored", a.first_stored},
                          {"window", l < cache.config().window.size() ? cache.config().window[l] : 0},
                          {"bytes_in_use", a.bytes_in_use},
                          {"bytes_allocated", a.bytes_allocated}});
    }
    const int block_tokens = int(cache.config().block_tokens);
    doc["kv"] = {{"source", "stepper"},
                 {"n_ctx", cache.config().n_ctx},
                 {"block_tokens", block_tokens},
                 {"blocks_per_layer", (int(cache.config().n_ctx) + block_tokens - 1) / std::max(1, block_tokens)},
                 {"tokens_cached", kv.tokens_cached},
                 {"prompt_tokens", prompt_length},
                 {"reused_tokens", p.reused},
                 {"n_layers", config.n_layer},
                 {"n_kv_heads", config.n_head_kv.empty() ? 0 : config.n_head_kv.front()},
                 {"head_dim", cache.config().head_dim},
                 {"bytes_per_value", 2},
                 {"bytes_in_use", kv.bytes_in_use},
                 {"bytes_allocated", kv.bytes_allocated},
                 {"bytes_per_block", cache.config().n_layer ? cache.bytes_per_block(0) : 0},
                 {"weight_bytes", memory.weight_bytes},
                 {"device_total", memory.device_total},
                 {"device_available", engine::system_memory().available},
                 {"device", memory.device},
                 {"layers", layers}};

    // The timeline as the app's stepper draws it.
    const engine::StepperTimeline timeline = engine::stepper_timeline(*model, stepper, tokenize_ms);
    json events = json::array(), timeline_steps = json::array();
    for (const engine::TimelineEvent& e : timeline.events)
        events.push_back({int(e.stage), e.step, e.begin_ns, e.end_ns});
    for (const engine::StepperTimelineStep& s : timeline.steps)
        timeline_steps.push_back({{"token", s.token},
                                  {"text", engine::token_display_text(tok, s.token)},
                                  {"forward_ms", s.forward_ms},
                                  {"sample_ms", s.sample_ms},
                                  {"detokenize_ms", 0.0},
                                  {"latency_ms", s.latency_ms},
                                  {"flops", s.flops},
                                  {"bytes_read", s.bytes_read}});
    doc["timeline"] = {{"source", "stepper"},
                       {"events", events},
                       {"steps", timeline_steps},
                       {"tokenize_ms", tokenize_ms},
                       {"prefill_ms", p.ms},
                       {"prompt_tokens", prompt_length},
                       {"prefill_computed", p.computed},
                       {"prefill_flops", timeline.prefill_flops},
                       {"prefill_bytes", timeline.prefill_bytes},
                       {"ttft_ms", timeline.ttft_ms},
                       {"note", "tokenscope-cli trace: one step after another, as the stepper takes them."}};

    if (!r.attention.empty() && ids.size() > 1) {
        // One fresh pass over the sequence but its last token (whose K/V no pass has written yet),
        // all positions in one batch: each head holds the whole query × key matrix.
        const std::vector<engine::TokenId> seen(ids.begin(), ids.end() - 1);
        attention_session.truncate(0);
        const auto a0 = std::chrono::steady_clock::now();
        attention_session.prefill(seen, &r.attention);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a0).count();
        json heads = json::array();
        uint64_t bytes = 0;
        if (const auto& captures = attention_session.last_captures())
            for (const engine::AttentionCapture& c : captures->attention) {
                const std::string base = "attention." + std::to_string(c.layer) + "." + std::to_string(c.head);
                const uint64_t n = c.n_queries, d = c.head_dim;
                contents.arrays.push_back({base + ".weights", true, {n, n}, c.weights});
                contents.arrays.push_back({base + ".q", true, {n, d}, c.q});
                contents.arrays.push_back({base + ".k", true, {n, d}, c.k});
                contents.arrays.push_back({base + ".v", true, {n, d}, c.v});
                bytes += (c.weights.size() + c.q.size() + c.k.size() + c.v.size()) * sizeof(float);
                heads.push_back({{"layer", c.layer},
                                 {"head", c.head},
                                 {"kv_head", c.kv_head},
                                 {"scale", c.scale},
                                 {"n", n},
                                 {"head_dim", d},
                                 {"weights", base + ".weights"},
                                 {"q", base + ".q"},
                                 {"k", base + ".k"},
                                 {"v", base + ".v"}});
            }
        std::vector<int> heads_per_layer, kv_heads_per_layer;
        for (uint32_t il = 0; il < config.n_layer; ++il) {
            heads_per_layer.push_back(int(config.n_head[il]));
            kv_heads_per_layer.push_back(int(config.n_head_kv[il]));
        }
        std::string text;
        for (engine::TokenId id : seen)
            text += tok.token_to_piece(id);
        doc["attention"] = {{"source", "sequence"},
                            {"text", text},
                            {"tokens", tokens_json(tok, seen, prompt_length)},
                            {"n_layers", config.n_layer},
                            {"heads_per_layer", heads_per_layer},
                            {"kv_heads_per_layer", kv_heads_per_layer},
                            {"window", layer_window},
                            {"bytes", bytes},
                            {"ms", ms},
                            {"heads", heads}};
    }
    contents.writer = "tokenscope-cli trace";
    contents.document = doc.dump(-1, ' ', false, json::error_handler_t::replace);
    engine::run::write_run_file(r.out, contents, &model->file());
    return steps;
}
