// SPDX-License-Identifier: GPL-3.0-or-later
#include "storage/run_document.h"

#include "util/error.h"

#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <cmath>
#include <limits>

namespace tokenscope::ui {

namespace {

// ---- numbers that JSON cannot spell --------------------------------------------------------------
// NaN (a cell not run) is null; infinities are the strings "inf" and "-inf".
QJsonValue num(double v)
{
    if (std::isnan(v))
        return QJsonValue::Null;
    if (std::isinf(v))
        return v > 0 ? QStringLiteral("inf") : QStringLiteral("-inf");
    return v;
}

double num(const QJsonValue& v, double fallback = 0.0)
{
    if (v.isNull())
        return std::numeric_limits<double>::quiet_NaN();
    if (v.isString())
        return v.toString() == "-inf" ? -std::numeric_limits<double>::infinity()
                                      : std::numeric_limits<double>::infinity();
    return v.isUndefined() ? fallback : v.toDouble();
}

float numf(const QJsonValue& v)
{
    return static_cast<float>(num(v));
}
int integer(const QJsonValue& v)
{
    return v.toInt();
}
// Counts of bytes and nanoseconds (below 2^53, exact as doubles).
quint64 count(const QJsonValue& v)
{
    return static_cast<quint64>(v.toDouble());
}
qint64 signed_count(const QJsonValue& v)
{
    return static_cast<qint64>(v.toDouble());
}

QJsonArray ints(const std::vector<int>& v)
{
    QJsonArray a;
    for (int x : v)
        a.append(x);
    return a;
}
std::vector<int> ints(const QJsonValue& v)
{
    std::vector<int> out;
    for (const auto& x : v.toArray())
        out.push_back(x.toInt());
    return out;
}
QJsonArray doubles(const std::vector<double>& v)
{
    QJsonArray a;
    for (double x : v)
        a.append(num(x));
    return a;
}
std::vector<double> doubles(const QJsonValue& v)
{
    std::vector<double> out;
    for (const auto& x : v.toArray())
        out.push_back(num(x));
    return out;
}
QJsonArray strings(const QStringList& v)
{
    return QJsonArray::fromStringList(v);
}
QStringList strings(const QJsonValue& v)
{
    QStringList out;
    for (const auto& x : v.toArray())
        out << x.toString();
    return out;
}

// ---- bulk numbers kept as the file's tensors -------------------------------------------------------
struct Arrays {
    std::vector<engine::run::RunArray>* out = nullptr; // writing
    const engine::run::RunContents* in = nullptr;      // reading
    QString put(const std::string& name, bool f16, std::vector<uint64_t> dims, const std::vector<float>& values)
    {
        if (values.empty())
            return {};
        out->push_back({name, f16, std::move(dims), values});
        return QString::fromStdString(name);
    }
    std::vector<float> get(const QJsonValue& ref, std::size_t expected) const
    {
        const QString name = ref.toString();
        if (name.isEmpty())
            return {};
        const auto* a = in->find(name.toStdString());
        if (!a)
            throw engine::FormatError("the run's document names an array '" + name.toStdString() +
                                      "' that the file does not hold");
        if (expected && a->values.size() != expected)
            throw engine::FormatError("array '" + name.toStdString() + "' has " + std::to_string(a->values.size()) +
                                      " values where " + std::to_string(expected) + " are expected");
        return a->values;
    }
};

// ---- model ------------------------------------------------------------------------------------------
QJsonObject model_json(const ModelSummary& m, const QString& sha256)
{
    // The file's name only: a run is sent to others, the folders of the machine it was made on are not.
    return {{"path", QFileInfo(m.path).fileName()},
            {"name", m.name},
            {"architecture", m.architecture},
            {"parameters", double(m.parameters)},
            {"file_size", double(m.file_size)},
            {"quant_types", m.quant_types},
            {"context_length", double(m.context_length)},
            {"n_ctx", double(m.n_ctx)},
            {"backend", m.backend},
            {"threads", m.threads},
            {"chat_format", m.chat_format},
            {"instruction_tuned", m.instruction_tuned},
            {"model_kind_reason", m.model_kind_reason},
            {"n_layers", m.n_layers},
            {"sha256", sha256}};
}
std::shared_ptr<const ModelSummary> model_from(const QJsonObject& o)
{
    auto m = std::make_shared<ModelSummary>();
    m->path = o["path"].toString();
    m->name = o["name"].toString();
    m->architecture = o["architecture"].toString();
    m->parameters = count(o["parameters"]);
    m->file_size = count(o["file_size"]);
    m->quant_types = o["quant_types"].toString();
    m->context_length = static_cast<quint32>(count(o["context_length"]));
    m->n_ctx = static_cast<quint32>(count(o["n_ctx"]));
    m->backend = o["backend"].toString();
    m->threads = integer(o["threads"]);
    m->chat_format = o["chat_format"].toString();
    m->instruction_tuned = o["instruction_tuned"].toBool();
    m->model_kind_reason = o["model_kind_reason"].toString(); // absent in runs saved before it was recorded
    m->n_layers = integer(o["n_layers"]);
    return m;
}

// ---- stepper ----------------------------------------------------------------------------------------
QJsonObject sampling_json(const SamplingSettings& s)
{
    return {{"temperature", double(s.temperature)},
            {"top_k", s.top_k},
            {"top_p", double(s.top_p)},
            {"min_p", double(s.min_p)},
            {"repeat_penalty", double(s.repeat_penalty)},
            {"seed", QString::number(s.seed)},
            {"max_tokens", s.max_tokens}};
}
SamplingSettings sampling_from(const QJsonObject& o)
{
    SamplingSettings s;
    s.temperature = numf(o["temperature"]);
    s.top_k = integer(o["top_k"]);
    s.top_p = numf(o["top_p"]);
    s.min_p = numf(o["min_p"]);
    s.repeat_penalty = numf(o["repeat_penalty"]);
    s.seed = o["seed"].toString().toULongLong();
    s.max_tokens = integer(o["max_tokens"]);
    return s;
}
QJsonObject stepper_settings_json(const StepperSettings& s)
{
    return {{"sampling", sampling_json(s.sampling)},
            {"greedy", s.greedy},
            {"stop_strings", strings(s.stop_strings)},
            {"logit_lens", s.logit_lens},
            {"lens_top", s.lens_top}};
}
StepperSettings stepper_settings_from(const QJsonObject& o)
{
    StepperSettings s;
    s.sampling = sampling_from(o["sampling"].toObject());
    s.greedy = o["greedy"].toBool();
    s.stop_strings = strings(o["stop_strings"]);
    s.logit_lens = o["logit_lens"].toBool();
    s.lens_top = integer(o["lens_top"]);
    return s;
}
QJsonArray tokens_json(const std::vector<StepperToken>& tokens)
{
    QJsonArray a;
    for (const auto& t : tokens)
        a.append(QJsonObject{{"id", t.id},
                             {"text", t.text},
                             {"type", t.type},
                             {"prompt", t.prompt},
                             {"forced", t.forced},
                             {"probability", double(t.probability)}});
    return a;
}
std::vector<StepperToken> tokens_from(const QJsonValue& v)
{
    std::vector<StepperToken> out;
    for (const auto& x : v.toArray()) {
        const QJsonObject o = x.toObject();
        StepperToken t;
        t.id = integer(o["id"]);
        t.text = o["text"].toString();
        t.type = o["type"].toString();
        t.prompt = o["prompt"].toBool();
        t.forced = o["forced"].toBool();
        t.probability = numf(o["probability"]);
        out.push_back(std::move(t));
    }
    return out;
}
// A distribution with its sampling stages: candidates as [id, logit, probability].
QJsonObject sample_json(const engine::SampleResult& r)
{
    QJsonArray stages;
    for (const auto& s : r.stages) {
        QJsonArray top;
        for (const auto& c : s.top)
            top.append(QJsonArray{c.id, num(double(c.logit)), num(double(c.probability))});
        stages.append(QJsonObject{{"name", QString::fromStdString(s.name)},
                                  {"applied", s.applied},
                                  {"survivors", double(s.survivors)},
                                  {"top", top}});
    }
    return {{"token", r.token}, {"probability", double(r.probability)}, {"stages", stages}};
}
engine::SampleResult sample_from(const QJsonObject& o)
{
    engine::SampleResult r;
    r.token = integer(o["token"]);
    r.probability = numf(o["probability"]);
    for (const auto& sv : o["stages"].toArray()) {
        const QJsonObject so = sv.toObject();
        engine::StageView s;
        s.name = so["name"].toString().toStdString();
        s.applied = so["applied"].toBool();
        s.survivors = static_cast<std::size_t>(count(so["survivors"]));
        for (const auto& cv : so["top"].toArray()) {
            const QJsonArray c = cv.toArray();
            s.top.push_back({c.at(0).toInt(), numf(c.at(1)), numf(c.at(2))});
        }
        r.stages.push_back(std::move(s));
    }
    return r;
}

QJsonObject stepper_json(const RunDocument& d, Arrays& arrays)
{
    const StepperState& s = *d.stepper;
    QJsonArray lens;
    for (const auto& layer : s.lens) {
        QJsonArray row;
        for (const auto& c : layer)
            row.append(QJsonObject{{"id", c.id}, {"text", c.text}, {"p", double(c.probability)}});
        lens.append(row);
    }
    QJsonArray distributions;
    for (const auto& [position, r] : d.distributions) {
        QJsonObject o = sample_json(r);
        o["position"] = position;
        distributions.append(o);
    }
    QJsonObject o{{"settings", stepper_settings_json(d.stepper_settings)},
                  {"action", s.action},
                  {"tokens", tokens_json(s.tokens)},
                  {"prompt_length", s.prompt_length},
                  {"steps", s.steps},
                  {"prefill_computed", s.prefill_computed},
                  {"prefill_reused", s.prefill_reused},
                  {"prefill_batches", s.prefill_batches},
                  {"prefill_ms", s.prefill_ms},
                  {"n_layers", s.n_layers},
                  {"n_kv_heads", s.n_kv_heads},
                  {"kv_tokens", s.kv_tokens},
                  {"kv_bytes_in_use", double(s.kv_bytes_in_use)},
                  {"kv_layer_tokens", ints(s.kv_layer_tokens)},
                  {"layer_window", ints(s.layer_window)},
                  {"last_reused", s.last_reused},
                  {"last_ms", s.last_ms},
                  {"history", ints(s.history)},
                  {"lens", lens},
                  {"branches", strings(s.branches)},
                  {"stop_reason", s.stop_reason},
                  {"generated_text", s.generated_text},
                  {"distributions", distributions}};
    if (s.logits)
        o["logits"] = arrays.put("stepper.logits", false, {s.logits->size()}, *s.logits);
    return o;
}
void stepper_from(const QJsonObject& o, const Arrays& arrays, RunDocument& d)
{
    auto s = std::make_shared<StepperState>();
    d.stepper_settings = stepper_settings_from(o["settings"].toObject());
    s->action = "replay";
    s->tokens = tokens_from(o["tokens"]);
    s->prompt_length = integer(o["prompt_length"]);
    s->steps = integer(o["steps"]);
    s->prefill_computed = integer(o["prefill_computed"]);
    s->prefill_reused = integer(o["prefill_reused"]);
    s->prefill_batches = integer(o["prefill_batches"]);
    s->prefill_ms = num(o["prefill_ms"]);
    s->n_layers = integer(o["n_layers"]);
    s->n_kv_heads = integer(o["n_kv_heads"]);
    s->kv_tokens = integer(o["kv_tokens"]);
    s->kv_bytes_in_use = count(o["kv_bytes_in_use"]);
    s->kv_layer_tokens = ints(o["kv_layer_tokens"]);
    s->layer_window = ints(o["layer_window"]);
    s->last_reused = integer(o["last_reused"]);
    s->last_ms = num(o["last_ms"]);
    s->history = ints(o["history"]);
    for (const auto& layer : o["lens"].toArray()) {
        std::vector<LensCandidate> row;
        for (const auto& c : layer.toArray()) {
            const QJsonObject co = c.toObject();
            row.push_back({integer(co["id"]), co["text"].toString(), numf(co["p"])});
        }
        s->lens.push_back(std::move(row));
    }
    s->branches = strings(o["branches"]);
    s->stop_reason = o["stop_reason"].toString();
    s->generated_text = o["generated_text"].toString();
    auto logits = arrays.get(o["logits"], 0);
    if (!logits.empty())
        s->logits = std::make_shared<const std::vector<float>>(std::move(logits));
    s->tokenizer = d.tokenizer;
    for (const auto& v : o["distributions"].toArray()) {
        const QJsonObject r = v.toObject();
        d.distributions[integer(r["position"])] = sample_from(r);
    }
    d.stepper = std::move(s);
}

// ---- KV accounting and the timeline ------------------------------------------------------------------
QJsonObject kv_json(const KvSnapshot& k)
{
    QJsonArray layers;
    for (const auto& l : k.layers)
        layers.append(QJsonObject{{"tokens_in_use", l.tokens_in_use},
                                  {"blocks", l.blocks},
                                  {"first_stored", l.first_stored},
                                  {"window", l.window},
                                  {"bytes_in_use", double(l.bytes_in_use)},
                                  {"bytes_allocated", double(l.bytes_allocated)}});
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
            {"bytes_in_use", double(k.bytes_in_use)},
            {"bytes_allocated", double(k.bytes_allocated)},
            {"bytes_per_block", double(k.bytes_per_block)},
            {"weight_bytes", double(k.weight_bytes)},
            {"device_total", double(k.device_total)},
            {"device_available", double(k.device_available)},
            {"device", k.device},
            {"layers", layers}};
}
std::shared_ptr<const KvSnapshot> kv_from(const QJsonObject& o)
{
    auto k = std::make_shared<KvSnapshot>();
    k->source = o["source"].toString();
    k->n_ctx = integer(o["n_ctx"]);
    k->block_tokens = integer(o["block_tokens"]);
    k->blocks_per_layer = integer(o["blocks_per_layer"]);
    k->tokens_cached = integer(o["tokens_cached"]);
    k->prompt_tokens = integer(o["prompt_tokens"]);
    k->reused_tokens = integer(o["reused_tokens"]);
    k->n_layers = integer(o["n_layers"]);
    k->n_kv_heads = integer(o["n_kv_heads"]);
    k->head_dim = integer(o["head_dim"]);
    k->bytes_per_value = integer(o["bytes_per_value"]);
    k->bytes_in_use = count(o["bytes_in_use"]);
    k->bytes_allocated = count(o["bytes_allocated"]);
    k->bytes_per_block = count(o["bytes_per_block"]);
    k->weight_bytes = count(o["weight_bytes"]);
    k->device_total = count(o["device_total"]);
    k->device_available = count(o["device_available"]);
    k->device = o["device"].toString();
    for (const auto& v : o["layers"].toArray()) {
        const QJsonObject l = v.toObject();
        k->layers.push_back({integer(l["tokens_in_use"]), integer(l["blocks"]), integer(l["first_stored"]),
                             integer(l["window"]), count(l["bytes_in_use"]), count(l["bytes_allocated"])});
    }
    return k;
}

QJsonObject timeline_json(const TimelineSnapshot& t)
{
    QJsonArray events;
    for (const auto& e : t.events)
        events.append(QJsonArray{e.stage, e.step, double(e.begin_ns), double(e.end_ns)});
    QJsonArray steps;
    for (const auto& s : t.steps)
        steps.append(QJsonObject{{"token", s.token},
                                 {"text", s.text},
                                 {"forward_ms", s.forward_ms},
                                 {"sample_ms", s.sample_ms},
                                 {"detokenize_ms", s.detokenize_ms},
                                 {"latency_ms", s.latency_ms},
                                 {"flops", s.flops},
                                 {"bytes_read", s.bytes_read}});
    return {{"source", t.source},
            {"events", events},
            {"steps", steps},
            {"tokenize_ms", t.tokenize_ms},
            {"prefill_ms", t.prefill_ms},
            {"prompt_tokens", t.prompt_tokens},
            {"prefill_computed", t.prefill_computed},
            {"prefill_flops", t.prefill_flops},
            {"prefill_bytes", t.prefill_bytes},
            {"ttft_ms", t.ttft_ms},
            {"note", t.note},
            // A served model's reply: measured here on the stream, the server's own account beside it.
            {"remote", t.remote},
            {"server", t.server},
            {"server_prompt_ms", t.server_prompt_ms},
            {"server_generation_ms", t.server_generation_ms},
            {"server_generated", t.server_generated},
            {"total_ms", t.total_ms}};
}
std::shared_ptr<const TimelineSnapshot> timeline_from(const QJsonObject& o)
{
    auto t = std::make_shared<TimelineSnapshot>();
    t->source = o["source"].toString();
    t->live = false;
    for (const auto& v : o["events"].toArray()) {
        const QJsonArray e = v.toArray();
        t->events.push_back({e.at(0).toInt(), e.at(1).toInt(), signed_count(e.at(2)), signed_count(e.at(3))});
    }
    for (const auto& v : o["steps"].toArray()) {
        const QJsonObject s = v.toObject();
        t->steps.push_back({integer(s["token"]), s["text"].toString(), num(s["forward_ms"]), num(s["sample_ms"]),
                            num(s["detokenize_ms"]), num(s["latency_ms"]), num(s["flops"]), num(s["bytes_read"])});
    }
    t->tokenize_ms = num(o["tokenize_ms"]);
    t->prefill_ms = num(o["prefill_ms"]);
    t->prompt_tokens = integer(o["prompt_tokens"]);
    t->prefill_computed = integer(o["prefill_computed"]);
    t->prefill_flops = num(o["prefill_flops"]);
    t->prefill_bytes = num(o["prefill_bytes"]);
    t->ttft_ms = num(o["ttft_ms"]);
    t->note = o["note"].toString();
    // Absent from runs saved before these fields were written: a local run, nothing reported.
    t->remote = o["remote"].toBool();
    t->server = o["server"].toString();
    t->server_prompt_ms = num(o["server_prompt_ms"], -1.0);
    t->server_generation_ms = num(o["server_generation_ms"], -1.0);
    t->server_generated = o["server_generated"].isDouble() ? integer(o["server_generated"]) : -1;
    t->total_ms = num(o["total_ms"]);
    return t;
}

// ---- attention (F16 arrays) ---------------------------------------------------------------------------
QJsonObject attention_json(const AttentionSnapshot& a, Arrays& arrays)
{
    QJsonArray heads;
    for (const auto& h : a.heads) {
        const std::string base = "attention." + std::to_string(h.layer) + "." + std::to_string(h.head);
        const auto n = uint64_t(h.n), d = uint64_t(h.head_dim);
        heads.append(QJsonObject{{"layer", h.layer},
                                 {"head", h.head},
                                 {"kv_head", h.kv_head},
                                 {"scale", double(h.scale)},
                                 {"n", h.n},
                                 {"head_dim", h.head_dim},
                                 {"weights", arrays.put(base + ".weights", true, {n, n}, h.weights)},
                                 {"q", arrays.put(base + ".q", true, {n, d}, h.q)},
                                 {"k", arrays.put(base + ".k", true, {n, d}, h.k)},
                                 {"v", arrays.put(base + ".v", true, {n, d}, h.v)}});
    }
    return {{"source", a.source},
            {"text", a.text},
            {"tokens", tokens_json(a.tokens)},
            {"n_layers", a.n_layers},
            {"heads_per_layer", ints(a.heads_per_layer)},
            {"kv_heads_per_layer", ints(a.kv_heads_per_layer)},
            {"window", ints(a.window)},
            {"bytes", double(a.bytes)},
            {"ms", a.ms},
            {"heads", heads}};
}
std::shared_ptr<const AttentionSnapshot> attention_from(const QJsonObject& o, const Arrays& arrays)
{
    auto a = std::make_shared<AttentionSnapshot>();
    a->source = o["source"].toString();
    a->text = o["text"].toString();
    a->tokens = tokens_from(o["tokens"]);
    a->n_layers = integer(o["n_layers"]);
    a->heads_per_layer = ints(o["heads_per_layer"]);
    a->kv_heads_per_layer = ints(o["kv_heads_per_layer"]);
    a->window = ints(o["window"]);
    a->bytes = count(o["bytes"]);
    a->ms = num(o["ms"]);
    for (const auto& v : o["heads"].toArray()) {
        const QJsonObject ho = v.toObject();
        AttentionHead h;
        h.layer = integer(ho["layer"]);
        h.head = integer(ho["head"]);
        h.kv_head = integer(ho["kv_head"]);
        h.scale = numf(ho["scale"]);
        h.n = integer(ho["n"]);
        h.head_dim = integer(ho["head_dim"]);
        if (h.n < 0 || h.head_dim < 0)
            throw engine::FormatError("an attention head of the run has a negative size");
        const auto n = std::size_t(h.n), d = std::size_t(h.head_dim);
        h.weights = arrays.get(ho["weights"], n * n);
        h.q = arrays.get(ho["q"], n * d);
        h.k = arrays.get(ho["k"], n * d);
        h.v = arrays.get(ho["v"], n * d);
        a->heads.push_back(std::move(h));
    }
    return a;
}

// ---- text analysis ----------------------------------------------------------------------------------
QJsonObject text_json(const TextAnalysisSnapshot& t)
{
    QJsonArray tokens;
    for (const auto& k : t.tokens) {
        QJsonArray top, candidates;
        for (const auto& [text, p] : k.top)
            top.append(QJsonArray{text, num(p)});
        for (const auto& c : k.candidates)
            candidates.append(QJsonArray{c.id, c.text, num(c.p_a), num(c.p_b)});
        tokens.append(QJsonObject{{"id", k.id},
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
            {"ms", t.ms}};
}
std::shared_ptr<const TextAnalysisSnapshot> text_from(const QJsonObject& o, const RunDocument& d)
{
    auto t = std::make_shared<TextAnalysisSnapshot>();
    t->model_a = o["model_a"].toString();
    t->model_b = o["model_b"].toString();
    t->window = integer(o["window"]);
    for (const auto& v : o["tokens"].toArray()) {
        const QJsonObject ko = v.toObject();
        AnalyzedToken k;
        k.id = integer(ko["id"]);
        k.text = ko["text"].toString();
        k.predicted = ko["predicted"].toBool();
        k.p = num(ko["p"]);
        k.surprisal_bits = num(ko["surprisal_bits"]);
        k.entropy_bits = num(ko["entropy_bits"]);
        k.rank = integer(ko["rank"]);
        for (const auto& c : ko["top"].toArray())
            k.top.emplace_back(c.toArray().at(0).toString(), num(c.toArray().at(1)));
        k.kl = num(ko["kl"]);
        k.reverse_kl = num(ko["reverse_kl"]);
        k.p_b = num(ko["p_b"]);
        k.same_top = ko["same_top"].toBool();
        for (const auto& c : ko["candidates"].toArray()) {
            const QJsonArray ca = c.toArray();
            k.candidates.push_back({ca.at(0).toInt(), ca.at(1).toString(), num(ca.at(2)), num(ca.at(3))});
        }
        t->tokens.push_back(std::move(k));
    }
    t->perplexity = num(o["perplexity"]);
    t->mean_kl = num(o["mean_kl"]);
    t->same_top = num(o["same_top"]);
    t->rms_dp = num(o["rms_dp"]);
    t->compared = o["compared"].toBool();
    t->cancelled = o["cancelled"].toBool();
    t->ms = num(o["ms"]);
    t->tokenizer = d.tokenizer;
    return t;
}

// ---- the lab ------------------------------------------------------------------------------------------
QJsonArray grid_json(const std::vector<std::vector<double>>& g)
{
    QJsonArray a;
    for (const auto& row : g)
        a.append(doubles(row));
    return a;
}
std::vector<std::vector<double>> grid_from(const QJsonValue& v)
{
    std::vector<std::vector<double>> g;
    for (const auto& row : v.toArray())
        g.push_back(doubles(row));
    return g;
}
QJsonObject patching_json(const PatchingSnapshot& p)
{
    const auto& s = p.settings;
    return {{"settings", QJsonObject{{"clean", s.clean},
                                     {"corrupted", s.corrupted},
                                     {"metric", s.metric},
                                     {"token_a", s.token_a},
                                     {"token_b", s.token_b},
                                     {"over", s.over}}},
            {"clean_pieces", strings(p.clean_pieces)},
            {"corrupted_pieces", strings(p.corrupted_pieces)},
            {"token_a", p.token_a},
            {"token_b", p.token_b},
            {"metric_name", p.metric_name},
            {"over_name", p.over_name},
            {"backend", p.backend},
            {"n_layers", p.n_layers},
            {"n_columns", p.n_columns},
            {"effect", grid_json(p.effect)},
            {"raw", grid_json(p.raw)},
            {"clean_metric", num(p.clean_metric)},
            {"corrupted_metric", num(p.corrupted_metric)},
            {"runs", p.runs},
            {"cancelled", p.cancelled},
            {"ms", p.ms}};
}
std::shared_ptr<const PatchingSnapshot> patching_from(const QJsonObject& o)
{
    auto p = std::make_shared<PatchingSnapshot>();
    const QJsonObject s = o["settings"].toObject();
    p->settings = {s["clean"].toString(),   s["corrupted"].toString(), integer(s["metric"]),
                   s["token_a"].toString(), s["token_b"].toString(),   integer(s["over"])};
    p->clean_pieces = strings(o["clean_pieces"]);
    p->corrupted_pieces = strings(o["corrupted_pieces"]);
    p->token_a = o["token_a"].toString();
    p->token_b = o["token_b"].toString();
    p->metric_name = o["metric_name"].toString();
    p->over_name = o["over_name"].toString();
    p->backend = o["backend"].toString();
    p->n_layers = integer(o["n_layers"]);
    p->n_columns = integer(o["n_columns"]);
    p->effect = grid_from(o["effect"]);
    p->raw = grid_from(o["raw"]);
    p->clean_metric = num(o["clean_metric"]);
    p->corrupted_metric = num(o["corrupted_metric"]);
    p->runs = integer(o["runs"]);
    p->cancelled = o["cancelled"].toBool();
    p->ms = num(o["ms"]);
    return p;
}
QJsonObject attribution_json(const AttributionSnapshot& a)
{
    QJsonArray parts;
    for (const auto& p : a.parts)
        parts.append(QJsonObject{
            {"kind", p.kind}, {"name", p.name}, {"layer", p.layer}, {"head", p.head}, {"value", num(p.value)}});
    return {{"token", a.token},       {"versus", a.versus},    {"token_id", a.token_id},
            {"position", a.position}, {"logit", num(a.logit)}, {"final_norm_scale", num(a.final_norm_scale)},
            {"parts", parts},         {"backend", a.backend},  {"ms", a.ms}};
}
std::shared_ptr<const AttributionSnapshot> attribution_from(const QJsonObject& o)
{
    auto a = std::make_shared<AttributionSnapshot>();
    a->token = o["token"].toString();
    a->versus = o["versus"].toString();
    a->token_id = integer(o["token_id"]);
    a->position = integer(o["position"]);
    a->logit = num(o["logit"]);
    a->final_norm_scale = num(o["final_norm_scale"]);
    for (const auto& v : o["parts"].toArray()) {
        const QJsonObject p = v.toObject();
        a->parts.push_back(
            {integer(p["kind"]), p["name"].toString(), integer(p["layer"]), integer(p["head"]), num(p["value"])});
    }
    a->backend = o["backend"].toString();
    a->ms = num(o["ms"]);
    return a;
}
QJsonObject heads_json(const HeadsSnapshot& h)
{
    QJsonArray heads;
    for (const auto& i : h.heads)
        heads.append(QJsonObject{{"layer", i.layer},
                                 {"head", i.head},
                                 {"class", i.cls},
                                 {"scores", doubles(i.scores)},
                                 {"entropy", num(i.entropy)},
                                 {"kl", num(i.kl)},
                                 {"logit_change", num(i.logit_change)}});
    return {{"kind", h.kind},   {"n_layers", h.n_layers}, {"n_heads", h.n_heads},     {"heads", heads},
            {"token", h.token}, {"runs", h.runs},         {"cancelled", h.cancelled}, {"ms", h.ms}};
}
std::shared_ptr<const HeadsSnapshot> heads_from(const QJsonObject& o)
{
    auto h = std::make_shared<HeadsSnapshot>();
    h->kind = o["kind"].toString();
    h->n_layers = integer(o["n_layers"]);
    h->n_heads = integer(o["n_heads"]);
    for (const auto& v : o["heads"].toArray()) {
        const QJsonObject i = v.toObject();
        h->heads.push_back({integer(i["layer"]), integer(i["head"]), integer(i["class"]), doubles(i["scores"]),
                            num(i["entropy"]), num(i["kl"]), num(i["logit_change"])});
    }
    h->token = o["token"].toString();
    h->runs = integer(o["runs"]);
    h->cancelled = o["cancelled"].toBool();
    h->ms = num(o["ms"]);
    return h;
}
QJsonArray candidates_json(const std::vector<CandidateUi>& v)
{
    QJsonArray a;
    for (const auto& c : v)
        a.append(QJsonArray{c.id, c.text, num(c.p)});
    return a;
}
std::vector<CandidateUi> candidates_from(const QJsonValue& v)
{
    std::vector<CandidateUi> out;
    for (const auto& x : v.toArray()) {
        const QJsonArray c = x.toArray();
        out.push_back({c.at(0).toInt(), c.at(1).toString(), num(c.at(2))});
    }
    return out;
}
QJsonObject ablation_json(const AblationSnapshot& a)
{
    QJsonArray heads;
    for (const auto& [layer, head] : a.heads)
        heads.append(QJsonArray{layer, head});
    return {{"heads", heads},
            {"before", candidates_json(a.before)},
            {"after", candidates_json(a.after)},
            {"kl", num(a.kl)},
            {"token", a.token},
            {"logit", num(a.logit)},
            {"ablated_logit", num(a.ablated_logit)},
            {"positions", a.positions}};
}
std::shared_ptr<const AblationSnapshot> ablation_from(const QJsonObject& o)
{
    auto a = std::make_shared<AblationSnapshot>();
    a->before = candidates_from(o["before"]);
    a->after = candidates_from(o["after"]);
    a->kl = num(o["kl"]);
    a->token = o["token"].toString();
    a->logit = num(o["logit"]);
    a->ablated_logit = num(o["ablated_logit"]);
    a->positions = integer(o["positions"]);
    for (const auto& v : o["heads"].toArray())
        a->heads.emplace_back(v.toArray().at(0).toInt(), v.toArray().at(1).toInt());
    return a;
}
QJsonObject steering_json(const SteeringSnapshot& s, Arrays& arrays)
{
    const auto& c = s.settings;
    return {{"settings", QJsonObject{{"plus", c.plus},
                                     {"minus", c.minus},
                                     {"prompt", c.prompt},
                                     {"layer", c.layer},
                                     {"strength", c.strength},
                                     {"tokens", c.tokens}}},
            {"default_text", s.default_text},
            {"steered_text", s.steered_text},
            {"kl", num(s.kl)},
            {"norm", num(s.norm)},
            {"direction", arrays.put("steering.direction", false, {s.direction.size()}, s.direction)},
            {"architecture", s.architecture},
            {"n_layers", s.n_layers}};
}
std::shared_ptr<const SteeringSnapshot> steering_from(const QJsonObject& o, const Arrays& arrays)
{
    auto s = std::make_shared<SteeringSnapshot>();
    const QJsonObject c = o["settings"].toObject();
    s->settings = {c["plus"].toString(), c["minus"].toString(), c["prompt"].toString(),
                   integer(c["layer"]),  num(c["strength"]),    integer(c["tokens"])};
    s->default_text = o["default_text"].toString();
    s->steered_text = o["steered_text"].toString();
    s->kl = num(o["kl"]);
    s->norm = num(o["norm"]);
    s->direction = arrays.get(o["direction"], 0);
    s->architecture = o["architecture"].toString();
    s->n_layers = integer(o["n_layers"]);
    return s;
}

} // namespace

QString RunDocument::parts() const
{
    QStringList p;
    if (stepper)
        p << QObject::tr("stepper (%1 tokens, %2 steps)").arg(stepper->tokens.size()).arg(stepper->steps);
    if (attention)
        p << QObject::tr("attention (%1 heads over %2 tokens)")
                 .arg(attention->heads.size())
                 .arg(attention->tokens.size());
    if (kv)
        p << QObject::tr("KV cache");
    if (timeline)
        p << QObject::tr("timeline (%1 steps)").arg(timeline->steps.size());
    if (text)
        p << (text->compared ? QObject::tr("comparison (%1 tokens)") : QObject::tr("text analysis (%1 tokens)"))
                 .arg(text->tokens.size());
    if (patching)
        p << QObject::tr("patching");
    if (attribution)
        p << QObject::tr("attribution");
    if (head_classes)
        p << QObject::tr("head classes");
    if (head_scan)
        p << QObject::tr("ablation scan");
    if (ablation)
        p << QObject::tr("ablation");
    if (steering)
        p << QObject::tr("steering");
    return p.join(", ");
}

engine::run::RunContents to_run_contents(const RunDocument& doc)
{
    engine::run::RunContents c;
    Arrays arrays;
    arrays.out = &c.arrays;
    QJsonObject root{{"format", int(engine::run::kFormatVersion)}, {"saved_at", doc.saved_at}};
    if (doc.model) {
        root["model"] = model_json(*doc.model, doc.model_sha256);
        c.model.name = doc.model->name.toStdString();
        c.model.architecture = doc.model->architecture.toStdString();
        c.model.file_size = doc.model->file_size;
    }
    c.model.sha256 = doc.model_sha256.toStdString();
    if (doc.stepper)
        root["stepper"] = stepper_json(doc, arrays);
    if (doc.kv)
        root["kv"] = kv_json(*doc.kv);
    if (doc.timeline)
        root["timeline"] = timeline_json(*doc.timeline);
    if (doc.attention)
        root["attention"] = attention_json(*doc.attention, arrays);
    if (doc.text)
        root["text_analysis"] = text_json(*doc.text);
    QJsonObject lab;
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
    if (!lab.isEmpty())
        root["lab"] = lab;
    c.document = QJsonDocument(root).toJson(QJsonDocument::Compact).toStdString();
    c.writer = "Tokenscope " TOKENSCOPE_VERSION;
    return c;
}

RunDocument run_document_from(const engine::run::OpenedRun& opened, const QString& path)
{
    QJsonParseError error;
    const QJsonDocument json = QJsonDocument::fromJson(QByteArray::fromStdString(opened.contents.document), &error);
    if (!json.isObject())
        throw engine::FormatError("the run's document cannot be read: " + error.errorString().toStdString());
    const QJsonObject root = json.object();
    RunDocument d;
    d.path = path;
    d.file_size = opened.file_size;
    d.tokenizer = opened.tokenizer;
    d.file = opened.file;
    d.writer = QString::fromStdString(opened.contents.writer);
    d.saved_at = root["saved_at"].toString();
    Arrays arrays;
    arrays.in = &opened.contents;
    if (root.contains("model")) {
        d.model = model_from(root["model"].toObject());
        d.model_sha256 = root["model"].toObject()["sha256"].toString();
    } else {
        auto m = std::make_shared<ModelSummary>();
        m->name = QString::fromStdString(opened.contents.model.name);
        m->architecture = QString::fromStdString(opened.contents.model.architecture);
        m->file_size = opened.contents.model.file_size;
        d.model = std::move(m);
        d.model_sha256 = QString::fromStdString(opened.contents.model.sha256);
    }
    if (root.contains("stepper"))
        stepper_from(root["stepper"].toObject(), arrays, d);
    if (root.contains("kv"))
        d.kv = kv_from(root["kv"].toObject());
    if (root.contains("timeline"))
        d.timeline = timeline_from(root["timeline"].toObject());
    if (root.contains("attention"))
        d.attention = attention_from(root["attention"].toObject(), arrays);
    if (root.contains("text_analysis"))
        d.text = text_from(root["text_analysis"].toObject(), d);
    const QJsonObject lab = root["lab"].toObject();
    if (lab.contains("patching"))
        d.patching = patching_from(lab["patching"].toObject());
    if (lab.contains("attribution"))
        d.attribution = attribution_from(lab["attribution"].toObject());
    if (lab.contains("head_classes"))
        d.head_classes = heads_from(lab["head_classes"].toObject());
    if (lab.contains("head_scan"))
        d.head_scan = heads_from(lab["head_scan"].toObject());
    if (lab.contains("ablation"))
        d.ablation = ablation_from(lab["ablation"].toObject());
    if (lab.contains("steering"))
        d.steering = steering_from(lab["steering"].toObject(), arrays);
    return d;
}

} // namespace tokenscope::ui
