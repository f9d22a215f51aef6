// SPDX-License-Identifier: GPL-3.0-or-later
// The transformer forward pass of every architecture and every backend (see forward_pass.h): the
// one loop over layers, the capture assembly and the KV read-back. Shapes as in the header.
#include "backend/forward_pass.h"

#include "quant/dequant.h"
#include "util/error.h"
#include "util/fp16.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <spdlog/fmt/fmt.h>

namespace engine {

void for_each_weight(const Model& model, const std::function<void(const TensorView&, WeightUse)>& fn)
{
    const ModelWeights& w = model.weights();
    fn(w.token_embd, WeightUse::Embedding);
    if (!w.tied_output && w.output.data != w.token_embd.data)
        fn(w.output, WeightUse::Matrix);
    fn(w.output_norm, WeightUse::Vector);
    for (const LayerWeights& L : w.layers) {
        for (const TensorView* m :
             {&L.attn_q, &L.attn_k, &L.attn_v, &L.attn_output, &L.ffn_gate, &L.ffn_up, &L.ffn_down, &L.ffn_gate_inp,
              &L.ffn_gate_shexp, &L.ffn_up_shexp, &L.ffn_down_shexp})
            if (*m)
                fn(*m, WeightUse::Matrix);
        if (L.is_moe())
            for (uint32_t e = 0; e < model.config().n_expert; ++e)
                for (const TensorView* m : {&L.ffn_gate_exps, &L.ffn_up_exps, &L.ffn_down_exps})
                    fn(expert_matrix(*m, e), WeightUse::Matrix);
        for (const TensorView* v : {&L.attn_norm, &L.ffn_norm, &L.attn_q_norm, &L.attn_k_norm, &L.post_attention_norm,
                                    &L.post_ffw_norm, &L.attn_q_bias, &L.attn_k_bias, &L.attn_v_bias,
                                    &L.attn_output_bias, &L.ffn_gate_bias, &L.ffn_up_bias, &L.ffn_down_bias})
            if (*v)
                fn(*v, WeightUse::Vector);
    }
}

namespace {

// The request's results, assembled from what each chunk delivers: logits rows in place, residuals
// per layer, and one AttentionCapture per wanted head (made on the first chunk that delivers its
// layer), copied only for the heads the request asks for.
class Assembly final : public ChunkSink {
public:
    Assembly(const Model& model, const CaptureRequest* capture, ForwardCaptures* captures, ForwardResult& result,
             uint32_t first_out, uint32_t n_total, uint32_t pos0)
        : m_c(model.config()), m_capture(capture), m_captures(captures), m_result(result), m_first_out(first_out),
          m_n_total(n_total), m_pos0(pos0), m_scale(query_scaling(model).attention)
    {
    }
    void start(const ChunkPlan& plan, uint32_t b0)
    {
        m_plan = &plan;
        m_b0 = b0;
    }

    float* logits() override
    {
        const std::size_t row = m_b0 + m_plan->logit_row0 - m_first_out;
        return m_result.logits.data() + row * m_c.n_vocab;
    }

    void residual(uint32_t layer, const float* x) override
    {
        std::memcpy(m_captures->residuals[layer].data() + std::size_t(m_b0) * m_c.n_embd, x,
                    std::size_t(m_plan->n_tokens) * m_c.n_embd * sizeof(float));
    }

    void attention(uint32_t layer, const float* q, const float* weights) override
    {
        const uint32_t H = m_c.n_head[layer], D = m_c.head_dim_k, n = m_plan->n_tokens;
        const uint32_t n_keys = m_plan->pos0 + n, n_keys_total = m_pos0 + m_n_total;
        for (uint32_t h = 0; h < H; ++h) {
            if (!m_capture->wants(layer, h))
                continue;
            AttentionCapture& a = find_or_add(layer, h);
            for (uint32_t t = 0; t < n; ++t) {
                const std::size_t row = m_b0 + t;
                std::copy_n(weights + (std::size_t(t) * H + h) * n_keys, n_keys,
                            a.weights.begin() + std::ptrdiff_t(row * n_keys_total));
                // q as q·k reads it: rounded to F16.
                for (uint32_t i = 0; i < D; ++i)
                    a.q[row * D + i] = fp16_to_f32(f32_to_fp16(q[(std::size_t(t) * H + h) * D + i]));
            }
        }
    }

    void activation(Site site, uint32_t layer, const float* rows) override
    {
        std::vector<float>& out = m_captures->activations[std::size_t(site)][layer];
        const std::size_t width = site_width(m_c, site, layer);
        std::memcpy(out.data() + std::size_t(m_b0) * width, rows,
                    std::size_t(m_plan->n_tokens) * width * sizeof(float));
    }

    void expert_outputs(uint32_t layer, const float* outputs) override
    {
        for (RoutingCapture& e : m_captures->routing)
            if (e.layer == layer) // a later chunk's last row replaces an earlier one's: the pass's last wins
                e.last_outputs.assign(outputs, outputs + std::size_t(e.k) * m_c.n_embd);
    }

    void routing(uint32_t layer, const float* logits, const float* probs, const ExpertRouting& r) override
    {
        if (!m_capture->routing && !m_capture->expert_outputs)
            return;
        RoutingCapture* rc = nullptr;
        for (RoutingCapture& e : m_captures->routing)
            if (e.layer == layer)
                rc = &e;
        const uint32_t NE = m_c.n_expert, k = r.k;
        if (!rc) {
            rc = &m_captures->routing.emplace_back();
            rc->layer = layer;
            rc->first_position = m_pos0;
            rc->n_tokens = m_n_total;
            rc->n_expert = NE;
            rc->k = k;
            rc->logits.assign(std::size_t(m_n_total) * NE, 0.0f);
            rc->probs.assign(std::size_t(m_n_total) * NE, 0.0f);
            rc->experts.assign(std::size_t(m_n_total) * k, -1);
            rc->weights.assign(std::size_t(m_n_total) * k, 0.0f);
        }
        const std::size_t n = r.n_rows, row = m_b0;
        std::copy_n(logits, n * NE, rc->logits.begin() + std::ptrdiff_t(row * NE));
        std::copy_n(probs, n * NE, rc->probs.begin() + std::ptrdiff_t(row * NE));
        std::copy_n(r.experts.begin(), n * k, rc->experts.begin() + std::ptrdiff_t(row * k));
        std::copy_n(r.weights.begin(), n * k, rc->weights.begin() + std::ptrdiff_t(row * k));
    }

private:
    AttentionCapture& find_or_add(uint32_t layer, uint32_t head)
    {
        for (AttentionCapture& e : m_captures->attention)
            if (e.layer == layer && e.head == head)
                return e;
        AttentionCapture& a = m_captures->attention.emplace_back();
        a.layer = layer;
        a.head = head;
        a.kv_head = head / (m_c.n_head[layer] / m_c.n_head_kv[layer]);
        a.first_position = m_pos0;
        a.n_queries = m_n_total;
        a.n_keys = m_pos0 + m_n_total;
        a.head_dim = m_c.head_dim_k;
        a.scale = m_scale;
        a.softcap = m_c.attn_logit_softcap.value_or(0.0f);
        a.weights.assign(std::size_t(a.n_queries) * a.n_keys, 0.0f);
        a.q.assign(std::size_t(a.n_queries) * a.head_dim, 0.0f);
        return a;
    }

    const ModelConfig& m_c;
    const CaptureRequest* m_capture;
    ForwardCaptures* m_captures;
    ForwardResult& m_result;
    uint32_t m_first_out, m_n_total, m_pos0;
    float m_scale;
    const ChunkPlan* m_plan = nullptr;
    uint32_t m_b0 = 0;
};

// Only logits, into one buffer: the logit lens's row, or a multi-sequence pass's rows one after another.
class LogitsOnly final : public ChunkSink {
public:
    explicit LogitsOnly(std::vector<float>& out) : m_out(out) {}
    float* logits() override { return m_out.data(); }
    void residual(uint32_t, const float*) override {}
    void attention(uint32_t, const float*, const float*) override {}
    void activation(Site, uint32_t, const float*) override {}

private:
    std::vector<float>& m_out;
};

} // namespace

LayeredBackend::LayeredBackend(std::shared_ptr<const Model> model) : m_model(std::move(model))
{
    const ModelWeights& w = m_model->weights();
    m_rope_factors = tensor_to_f32(w.rope_freqs);
    if (!m_rope_factors.empty() && m_rope_factors.size() < m_model->config().n_rot / 2)
        throw FormatError("rope_freqs has fewer factors than rotated pairs");
    if (m_rope_factors.empty()) { // llama.cpp's get_rope_factors: rope_freqs first, else LongRoPE's pair
        m_rope_factors = tensor_to_f32(w.rope_factors_short);
        m_rope_factors_long = tensor_to_f32(w.rope_factors_long);
        if (m_rope_factors.empty())
            m_rope_factors = m_rope_factors_long;
    }
}

void require_batch_invariant(const Backend& backend)
{
    if (!backend.batch_invariant_capable())
        throw UnsupportedError(
            fmt::format("{}: deterministic (batch-invariant) mode runs on the CPU backend only", backend.name()));
}

bool LayeredBackend::pass_is_invariant(bool asked) const
{
    if (!asked && !batch_invariant_always())
        return false;
    require_batch_invariant(*this);
    return true;
}

RopeShape LayeredBackend::rope_shape(uint32_t il) const
{
    const ModelConfig& c = m_model->config();
    RopeShape r;
    r.n_rot = c.n_rot;
    r.neox = m_model->traits().rope_neox;
    r.base = m_model->layer_rope_base(il);
    const bool local = c.layer_is_swa[il]; // local layers are never scaled (nor YaRN-mixed: OLMo 3)
    r.freq_scale = local ? 1.0f : c.rope_freq_scale;
    const bool long_factors = !m_rope_factors_long.empty() && kv_cache().config().n_ctx > c.rope_n_ctx_orig;
    const std::vector<float>& factors = long_factors ? m_rope_factors_long : m_rope_factors;
    r.factors = factors.empty() ? nullptr : factors.data();
    r.ext_factor = local ? 0.0f : c.rope_ext_factor;
    r.attn_factor = local ? 1.0f : c.rope_attn_factor;
    if (r.ext_factor != 0.0f) { // ggml_rope_yarn_corr_dims
        const auto dim = [&](float rotations) {
            return static_cast<float>(c.n_rot) *
                   std::log(static_cast<float>(c.rope_n_ctx_orig) / (rotations * 2.0f * static_cast<float>(M_PI))) /
                   (2.0f * std::log(r.base));
        };
        r.corr_low = std::max(0.0f, std::floor(dim(c.yarn_beta_fast)));
        r.corr_high = std::min(static_cast<float>(c.n_rot - 1), std::ceil(dim(c.yarn_beta_slow)));
    }
    return r;
}

RopeTables LayeredBackend::rope_tables() const
{
    const ModelConfig& c = m_model->config();
    RopeTables tables;
    for (uint32_t il = 0; il < c.n_layer; ++il) {
        const RopeShape r = rope_shape(il);
        tables.add(r.base, r.freq_scale, r.yarn());
    }
    if (c.attn_temperature_scale)
        tables.set_query_temperature(*c.attn_temperature_scale, c.rope_n_ctx_orig);
    return tables;
}

ForwardResult LayeredBackend::forward(const ForwardRequest& request)
{
    const ModelConfig& c = m_model->config();
    check_forward_request(c, request);
    ensure_usable();
    KvCache& kv = kv_cache();
    const auto n = static_cast<uint32_t>(request.tokens.size());
    const uint32_t pos0 = kv.n_cached();
    const uint32_t chunk = max_chunk_tokens(request, pos0);
    check_interventions(c, request.interventions, pos0, n);
    check_expert_interventions(c, request.expert_interventions);
    if (request.start_layer > c.n_layer)
        throw Error(fmt::format("cannot resume at layer {}: the model has {} layers", request.start_layer, c.n_layer));
    if (request.start_layer > 0 && request.start_residual.size() != std::size_t(n) * c.n_embd)
        throw Error(fmt::format("resuming at layer {} needs {} residual values ({} tokens × {}); {} were given",
                                request.start_layer, std::size_t(n) * c.n_embd, n, c.n_embd,
                                request.start_residual.size()));
    const uint32_t end_layer = request.end_layer ? request.end_layer : c.n_layer;
    if (request.end_layer != 0 && (end_layer > c.n_layer || end_layer <= request.start_layer))
        throw Error(fmt::format("cannot stop after layer {}: the model has {} layers{}", end_layer, c.n_layer,
                                request.start_layer ? fmt::format(" and the pass starts at {}", request.start_layer)
                                                    : std::string()));
    if (request.start_layer > 0 && request.capture && !request.capture->empty())
        throw Error("a pass resumed at a later layer cannot capture: the layers below it are not computed");
    kv.reserve_until(pos0 + n); // throws when the context is full; the cache is unchanged then

    const CaptureRequest* capture = request.capture && !request.capture->empty() ? request.capture : nullptr;
    std::shared_ptr<ForwardCaptures> captures = capture ? std::make_shared<ForwardCaptures>() : nullptr;
    const uint32_t first_out = request.all_logits ? 0 : n - 1;
    ForwardResult result;
    result.n_vocab = c.n_vocab;
    result.logits.resize(std::size_t(n - first_out) * c.n_vocab);

    ChunkPlan plan;
    // Kernels pick their summation order by batch size, as llama.cpp does (see ForwardRequest).
    plan.order = static_cast<uint32_t>(std::max<std::size_t>(n, request.order_as_batch));
    plan.logit_order = n - first_out; // only the rows whose logits are wanted go through the head, as llama.cpp
    if (pass_is_invariant(request.batch_invariant)) {
        plan.batch_invariant = true;
        plan.order = plan.logit_order = kBatchInvariantOrder;
    }
    if (captures) {
        plan.residuals = capture->residuals;
        for (Site site : capture->sites) {
            if (site == Site::Residual) {
                plan.residuals = true;
                continue;
            }
            if (std::find(plan.sites.begin(), plan.sites.end(), site) != plan.sites.end())
                continue;
            plan.sites.push_back(site);
            auto& per_layer = captures->activations[std::size_t(site)];
            per_layer.resize(site == Site::Embedding ? 1 : c.n_layer);
            for (uint32_t il = 0; il < per_layer.size(); ++il)
                per_layer[il].assign(std::size_t(n) * site_width(c, site, il), 0.0f);
        }
        if (plan.residuals)
            captures->residuals.assign(c.n_layer, std::vector<float>(std::size_t(n) * c.n_embd));
        plan.routing = (capture->routing || capture->expert_outputs) && c.is_moe();
        plan.expert_outputs = capture->expert_outputs && c.is_moe();
        for (uint32_t il = 0; il < c.n_layer; ++il)
            for (uint32_t h = 0; h < c.n_head[il]; ++h)
                if (capture->wants(il, h)) {
                    plan.attention_layers.push_back(il);
                    break;
                }
    }
    Assembly assembly(*m_model, capture, captures.get(), result, first_out, n, pos0);
    m_interventions = request.interventions;
    m_expert_interventions = request.expert_interventions;
    m_start_layer = request.start_layer;
    m_end_layer = end_layer;
    plan.plain =
        m_interventions.empty() && m_expert_interventions.empty() && m_start_layer == 0 && m_end_layer == c.n_layer;
    struct Forget { // the spans point into the caller's request
        LayeredBackend& b;
        ~Forget()
        {
            b.m_interventions = {};
            b.m_expert_interventions = {};
            b.m_start_layer = 0;
            b.m_end_layer = 0;
            b.m_start_rows = {};
            b.m_pass_sink = nullptr;
        }
    } forget{*this};
    for (uint32_t b0 = 0; b0 < n; b0 += chunk) {
        const uint32_t b1 = std::min(n, b0 + chunk);
        plan.n_tokens = b1 - b0;
        plan.pos0 = pos0 + b0;
        plan.logit_row0 = std::max(first_out, b0) - b0;
        plan.n_logit_rows = b1 > std::max(first_out, b0) ? b1 - std::max(first_out, b0) : 0;
        assembly.start(plan, b0);
        if (m_start_layer > 0)
            m_start_rows = request.start_residual.subspan(std::size_t(b0) * c.n_embd, std::size_t(b1 - b0) * c.n_embd);
        begin_chunk(plan, assembly);
        m_pass_sink = &assembly;
        const auto tokens = request.tokens.subspan(b0, b1 - b0);
        if (!replay_chunk(tokens))
            run_layers(tokens, plan);
        finish_chunk();
    }

    // Keys and values the captured heads read, from the cache (positions a window freed stay 0).
    if (captures) {
        std::map<std::pair<uint32_t, uint32_t>, std::pair<std::vector<float>, std::vector<float>>> read;
        for (AttentionCapture& a : captures->attention) {
            auto& [keys, values] = read[{a.layer, a.kv_head}];
            if (keys.empty()) {
                read_cache(a.layer, a.kv_head, a.n_keys, keys, values);
                for (uint32_t j = 0; j < pos0; ++j)
                    if (!kv.holds(a.layer, j)) {
                        std::fill_n(keys.begin() + std::ptrdiff_t(std::size_t(j) * a.head_dim), a.head_dim, 0.0f);
                        std::fill_n(values.begin() + std::ptrdiff_t(std::size_t(j) * a.head_dim), a.head_dim, 0.0f);
                    }
            }
            a.k = keys;
            a.v = values;
        }
    }
    apply_output_scaling(c, result.logits);
    kv.commit(pos0 + n);
    result.captures = std::move(captures);
    return result;
}

BatchResult LayeredBackend::forward_batch(const BatchRequest& request)
{
    if (!multi_sequence_capable())
        return Backend::forward_batch(request); // refuses by name
    const ModelConfig& c = m_model->config();
    if (request.sequences.empty())
        throw Error("nothing to evaluate: the batch holds no sequence");
    ensure_usable();
    ChunkPlan plan;
    std::vector<TokenId> tokens;
    for (const BatchSequence& seq : request.sequences) {
        if (!seq.kv)
            throw std::logic_error("a sequence of a batch has no cache");
        for (const PlanSegment& other : plan.segments)
            if (other.kv == seq.kv)
                throw Error("a sequence appears twice in one batch");
        ForwardRequest one;
        one.tokens = seq.tokens;
        check_forward_request(c, one);
        plan.segments.push_back({uint32_t(tokens.size()), uint32_t(seq.tokens.size()), seq.kv->n_cached(), seq.kv});
        tokens.insert(tokens.end(), seq.tokens.begin(), seq.tokens.end());
    }
    // Room first, for every sequence (throws before anything is computed; a cache keeps the room it got)
    for (const PlanSegment& seg : plan.segments)
        seg.kv->reserve_until(seg.pos0 + seg.n_rows);

    const auto n = uint32_t(tokens.size());
    BatchResult result;
    result.n_vocab = c.n_vocab;
    result.logits.resize(request.sequences.size());
    std::vector<uint32_t> logit_rows; // each wanting sequence's last row
    for (std::size_t i = 0; i < request.sequences.size(); ++i)
        if (request.sequences[i].logits)
            logit_rows.push_back(plan.segments[i].row0 + plan.segments[i].n_rows - 1);
    plan.n_tokens = n;
    plan.pos0 = 0;
    // As llama.cpp's batched decoding: matrices summed in the order of the whole batch, the output head
    // in that of the rows with logits; deterministic mode: one fixed order for every row.
    plan.order = n;
    uint32_t logit_order = std::max<uint32_t>(1, uint32_t(logit_rows.size()));
    if (pass_is_invariant(request.batch_invariant)) {
        plan.batch_invariant = true;
        plan.order = logit_order = kBatchInvariantOrder;
    }
    plan.plain = true;
    std::vector<float> logits(logit_rows.size() * std::size_t(c.n_vocab));
    LogitsOnly sink(logits);
    begin_chunk(plan, sink);
    run_layers(tokens, plan); // n_logit_rows is 0: the head runs below, over the rows with logits at once
    if (!logit_rows.empty())
        output_head_rows(m_model->weights().output_norm, m_model->weights().output, logit_rows, logit_order,
                         c.norm_eps);
    finish_chunk();
    std::size_t next_row = 0;
    for (std::size_t i = 0; i < request.sequences.size(); ++i) {
        const PlanSegment& seg = plan.segments[i];
        seg.kv->commit(seg.pos0 + seg.n_rows);
        if (!request.sequences[i].logits)
            continue;
        const auto row = logits.begin() + std::ptrdiff_t(next_row++ * c.n_vocab);
        result.logits[i].assign(row, row + c.n_vocab);
        apply_output_scaling(c, result.logits[i]);
    }
    return result;
}

// The layers of one chunk: rows are the chunk's tokens at positions plan.pos0 ….
void LayeredBackend::run_layers(std::span<const TokenId> tokens, const ChunkPlan& plan)
{
    const Model& model = *m_model;
    const ModelConfig& c = model.config();
    const ArchitectureTraits& arch = model.traits();
    const ModelWeights& w = model.weights();
    const uint32_t n = plan.n_tokens, E = c.n_embd, D = c.head_dim_k, order = plan.order;
    const QueryScaling scaling = query_scaling(model);
    const float eps = c.norm_eps;

    // ---- embeddings: X [n][E] (gemma scales them by sqrt(E))
    if (m_start_layer == 0) {
        embed(tokens, arch.embedding_scale ? std::sqrt(static_cast<float>(E)) : c.embedding_multiplier.value_or(1.0f));
        at_site(Site::Embedding, 0, Act::X, plan);
    } else { // resumed: X is the residual stream after layer m_start_layer − 1
        RowEdit e;
        e.row_width = E;
        e.n_rows = n;
        e.cols = E;
        e.values = m_start_rows.data();
        edit_rows(Act::X, e);
    }

    std::size_t next_capture = 0;
    bool h_normed = false; // the previous layer's end already wrote H = norm(X) for this layer
    const uint32_t end = m_end_layer ? std::min(m_end_layer, c.n_layer) : c.n_layer;
    for (uint32_t il = m_start_layer; il < end; ++il) {
        const LayerWeights& L = w.layers[il];
        const uint32_t H = c.n_head[il], Hkv = c.n_head_kv[il], F = c.n_ff[il];

        // ---- attention block: H = norm(X); Q, K, V projections (+ biases: qwen2). olmo2 has no
        // pre-norm: the projections read X itself.
        const Act attn_in = arch.pre_norms ? Act::H : Act::X;
        if (!h_normed && arch.pre_norms)
            rmsnorm(Act::X, Act::H, L.attn_norm, E, n, eps);
        h_normed = false;
        matmul(L.attn_q, attn_in, Act::Q, n, order); // [n][H·D]
        matmul(L.attn_k, attn_in, Act::K, n, order); // [n][Hkv·D]
        matmul(L.attn_v, attn_in, Act::V, n, order); // [n][Hkv·D]
        if (L.attn_q_bias)
            add_bias(Act::Q, L.attn_q_bias, n);
        if (L.attn_k_bias)
            add_bias(Act::K, L.attn_k_bias, n);
        if (L.attn_v_bias)
            add_bias(Act::V, L.attn_v_bias, n);
        // norms of queries and keys: per head (qwen3, gemma3) or over the whole row (olmo2); then
        // RoPE (not on smollm3's every fourth layer); gemma and phi3 pre-scale the queries, mistral3
        // multiplies them by a temperature of their position
        if (arch.qk_norm && arch.qk_norm_whole_row) {
            rmsnorm(Act::Q, Act::Q, L.attn_q_norm, H * D, n, eps);
            rmsnorm(Act::K, Act::K, L.attn_k_norm, Hkv * D, n, eps);
        } else if (arch.qk_norm) {
            rmsnorm(Act::Q, Act::Q, L.attn_q_norm, D, n * H, eps);
            rmsnorm(Act::K, Act::K, L.attn_k_norm, D, n * Hkv, eps);
        }
        if (model.layer_has_rope(il)) {
            RopeShape rope_of_layer = rope_shape(il);
            RopeShape rope_of_keys = rope_of_layer;
            if (c.attn_temperature_scale) {
                rope_of_layer.temperature_beta = *c.attn_temperature_scale;
                rope_of_layer.temperature_floor = c.rope_n_ctx_orig;
            }
            rope(Act::Q, H, D, rope_of_layer, scaling.query);
            rope(Act::K, Hkv, D, rope_of_keys, 1.0f);
        } else if (scaling.query != 1.0f) {
            scale_rows(Act::Q, H * D, n, scaling.query);
        }
        store_kv(il, Hkv, D); // the cache holds post-RoPE keys

        AttentionShape shape;
        shape.layer = il;
        shape.n_tokens = n;
        shape.n_heads = H;
        shape.n_kv_heads = Hkv;
        shape.head_dim = D;
        shape.pos0 = plan.pos0;
        shape.window = model.layer_window(il);
        shape.scale = scaling.attention;
        shape.softcap = c.attn_logit_softcap.value_or(0.0f);
        shape.batched = order > 1;
        shape.batch = order;
        const bool deliver = next_capture < plan.attention_layers.size() && plan.attention_layers[next_capture] == il;
        next_capture += deliver ? 1 : 0;
        attention(shape, deliver); // Attn [n][H·D]
        at_site(Site::HeadOut, il, Act::Attn, plan);

        // ---- O = output projection (+ bias), post-norm (gemma), X += O
        matmul(L.attn_output, Act::Attn, Act::O, n, order); // [n][E]
        if (L.attn_output_bias)
            add_bias(Act::O, L.attn_output_bias, n);
        if (arch.post_norms)
            rmsnorm(Act::O, Act::O, L.post_attention_norm, E, n, eps);
        if (c.residual_multiplier) // granite: the block's output scaled, then added
            scale_rows(Act::O, E, n, *c.residual_multiplier);
        at_site(Site::AttentionOut, il, Act::O, plan);
        const bool mid_fused = arch.pre_norms && site_idle(Site::ResidualMid, il, plan);
        if (mid_fused) {
            add_residual_rmsnorm(n, L.ffn_norm, Act::H, eps);
        } else {
            add_residual(n);
            at_site(Site::ResidualMid, il, Act::X, plan);
        }

        // ---- feed-forward block: H = norm(X); Gate = act(gate·H) ⊙ up·H; O = down·Gate; X += O
        // llama.cpp keeps only the rows whose logits are wanted after the last layer's attention, so
        // its last MLP sums them in the order of a batch of that many rows (one, for a prompt). The
        // rows with logits get that order here too (all rows are still computed: captures and
        // interventions see every row, and the row with logits holds the same bits in both).
        const uint32_t k = plan.n_logit_rows;
        const bool last = il + 1 == end && k > 0;
        const uint32_t mlp_order = plan.batch_invariant ? order : last && k == n ? k : order;
        const bool reorder_logit_rows = !plan.batch_invariant && last && k < n;
        const auto ffn_matmul = [&](const TensorView& m, Act in, Act out) {
            matmul(m, in, out, n, mlp_order);
            if (reorder_logit_rows)
                matmul_rows(m, in, out, plan.logit_row0, k, k);
        };
        const Act ffn_in = arch.pre_norms ? Act::H : Act::X;
        if (!mid_fused && arch.pre_norms)
            rmsnorm(Act::X, Act::H, L.ffn_norm, E, n, eps);
        if (L.is_moe()) {
            moe_block(il, ffn_in, plan, mlp_order, reorder_logit_rows);
        } else {
            ffn_matmul(L.ffn_gate, ffn_in, Act::Gate); // [n][F]
            if (L.ffn_gate_bias)
                add_bias(Act::Gate, L.ffn_gate_bias, n);
            ffn_matmul(L.ffn_up, ffn_in, Act::Up); // [n][F]
            if (L.ffn_up_bias)
                add_bias(Act::Up, L.ffn_up_bias, n);
            glu(F, n, arch.gelu_ffn);
            ffn_matmul(L.ffn_down, Act::Gate, Act::O); // [n][E]
            if (L.ffn_down_bias)
                add_bias(Act::O, L.ffn_down_bias, n);
        }
        if (arch.post_norms)
            rmsnorm(Act::O, Act::O, L.post_ffw_norm, E, n, eps);
        if (c.residual_multiplier)
            scale_rows(Act::O, E, n, *c.residual_multiplier);
        at_site(Site::MlpOut, il, Act::O, plan);
        if (il + 1 < end && arch.pre_norms && !plan.residuals && site_idle(Site::Residual, il, plan)) {
            add_residual_rmsnorm(n, w.layers[il + 1].attn_norm, Act::H, eps); // the next layer's norm
            h_normed = true;
        } else {
            add_residual(n);
            at_site(Site::Residual, il, Act::X, plan);
        }

        // A broken model is named where it breaks: the first layer whose output is NaN or infinite.
        check_finite(il, plan.pos0);
        if (plan.residuals)
            deliver_residual(il);
    }

    // ---- output: final norm and the LM head of the rows whose logits are wanted
    if (plan.n_logit_rows)
        output_head(w.output_norm, w.output, plan.logit_row0, plan.n_logit_rows, plan.logit_order, eps);
}

void LayeredBackend::moe_block(uint32_t il, Act in, const ChunkPlan& plan, uint32_t mlp_order, bool reorder_logit_rows)
{
    const ModelConfig& c = m_model->config();
    const LayerWeights& L = m_model->weights().layers[il];
    const uint32_t n = plan.n_tokens, k = plan.n_logit_rows;
    // The router, summed as the layer's other matrices (llama.cpp's last layer: the rows with logits in
    // the order of their own batch), then the routing on the host.
    m_router_logits.resize(std::size_t(n) * c.n_expert);
    router_logits(L.ffn_gate_inp, in, 0, n, mlp_order, m_router_logits.data());
    if (reorder_logit_rows)
        router_logits(L.ffn_gate_inp, in, plan.logit_row0, k, k,
                      m_router_logits.data() + std::size_t(plan.logit_row0) * c.n_expert);
    const ExpertRouting routing = route_rows(c, m_model->traits().moe_normalize_weights, il, m_router_logits.data(), n,
                                             plan.pos0, m_expert_interventions, m_router_probs);
    if (plan.routing && m_pass_sink)
        m_pass_sink->routing(il, m_router_logits.data(), m_router_probs.data(), routing);
    // A shared expert (granitemoe) first, into O: out = moe + shexp is the same sum either way round.
    const bool shared = bool(L.ffn_gate_shexp);
    if (shared) {
        const auto shexp_matmul = [&](const TensorView& m, Act from, Act to) {
            matmul(m, from, to, n, mlp_order);
            if (reorder_logit_rows)
                matmul_rows(m, from, to, plan.logit_row0, k, k);
        };
        shexp_matmul(L.ffn_gate_shexp, in, Act::Gate);
        shexp_matmul(L.ffn_up_shexp, in, Act::Up);
        glu(c.n_ff_shexp, n, false);
        shexp_matmul(L.ffn_down_shexp, Act::Gate, Act::O);
    }
    float* last_row = nullptr;
    if (plan.expert_outputs) {
        m_expert_outputs.assign(std::size_t(c.n_expert_used) * c.n_embd, 0.0f);
        last_row = m_expert_outputs.data();
    }
    moe_experts(L, in, Act::O, routing, plan.batch_invariant, shared, reorder_logit_rows ? nullptr : last_row);
    if (reorder_logit_rows) {
        // llama.cpp's last layer runs its experts on the rows with logits alone: an expert then gets
        // only those rows, and their number picks its summation order (one row at a time, tiled from 8)
        ExpertRouting rows;
        rows.n_rows = k;
        rows.k = routing.k;
        const auto first = std::ptrdiff_t(std::size_t(plan.logit_row0) * routing.k);
        const auto count = std::ptrdiff_t(std::size_t(k) * routing.k);
        rows.experts.assign(routing.experts.begin() + first, routing.experts.begin() + first + count);
        rows.weights.assign(routing.weights.begin() + first, routing.weights.begin() + first + count);
        if (shared) // those rows of O back to the shared expert's output alone
            matmul_rows(L.ffn_down_shexp, Act::Gate, Act::O, plan.logit_row0, k, k);
        moe_experts(L, in, Act::O, rows, plan.batch_invariant, shared, last_row, plan.logit_row0);
    }
    if (last_row && m_pass_sink)
        m_pass_sink->expert_outputs(il, last_row);
}

void LayeredBackend::router_logits(const TensorView&, Act, uint32_t, uint32_t, uint32_t, float*)
{
    throw UnsupportedError(fmt::format("{} does not run mixture-of-experts layers", name()));
}

void LayeredBackend::moe_experts(const LayerWeights&, Act, Act, const ExpertRouting&, bool, bool, float*, uint32_t)
{
    throw UnsupportedError(fmt::format("{} does not run mixture-of-experts layers", name()));
}

void LayeredBackend::output_head_rows(const TensorView&, const TensorView&, std::span<const uint32_t>, uint32_t, float)
{
    throw std::logic_error("this backend runs no multi-sequence pass");
}

bool LayeredBackend::replay_chunk(std::span<const TokenId>)
{
    return false;
}

void LayeredBackend::add_residual_rmsnorm(uint32_t n_rows, const TensorView& weight, Act out, float eps)
{
    add_residual(n_rows);
    rmsnorm(Act::X, out, weight, m_model->config().n_embd, n_rows, eps);
}

bool LayeredBackend::site_idle(Site site, uint32_t layer, const ChunkPlan& plan) const
{
    const uint64_t lo_chunk = plan.pos0, hi_chunk = uint64_t(plan.pos0) + plan.n_tokens;
    for (const Intervention& iv : m_interventions)
        if (iv.site == site && iv.layer == layer && iv.first < hi_chunk && uint64_t(iv.first) + iv.count > lo_chunk)
            return false;
    return std::find(plan.sites.begin(), plan.sites.end(), site) == plan.sites.end();
}

void LayeredBackend::at_site(Site site, uint32_t layer, Act a, const ChunkPlan& plan)
{
    const ModelConfig& c = m_model->config();
    const uint32_t width = site_width(c, site, layer);
    const uint64_t lo_chunk = plan.pos0, hi_chunk = uint64_t(plan.pos0) + plan.n_tokens;
    for (const Intervention& iv : m_interventions) {
        if (iv.site != site || iv.layer != layer)
            continue;
        const uint64_t lo = std::max<uint64_t>(iv.first, lo_chunk);
        const uint64_t hi = std::min<uint64_t>(uint64_t(iv.first) + iv.count, hi_chunk);
        if (lo >= hi)
            continue;
        const ColumnRange cols = intervention_columns(c, iv);
        RowEdit e;
        e.row_width = width;
        e.row0 = uint32_t(lo - lo_chunk);
        e.n_rows = uint32_t(hi - lo);
        e.col0 = cols.col0;
        e.cols = cols.cols;
        e.per_row = iv.values.size() != cols.cols;
        e.values = iv.values.data() + (e.per_row ? std::size_t(lo - iv.first) * cols.cols : 0);
        e.add = iv.op == Intervention::Op::Add;
        edit_rows(a, e);
    }
    // Residual: delivered after the finiteness check (run_layers).
    if (site != Site::Residual && std::find(plan.sites.begin(), plan.sites.end(), site) != plan.sites.end())
        deliver_activation(site, layer, a, width);
}

KvReadback LayeredBackend::read_kv(uint32_t layer, uint32_t kv_head) const
{
    const ModelConfig& c = m_model->config();
    check_kv_head(c, layer, kv_head);
    ensure_usable();
    const KvCache& kv = kv_cache();
    KvReadback r;
    r.layer = layer;
    r.kv_head = kv_head;
    r.n_positions = kv.n_cached();
    r.head_dim = c.head_dim_k;
    r.held.assign(r.n_positions, false);
    read_cache(layer, kv_head, r.n_positions, r.keys, r.values);
    for (uint32_t p = 0; p < r.n_positions; ++p) {
        r.held[p] = kv.holds(layer, p);
        if (!r.held[p]) {
            std::fill_n(r.keys.begin() + std::ptrdiff_t(std::size_t(p) * r.head_dim), r.head_dim, 0.0f);
            std::fill_n(r.values.begin() + std::ptrdiff_t(std::size_t(p) * r.head_dim), r.head_dim, 0.0f);
        }
    }
    return r;
}

std::vector<float> LayeredBackend::project_to_vocab(std::span<const float> residual)
{
    const ModelConfig& c = m_model->config();
    check_residual_width(c, residual);
    ensure_usable();
    std::vector<float> logits(c.n_vocab);
    LogitsOnly sink(logits);
    // One row, as the forward pass computes the last position's logits (the summation order
    // depends on the row count), so that the last layer's residual gives the real logits.
    ChunkPlan plan;
    plan.n_tokens = 1;
    plan.pos0 = kv_cache().n_cached();
    plan.n_logit_rows = 1;
    begin_chunk(plan, sink);
    load_residual(residual);
    output_head(m_model->weights().output_norm, m_model->weights().output, 0, 1, 1, c.norm_eps);
    finish_chunk();
    apply_output_scaling(c, logits);
    return logits;
}

} // namespace engine
