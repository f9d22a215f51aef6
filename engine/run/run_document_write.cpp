// SPDX-License-Identifier: GPL-3.0-or-later
// Document → the run file's JSON and tensors (the README's "Saved runs" schema).
#include "run/run_document.h"
#include "run/run_json.h"

namespace engine::run {

namespace {

json ints(const std::vector<int>& v)
{
    return json(v);
}
json doubles(const std::vector<double>& v)
{
    json a = json::array();
    for (double x : v)
        a.push_back(num(x));
    return a;
}
json grid(const std::vector<std::vector<double>>& g)
{
    json a = json::array();
    for (const auto& row : g)
        a.push_back(doubles(row));
    return a;
}

// Bulk numbers become the file's tensors; the document names them (an empty array is not stored).
struct ArrayOut {
    std::vector<RunArray>& out;
    json put(const std::string& name, bool f16, std::vector<uint64_t> dims, const std::vector<float>& values)
    {
        if (values.empty())
            return "";
        out.push_back({name, f16, std::move(dims), values});
        return name;
    }
};

json model_json(const ModelInfo& m)
{
    return {{"path", m.path},
            {"name", m.name},
            {"architecture", m.architecture},
            {"parameters", m.parameters},
            {"file_size", m.file_size},
            {"quant_types", m.quant_types},
            {"context_length", m.context_length},
            {"n_ctx", m.n_ctx},
            {"backend", m.backend},
            {"threads", m.threads},
            {"chat_format", m.chat_format},
            {"instruction_tuned", m.instruction_tuned},
            {"model_kind_reason", m.model_kind_reason},
            {"n_layers", m.n_layers},
            {"sha256", m.sha256}};
}

json tokens_json(const std::vector<TokenDoc>& tokens)
{
    json a = json::array();
    for (const auto& t : tokens)
        a.push_back({{"id", t.id},
                     {"text", t.text},
                     {"type", t.type},
                     {"prompt", t.prompt},
                     {"forced", t.forced},
                     {"probability", num(t.probability)}});
    return a;
}

// A distribution with its sampling stages: candidates as [id, logit, probability].
json sample_json(const SampleResult& r)
{
    json stages = json::array();
    for (const auto& s : r.stages) {
        json top = json::array();
        for (const auto& c : s.top)
            top.push_back({c.id, num(c.logit), num(c.probability)});
        stages.push_back({{"name", s.name}, {"applied", s.applied}, {"survivors", s.survivors}, {"top", top}});
    }
    return {{"token", r.token}, {"probability", num(r.probability)}, {"stages", stages}};
}

json stepper_json(const StepperDoc& s, ArrayOut& arrays)
{
    const SamplingSettings& c = s.settings.sampling;
    json settings = {{"sampling",
                      {{"temperature", num(c.temperature)},
                       {"top_k", c.top_k},
                       {"top_p", num(c.top_p)},
                       {"min_p", num(c.min_p)},
                       {"repeat_penalty", num(c.repeat_penalty)},
                       {"seed", std::to_string(c.seed)},
                       {"max_tokens", c.max_tokens}}},
                     {"greedy", s.settings.greedy},
                     {"stop_strings", s.settings.stop_strings},
                     {"logit_lens", s.settings.logit_lens},
                     {"lens_top", s.settings.lens_top}};
    json lens = json::array();
    for (const auto& layer : s.lens) {
        json row = json::array();
        for (const auto& x : layer)
            row.push_back({{"id", x.id}, {"text", x.text}, {"p", num(x.probability)}});
        lens.push_back(std::move(row));
    }
    json distributions = json::array();
    for (const auto& [position, r] : s.distributions) {
        json o = sample_json(r);
        o["position"] = position;
        distributions.push_back(std::move(o));
    }
    json o = {{"settings", settings},
              {"action", s.action},
              {"tokens", tokens_json(s.tokens)},
              {"prompt_length", s.prompt_length},
              {"steps", s.steps},
              {"prefill_computed", s.prefill_computed},
              {"prefill_reused", s.prefill_reused},
              {"prefill_batches", s.prefill_batches},
              {"prefill_ms", num(s.prefill_ms)},
              {"n_layers", s.n_layers},
              {"n_kv_heads", s.n_kv_heads},
              {"kv_tokens", s.kv_tokens},
              {"kv_bytes_in_use", s.kv_bytes_in_use},
              {"kv_layer_tokens", ints(s.kv_layer_tokens)},
              {"layer_window", ints(s.layer_window)},
              {"last_reused", s.last_reused},
              {"last_ms", num(s.last_ms)},
              {"history", ints(s.history)},
              {"lens", lens},
              {"branches", s.branches},
              {"stop_reason", s.stop_reason},
              {"generated_text", s.generated_text},
              {"distributions", distributions}};
    if (!s.logits.empty())
        o["logits"] = arrays.put("stepper.logits", false, {s.logits.size()}, s.logits);
    return o;
}

json kv_json(const KvDoc& k)
{
    json layers = json::array();
    for (const auto& l : k.layers)
        layers.push_back({{"tokens_in_use", l.tokens_in_use},
                          {"blocks", l.blocks},
                          {"first_stored", l.first_stored},
                          {"window", l.window},
                          {"bytes_in_use", l.bytes_in_use},
                          {"bytes_allocated", l.bytes_allocated}});
    return {{"source", k.source},
            {"n_ctx", k.n_ctx},
            {"block_tokens", k.block_tokens},
            {"blocks_per_layer", k.blocks_per_layer},
            {"tokens_cached", k.tokens_cached},
            {"prompt_tokens", k.prompt_tokens},
            {"reused_tokens", k.reused_tokens},
            {"n_layers", k.n_layers},
            {"n_kv_heads", k.n_kv_heads},
            {"head_dim", k.head_dim},
            {"bytes_per_value", k.bytes_per_value},
            {"cache_types", k.cache_types},
            {"bytes_in_use", k.bytes_in_use},
            {"bytes_allocated", k.bytes_allocated},
            {"bytes_per_block", k.bytes_per_block},
            {"weight_bytes", k.weight_bytes},
            {"device_total", k.device_total},
            {"device_available", k.device_available},
            {"device", k.device},
            {"layers", layers}};
}

json timeline_json(const TimelineDoc& t)
{
    json events = json::array();
    for (const auto& e : t.events)
        events.push_back({e.stage, e.step, e.begin_ns, e.end_ns});
    json steps = json::array();
    for (const auto& s : t.steps)
        steps.push_back({{"token", s.token},
                         {"text", s.text},
                         {"forward_ms", num(s.forward_ms)},
                         {"sample_ms", num(s.sample_ms)},
                         {"detokenize_ms", num(s.detokenize_ms)},
                         {"latency_ms", num(s.latency_ms)},
                         {"flops", num(s.flops)},
                         {"bytes_read", num(s.bytes_read)}});
    return {{"source", t.source},
            {"events", events},
            {"steps", steps},
            {"tokenize_ms", num(t.tokenize_ms)},
            {"prefill_ms", num(t.prefill_ms)},
            {"prompt_tokens", t.prompt_tokens},
            {"prefill_computed", t.prefill_computed},
            {"prefill_flops", num(t.prefill_flops)},
            {"prefill_bytes", num(t.prefill_bytes)},
            {"ttft_ms", num(t.ttft_ms)},
            {"note", t.note},
            {"remote", t.remote},
            {"server", t.server},
            {"server_prompt_ms", num(t.server_prompt_ms)},
            {"server_generation_ms", num(t.server_generation_ms)},
            {"server_generated", t.server_generated},
            {"server_drafted", t.server_drafted},
            {"server_draft_accepted", t.server_draft_accepted},
            {"total_ms", num(t.total_ms)}};
}

json attention_json(const AttentionDoc& a, ArrayOut& arrays)
{
    json heads = json::array();
    for (const auto& h : a.heads) {
        const std::string base = "attention." + std::to_string(h.layer) + "." + std::to_string(h.head);
        const auto n = uint64_t(h.n), d = uint64_t(h.head_dim);
        heads.push_back({{"layer", h.layer},
                         {"head", h.head},
                         {"kv_head", h.kv_head},
                         {"scale", num(h.scale)},
                         {"n", h.n},
                         {"head_dim", h.head_dim},
                         {"weights", arrays.put(base + ".weights", true, {n, n}, h.weights)},
                         {"q", arrays.put(base + ".q", true, {n, d}, h.q)},
                         {"k", arrays.put(base + ".k", true, {n, d}, h.k)},
                         {"v", arrays.put(base + ".v", true, {n, d}, h.v)}});
        if (h.softcap != 0.0f)
            heads.back()["softcap"] = num(h.softcap);
    }
    return {{"source", a.source},
            {"text", a.text},
            {"tokens", tokens_json(a.tokens)},
            {"n_layers", a.n_layers},
            {"heads_per_layer", ints(a.heads_per_layer)},
            {"kv_heads_per_layer", ints(a.kv_heads_per_layer)},
            {"window", ints(a.window)},
            {"bytes", a.bytes},
            {"ms", num(a.ms)},
            {"heads", heads}};
}

json text_json(const TextAnalysisDoc& t)
{
    json tokens = json::array();
    for (const auto& k : t.tokens) {
        json top = json::array(), candidates = json::array();
        for (const auto& [text, p] : k.top)
            top.push_back({text, num(p)});
        for (const auto& c : k.candidates)
            candidates.push_back({c.id, c.text, num(c.p_a), num(c.p_b)});
        tokens.push_back({{"id", k.id},
                          {"text", k.text},
                          {"predicted", k.predicted},
                          {"p", num(k.p)},
                          {"surprisal_bits", num(k.surprisal_bits)},
                          {"entropy_bits", num(k.entropy_bits)},
                          {"rank", k.rank},
                          {"top", top},
                          {"kl", num(k.kl)},
                          {"reverse_kl", num(k.reverse_kl)},
                          {"p_b", num(k.p_b)},
                          {"same_top", k.same_top},
                          {"candidates", candidates}});
    }
    return {{"model_a", t.model_a},
            {"model_b", t.model_b},
            {"window", t.window},
            {"tokens", tokens},
            {"perplexity", num(t.perplexity)},
            {"mean_kl", num(t.mean_kl)},
            {"same_top", num(t.same_top)},
            {"rms_dp", num(t.rms_dp)},
            {"compared", t.compared},
            {"cancelled", t.cancelled},
            {"ms", num(t.ms)}};
}

json patching_json(const PatchingDoc& p)
{
    return {{"settings",
             {{"clean", p.clean},
              {"corrupted", p.corrupted},
              {"metric", p.metric},
              {"token_a", p.settings_token_a},
              {"token_b", p.settings_token_b},
              {"over", p.over}}},
            {"clean_pieces", p.clean_pieces},
            {"corrupted_pieces", p.corrupted_pieces},
            {"token_a", p.token_a},
            {"token_b", p.token_b},
            {"metric_name", p.metric_name},
            {"over_name", p.over_name},
            {"backend", p.backend},
            {"n_layers", p.n_layers},
            {"n_columns", p.n_columns},
            {"effect", grid(p.effect)},
            {"raw", grid(p.raw)},
            {"clean_metric", num(p.clean_metric)},
            {"corrupted_metric", num(p.corrupted_metric)},
            {"runs", p.runs},
            {"cancelled", p.cancelled},
            {"ms", num(p.ms)}};
}

json attribution_json(const AttributionDoc& a)
{
    json parts = json::array();
    for (const auto& p : a.parts)
        parts.push_back(
            {{"kind", p.kind}, {"name", p.name}, {"layer", p.layer}, {"head", p.head}, {"value", num(p.value)}});
    return {{"token", a.token},       {"versus", a.versus},    {"token_id", a.token_id},
            {"position", a.position}, {"logit", num(a.logit)}, {"final_norm_scale", num(a.final_norm_scale)},
            {"parts", parts},         {"backend", a.backend},  {"ms", num(a.ms)}};
}

json heads_json(const HeadsDoc& h)
{
    json heads = json::array();
    for (const auto& i : h.heads)
        heads.push_back({{"layer", i.layer},
                         {"head", i.head},
                         {"class", i.cls},
                         {"scores", doubles(i.scores)},
                         {"entropy", num(i.entropy)},
                         {"kl", num(i.kl)},
                         {"logit_change", num(i.logit_change)}});
    return {{"kind", h.kind},   {"n_layers", h.n_layers}, {"n_heads", h.n_heads},     {"heads", heads},
            {"token", h.token}, {"runs", h.runs},         {"cancelled", h.cancelled}, {"ms", num(h.ms)}};
}

json candidates_json(const std::vector<CandidateDoc>& v)
{
    json a = json::array();
    for (const auto& c : v)
        a.push_back({c.id, c.text, num(c.p)});
    return a;
}

json ablation_json(const AblationDoc& a)
{
    json heads = json::array();
    for (const auto& [layer, head] : a.heads)
        heads.push_back({layer, head});
    return {{"heads", heads},
            {"before", candidates_json(a.before)},
            {"after", candidates_json(a.after)},
            {"kl", num(a.kl)},
            {"token", a.token},
            {"logit", num(a.logit)},
            {"ablated_logit", num(a.ablated_logit)},
            {"positions", a.positions}};
}

json steering_json(const SteeringDoc& s, ArrayOut& arrays)
{
    return {{"settings",
             {{"plus", s.plus},
              {"minus", s.minus},
              {"prompt", s.prompt},
              {"layer", s.layer},
              {"strength", num(s.strength)},
              {"tokens", s.tokens}}},
            {"default_text", s.default_text},
            {"steered_text", s.steered_text},
            {"kl", num(s.kl)},
            {"norm", num(s.norm)},
            {"direction", arrays.put("steering.direction", false, {s.direction.size()}, s.direction)},
            {"architecture", s.architecture},
            {"n_layers", s.n_layers}};
}

} // namespace

RunContents to_contents(const Document& doc, std::string writer)
{
    RunContents c;
    ArrayOut arrays{c.arrays};
    json root = {{"format", kFormatVersion}, {"saved_at", doc.saved_at}};
    if (doc.model) {
        root["model"] = model_json(*doc.model);
        // The identity keys name the model's file (the document's "name" is the model's own).
        c.model = {doc.model->path.empty() ? doc.model->name : doc.model->path, doc.model->architecture,
                   doc.model->sha256, doc.model->file_size};
    }
    if (doc.stepper)
        root["stepper"] = stepper_json(*doc.stepper, arrays);
    if (doc.kv)
        root["kv"] = kv_json(*doc.kv);
    if (doc.timeline)
        root["timeline"] = timeline_json(*doc.timeline);
    if (doc.attention)
        root["attention"] = attention_json(*doc.attention, arrays);
    if (doc.text_analysis)
        root["text_analysis"] = text_json(*doc.text_analysis);
    json lab = json::object();
    if (doc.patching)
        lab["patching"] = patching_json(*doc.patching);
    if (doc.attribution)
        lab["attribution"] = attribution_json(*doc.attribution);
    if (doc.head_classes)
        lab["head_classes"] = heads_json(*doc.head_classes);
    if (doc.head_scan)
        lab["head_scan"] = heads_json(*doc.head_scan);
    if (doc.ablation)
        lab["ablation"] = ablation_json(*doc.ablation);
    if (doc.steering)
        lab["steering"] = steering_json(*doc.steering, arrays);
    if (!lab.empty())
        root["lab"] = std::move(lab);
    if (doc.serving)
        root["serving"] = serving_json(*doc.serving);
    if (doc.speculation)
        root["speculation"] = speculation_json(*doc.speculation);
    if (doc.experts)
        root["experts"] = experts_json(*doc.experts);
    c.document = root.dump(-1, ' ', false, json::error_handler_t::replace);
    c.writer = std::move(writer);
    return c;
}

} // namespace engine::run
