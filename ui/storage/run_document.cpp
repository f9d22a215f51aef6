// SPDX-License-Identifier: GPL-3.0-or-later
// The panels' snapshots ↔ the engine's run document (engine/run/run_document.h): field for field,
// strings as UTF-8. The JSON, the tensors and the checks live in the engine, shared with the CLI.
#include "storage/run_document.h"

#include "bridge/token_text.h"
#include "widgets/count_text.h"

#include "kv/kv_cache_types.h"
#include "run/run_document.h"
#include "run/run_validate.h"
#include "util/error.h"

#include <QFileInfo>
#include <QObject>

namespace tokenscope::ui {

namespace {

namespace run = engine::run;

std::string s(const QString& q)
{
    return q.toStdString();
}
QString q(const std::string& s)
{
    return QString::fromStdString(s);
}
std::vector<std::string> s(const QStringList& l)
{
    std::vector<std::string> out;
    out.reserve(std::size_t(l.size()));
    for (const auto& x : l)
        out.push_back(x.toStdString());
    return out;
}
QStringList q(const std::vector<std::string>& v)
{
    QStringList out;
    out.reserve(qsizetype(v.size()));
    for (const auto& x : v)
        out << QString::fromStdString(x);
    return out;
}

// ---- model ------------------------------------------------------------------------------------------
run::ModelInfo model_doc(const ModelSummary& m, const QString& sha256)
{
    // The file's name only: a run is sent to others, the folders of the machine it was made on are not.
    return {s(QFileInfo(m.path).fileName()),
            s(m.name),
            s(m.architecture),
            m.parameters,
            m.file_size,
            s(m.quant_types),
            m.context_length,
            m.n_ctx,
            s(m.backend),
            m.threads,
            s(m.chat_format),
            m.instruction_tuned,
            s(m.model_kind_reason),
            m.n_layers,
            s(sha256)};
}
std::shared_ptr<const ModelSummary> model_from(const run::ModelInfo& d)
{
    auto m = std::make_shared<ModelSummary>();
    m->path = q(d.path);
    m->name = q(d.name);
    m->architecture = q(d.architecture);
    m->parameters = d.parameters;
    m->file_size = d.file_size;
    m->quant_types = q(d.quant_types);
    m->context_length = d.context_length;
    m->n_ctx = d.n_ctx;
    m->backend = q(d.backend);
    m->threads = d.threads;
    m->chat_format = q(d.chat_format);
    m->instruction_tuned = d.instruction_tuned;
    m->model_kind_reason = q(d.model_kind_reason);
    m->n_layers = d.n_layers;
    return m;
}

// ---- stepper ----------------------------------------------------------------------------------------
std::vector<run::TokenDoc> tokens_doc(const std::vector<StepperToken>& tokens)
{
    std::vector<run::TokenDoc> out;
    out.reserve(tokens.size());
    for (const auto& t : tokens)
        out.push_back({t.id, s(t.text), s(t.type), t.prompt, t.forced, t.probability});
    return out;
}
std::vector<StepperToken> tokens_from(const std::vector<run::TokenDoc>& tokens)
{
    std::vector<StepperToken> out;
    out.reserve(tokens.size());
    for (const auto& t : tokens)
        out.push_back({t.id, q(t.text), q(t.type), t.prompt, t.forced, t.probability});
    return out;
}

run::StepperDoc stepper_doc(const RunDocument& d)
{
    const StepperState& st = *d.stepper;
    run::StepperDoc o;
    o.settings = {d.stepper_settings.sampling, d.stepper_settings.greedy, s(d.stepper_settings.stop_strings),
                  d.stepper_settings.logit_lens, d.stepper_settings.lens_top};
    o.action = s(st.action);
    o.tokens = tokens_doc(st.tokens);
    o.prompt_length = st.prompt_length;
    o.steps = st.steps;
    o.prefill_computed = st.prefill_computed;
    o.prefill_reused = st.prefill_reused;
    o.prefill_batches = st.prefill_batches;
    o.prefill_ms = st.prefill_ms;
    o.n_layers = st.n_layers;
    o.n_kv_heads = st.n_kv_heads;
    o.kv_tokens = st.kv_tokens;
    o.kv_bytes_in_use = st.kv_bytes_in_use;
    o.kv_layer_tokens = st.kv_layer_tokens;
    o.layer_window = st.layer_window;
    o.last_reused = st.last_reused;
    o.last_ms = st.last_ms;
    o.history = st.history;
    for (const auto& layer : st.lens) {
        std::vector<run::LensCandidateDoc> row;
        for (const auto& c : layer)
            row.push_back({c.id, s(c.text), c.probability});
        o.lens.push_back(std::move(row));
    }
    o.branches = s(st.branches);
    o.stop_reason = s(st.stop_reason);
    o.generated_text = s(st.generated_text);
    o.distributions = d.distributions;
    if (st.logits)
        o.logits = *st.logits;
    return o;
}
void stepper_from(run::StepperDoc& o, RunDocument& d)
{
    auto st = std::make_shared<StepperState>();
    d.stepper_settings = {o.settings.sampling, o.settings.greedy, q(o.settings.stop_strings), o.settings.logit_lens,
                          o.settings.lens_top};
    st->action = "replay";
    st->tokens = tokens_from(o.tokens);
    st->prompt_length = o.prompt_length;
    st->steps = o.steps;
    st->prefill_computed = o.prefill_computed;
    st->prefill_reused = o.prefill_reused;
    st->prefill_batches = o.prefill_batches;
    st->prefill_ms = o.prefill_ms;
    st->n_layers = o.n_layers;
    st->n_kv_heads = o.n_kv_heads;
    st->kv_tokens = o.kv_tokens;
    st->kv_bytes_in_use = o.kv_bytes_in_use;
    st->kv_layer_tokens = std::move(o.kv_layer_tokens);
    st->layer_window = std::move(o.layer_window);
    st->last_reused = o.last_reused;
    st->last_ms = o.last_ms;
    st->history = std::move(o.history);
    for (const auto& layer : o.lens) {
        std::vector<LensCandidate> row;
        for (const auto& c : layer)
            row.push_back({c.id, q(c.text), c.probability});
        st->lens.push_back(std::move(row));
    }
    st->branches = q(o.branches);
    st->stop_reason = q(o.stop_reason);
    st->generated_text = q(o.generated_text);
    if (!o.logits.empty())
        st->logits = std::make_shared<const std::vector<float>>(std::move(o.logits));
    st->tokenizer = d.tokenizer;
    d.distributions = std::move(o.distributions);
    d.stepper = std::move(st);
}

// ---- KV accounting and the timeline ------------------------------------------------------------------
run::KvDoc kv_doc(const KvSnapshot& k)
{
    run::KvDoc o{s(k.source),       k.n_ctx,
                 k.block_tokens,    k.blocks_per_layer,
                 k.tokens_cached,   k.prompt_tokens,
                 k.reused_tokens,   k.n_layers,
                 k.n_kv_heads,      k.head_dim,
                 k.bytes_per_value, k.cache_types.toStdString(),
                 k.bytes_in_use,    k.bytes_allocated,
                 k.bytes_per_block, k.weight_bytes,
                 k.device_total,    k.device_available,
                 s(k.device),       {}};
    for (const auto& l : k.layers)
        o.layers.push_back({l.tokens_in_use, l.blocks, l.first_stored, l.window, l.bytes_in_use, l.bytes_allocated});
    return o;
}
std::shared_ptr<const KvSnapshot> kv_from(const run::KvDoc& o)
{
    auto k = std::make_shared<KvSnapshot>();
    k->source = q(o.source);
    k->n_ctx = o.n_ctx;
    k->block_tokens = o.block_tokens;
    k->blocks_per_layer = o.blocks_per_layer;
    k->tokens_cached = o.tokens_cached;
    k->prompt_tokens = o.prompt_tokens;
    k->reused_tokens = o.reused_tokens;
    k->n_layers = o.n_layers;
    k->n_kv_heads = o.n_kv_heads;
    k->head_dim = o.head_dim;
    k->bytes_per_value = o.bytes_per_value;
    k->cache_types = q(o.cache_types);
    if (const auto types = engine::parse_kv_cache_types_name(o.cache_types)) { // validated: always
        k->key_bytes_per_value = double(engine::kv_row_bytes(types->k, 32)) / 32.0;
        k->value_bytes_per_value = double(engine::kv_row_bytes(types->v, 32)) / 32.0;
    }
    k->bytes_in_use = o.bytes_in_use;
    k->bytes_allocated = o.bytes_allocated;
    k->bytes_per_block = o.bytes_per_block;
    k->weight_bytes = o.weight_bytes;
    k->device_total = o.device_total;
    k->device_available = o.device_available;
    k->device = q(o.device);
    for (const auto& l : o.layers)
        k->layers.push_back({l.tokens_in_use, l.blocks, l.first_stored, l.window, l.bytes_in_use, l.bytes_allocated});
    return k;
}

run::TimelineDoc timeline_doc(const TimelineSnapshot& t)
{
    run::TimelineDoc o;
    o.source = s(t.source);
    for (const auto& e : t.events)
        o.events.push_back({e.stage, e.step, e.begin_ns, e.end_ns});
    for (const auto& x : t.steps)
        o.steps.push_back(
            {x.token, s(x.text), x.forward_ms, x.sample_ms, x.detokenize_ms, x.latency_ms, x.flops, x.bytes_read});
    o.tokenize_ms = t.tokenize_ms;
    o.prefill_ms = t.prefill_ms;
    o.prompt_tokens = t.prompt_tokens;
    o.prefill_computed = t.prefill_computed;
    o.prefill_flops = t.prefill_flops;
    o.prefill_bytes = t.prefill_bytes;
    o.ttft_ms = t.ttft_ms;
    o.note = s(t.note);
    o.remote = t.remote;
    o.server = s(t.server);
    o.server_prompt_ms = t.server_prompt_ms;
    o.server_generation_ms = t.server_generation_ms;
    o.server_generated = t.server_generated;
    o.server_drafted = t.server_drafted;
    o.server_draft_accepted = t.server_draft_accepted;
    o.total_ms = t.total_ms;
    return o;
}
std::shared_ptr<const TimelineSnapshot> timeline_from(const run::TimelineDoc& o)
{
    auto t = std::make_shared<TimelineSnapshot>();
    t->source = q(o.source);
    t->live = false;
    for (const auto& e : o.events)
        t->events.push_back({e.stage, e.step, e.begin_ns, e.end_ns});
    for (const auto& x : o.steps)
        t->steps.push_back(
            {x.token, q(x.text), x.forward_ms, x.sample_ms, x.detokenize_ms, x.latency_ms, x.flops, x.bytes_read});
    t->tokenize_ms = o.tokenize_ms;
    t->prefill_ms = o.prefill_ms;
    t->prompt_tokens = o.prompt_tokens;
    t->prefill_computed = o.prefill_computed;
    t->prefill_flops = o.prefill_flops;
    t->prefill_bytes = o.prefill_bytes;
    t->ttft_ms = o.ttft_ms;
    t->note = q(o.note);
    t->remote = o.remote;
    t->server = q(o.server);
    t->server_prompt_ms = o.server_prompt_ms;
    t->server_generation_ms = o.server_generation_ms;
    t->server_generated = o.server_generated;
    t->server_drafted = o.server_drafted;
    t->server_draft_accepted = o.server_draft_accepted;
    t->total_ms = o.total_ms;
    return t;
}

// ---- attention ----------------------------------------------------------------------------------------
run::AttentionDoc attention_doc(const AttentionSnapshot& a)
{
    run::AttentionDoc o;
    o.source = s(a.source);
    o.text = s(a.text);
    o.tokens = tokens_doc(a.tokens);
    o.n_layers = a.n_layers;
    o.heads_per_layer = a.heads_per_layer;
    o.kv_heads_per_layer = a.kv_heads_per_layer;
    o.window = a.window;
    o.bytes = a.bytes;
    o.ms = a.ms;
    for (const auto& h : a.heads)
        o.heads.push_back({h.layer, h.head, h.kv_head, h.scale, h.n, h.head_dim, h.weights, h.q, h.k, h.v, h.softcap});
    return o;
}
std::shared_ptr<const AttentionSnapshot> attention_from(run::AttentionDoc& o)
{
    auto a = std::make_shared<AttentionSnapshot>();
    a->source = q(o.source);
    a->text = q(o.text);
    a->tokens = tokens_from(o.tokens);
    a->n_layers = o.n_layers;
    a->heads_per_layer = o.heads_per_layer;
    a->kv_heads_per_layer = o.kv_heads_per_layer;
    a->window = o.window;
    a->bytes = o.bytes;
    a->ms = o.ms;
    for (auto& h : o.heads)
        a->heads.push_back({h.layer, h.head, h.kv_head, h.scale, h.n, h.head_dim, std::move(h.weights), std::move(h.q),
                            std::move(h.k), std::move(h.v), h.softcap});
    return a;
}

// ---- text analysis ----------------------------------------------------------------------------------
run::TextAnalysisDoc text_doc(const TextAnalysisSnapshot& t)
{
    run::TextAnalysisDoc o;
    o.model_a = s(t.model_a);
    o.model_b = s(t.model_b);
    o.window = t.window;
    for (const auto& k : t.tokens) {
        run::AnalyzedTokenDoc x;
        x.id = k.id;
        x.text = s(k.text);
        x.predicted = k.predicted;
        x.p = k.p;
        x.surprisal_bits = k.surprisal_bits;
        x.entropy_bits = k.entropy_bits;
        x.rank = k.rank;
        for (const auto& [text, p] : k.top)
            x.top.emplace_back(s(text), p);
        x.kl = k.kl;
        x.reverse_kl = k.reverse_kl;
        x.p_b = k.p_b;
        x.same_top = k.same_top;
        for (const auto& c : k.candidates)
            x.candidates.push_back({c.id, s(c.text), c.p_a, c.p_b});
        o.tokens.push_back(std::move(x));
    }
    o.perplexity = t.perplexity;
    o.mean_kl = t.mean_kl;
    o.same_top = t.same_top;
    o.rms_dp = t.rms_dp;
    o.compared = t.compared;
    o.cancelled = t.cancelled;
    o.ms = t.ms;
    return o;
}
std::shared_ptr<const TextAnalysisSnapshot> text_from(const run::TextAnalysisDoc& o, const RunDocument& d)
{
    auto t = std::make_shared<TextAnalysisSnapshot>();
    t->model_a = q(o.model_a);
    t->model_b = q(o.model_b);
    t->window = o.window;
    t->tokens.reserve(o.tokens.size());
    for (const auto& x : o.tokens) {
        AnalyzedToken k;
        k.id = x.id;
        k.text = q(x.text);
        k.predicted = x.predicted;
        k.p = x.p;
        k.surprisal_bits = x.surprisal_bits;
        k.entropy_bits = x.entropy_bits;
        k.rank = x.rank;
        for (const auto& [text, p] : x.top)
            k.top.emplace_back(q(text), p);
        k.kl = x.kl;
        k.reverse_kl = x.reverse_kl;
        k.p_b = x.p_b;
        k.same_top = x.same_top;
        for (const auto& c : x.candidates)
            k.candidates.push_back({c.id, q(c.text), c.p_a, c.p_b});
        t->tokens.push_back(std::move(k));
    }
    t->perplexity = o.perplexity;
    t->mean_kl = o.mean_kl;
    t->same_top = o.same_top;
    t->rms_dp = o.rms_dp;
    t->compared = o.compared;
    t->cancelled = o.cancelled;
    t->ms = o.ms;
    t->tokenizer = d.tokenizer;
    return t;
}

// ---- the lab ------------------------------------------------------------------------------------------
run::PatchingDoc patching_doc(const PatchingSnapshot& p)
{
    const auto& c = p.settings;
    return {s(c.clean),
            s(c.corrupted),
            c.metric,
            s(c.token_a),
            s(c.token_b),
            c.over,
            s(p.clean_pieces),
            s(p.corrupted_pieces),
            s(p.token_a),
            s(p.token_b),
            s(p.metric_name),
            s(p.over_name),
            s(p.backend),
            p.n_layers,
            p.n_columns,
            p.effect,
            p.raw,
            p.clean_metric,
            p.corrupted_metric,
            p.runs,
            p.cancelled,
            p.ms};
}
std::shared_ptr<const PatchingSnapshot> patching_from(const run::PatchingDoc& o)
{
    auto p = std::make_shared<PatchingSnapshot>();
    p->settings = {q(o.clean), q(o.corrupted), o.metric, q(o.settings_token_a), q(o.settings_token_b), o.over};
    p->clean_pieces = q(o.clean_pieces);
    p->corrupted_pieces = q(o.corrupted_pieces);
    p->token_a = q(o.token_a);
    p->token_b = q(o.token_b);
    p->metric_name = q(o.metric_name);
    p->over_name = q(o.over_name);
    p->backend = q(o.backend);
    p->n_layers = o.n_layers;
    p->n_columns = o.n_columns;
    p->effect = o.effect;
    p->raw = o.raw;
    p->clean_metric = o.clean_metric;
    p->corrupted_metric = o.corrupted_metric;
    p->runs = o.runs;
    p->cancelled = o.cancelled;
    p->ms = o.ms;
    return p;
}

run::AttributionDoc attribution_doc(const AttributionSnapshot& a)
{
    run::AttributionDoc o{s(a.token),         s(a.versus), a.token_id,   a.position, a.logit,
                          a.final_norm_scale, {},          s(a.backend), a.ms};
    for (const auto& p : a.parts)
        o.parts.push_back({p.kind, s(p.name), p.layer, p.head, p.value});
    return o;
}
std::shared_ptr<const AttributionSnapshot> attribution_from(const run::AttributionDoc& o)
{
    auto a = std::make_shared<AttributionSnapshot>();
    a->token = q(o.token);
    a->versus = q(o.versus);
    a->token_id = o.token_id;
    a->position = o.position;
    a->logit = o.logit;
    a->final_norm_scale = o.final_norm_scale;
    for (const auto& p : o.parts)
        a->parts.push_back({p.kind, q(p.name), p.layer, p.head, p.value});
    a->backend = q(o.backend);
    a->ms = o.ms;
    return a;
}

run::HeadsDoc heads_doc(const HeadsSnapshot& h)
{
    run::HeadsDoc o{s(h.kind), h.n_layers, h.n_heads, {}, s(h.token), h.runs, h.cancelled, h.ms};
    for (const auto& i : h.heads)
        o.heads.push_back({i.layer, i.head, i.cls, i.scores, i.entropy, i.kl, i.logit_change});
    return o;
}
std::shared_ptr<const HeadsSnapshot> heads_from(const run::HeadsDoc& o)
{
    auto h = std::make_shared<HeadsSnapshot>();
    h->kind = q(o.kind);
    h->n_layers = o.n_layers;
    h->n_heads = o.n_heads;
    for (const auto& i : o.heads)
        h->heads.push_back({i.layer, i.head, i.cls, i.scores, i.entropy, i.kl, i.logit_change});
    h->token = q(o.token);
    h->runs = o.runs;
    h->cancelled = o.cancelled;
    h->ms = o.ms;
    return h;
}

std::vector<run::CandidateDoc> candidates_doc(const std::vector<CandidateUi>& v)
{
    std::vector<run::CandidateDoc> out;
    for (const auto& c : v)
        out.push_back({c.id, s(c.text), c.p});
    return out;
}
std::vector<CandidateUi> candidates_from(const std::vector<run::CandidateDoc>& v)
{
    std::vector<CandidateUi> out;
    for (const auto& c : v)
        out.push_back({c.id, q(c.text), c.p});
    return out;
}
run::AblationDoc ablation_doc(const AblationSnapshot& a)
{
    return {a.heads,    candidates_doc(a.before), candidates_doc(a.after), a.kl, s(a.token), a.logit, a.ablated_logit,
            a.positions};
}
std::shared_ptr<const AblationSnapshot> ablation_from(const run::AblationDoc& o)
{
    auto a = std::make_shared<AblationSnapshot>();
    a->before = candidates_from(o.before);
    a->after = candidates_from(o.after);
    a->kl = o.kl;
    a->token = q(o.token);
    a->logit = o.logit;
    a->ablated_logit = o.ablated_logit;
    a->positions = o.positions;
    a->heads = o.heads;
    return a;
}

run::SteeringDoc steering_doc(const SteeringSnapshot& x)
{
    const auto& c = x.settings;
    return {s(c.plus),         s(c.minus), s(c.prompt), c.layer,     c.strength,        c.tokens,  s(x.default_text),
            s(x.steered_text), x.kl,       x.norm,      x.direction, s(x.architecture), x.n_layers};
}
std::shared_ptr<const SteeringSnapshot> steering_from(run::SteeringDoc& o)
{
    auto x = std::make_shared<SteeringSnapshot>();
    x->settings = {q(o.plus), q(o.minus), q(o.prompt), o.layer, o.strength, o.tokens};
    x->default_text = q(o.default_text);
    x->steered_text = q(o.steered_text);
    x->kl = o.kl;
    x->norm = o.norm;
    x->direction = std::move(o.direction);
    x->architecture = q(o.architecture);
    x->n_layers = o.n_layers;
    return x;
}

} // namespace

QString RunDocument::parts() const
{
    QStringList p;
    if (stepper)
        p << QObject::tr("stepper (%1, %2)")
                 .arg(countText(qint64(stepper->tokens.size()), QObject::tr("token"), QObject::tr("tokens")))
                 .arg(countText(stepper->steps, QObject::tr("step"), QObject::tr("steps")));
    if (attention)
        p << QObject::tr("attention (%1 over %2)")
                 .arg(countText(qint64(attention->heads.size()), QObject::tr("head"), QObject::tr("heads")))
                 .arg(countText(qint64(attention->tokens.size()), QObject::tr("token"), QObject::tr("tokens")));
    if (kv)
        p << QObject::tr("KV cache");
    if (timeline)
        p << QObject::tr("timeline (%1)")
                 .arg(countText(qint64(timeline->steps.size()), QObject::tr("step"), QObject::tr("steps")));
    if (text)
        p << (text->compared ? QObject::tr("comparison (%1)") : QObject::tr("text analysis (%1)"))
                 .arg(countText(qint64(text->tokens.size()), QObject::tr("token"), QObject::tr("tokens")));
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
    if (serving)
        p << QObject::tr("serving lab (%1 of %2)")
                 .arg(countText(qint64(serving->runs.size()), QObject::tr("run"), QObject::tr("runs")))
                 .arg(countText(serving->runs.empty() ? 0 : qint64(serving->runs.front().requests.size()),
                                QObject::tr("request"), QObject::tr("requests")));
    if (experts)
        p << QObject::tr("experts (%1 over %2 layers)")
                 .arg(countText(qint64(experts->ids.size()), QObject::tr("token"), QObject::tr("tokens")))
                 .arg(experts->moe_layers.size());
    if (speculation)
        p << QObject::tr("speculation (%1, %2)")
                 .arg(speculation->drafter)
                 .arg(
                     countText(qint64(speculation->result.tokens.size()), QObject::tr("token"), QObject::tr("tokens")));
    return p.join(", ");
}

engine::run::RunContents to_run_contents(const RunDocument& doc)
{
    run::Document d;
    d.saved_at = s(doc.saved_at);
    if (doc.model)
        d.model = model_doc(*doc.model, doc.model_sha256);
    if (doc.stepper)
        d.stepper = stepper_doc(doc);
    if (doc.kv)
        d.kv = kv_doc(*doc.kv);
    if (doc.timeline)
        d.timeline = timeline_doc(*doc.timeline);
    if (doc.attention)
        d.attention = attention_doc(*doc.attention);
    if (doc.text)
        d.text_analysis = text_doc(*doc.text);
    if (doc.patching)
        d.patching = patching_doc(*doc.patching);
    if (doc.attribution)
        d.attribution = attribution_doc(*doc.attribution);
    if (doc.head_classes)
        d.head_classes = heads_doc(*doc.head_classes);
    if (doc.head_scan)
        d.head_scan = heads_doc(*doc.head_scan);
    if (doc.ablation)
        d.ablation = ablation_doc(*doc.ablation);
    if (doc.steering)
        d.steering = steering_doc(*doc.steering);
    if (doc.serving) {
        run::ServingDoc sd;
        sd.model = s(doc.serving->model);
        sd.backend = s(doc.serving->backend);
        sd.cancelled = doc.serving->cancelled;
        sd.workload = doc.serving->settings.workload;
        sd.runs = doc.serving->runs;
        d.serving = std::move(sd);
    }
    if (doc.speculation) {
        const SpeculationSnapshot& sp = *doc.speculation;
        run::SpeculationDoc sd;
        sd.model = s(sp.model);
        sd.drafter = s(sp.drafter);
        sd.source = s(sp.settings.source);
        sd.backend = s(sp.backend);
        sd.deterministic = sp.deterministic;
        sd.cancelled = sp.cancelled;
        sd.draft_max = uint32_t(sp.settings.draft_max);
        sd.temperature = sp.settings.sampling.temperature;
        sd.seed = sp.settings.sampling.seed;
        sd.prompt_text = s(sp.prompt_text);
        sd.prompt = sp.prompt_ids;
        sd.result = sp.result;
        sd.plain_tokens = sp.plain_tokens;
        sd.speculative_s = sp.speculative_s;
        sd.plain_s = sp.plain_s;
        sd.parted = sp.parted;
        if (sp.parted >= 0 && std::size_t(sp.parted) < sp.result.choices.size() &&
            std::size_t(sp.parted) < sp.plain_choices.size()) {
            sd.parted_speculative = sp.result.choices[std::size_t(sp.parted)];
            sd.parted_plain = sp.plain_choices[std::size_t(sp.parted)];
        }
        d.speculation = std::move(sd);
    }
    if (doc.experts) {
        const ExpertsSnapshot& ex = *doc.experts;
        run::ExpertsDoc ed;
        ed.architecture = s(ex.architecture);
        ed.source = s(ex.source);
        ed.n_expert = uint32_t(ex.n_expert);
        ed.k = uint32_t(ex.k);
        ed.normalized = ex.normalized;
        ed.random_weights = ex.random_weights;
        ed.ids = ex.ids;
        for (const int l : ex.moe_layers)
            ed.layers.push_back(uint32_t(l));
        ed.experts = ex.experts;
        ed.weights = ex.weights;
        d.experts = std::move(ed);
    }
    auto contents = run::to_contents(d, "Tokenscope " TOKENSCOPE_VERSION);
    if (!doc.model)
        contents.model.sha256 = s(doc.model_sha256);
    return contents;
}

RunDocument run_document_from(const engine::run::OpenedRun& opened, const QString& path)
{
    // Checked as a whole before any panel sees it: a document that disagrees with itself or exceeds a
    // limit is refused here, naming the field.
    run::Document o;
    try {
        o = run::checked_document(opened);
    } catch (const engine::FormatError& e) {
        throw engine::FormatError(QFileInfo(path).fileName().toStdString() + ": " + e.what());
    }
    RunDocument d;
    d.path = path;
    d.file_size = opened.file_size;
    d.tokenizer = opened.tokenizer;
    d.file = opened.file;
    d.writer = q(opened.contents.writer);
    d.saved_at = q(o.saved_at);
    d.model = model_from(*o.model);
    d.model_sha256 = q(o.model->sha256);
    if (o.stepper)
        stepper_from(*o.stepper, d);
    if (o.kv)
        d.kv = kv_from(*o.kv);
    if (o.timeline)
        d.timeline = timeline_from(*o.timeline);
    if (o.attention)
        d.attention = attention_from(*o.attention);
    if (o.text_analysis)
        d.text = text_from(*o.text_analysis, d);
    if (o.patching)
        d.patching = patching_from(*o.patching);
    if (o.attribution)
        d.attribution = attribution_from(*o.attribution);
    if (o.head_classes)
        d.head_classes = heads_from(*o.head_classes);
    if (o.head_scan)
        d.head_scan = heads_from(*o.head_scan);
    if (o.ablation)
        d.ablation = ablation_from(*o.ablation);
    if (o.steering)
        d.steering = steering_from(*o.steering);
    if (o.experts) {
        const run::ExpertsDoc& ed = *o.experts;
        auto ex = std::make_shared<ExpertsSnapshot>();
        ex->architecture = q(ed.architecture);
        ex->source = q(ed.source);
        ex->n_expert = int(ed.n_expert);
        ex->k = int(ed.k);
        ex->normalized = ed.normalized;
        ex->random_weights = ed.random_weights;
        ex->ids = ed.ids;
        for (const uint32_t l : ed.layers)
            ex->moe_layers.push_back(int(l));
        ex->n_layers = ed.layers.empty() ? 0 : int(ed.layers.back()) + 1;
        ex->experts = ed.experts;
        ex->weights = ed.weights;
        ex->saved = true;
        if (d.tokenizer)
            for (const int32_t id : ed.ids) {
                StepperToken t;
                t.id = id;
                t.text = token_display_text(*d.tokenizer, id);
                ex->tokens.push_back(t);
            }
        else
            for (const int32_t id : ed.ids) {
                StepperToken t;
                t.id = id;
                t.text = QString("#%1").arg(id);
                ex->tokens.push_back(t);
            }
        d.experts = std::move(ex);
    }
    if (o.speculation) {
        const run::SpeculationDoc& sd = *o.speculation;
        auto sp = std::make_shared<SpeculationSnapshot>();
        sp->finished = !sd.cancelled;
        sp->cancelled = sd.cancelled;
        sp->model = q(sd.model);
        sp->drafter = q(sd.drafter);
        sp->backend = q(sd.backend);
        sp->deterministic = sd.deterministic;
        sp->settings.source = q(sd.source);
        sp->settings.draft_max = int(sd.draft_max);
        sp->settings.tokens = int(sd.result.tokens.size());
        sp->settings.sampling.temperature = sd.temperature;
        sp->settings.sampling.seed = sd.seed;
        sp->settings.prompt = sp->prompt_text = q(sd.prompt_text);
        sp->prompt_ids = sd.prompt;
        sp->prompt_tokens = int(sd.prompt.size());
        sp->result = sd.result;
        sp->plain_tokens = sd.plain_tokens;
        sp->speculative_s = sd.speculative_s;
        sp->plain_s = sd.plain_s;
        sp->parted = sd.parted;
        if (sd.parted >= 0) { // the two runs' choices where they part (the view names them)
            sp->result.choices.resize(sd.result.tokens.size());
            sp->plain_choices.resize(sd.plain_tokens.size());
            sp->result.choices[std::size_t(sd.parted)] = sd.parted_speculative;
            sp->plain_choices[std::size_t(sd.parted)] = sd.parted_plain;
        }
        if (d.tokenizer)
            fill_pieces(*sp, *d.tokenizer);
        d.speculation = std::move(sp);
    }
    if (o.serving) {
        auto sv = std::make_shared<ServingSnapshot>();
        sv->model = q(o.serving->model);
        sv->backend = q(o.serving->backend);
        sv->cancelled = o.serving->cancelled;
        sv->settings.workload = o.serving->workload;
        for (const engine::ServeRunResult& r : o.serving->runs) {
            if (sv->runs.empty())
                sv->settings.options = r.options;
            sv->settings.modes.push_back(r.options.mode);
            sv->views.push_back(run_view(r));
        }
        sv->runs = o.serving->runs;
        d.serving = std::move(sv);
    }
    return d;
}

} // namespace tokenscope::ui
