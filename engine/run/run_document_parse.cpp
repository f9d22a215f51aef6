// SPDX-License-Identifier: GPL-3.0-or-later
// The run file's JSON and tensors → Document. Types and shapes are checked here, each refusal naming
// its field; what the values must agree on (counts, ids, limits) is run_validate.cpp's.
#include "run/run_document.h"
#include "run/run_json.h"

#include <set>
#include <spdlog/fmt/fmt.h>

namespace engine::run {

namespace {

std::string item(const std::string& path, std::size_t i)
{
    return fmt::format("{}[{}]", path, i);
}

// The tensors the document names, each taken at most once and checked against the size it must have.
// (Named twice, one array would be copied as often as the document names it: a few bytes of JSON
// asking for gigabytes.)
struct ArrayIn {
    const RunContents& in;
    std::set<std::string> taken;
    std::vector<float> get(const Fields& o, const char* key, uint64_t expected)
    {
        const std::string name = o.string(key);
        if (name.empty())
            return {};
        const RunArray* a = in.find(name);
        if (!a)
            refuse(o.at(key), "it names an array '" + name + "' that the file does not hold");
        if (!taken.insert(name).second)
            refuse(o.at(key), "it names array '" + name + "', which another field already uses");
        if (expected && a->values.size() != expected)
            refuse(o.at(key),
                   fmt::format("array '{}' has {} values where {} are expected", name, a->values.size(), expected));
        return a->values;
    }
};

ModelInfo model_from(const Fields& o)
{
    ModelInfo m;
    m.path = o.string("path");
    m.name = o.string("name");
    m.architecture = o.string("architecture");
    m.parameters = o.count("parameters");
    m.file_size = o.count("file_size");
    m.quant_types = o.string("quant_types");
    m.context_length = uint32_t(o.integer("context_length", 0, 0, UINT32_MAX));
    m.n_ctx = uint32_t(o.integer("n_ctx", 0, 0, UINT32_MAX));
    m.backend = o.string("backend");
    m.threads = int(o.integer("threads"));
    m.chat_format = o.string("chat_format");
    m.instruction_tuned = o.boolean("instruction_tuned");
    m.model_kind_reason = o.string("model_kind_reason"); // absent in runs saved before it was recorded
    m.n_layers = int(o.integer("n_layers"));
    m.sha256 = o.string("sha256");
    return m;
}

std::vector<TokenDoc> tokens_from(const json& a, const std::string& path)
{
    std::vector<TokenDoc> out;
    out.reserve(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        const Fields o(a[i], item(path, i));
        TokenDoc t;
        t.id = int(o.integer("id"));
        t.text = o.string("text");
        t.type = o.string("type");
        t.prompt = o.boolean("prompt", true);
        t.forced = o.boolean("forced");
        t.probability = float(o.number("probability"));
        out.push_back(std::move(t));
    }
    return out;
}

SampleResult sample_from(const Fields& o)
{
    SampleResult r;
    r.token = int32_t(o.integer("token", -1));
    r.probability = float(o.number("probability"));
    const json& stages = o.array("stages");
    for (std::size_t i = 0; i < stages.size(); ++i) {
        const Fields so(stages[i], item(o.at("stages"), i));
        StageView s;
        s.name = so.string("name");
        s.applied = so.boolean("applied", true);
        s.survivors = std::size_t(so.count("survivors"));
        const json& top = so.array("top");
        for (std::size_t j = 0; j < top.size(); ++j) {
            const std::string at = item(so.at("top"), j);
            const json& c = Fields::array_value(top[j], at, 3);
            s.top.push_back({int32_t(Fields::integer_value(c[0], at + "[0]")),
                             float(Fields::number_value(c[1], at + "[1]")),
                             float(Fields::number_value(c[2], at + "[2]"))});
        }
        r.stages.push_back(std::move(s));
    }
    return r;
}

StepperDoc stepper_from(const Fields& o, ArrayIn& arrays)
{
    StepperDoc s;
    const Fields settings = o.object("settings");
    const Fields c = settings.object("sampling");
    s.settings.sampling.temperature = float(c.number("temperature", 0.8));
    s.settings.sampling.top_k = int32_t(c.integer("top_k", 40));
    s.settings.sampling.top_p = float(c.number("top_p", 0.95));
    s.settings.sampling.min_p = float(c.number("min_p", 0.05));
    s.settings.sampling.repeat_penalty = float(c.number("repeat_penalty", 1.0));
    {
        // A string: a 64-bit seed does not survive a JSON number.
        const std::string seed = c.string("seed");
        uint64_t v = 0;
        for (char ch : seed) {
            if (ch < '0' || ch > '9' || v > (UINT64_MAX - uint64_t(ch - '0')) / 10)
                refuse(c.at("seed"), "expected the decimal digits of a 64-bit number");
            v = v * 10 + uint64_t(ch - '0');
        }
        s.settings.sampling.seed = v;
    }
    s.settings.sampling.max_tokens = int32_t(c.integer("max_tokens", 256));
    s.settings.greedy = settings.boolean("greedy");
    s.settings.stop_strings = string_list(settings.array("stop_strings"), settings.at("stop_strings"));
    s.settings.logit_lens = settings.boolean("logit_lens");
    s.settings.lens_top = int(settings.integer("lens_top", 5));
    s.action = o.string("action");
    s.tokens = tokens_from(o.array("tokens"), o.at("tokens"));
    s.prompt_length = int(o.integer("prompt_length"));
    s.steps = int(o.integer("steps"));
    s.prefill_computed = int(o.integer("prefill_computed"));
    s.prefill_reused = int(o.integer("prefill_reused"));
    s.prefill_batches = int(o.integer("prefill_batches"));
    s.prefill_ms = o.number("prefill_ms");
    s.n_layers = int(o.integer("n_layers"));
    s.n_kv_heads = int(o.integer("n_kv_heads"));
    s.kv_tokens = int(o.integer("kv_tokens"));
    s.kv_bytes_in_use = o.count("kv_bytes_in_use");
    s.kv_layer_tokens = int_list(o.array("kv_layer_tokens"), o.at("kv_layer_tokens"));
    s.layer_window = int_list(o.array("layer_window"), o.at("layer_window"));
    s.last_reused = int(o.integer("last_reused"));
    s.last_ms = o.number("last_ms");
    s.history = int_list(o.array("history"), o.at("history"));
    const json& lens = o.array("lens");
    for (std::size_t l = 0; l < lens.size(); ++l) {
        const std::string at = item(o.at("lens"), l);
        const json& row = Fields::array_value(lens[l], at);
        std::vector<LensCandidateDoc> out;
        for (std::size_t i = 0; i < row.size(); ++i) {
            const Fields x(row[i], item(at, i));
            out.push_back({int(x.integer("id")), x.string("text"), float(x.number("p"))});
        }
        s.lens.push_back(std::move(out));
    }
    s.branches = string_list(o.array("branches"), o.at("branches"));
    s.stop_reason = o.string("stop_reason");
    s.generated_text = o.string("generated_text");
    s.logits = arrays.get(o, "logits", 0);
    const json& distributions = o.array("distributions");
    for (std::size_t i = 0; i < distributions.size(); ++i) {
        const Fields r(distributions[i], item(o.at("distributions"), i));
        s.distributions[int(r.integer("position"))] = sample_from(r);
    }
    return s;
}

KvDoc kv_from(const Fields& o)
{
    KvDoc k;
    k.source = o.string("source");
    k.n_ctx = int(o.integer("n_ctx"));
    k.block_tokens = int(o.integer("block_tokens"));
    k.blocks_per_layer = int(o.integer("blocks_per_layer"));
    k.tokens_cached = int(o.integer("tokens_cached"));
    k.prompt_tokens = int(o.integer("prompt_tokens"));
    k.reused_tokens = int(o.integer("reused_tokens"));
    k.n_layers = int(o.integer("n_layers"));
    k.n_kv_heads = int(o.integer("n_kv_heads"));
    k.head_dim = int(o.integer("head_dim"));
    k.bytes_per_value = int(o.integer("bytes_per_value", 2));
    if (o.has("cache_types"))
        k.cache_types = o.string("cache_types");
    k.bytes_in_use = o.count("bytes_in_use");
    k.bytes_allocated = o.count("bytes_allocated");
    k.bytes_per_block = o.count("bytes_per_block");
    k.weight_bytes = o.count("weight_bytes");
    k.device_total = o.count("device_total");
    k.device_available = o.count("device_available");
    k.device = o.string("device");
    const json& layers = o.array("layers");
    for (std::size_t i = 0; i < layers.size(); ++i) {
        const Fields l(layers[i], item(o.at("layers"), i));
        k.layers.push_back({int(l.integer("tokens_in_use")), int(l.integer("blocks")), int(l.integer("first_stored")),
                            int(l.integer("window")), l.count("bytes_in_use"), l.count("bytes_allocated")});
    }
    return k;
}

TimelineDoc timeline_from(const Fields& o)
{
    TimelineDoc t;
    t.source = o.string("source");
    const json& events = o.array("events");
    for (std::size_t i = 0; i < events.size(); ++i) {
        const std::string at = item(o.at("events"), i);
        const json& e = Fields::array_value(events[i], at, 4);
        constexpr int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
        t.events.push_back({int(Fields::integer_value(e[0], at + "[0]")), int(Fields::integer_value(e[1], at + "[1]")),
                            Fields::integer_value(e[2], at + "[2]", lo, hi),
                            Fields::integer_value(e[3], at + "[3]", lo, hi)});
    }
    const json& steps = o.array("steps");
    for (std::size_t i = 0; i < steps.size(); ++i) {
        const Fields s(steps[i], item(o.at("steps"), i));
        t.steps.push_back({int(s.integer("token")), s.string("text"), s.number("forward_ms"), s.number("sample_ms"),
                           s.number("detokenize_ms"), s.number("latency_ms"), s.number("flops"),
                           s.number("bytes_read")});
    }
    t.tokenize_ms = o.number("tokenize_ms");
    t.prefill_ms = o.number("prefill_ms");
    t.prompt_tokens = int(o.integer("prompt_tokens"));
    t.prefill_computed = int(o.integer("prefill_computed"));
    t.prefill_flops = o.number("prefill_flops");
    t.prefill_bytes = o.number("prefill_bytes");
    t.ttft_ms = o.number("ttft_ms");
    t.note = o.string("note");
    // Absent from runs saved before these fields were written: a local run, nothing reported.
    t.remote = o.boolean("remote");
    t.server = o.string("server");
    t.server_prompt_ms = o.number("server_prompt_ms", -1.0);
    t.server_generation_ms = o.number("server_generation_ms", -1.0);
    t.server_generated = int(o.integer("server_generated", -1));
    t.server_drafted = int(o.integer("server_drafted", -1));
    t.server_draft_accepted = int(o.integer("server_draft_accepted", -1));
    t.total_ms = o.number("total_ms");
    return t;
}

AttentionDoc attention_from(const Fields& o, ArrayIn& arrays)
{
    AttentionDoc a;
    a.source = o.string("source");
    a.text = o.string("text");
    a.tokens = tokens_from(o.array("tokens"), o.at("tokens"));
    a.n_layers = int(o.integer("n_layers"));
    a.heads_per_layer = int_list(o.array("heads_per_layer"), o.at("heads_per_layer"));
    a.kv_heads_per_layer = int_list(o.array("kv_heads_per_layer"), o.at("kv_heads_per_layer"));
    a.window = int_list(o.array("window"), o.at("window"));
    a.bytes = o.count("bytes");
    a.ms = o.number("ms");
    const json& heads = o.array("heads");
    for (std::size_t i = 0; i < heads.size(); ++i) {
        const Fields ho(heads[i], item(o.at("heads"), i));
        AttentionHeadDoc h;
        h.layer = int(ho.integer("layer"));
        h.head = int(ho.integer("head"));
        h.kv_head = int(ho.integer("kv_head"));
        h.scale = float(ho.number("scale", 1.0));
        h.softcap = float(ho.number("softcap", 0.0));
        h.n = int(ho.integer("n", 0, 0));
        h.head_dim = int(ho.integer("head_dim", 0, 0));
        const auto n = uint64_t(h.n), d = uint64_t(h.head_dim);
        h.weights = arrays.get(ho, "weights", n * n);
        h.q = arrays.get(ho, "q", n * d);
        h.k = arrays.get(ho, "k", n * d);
        h.v = arrays.get(ho, "v", n * d);
        a.heads.push_back(std::move(h));
    }
    return a;
}

TextAnalysisDoc text_from(const Fields& o)
{
    TextAnalysisDoc t;
    t.model_a = o.string("model_a");
    t.model_b = o.string("model_b");
    t.window = int(o.integer("window"));
    const json& tokens = o.array("tokens");
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        const Fields ko(tokens[i], item(o.at("tokens"), i));
        AnalyzedTokenDoc k;
        k.id = int(ko.integer("id"));
        k.text = ko.string("text");
        k.predicted = ko.boolean("predicted");
        k.p = ko.number("p");
        k.surprisal_bits = ko.number("surprisal_bits");
        k.entropy_bits = ko.number("entropy_bits");
        k.rank = int(ko.integer("rank"));
        const json& top = ko.array("top");
        for (std::size_t j = 0; j < top.size(); ++j) {
            const std::string at = item(ko.at("top"), j);
            const json& c = Fields::array_value(top[j], at, 2);
            k.top.emplace_back(Fields::string_value(c[0], at + "[0]"), Fields::number_value(c[1], at + "[1]"));
        }
        k.kl = ko.number("kl");
        k.reverse_kl = ko.number("reverse_kl");
        k.p_b = ko.number("p_b");
        k.same_top = ko.boolean("same_top", true);
        const json& candidates = ko.array("candidates");
        for (std::size_t j = 0; j < candidates.size(); ++j) {
            const std::string at = item(ko.at("candidates"), j);
            const json& c = Fields::array_value(candidates[j], at, 4);
            k.candidates.push_back({int(Fields::integer_value(c[0], at + "[0]")),
                                    Fields::string_value(c[1], at + "[1]"), Fields::number_value(c[2], at + "[2]"),
                                    Fields::number_value(c[3], at + "[3]")});
        }
        t.tokens.push_back(std::move(k));
    }
    t.perplexity = o.number("perplexity");
    t.mean_kl = o.number("mean_kl");
    t.same_top = o.number("same_top");
    t.rms_dp = o.number("rms_dp");
    t.compared = o.boolean("compared");
    t.cancelled = o.boolean("cancelled");
    t.ms = o.number("ms");
    return t;
}

std::vector<std::vector<double>> grid_from(const json& a, const std::string& path)
{
    std::vector<std::vector<double>> g;
    g.reserve(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        const std::string at = item(path, i);
        g.push_back(number_list(Fields::array_value(a[i], at), at));
    }
    return g;
}

PatchingDoc patching_from(const Fields& o)
{
    PatchingDoc p;
    const Fields s = o.object("settings");
    p.clean = s.string("clean");
    p.corrupted = s.string("corrupted");
    p.metric = int(s.integer("metric"));
    p.settings_token_a = s.string("token_a");
    p.settings_token_b = s.string("token_b");
    p.over = int(s.integer("over"));
    p.clean_pieces = string_list(o.array("clean_pieces"), o.at("clean_pieces"));
    p.corrupted_pieces = string_list(o.array("corrupted_pieces"), o.at("corrupted_pieces"));
    p.token_a = o.string("token_a");
    p.token_b = o.string("token_b");
    p.metric_name = o.string("metric_name");
    p.over_name = o.string("over_name");
    p.backend = o.string("backend");
    p.n_layers = int(o.integer("n_layers"));
    p.n_columns = int(o.integer("n_columns"));
    p.effect = grid_from(o.array("effect"), o.at("effect"));
    p.raw = grid_from(o.array("raw"), o.at("raw"));
    p.clean_metric = o.number("clean_metric");
    p.corrupted_metric = o.number("corrupted_metric");
    p.runs = int(o.integer("runs"));
    p.cancelled = o.boolean("cancelled");
    p.ms = o.number("ms");
    return p;
}

AttributionDoc attribution_from(const Fields& o)
{
    AttributionDoc a;
    a.token = o.string("token");
    a.versus = o.string("versus");
    a.token_id = int(o.integer("token_id", -1));
    a.position = int(o.integer("position"));
    a.logit = o.number("logit");
    a.final_norm_scale = o.number("final_norm_scale");
    const json& parts = o.array("parts");
    for (std::size_t i = 0; i < parts.size(); ++i) {
        const Fields p(parts[i], item(o.at("parts"), i));
        a.parts.push_back({int(p.integer("kind")), p.string("name"), int(p.integer("layer", -1)),
                           int(p.integer("head", -1)), p.number("value")});
    }
    a.backend = o.string("backend");
    a.ms = o.number("ms");
    return a;
}

HeadsDoc heads_from(const Fields& o)
{
    HeadsDoc h;
    h.kind = o.string("kind");
    h.n_layers = int(o.integer("n_layers"));
    h.n_heads = int(o.integer("n_heads"));
    const json& heads = o.array("heads");
    for (std::size_t i = 0; i < heads.size(); ++i) {
        const Fields x(heads[i], item(o.at("heads"), i));
        h.heads.push_back({int(x.integer("layer")), int(x.integer("head")), int(x.integer("class", 5)),
                           number_list(x.array("scores"), x.at("scores")), x.number("entropy"), x.number("kl", -1.0),
                           x.number("logit_change")});
    }
    h.token = o.string("token");
    h.runs = int(o.integer("runs"));
    h.cancelled = o.boolean("cancelled");
    h.ms = o.number("ms");
    return h;
}

std::vector<CandidateDoc> candidates_from(const json& a, const std::string& path)
{
    std::vector<CandidateDoc> out;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const std::string at = item(path, i);
        const json& c = Fields::array_value(a[i], at, 3);
        out.push_back({int(Fields::integer_value(c[0], at + "[0]")), Fields::string_value(c[1], at + "[1]"),
                       Fields::number_value(c[2], at + "[2]")});
    }
    return out;
}

AblationDoc ablation_from(const Fields& o)
{
    AblationDoc a;
    a.before = candidates_from(o.array("before"), o.at("before"));
    a.after = candidates_from(o.array("after"), o.at("after"));
    a.kl = o.number("kl");
    a.token = o.string("token");
    a.logit = o.number("logit");
    a.ablated_logit = o.number("ablated_logit");
    a.positions = int(o.integer("positions"));
    const json& heads = o.array("heads");
    for (std::size_t i = 0; i < heads.size(); ++i) {
        const std::string at = item(o.at("heads"), i);
        const json& h = Fields::array_value(heads[i], at, 2);
        a.heads.emplace_back(int(Fields::integer_value(h[0], at + "[0]")),
                             int(Fields::integer_value(h[1], at + "[1]")));
    }
    return a;
}

SteeringDoc steering_from(const Fields& o, ArrayIn& arrays)
{
    SteeringDoc s;
    const Fields c = o.object("settings");
    s.plus = c.string("plus");
    s.minus = c.string("minus");
    s.prompt = c.string("prompt");
    s.layer = int(c.integer("layer", 6));
    s.strength = c.number("strength", 4.0);
    s.tokens = int(c.integer("tokens", 24));
    s.default_text = o.string("default_text");
    s.steered_text = o.string("steered_text");
    s.kl = o.number("kl");
    s.norm = o.number("norm");
    s.direction = arrays.get(o, "direction", 0);
    s.architecture = o.string("architecture");
    s.n_layers = int(o.integer("n_layers"));
    return s;
}

// JSON nested deeper than the schema is refused before it is parsed: no legitimate run goes past 6
// levels, and a deep nest of brackets costs memory for nothing. (A scan of the text: nlohmann's
// parser callback, which could count depth, is quadratic in the members of an object.)
constexpr int kMaxJsonDepth = 16;

void check_depth(std::string_view text)
{
    int depth = 0;
    bool in_string = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\')
                ++i;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > kMaxJsonDepth)
                throw FormatError(fmt::format("the run's document nests deeper than {} levels", kMaxJsonDepth));
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
}

} // namespace

Document parse_document(const RunContents& contents)
{
    check_depth(contents.document);
    json root;
    try {
        root = json::parse(contents.document);
    } catch (const json::exception& e) {
        throw FormatError(std::string("the run's document is not valid JSON: ") + e.what());
    }
    const Fields o(root, "");
    ArrayIn arrays{contents};
    Document d;
    d.saved_at = o.string("saved_at");
    if (o.has("model")) {
        d.model = model_from(o.object("model"));
    } else {
        // Runs without the document's model part: the file's identity keys say which model it was.
        d.model.emplace();
        d.model->path = d.model->name = contents.model.name;
        d.model->architecture = contents.model.architecture;
        d.model->sha256 = contents.model.sha256;
        d.model->file_size = contents.model.file_size;
    }
    if (o.has("stepper"))
        d.stepper = stepper_from(o.object("stepper"), arrays);
    if (o.has("kv"))
        d.kv = kv_from(o.object("kv"));
    if (o.has("timeline"))
        d.timeline = timeline_from(o.object("timeline"));
    if (o.has("attention"))
        d.attention = attention_from(o.object("attention"), arrays);
    if (o.has("text_analysis"))
        d.text_analysis = text_from(o.object("text_analysis"));
    const Fields lab = o.object("lab");
    if (lab.has("patching"))
        d.patching = patching_from(lab.object("patching"));
    if (lab.has("attribution"))
        d.attribution = attribution_from(lab.object("attribution"));
    if (lab.has("head_classes"))
        d.head_classes = heads_from(lab.object("head_classes"));
    if (lab.has("head_scan"))
        d.head_scan = heads_from(lab.object("head_scan"));
    if (lab.has("ablation"))
        d.ablation = ablation_from(lab.object("ablation"));
    if (lab.has("steering"))
        d.steering = steering_from(lab.object("steering"), arrays);
    if (o.has("serving"))
        d.serving = serving_from(o.object("serving"));
    if (o.has("speculation"))
        d.speculation = speculation_from(o.object("speculation"));
    if (o.has("experts"))
        d.experts = experts_from(o.object("experts"));
    return d;
}

} // namespace engine::run
