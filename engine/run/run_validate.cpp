// SPDX-License-Identifier: GPL-3.0-or-later
// What the panels rely on, checked once: each rule below is an index, a loop bound, an allocation or a
// division some view makes with the value (docs/architecture.md names the views).
#include "run/run_validate.h"

#include "kv/kv_cache_types.h"
#include "session/generator.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

#include <cmath>
#include <set>
#include <spdlog/fmt/fmt.h>
#include <tuple>

namespace engine::run {

namespace {

using L = RunLimits;

[[noreturn]] void refuse(const std::string& field, const std::string& why)
{
    throw FormatError("the run is refused: " + field + " " + why);
}

std::string at(const std::string& path, std::size_t i)
{
    return fmt::format("{}[{}]", path, i);
}

struct Check {
    int64_t vocabulary = -1; // -1: no saved vocabulary

    void range(const std::string& f, int64_t v, int64_t lo, int64_t hi) const
    {
        if (v < lo || v > hi)
            refuse(f, fmt::format("is {}, outside {} to {}", v, lo, hi));
    }
    void size(const std::string& f, std::size_t n, int64_t limit, const char* what) const
    {
        if (int64_t(n) > limit)
            refuse(f, fmt::format("holds {} {}, more than the limit of {}", n, what, limit));
    }
    void equal(const std::string& f, std::size_t n, int64_t expected, const std::string& because) const
    {
        if (int64_t(n) != expected)
            refuse(f, fmt::format("holds {} entries where it must hold {} ({})", n, expected, because));
    }
    void exactly(const std::string& f, int64_t v, int64_t expected, const std::string& because) const
    {
        if (v != expected)
            refuse(f, fmt::format("is {} where it must be {} ({})", v, expected, because));
    }
    void text(const std::string& f, const std::string& s, std::size_t limit = L::kTokenTextBytes) const
    {
        if (s.size() > limit)
            refuse(f, fmt::format("is {} bytes long, more than the limit of {}", s.size(), limit));
    }
    void texts(const std::string& f, const std::vector<std::string>& v, std::size_t limit = L::kTokenTextBytes) const
    {
        size(f, v.size(), L::kListEntries, "strings");
        for (std::size_t i = 0; i < v.size(); ++i)
            text(at(f, i), v[i], limit);
    }
    void id(const std::string& f, int64_t v) const
    {
        if (v < 0 || (vocabulary >= 0 && v >= vocabulary))
            refuse(f, vocabulary >= 0 ? fmt::format("is {}, outside the saved vocabulary of {} tokens", v, vocabulary)
                                      : fmt::format("is {}, not a token id", v));
    }
    // A measured quantity: finite and not negative (a duration, a count of FLOPs or bytes).
    void measure(const std::string& f, double v) const
    {
        if (!std::isfinite(v) || v < 0 || v > 1e30)
            refuse(f, fmt::format("is {}, not a finite quantity of at least 0", v));
    }
    void finite(const std::string& f, double v) const
    {
        if (!std::isfinite(v))
            refuse(f, fmt::format("is {}, not a finite number", v));
    }
    void not_nan(const std::string& f, double v) const
    {
        if (std::isnan(v))
            refuse(f, "is not a number (null)");
    }
    void probability(const std::string& f, double v) const
    {
        if (!(v >= 0.0 && v <= 1.0 + 1e-3))
            refuse(f, fmt::format("is {}, not a probability (0 to 1)", v));
    }
    void bytes(const std::string& f, uint64_t v) const
    {
        if (v > L::kBytes)
            refuse(f, fmt::format("is {}, more than the limit of {} bytes", v, L::kBytes));
    }
    void ints(const std::string& f, const std::vector<int>& v, int64_t lo, int64_t hi) const
    {
        for (std::size_t i = 0; i < v.size(); ++i)
            if (v[i] < lo || v[i] > hi)
                range(at(f, i), v[i], lo, hi);
    }
    // Bulk values: the element's name is spelled only for the one refused (a million logits).
    void ids(const std::string& f, const std::vector<int>& v) const
    {
        for (std::size_t i = 0; i < v.size(); ++i)
            if (v[i] < 0 || (vocabulary >= 0 && v[i] >= vocabulary))
                id(at(f, i), v[i]);
    }
    void probabilities(const std::string& f, const std::vector<float>& v) const
    {
        for (std::size_t i = 0; i < v.size(); ++i)
            if (!(v[i] >= 0.0f && v[i] <= 1.0f + 1e-3f))
                probability(at(f, i), v[i]);
    }
    void finites(const std::string& f, const std::vector<float>& v) const
    {
        for (std::size_t i = 0; i < v.size(); ++i)
            if (!std::isfinite(v[i]))
                finite(at(f, i), v[i]);
    }
    void not_nans(const std::string& f, const std::vector<float>& v) const
    {
        for (std::size_t i = 0; i < v.size(); ++i)
            if (std::isnan(v[i]))
                not_nan(at(f, i), v[i]);
    }
};

void model(const Check& c, const ModelInfo& m)
{
    const std::string f = "model";
    for (const auto& [name, s] : {std::pair{"path", &m.path},
                                  {"name", &m.name},
                                  {"architecture", &m.architecture},
                                  {"quant_types", &m.quant_types},
                                  {"backend", &m.backend},
                                  {"chat_format", &m.chat_format},
                                  {"model_kind_reason", &m.model_kind_reason}})
        c.text(f + "." + name, *s);
    // Drawn in the model bar: 64 lowercase hex digits or nothing, never markup.
    if (!m.sha256.empty() &&
        (m.sha256.size() != 64 || m.sha256.find_first_not_of("0123456789abcdef") != std::string::npos))
        refuse(f + ".sha256", "is not a SHA-256 (64 lowercase hexadecimal digits)");
    c.range(f + ".n_layers", m.n_layers, 0, L::kLayers);
    c.range(f + ".threads", m.threads, 0, 1 << 16);
    c.range(f + ".n_ctx", m.n_ctx, 0, L::kContextTokens);
    c.bytes(f + ".file_size", m.file_size);
}

void tokens(const Check& c, const std::string& f, const std::vector<TokenDoc>& v, int64_t limit)
{
    c.size(f, v.size(), limit, "tokens");
    for (std::size_t i = 0; i < v.size(); ++i) {
        const std::string t = at(f, i);
        c.id(t + ".id", v[i].id);
        c.text(t + ".text", v[i].text);
        c.text(t + ".type", v[i].type, 64);
        c.probability(t + ".probability", v[i].probability);
    }
}

void sample(const Check& c, const std::string& f, const SampleResult& r)
{
    if (r.token != -1)
        c.id(f + ".token", r.token);
    c.probability(f + ".probability", r.probability);
    c.size(f + ".stages", r.stages.size(), L::kStages, "stages");
    for (std::size_t s = 0; s < r.stages.size(); ++s) {
        const std::string g = at(f + ".stages", s);
        const StageView& stage = r.stages[s];
        c.text(g + ".name", stage.name, 64);
        c.size(g + ".top", stage.top.size(), L::kCandidates, "candidates");
        if (stage.survivors > uint64_t(L::kVocabulary))
            refuse(g + ".survivors", fmt::format("is {}, more than the limit of {}", stage.survivors, L::kVocabulary));
        for (std::size_t k = 0; k < stage.top.size(); ++k) {
            const std::string h = at(g + ".top", k);
            c.id(h + "[0]", stage.top[k].id);
            c.not_nan(h + "[1]", stage.top[k].logit);
            c.probability(h + "[2]", stage.top[k].probability);
        }
    }
}

void stepper(const Check& c, const StepperDoc& s)
{
    const std::string f = "stepper";
    const SamplingSettings& p = s.settings.sampling;
    if (!(p.temperature >= -1e3f && p.temperature <= kMaxTemperature)) // <= 0: greedy
        refuse(f + ".settings.sampling.temperature",
               fmt::format("is {}, outside -1000 to {}", p.temperature, kMaxTemperature));
    c.probability(f + ".settings.sampling.top_p", p.top_p);
    c.probability(f + ".settings.sampling.min_p", p.min_p);
    c.finite(f + ".settings.sampling.repeat_penalty", p.repeat_penalty);
    if (p.repeat_penalty <= 0 || p.repeat_penalty > kMaxRepeatPenalty)
        refuse(f + ".settings.sampling.repeat_penalty",
               fmt::format("is {}, outside 0 to {}", p.repeat_penalty, kMaxRepeatPenalty));
    c.range(f + ".settings.sampling.top_k", p.top_k, -1, L::kVocabulary);
    c.range(f + ".settings.sampling.max_tokens", p.max_tokens, -1, L::kContextTokens);
    c.texts(f + ".settings.stop_strings", s.settings.stop_strings);
    c.range(f + ".settings.lens_top", s.settings.lens_top, 0, L::kCandidates);
    c.text(f + ".action", s.action, 64);
    c.text(f + ".stop_reason", s.stop_reason, 256);
    c.text(f + ".generated_text", s.generated_text, L::kTextBytes);
    tokens(c, f + ".tokens", s.tokens, L::kSequenceTokens);
    const auto n = int64_t(s.tokens.size());
    c.range(f + ".prompt_length", s.prompt_length, 0, n);
    c.range(f + ".steps", s.steps, 0, n);
    for (const auto& [name, v] : {std::pair{"prefill_computed", s.prefill_computed},
                                  {"prefill_reused", s.prefill_reused},
                                  {"prefill_batches", s.prefill_batches},
                                  {"kv_tokens", s.kv_tokens},
                                  {"last_reused", s.last_reused}})
        c.range(f + "." + name, v, 0, L::kContextTokens);
    c.measure(f + ".prefill_ms", s.prefill_ms);
    c.measure(f + ".last_ms", s.last_ms);
    c.range(f + ".n_layers", s.n_layers, 0, L::kLayers);
    c.range(f + ".n_kv_heads", s.n_kv_heads, 0, L::kHeadsPerLayer);
    c.bytes(f + ".kv_bytes_in_use", s.kv_bytes_in_use);
    c.size(f + ".kv_layer_tokens", s.kv_layer_tokens.size(), L::kLayers, "layers");
    c.ints(f + ".kv_layer_tokens", s.kv_layer_tokens, 0, L::kContextTokens);
    c.size(f + ".layer_window", s.layer_window.size(), L::kLayers, "layers");
    c.ints(f + ".layer_window", s.layer_window, 0, L::kContextTokens);
    c.size(f + ".history", s.history.size(), L::kSequenceTokens, "tokens");
    c.ids(f + ".history", s.history);
    c.size(f + ".lens", s.lens.size(), L::kLayers, "layers");
    for (std::size_t l = 0; l < s.lens.size(); ++l) {
        const std::string g = at(f + ".lens", l);
        c.equal(g, s.lens[l].size(), int64_t(s.lens.front().size()),
                "every layer of the lens shows as many candidates");
        c.size(g, s.lens[l].size(), L::kCandidates, "candidates");
        for (std::size_t k = 0; k < s.lens[l].size(); ++k) {
            c.id(at(g, k) + ".id", s.lens[l][k].id);
            c.text(at(g, k) + ".text", s.lens[l][k].text);
            c.probability(at(g, k) + ".p", s.lens[l][k].probability);
        }
    }
    c.texts(f + ".branches", s.branches);
    c.size(f + ".distributions", s.distributions.size(), L::kSequenceTokens, "distributions");
    std::size_t i = 0;
    for (const auto& [position, r] : s.distributions) {
        const std::string g = at(f + ".distributions", i++);
        // The stepper shows the distribution of the token at this position.
        c.range(g + ".position", position, 0, n - 1);
        sample(c, g, r);
    }
    if (c.vocabulary >= 0 && !s.logits.empty())
        c.equal(f + ".logits", s.logits.size(), c.vocabulary, "one per token of the saved vocabulary");
    c.size(f + ".logits", s.logits.size(), L::kVocabulary, "logits");
    c.not_nans(f + ".logits", s.logits);
}

void kv(const Check& c, const KvDoc& k)
{
    const std::string f = "kv";
    c.text(f + ".source", k.source, 64);
    c.text(f + ".device", k.device);
    c.range(f + ".n_ctx", k.n_ctx, 0, L::kContextTokens);
    c.range(f + ".block_tokens", k.block_tokens, k.n_ctx > 0 ? 1 : 0, L::kContextTokens);
    const int64_t blocks = k.block_tokens > 0 ? (int64_t(k.n_ctx) + k.block_tokens - 1) / k.block_tokens : 0;
    c.exactly(f + ".blocks_per_layer", k.blocks_per_layer, blocks, "n_ctx / block_tokens, rounded up");
    c.range(f + ".n_layers", k.n_layers, 0, L::kLayers);
    c.equal(f + ".layers", k.layers.size(), k.n_layers, "one per layer (n_layers)");
    if (int64_t(k.n_layers) * blocks > L::kKvBlockCells)
        refuse(f + ".blocks_per_layer", fmt::format("× n_layers is {} blocks, more than the limit of {}",
                                                    int64_t(k.n_layers) * blocks, L::kKvBlockCells));
    c.range(f + ".tokens_cached", k.tokens_cached, 0, k.n_ctx);
    c.range(f + ".prompt_tokens", k.prompt_tokens, 0, L::kContextTokens);
    c.range(f + ".reused_tokens", k.reused_tokens, 0, L::kContextTokens);
    c.range(f + ".n_kv_heads", k.n_kv_heads, 0, L::kHeadsPerLayer);
    c.range(f + ".head_dim", k.head_dim, 0, L::kHeadDim);
    c.range(f + ".bytes_per_value", k.bytes_per_value, 0, 16);
    if (!parse_kv_cache_types_name(k.cache_types))
        refuse(f + ".cache_types", fmt::format("\"{}\" is not a KV cache's types (F16, or K and V each F16, Q8_0 "
                                               "or Q4_0, as \"K Q8_0, V Q8_0\")",
                                               k.cache_types.substr(0, 64)));
    for (const auto& [name, v] : {std::pair{"bytes_in_use", k.bytes_in_use},
                                  {"bytes_allocated", k.bytes_allocated},
                                  {"bytes_per_block", k.bytes_per_block},
                                  {"weight_bytes", k.weight_bytes},
                                  {"device_total", k.device_total},
                                  {"device_available", k.device_available}})
        c.bytes(f + "." + name, v);
    for (std::size_t l = 0; l < k.layers.size(); ++l) {
        const std::string g = at(f + ".layers", l);
        const KvLayerDoc& x = k.layers[l];
        c.range(g + ".tokens_in_use", x.tokens_in_use, 0, k.n_ctx);
        c.range(g + ".blocks", x.blocks, 0, blocks);
        c.range(g + ".first_stored", x.first_stored, 0, k.n_ctx);
        c.range(g + ".window", x.window, 0, L::kContextTokens);
        c.bytes(g + ".bytes_in_use", x.bytes_in_use);
        c.bytes(g + ".bytes_allocated", x.bytes_allocated);
    }
}

void timeline(const Check& c, const TimelineDoc& t)
{
    const std::string f = "timeline";
    c.text(f + ".source", t.source, 64);
    c.text(f + ".note", t.note);
    c.text(f + ".server", t.server);
    c.size(f + ".events", t.events.size(), L::kTimelineEvents, "events");
    c.size(f + ".steps", t.steps.size(), L::kSequenceTokens, "steps");
    constexpr int kStages = int(TimelineStage::Verify) + 1;
    for (std::size_t i = 0; i < t.events.size(); ++i) {
        const std::string g = at(f + ".events", i);
        const TimelineEventDoc& e = t.events[i];
        c.range(g + "[0] (stage)", e.stage, 0, kStages - 1);
        c.range(g + "[1] (step)", e.step, -1, int64_t(t.steps.size()) - 1);
        c.range(g + "[2] (begin, ns)", e.begin_ns, 0, L::kTimelineSpanNs);
        c.range(g + "[3] (end, ns)", e.end_ns, e.begin_ns, L::kTimelineSpanNs);
    }
    for (std::size_t i = 0; i < t.steps.size(); ++i) {
        const std::string g = at(f + ".steps", i);
        const TimelineStepDoc& s = t.steps[i];
        c.id(g + ".token", s.token);
        c.text(g + ".text", s.text);
        for (const auto& [name, v] : {std::pair{"forward_ms", s.forward_ms},
                                      {"sample_ms", s.sample_ms},
                                      {"detokenize_ms", s.detokenize_ms},
                                      {"latency_ms", s.latency_ms},
                                      {"flops", s.flops},
                                      {"bytes_read", s.bytes_read}})
            c.measure(g + "." + name, v);
    }
    constexpr double span_ms = double(L::kTimelineSpanNs) / 1e6;
    for (const auto& [name, v] : {std::pair{"tokenize_ms", t.tokenize_ms},
                                  {"prefill_ms", t.prefill_ms},
                                  {"ttft_ms", t.ttft_ms},
                                  {"total_ms", t.total_ms}}) {
        c.measure(f + "." + name, v);
        if (v > span_ms)
            refuse(f + "." + name, fmt::format("is {} ms, more than the limit of {} ms", v, span_ms));
    }
    c.measure(f + ".prefill_flops", t.prefill_flops);
    c.measure(f + ".prefill_bytes", t.prefill_bytes);
    c.range(f + ".prompt_tokens", t.prompt_tokens, 0, L::kContextTokens);
    c.range(f + ".prefill_computed", t.prefill_computed, 0, L::kContextTokens);
    for (const auto& [name, v] :
         {std::pair{"server_prompt_ms", t.server_prompt_ms}, {"server_generation_ms", t.server_generation_ms}})
        if (!(v == -1.0 || (std::isfinite(v) && v >= 0 && v <= span_ms)))
            refuse(f + "." + name,
                   fmt::format("is {}, neither -1 (not reported) nor a time of 0 to {} ms", v, span_ms));
    c.range(f + ".server_generated", t.server_generated, -1, L::kContextTokens);
    c.range(f + ".server_drafted", t.server_drafted, -1, L::kContextTokens);
    c.range(f + ".server_draft_accepted", t.server_draft_accepted, -1, std::max(-1, t.server_drafted));
}

void attention(const Check& c, const AttentionDoc& a)
{
    const std::string f = "attention";
    c.text(f + ".source", a.source, 64);
    c.text(f + ".text", a.text, L::kTextBytes);
    tokens(c, f + ".tokens", a.tokens, L::kAttentionTokens);
    c.range(f + ".n_layers", a.n_layers, 0, L::kLayers);
    c.equal(f + ".heads_per_layer", a.heads_per_layer.size(), a.n_layers, "one per layer (n_layers)");
    c.equal(f + ".kv_heads_per_layer", a.kv_heads_per_layer.size(), a.n_layers, "one per layer (n_layers)");
    c.equal(f + ".window", a.window.size(), a.n_layers, "one per layer (n_layers)");
    c.ints(f + ".heads_per_layer", a.heads_per_layer, 1, L::kHeadsPerLayer);
    c.ints(f + ".window", a.window, 0, L::kContextTokens);
    for (std::size_t l = 0; l < a.kv_heads_per_layer.size(); ++l)
        c.range(at(f + ".kv_heads_per_layer", l), a.kv_heads_per_layer[l], 1, a.heads_per_layer[l]);
    c.bytes(f + ".bytes", a.bytes);
    c.measure(f + ".ms", a.ms);
    c.size(f + ".heads", a.heads.size(), L::kHeads, "heads");
    const auto n = int64_t(a.tokens.size());
    std::set<std::pair<int, int>> seen;
    for (std::size_t i = 0; i < a.heads.size(); ++i) {
        const std::string g = at(f + ".heads", i);
        const AttentionHeadDoc& h = a.heads[i];
        c.range(g + ".layer", h.layer, 0, a.n_layers - 1);
        c.range(g + ".head", h.head, 0, a.heads_per_layer[std::size_t(h.layer)] - 1);
        c.range(g + ".kv_head", h.kv_head, 0, a.kv_heads_per_layer[std::size_t(h.layer)] - 1);
        if (!seen.emplace(h.layer, h.head).second)
            refuse(g, fmt::format("records layer {} head {} a second time", h.layer, h.head));
        c.finite(g + ".scale", h.scale);
        // Every head covers the recorded tokens: row = query, column = key.
        c.exactly(g + ".n", h.n, n, "the recorded tokens");
        c.range(g + ".head_dim", h.head_dim, 1, L::kHeadDim);
        c.equal(g + ".weights", h.weights.size(), n * n, "n × n");
        for (const auto& [name, v] : {std::pair{".q", &h.q}, {".k", &h.k}, {".v", &h.v}})
            c.equal(g + name, v->size(), n * h.head_dim, "n × head_dim");
        c.probabilities(g + ".weights", h.weights);
        for (const auto& [name, v] : {std::pair{".q", &h.q}, {".k", &h.k}, {".v", &h.v}})
            c.finites(g + name, *v);
    }
}

void text_analysis(const Check& c, const TextAnalysisDoc& t)
{
    const std::string f = "text_analysis";
    c.text(f + ".model_a", t.model_a);
    c.text(f + ".model_b", t.model_b);
    c.range(f + ".window", t.window, 0, L::kContextTokens);
    c.size(f + ".tokens", t.tokens.size(), L::kAnalysisTokens, "tokens");
    std::size_t text_bytes = 0;
    for (std::size_t i = 0; i < t.tokens.size(); ++i) {
        const std::string g = at(f + ".tokens", i);
        const AnalyzedTokenDoc& k = t.tokens[i];
        c.id(g + ".id", k.id);
        c.text(g + ".text", k.text);
        text_bytes += k.text.size();
        c.probability(g + ".p", k.p);
        c.probability(g + ".p_b", k.p_b);
        c.not_nan(g + ".surprisal_bits", k.surprisal_bits);
        if (k.surprisal_bits < 0)
            refuse(g + ".surprisal_bits", "is negative");
        c.measure(g + ".entropy_bits", k.entropy_bits);
        c.measure(g + ".kl", k.kl);
        c.measure(g + ".reverse_kl", k.reverse_kl);
        c.range(g + ".rank", k.rank, 0, L::kVocabulary);
        c.size(g + ".top", k.top.size(), L::kCandidates, "candidates");
        for (std::size_t j = 0; j < k.top.size(); ++j) {
            c.text(at(g + ".top", j) + "[0]", k.top[j].first);
            c.probability(at(g + ".top", j) + "[1]", k.top[j].second);
        }
        c.size(g + ".candidates", k.candidates.size(), L::kCandidates, "candidates");
        for (std::size_t j = 0; j < k.candidates.size(); ++j) {
            const std::string h = at(g + ".candidates", j);
            c.id(h + "[0]", k.candidates[j].id);
            c.text(h + "[1]", k.candidates[j].text);
            c.probability(h + "[2]", k.candidates[j].p_a);
            c.probability(h + "[3]", k.candidates[j].p_b);
        }
    }
    if (text_bytes > L::kTextBytes)
        refuse(f + ".tokens",
               fmt::format("spell {} bytes of text, more than the limit of {}", text_bytes, L::kTextBytes));
    for (const auto& [name, v] : {std::pair{"perplexity", t.perplexity},
                                  {"mean_kl", t.mean_kl},
                                  {"same_top", t.same_top},
                                  {"rms_dp", t.rms_dp},
                                  {"ms", t.ms}})
        if (std::isnan(v) || v < 0)
            refuse(f + "." + name, fmt::format("is {}, not a quantity of at least 0", v));
}

void grid(const Check& c, const std::string& f, const std::vector<std::vector<double>>& g, int rows, int columns)
{
    c.equal(f, g.size(), rows, "one row per layer (n_layers)");
    for (std::size_t r = 0; r < g.size(); ++r) {
        c.equal(at(f, r), g[r].size(), columns, "one value per column (n_columns)");
        for (std::size_t k = 0; k < g[r].size(); ++k)
            if (std::isinf(g[r][k]))
                refuse(at(at(f, r), k), "is infinite (null marks a cell not run)");
    }
}

void patching(const Check& c, const PatchingDoc& p)
{
    const std::string f = "lab.patching";
    c.range(f + ".settings.metric", p.metric, 0, 2);
    c.range(f + ".settings.over", p.over, 0, 4);
    for (const auto& [name, s] : {std::pair{"settings.clean", &p.clean}, {"settings.corrupted", &p.corrupted}})
        c.text(f + "." + name, *s, L::kTextBytes);
    for (const auto& [name, s] : {std::pair{"settings.token_a", &p.settings_token_a},
                                  {"settings.token_b", &p.settings_token_b},
                                  {"token_a", &p.token_a},
                                  {"token_b", &p.token_b},
                                  {"metric_name", &p.metric_name},
                                  {"over_name", &p.over_name},
                                  {"backend", &p.backend}})
        c.text(f + "." + name, *s);
    c.range(f + ".n_layers", p.n_layers, 0, L::kLayers);
    c.range(f + ".n_columns", p.n_columns, 0, L::kSequenceTokens);
    if (int64_t(p.n_layers) * p.n_columns > L::kGridCells)
        refuse(f + ".n_columns", fmt::format("× n_layers is {} cells, more than the limit of {}",
                                             int64_t(p.n_layers) * p.n_columns, L::kGridCells));
    c.texts(f + ".clean_pieces", p.clean_pieces);
    c.texts(f + ".corrupted_pieces", p.corrupted_pieces);
    if (p.over != 3) { // columns are positions: each labelled by the two prompts' tokens
        c.equal(f + ".clean_pieces", p.clean_pieces.size(), p.n_columns, "one per column (n_columns)");
        c.equal(f + ".corrupted_pieces", p.corrupted_pieces.size(), p.n_columns, "one per column (n_columns)");
    }
    grid(c, f + ".effect", p.effect, p.n_layers, p.n_columns);
    if (!p.raw.empty())
        grid(c, f + ".raw", p.raw, p.n_layers, p.n_columns);
    c.not_nan(f + ".clean_metric", p.clean_metric);
    c.not_nan(f + ".corrupted_metric", p.corrupted_metric);
    c.range(f + ".runs", p.runs, 0, L::kGridCells + 2);
    c.measure(f + ".ms", p.ms);
}

void attribution(const Check& c, const AttributionDoc& a)
{
    const std::string f = "lab.attribution";
    c.text(f + ".token", a.token);
    c.text(f + ".versus", a.versus);
    c.text(f + ".backend", a.backend);
    if (a.token_id != -1)
        c.id(f + ".token_id", a.token_id);
    c.range(f + ".position", a.position, 0, L::kSequenceTokens);
    c.finite(f + ".logit", a.logit);
    c.finite(f + ".final_norm_scale", a.final_norm_scale);
    c.size(f + ".parts", a.parts.size(), L::kListEntries * 16, "parts");
    for (std::size_t i = 0; i < a.parts.size(); ++i) {
        const std::string g = at(f + ".parts", i);
        c.text(g + ".name", a.parts[i].name);
        c.range(g + ".kind", a.parts[i].kind, 0, 64);
        c.range(g + ".layer", a.parts[i].layer, -1, L::kLayers);
        c.range(g + ".head", a.parts[i].head, -1, L::kHeadsPerLayer);
        c.finite(g + ".value", a.parts[i].value); // sorted by size: NaN has no order
    }
    c.measure(f + ".ms", a.ms);
}

void heads(const Check& c, const std::string& f, const HeadsDoc& h)
{
    c.text(f + ".kind", h.kind, 64);
    c.text(f + ".token", h.token);
    c.range(f + ".n_layers", h.n_layers, 0, L::kLayers);
    c.range(f + ".n_heads", h.n_heads, 0, L::kHeadsPerLayer);
    const int64_t cells = int64_t(h.n_layers) * h.n_heads;
    if (cells > L::kHeads)
        refuse(f + ".n_heads", fmt::format("× n_layers is {} heads, more than the limit of {}", cells, L::kHeads));
    // The head map draws every layer × head cell and reads heads[layer * n_heads + head].
    c.equal(f + ".heads", h.heads.size(), cells, "n_layers × n_heads, in order");
    for (std::size_t i = 0; i < h.heads.size(); ++i) {
        const std::string g = at(f + ".heads", i);
        const HeadInfoDoc& x = h.heads[i];
        c.exactly(g + ".layer", x.layer, int64_t(i) / h.n_heads, "heads are listed layer by layer");
        c.exactly(g + ".head", x.head, int64_t(i) % h.n_heads, "heads are listed layer by layer");
        c.range(g + ".class", x.cls, 0, 5);
        if (!x.scores.empty())
            c.equal(g + ".scores", x.scores.size(), 5, "one per head class, or none");
        for (std::size_t k = 0; k < x.scores.size(); ++k)
            c.finite(at(g + ".scores", k), x.scores[k]);
        c.finite(g + ".entropy", x.entropy);
        c.finite(g + ".kl", x.kl);
        c.finite(g + ".logit_change", x.logit_change);
    }
    c.range(f + ".runs", h.runs, 0, L::kHeads + 2);
    c.measure(f + ".ms", h.ms);
}

void candidates(const Check& c, const std::string& f, const std::vector<CandidateDoc>& v)
{
    c.size(f, v.size(), 64, "candidates");
    for (std::size_t i = 0; i < v.size(); ++i) {
        c.id(at(f, i) + "[0]", v[i].id);
        c.text(at(f, i) + "[1]", v[i].text);
        c.probability(at(f, i) + "[2]", v[i].p);
    }
}

void ablation(const Check& c, const AblationDoc& a)
{
    const std::string f = "lab.ablation";
    candidates(c, f + ".before", a.before);
    candidates(c, f + ".after", a.after);
    c.measure(f + ".kl", a.kl);
    c.text(f + ".token", a.token);
    c.finite(f + ".logit", a.logit);
    c.finite(f + ".ablated_logit", a.ablated_logit);
    c.range(f + ".positions", a.positions, 0, L::kSequenceTokens);
    c.size(f + ".heads", a.heads.size(), L::kHeads, "heads");
    for (std::size_t i = 0; i < a.heads.size(); ++i) {
        c.range(at(f + ".heads", i) + "[0]", a.heads[i].first, 0, L::kLayers - 1);
        c.range(at(f + ".heads", i) + "[1]", a.heads[i].second, 0, L::kHeadsPerLayer - 1);
    }
}

void steering(const Check& c, const SteeringDoc& s)
{
    const std::string f = "lab.steering";
    c.text(f + ".settings.plus", s.plus, L::kTextBytes);
    c.text(f + ".settings.minus", s.minus, L::kTextBytes);
    c.text(f + ".settings.prompt", s.prompt, L::kTextBytes);
    c.text(f + ".default_text", s.default_text, L::kTextBytes);
    c.text(f + ".steered_text", s.steered_text, L::kTextBytes);
    c.text(f + ".architecture", s.architecture);
    c.range(f + ".n_layers", s.n_layers, 0, L::kLayers);
    c.range(f + ".settings.layer", s.layer, 0, std::max(0, s.n_layers - 1));
    c.finite(f + ".settings.strength", s.strength);
    if (std::abs(s.strength) > 1e6)
        refuse(f + ".settings.strength", fmt::format("is {}, outside -1e6 to 1e6", s.strength));
    c.range(f + ".settings.tokens", s.tokens, 0, L::kContextTokens);
    c.measure(f + ".kl", s.kl);
    c.measure(f + ".norm", s.norm);
    c.size(f + ".direction", s.direction.size(), L::kEmbedding, "values");
    c.finites(f + ".direction", s.direction);
}

// The experts view's routing: ids in the vocabulary; per layer, ascending, each token's k experts in
// range and distinct; weights finite in [0, 1], in slot order (descending, as the router sorts them),
// summing to 1 where the model normalises them.
void experts(const Check& c, const ExpertsDoc& d)
{
    const std::string f = "experts";
    c.text(f + ".architecture", d.architecture);
    if (d.source != "prompt" && d.source != "sequence")
        refuse(f + ".source", fmt::format("is \"{}\", neither \"prompt\" nor \"sequence\"", d.source));
    if (d.n_expert < 1)
        refuse(f + ".n_expert", "is missing or 0: a mixture of experts has at least one");
    if (d.k < 1 || d.k > d.n_expert)
        refuse(f + ".k", fmt::format("is {}; a token goes to 1 … {} (the experts) of them", d.k, d.n_expert));
    if (d.ids.empty())
        refuse(f + ".ids", "is empty: a routing is of at least one token");
    if (d.layers.empty())
        refuse(f + ".layers", "is empty: a routing has at least one layer");
    c.ids(f + ".ids", d.ids);
    for (std::size_t i = 0; i < d.layers.size(); ++i) {
        const std::string g = at(f + ".layers", i);
        if (i > 0 && d.layers[i] <= d.layers[i - 1])
            refuse(g + ".layer",
                   fmt::format("is {}, not after the layer before it ({})", d.layers[i], d.layers[i - 1]));
        for (std::size_t t = 0; t < d.ids.size(); ++t) {
            double sum = 0;
            for (uint32_t s = 0; s < d.k; ++s) {
                const std::size_t j = t * d.k + s;
                const int32_t e = d.experts[i][j];
                if (e < 0 || uint32_t(e) >= d.n_expert)
                    refuse(at(g + ".experts", j), fmt::format("is {}, not an expert of 0 … {}", e, d.n_expert - 1));
                for (uint32_t r = 0; r < s; ++r)
                    if (d.experts[i][t * d.k + r] == e)
                        refuse(at(g + ".experts", j), fmt::format("repeats expert {} for token {}", e, t));
                c.probability(at(g + ".weights", j), d.weights[i][j]);
                if (s > 0 && d.weights[i][j] > d.weights[i][j - 1] && d.weights[i][j] != 0.0f)
                    refuse(at(g + ".weights", j), fmt::format("is {}, above the slot before it ({}): slots are in the "
                                                              "router's order",
                                                              d.weights[i][j], d.weights[i][j - 1]));
                sum += d.weights[i][j];
            }
            if (d.normalized && std::abs(sum - 1.0) > 1e-3 && sum != 0.0)
                refuse(at(g + ".weights", t * d.k),
                       fmt::format("token {}'s weights sum to {}, but this model's weights are normalised", t, sum));
        }
    }
}

// The speculation view's comparison: the ids in the vocabulary, each step's verdicts as the rejection
// rule leaves them, and the steps rebuilding the generated tokens exactly.
void speculation(const Check& c, const SpeculationDoc& d)
{
    const std::string f = "speculation";
    using SL = SpeculationLimits;
    for (const auto& [name, text] :
         {std::pair{".model", &d.model}, {".drafter", &d.drafter}, {".source", &d.source}, {".backend", &d.backend}})
        c.text(f + name, *text);
    c.text(f + ".prompt_text", d.prompt_text, SL::kTextBytes);
    c.range(f + ".draft_max", d.draft_max, 1, SL::kDraftMax);
    if (!(d.temperature >= 0.0f && d.temperature <= 100.0f))
        refuse(f + ".temperature", fmt::format("is {}, not a temperature from 0 to 100", d.temperature));
    for (const auto& [name, v] : {std::pair{".speculative_s", d.speculative_s}, {".plain_s", d.plain_s}})
        if (!std::isfinite(v) || v < 0 || v > 1e9)
            refuse(f + name, fmt::format("is {}, not a time of at least 0 seconds", v));
    c.ids(f + ".prompt", d.prompt);
    c.ids(f + ".tokens", d.result.tokens);
    c.ids(f + ".plain_tokens", d.plain_tokens);
    const auto& tokens = d.result.tokens;
    std::size_t pos = 0;
    for (std::size_t i = 0; i < d.result.steps.size(); ++i) {
        const SpeculativeStep& s = d.result.steps[i];
        const Acceptance& a = s.acceptance;
        const std::string g = at(f + ".steps", i);
        c.id(g + ".opened", s.opened);
        c.id(g + ".next", a.next);
        c.size(g + ".drafted", s.drafted.size(), d.draft_max, "tokens (its draft_max)");
        // a draft model's vocabulary may hold up to 128 more tokens than the target's
        c.ints(g + ".drafted", s.drafted, 0,
               c.vocabulary >= 0 ? c.vocabulary + 127 : std::numeric_limits<int32_t>::max());
        c.range(g + ".accepted", a.accepted, 0, int64_t(s.drafted.size()));
        if (a.corrected == (a.accepted == s.drafted.size()))
            refuse(g + ".corrected", a.corrected ? "is true, but every drafted token was accepted"
                                                 : "is false, but a drafted token was rejected");
        c.equal(g + ".verdicts", a.verdicts.size(), int64_t(std::min<std::size_t>(s.drafted.size(), a.accepted + 1)),
                "one per examined drafted token: the accepted ones and the first rejected");
        for (std::size_t j = 0; j < a.verdicts.size(); ++j) {
            const DraftVerdict& v = a.verdicts[j];
            const std::string h = at(g + ".verdicts", j);
            if (v.token != s.drafted[j]) // (its range: the draft's, checked above)
                refuse(h + ".token", fmt::format("is {}, but the draft has {} there", v.token, s.drafted[j]));
            if (v.accepted != (j < a.accepted))
                refuse(h + ".accepted",
                       fmt::format("is {} at position {} of a step that accepted {}", v.accepted, j, a.accepted));
            c.id(h + ".target_top", v.target_top);
            for (const auto& [name, p] :
                 {std::pair{".q", v.q}, {".p", v.p}, {".target_top_p", v.target_top_p}, {".overlap", v.overlap}})
                c.probability(h + name, p);
            if (v.kl != -1.0f)
                c.measure(h + ".kl", v.kl);
        }
        for (const auto& [name, ms] : {std::pair{".draft_ms", s.draft_ms}, {".verify_ms", s.verify_ms}})
            if (!std::isfinite(ms) || ms < 0 || ms > 1e12)
                refuse(g + name, fmt::format("is {}, not a duration of at least 0 ms", ms));
        // the steps rebuild the tokens: the opening token, then the accepted drafts
        if (pos >= tokens.size() || tokens[pos] != s.opened)
            refuse(g + ".opened", fmt::format("is {}, but tokens[{}] is {}", s.opened, pos,
                                              pos < tokens.size() ? std::to_string(tokens[pos]) : "past the end"));
        if (i > 0 && d.result.steps[i - 1].acceptance.next != s.opened)
            refuse(g + ".opened", "is not the token the step before it drew next");
        for (uint32_t j = 0; j < a.accepted; ++j)
            if (pos + 1 + j >= tokens.size() || tokens[pos + 1 + j] != s.drafted[j])
                refuse(at(g + ".drafted", j), fmt::format("was accepted but tokens[{}] is not it", pos + 1 + j));
        pos += 1 + a.accepted;
    }
    // after the last step, its next token (the last generated) or nothing more (a run stopped there)
    if (tokens.size() != pos && tokens.size() != pos + 1)
        refuse(f + ".tokens", fmt::format("holds {} tokens, but the steps account for {}", tokens.size(), pos));
    if (tokens.size() == pos + 1 && !d.result.steps.empty() && tokens.back() != d.result.steps.back().acceptance.next)
        refuse(f + ".tokens", "ends with a token the last step did not draw");
    if (d.parted >= 0) {
        c.range(f + ".parted", d.parted, 0, int64_t(std::min(tokens.size(), d.plain_tokens.size())) - 1);
        if (tokens[std::size_t(d.parted)] == d.plain_tokens[std::size_t(d.parted)])
            refuse(f + ".parted", fmt::format("is {}, where both runs have the same token", d.parted));
        for (const auto& [name, ch, tok] :
             {std::tuple{".at_parting.speculative", &d.parted_speculative, tokens[std::size_t(d.parted)]},
              {".at_parting.plain", &d.parted_plain, d.plain_tokens[std::size_t(d.parted)]}}) {
            if (ch->token != tok)
                refuse(f + name + ".token", fmt::format("is {}, not the run's token there ({})", ch->token, tok));
            c.id(f + name + ".best", ch->best);
            c.id(f + name + ".second", ch->second);
            c.finite(f + name + ".best_logit", ch->best_logit);
            c.not_nan(f + name + ".second_logit", ch->second_logit);
        }
    }
}

void serving(const Check& c, const ServingDoc& d)
{
    const std::string f = "serving";
    using SL = ServingLimits;
    const auto ids = [&](const std::string& field, const std::vector<TokenId>& v) {
        c.size(field, v.size(), SL::kRequestTokens, "tokens");
        c.ids(field, v);
    };
    // a time on the run's clock or a duration: finite, at least 0; -1 where the engine writes "not yet"
    const auto seconds = [](const std::string& field, double v, bool may_be_unset = false) {
        if (may_be_unset && v == -1.0)
            return;
        if (!std::isfinite(v) || v < 0 || v > 1e12)
            refuse(field, fmt::format("is {}, not a time of at least 0 seconds", v));
    };
    c.text(f + ".model", d.model);
    c.text(f + ".backend", d.backend);
    c.size(f + ".workload.prompts", d.workload.prompts.size(), 4096, "prompts");
    for (std::size_t i = 0; i < d.workload.prompts.size(); ++i)
        c.text(at(f + ".workload.prompts", i), d.workload.prompts[i], L::kTextBytes);
    c.size(f + ".runs", d.runs.size(), SL::kRuns, "runs");
    int64_t tokens = 0, slices = 0, events = 0;
    for (std::size_t ri = 0; ri < d.runs.size(); ++ri) {
        const ServeRunResult& r = d.runs[ri];
        const std::string g = at(f + ".runs", ri);
        const ServingOptions& o = r.options;
        c.range(g + ".options.max_running", o.max_running, 1, SL::kRequests);
        c.range(g + ".options.step_tokens", o.step_tokens, 1, int64_t(1) << 24);
        c.range(g + ".options.block_tokens", o.block_tokens, 1, int64_t(1) << 24);
        c.range(g + ".options.n_ctx", o.n_ctx, 0, int64_t(1) << 24);
        c.size(g + ".requests", r.requests.size(), SL::kRequests, "requests");
        c.size(g + ".steps", r.steps.size(), SL::kSteps, "steps");
        c.size(g + ".pool.blocks", r.pool.blocks.size(), SL::kBlocks, "blocks");
        if (r.pool.blocks.size() != o.pool_blocks)
            refuse(g + ".pool.blocks", fmt::format("holds {} blocks where options.pool_blocks says {}",
                                                   r.pool.blocks.size(), o.pool_blocks));
        for (const auto* p : {&r.ttft, &r.itl, &r.latency})
            for (double v : {p->p50, p->p90, p->p99, p->max})
                seconds(g + ".percentiles", v);
        seconds(g + ".makespan_s", r.makespan_s);
        seconds(g + ".busy_s", r.busy_s);
        const auto n_requests = uint32_t(r.requests.size());
        for (std::size_t i = 0; i < r.requests.size(); ++i) {
            const RequestState& q = r.requests[i];
            const std::string h = at(g + ".requests", i);
            c.range(h + ".id", q.id, int64_t(i), int64_t(i)); // lanes are indexed by it
            if (q.parent && *q.parent >= q.id)
                refuse(h + ".parent", fmt::format("is {}, not an earlier request", *q.parent));
            ids(h + ".prompt", q.request.prompt);
            ids(h + ".output", q.output);
            tokens += int64_t(q.request.prompt.size() + q.output.size());
            c.range(h + ".max_new_tokens", q.request.max_new_tokens, 1, SL::kRequestTokens);
            if (q.output.size() > q.request.max_new_tokens)
                refuse(h + ".output", fmt::format("holds {} tokens, more than its max_new_tokens of {}",
                                                  q.output.size(), q.request.max_new_tokens));
            if (q.token_times.size() != q.output.size())
                refuse(h + ".token_times",
                       fmt::format("holds {} times for {} tokens", q.token_times.size(), q.output.size()));
            for (std::size_t k = 0; k < q.token_times.size(); ++k)
                seconds(at(h + ".token_times", k), q.token_times[k]);
            seconds(h + ".arrival_s", q.request.arrival_s);
            seconds(h + ".admitted_s", q.admitted_s, true);
            seconds(h + ".first_token_s", q.first_token_s, true);
            seconds(h + ".finish_s", q.finish_s, true);
            c.range(h + ".samples", q.request.samples, 0, 64);
            c.text(h + ".finish_reason", q.finish_reason);
        }
        for (std::size_t si = 0; si < r.steps.size(); ++si) {
            const ServeStep& s = r.steps[si];
            const std::string h = at(g + ".steps", si);
            seconds(h + ".start_s", s.start_s);
            seconds(h + ".end_s", s.end_s);
            if (s.end_s < s.start_s)
                refuse(h + ".end_s", "is before its start");
            slices += int64_t(s.slices.size());
            events += int64_t(s.events.size());
            for (std::size_t k = 0; k < s.slices.size(); ++k)
                if (s.slices[k].request >= n_requests)
                    refuse(at(h + ".slices", k) + "[0]",
                           fmt::format("is request {}, of {} requests", s.slices[k].request, n_requests));
            for (std::size_t k = 0; k < s.events.size(); ++k)
                if (s.events[k].request >= n_requests)
                    refuse(at(h + ".events", k) + "[1]",
                           fmt::format("is request {}, of {} requests", s.events[k].request, n_requests));
        }
        for (std::size_t b = 0; b < r.pool.blocks.size(); ++b) {
            const PoolSnapshot::Block& block = r.pool.blocks[b];
            if (block.owner != KvBlockPool::kNoOwner && block.owner >= n_requests)
                refuse(at(g + ".pool.blocks", b) + "[0]",
                       fmt::format("is request {}, of {} requests", block.owner, n_requests));
            c.range(at(g + ".pool.blocks", b) + "[1]", block.refs, 0, SL::kRequests);
        }
    }
    if (tokens > SL::kTokens)
        refuse(f + ".runs",
               fmt::format("hold {} prompt and reply tokens, more than the limit of {}", tokens, SL::kTokens));
    if (slices > SL::kSlices)
        refuse(f + ".runs", fmt::format("hold {} requests in passes, more than the limit of {}", slices, SL::kSlices));
    if (events > SL::kEvents)
        refuse(f + ".runs", fmt::format("hold {} events, more than the limit of {}", events, SL::kEvents));
}

} // namespace

Document checked_document(const OpenedRun& opened)
{
    Document doc = parse_document(opened.contents);
    validate(doc, opened.tokenizer.get());
    return doc;
}

void validate(const Document& doc, const Tokenizer* vocabulary)
{
    Check c;
    if (vocabulary)
        c.vocabulary = int64_t(vocabulary->vocab().size());
    c.text("saved_at", doc.saved_at, 64);
    if (doc.model)
        model(c, *doc.model);
    if (doc.stepper)
        stepper(c, *doc.stepper);
    if (doc.kv)
        kv(c, *doc.kv);
    if (doc.timeline)
        timeline(c, *doc.timeline);
    if (doc.attention)
        attention(c, *doc.attention);
    if (doc.text_analysis)
        text_analysis(c, *doc.text_analysis);
    if (doc.patching)
        patching(c, *doc.patching);
    if (doc.attribution)
        attribution(c, *doc.attribution);
    if (doc.head_classes)
        heads(c, "lab.head_classes", *doc.head_classes);
    if (doc.head_scan)
        heads(c, "lab.head_scan", *doc.head_scan);
    if (doc.head_classes && doc.head_scan &&
        (doc.head_classes->n_layers != doc.head_scan->n_layers || doc.head_classes->n_heads != doc.head_scan->n_heads))
        refuse("lab.head_scan", "covers another layout of heads than lab.head_classes (n_layers × n_heads)");
    if (doc.ablation)
        ablation(c, *doc.ablation);
    if (doc.steering)
        steering(c, *doc.steering);
    if (doc.serving)
        serving(c, *doc.serving);
    if (doc.speculation)
        speculation(c, *doc.speculation);
    if (doc.experts)
        experts(c, *doc.experts);
}

} // namespace engine::run
