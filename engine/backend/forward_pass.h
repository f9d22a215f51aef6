// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// The transformer forward pass, written once (forward_pass.cpp) in terms of the operations a backend
// implements. A backend derives from LayeredBackend and implements the operations below on its own
// buffers; it never loops over layers or picks a layer's weights by their role: the pass hands it
// the weight (a TensorView of the model) with each operation. Architecture differences are data of
// the model (ArchitectureTraits, per-layer hyperparameters) read only by the pass.
//
// Shapes: n = tokens of a chunk, E = n_embd, D = head_dim, H / Hkv = the layer's query / KV heads,
// F = the layer's n_ff, V = n_vocab. Every activation is f32, rows of one token each.
#include "backend/backend.h"
#include "backend/rope_table.h"
#include "model/model.h"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace engine {

// The activation buffers of the pass. Each holds the chunk's n rows; the width of a row is the one
// the operation names.
enum class Act {
    X,    // [n][E] the residual stream
    H,    // [n][E] a block's normed input
    O,    // [n][E] a block's output
    Q,    // [n][H·D] queries
    K,    // [n][Hkv·D] keys of this chunk
    V,    // [n][Hkv·D] values of this chunk
    Attn, // [n][H·D] attention output
    Gate, // [n][F] FFN gate, then the activated product
    Up,   // [n][F] FFN up projection (keep last: ActivationBuffers counts the buffers by it)
};

// One sequence of a multi-sequence chunk (Backend::forward_batch): chunk rows [row0, row0 + n_rows)
// are its tokens at positions pos0 …, their keys and values in `kv`.
struct PlanSegment {
    uint32_t row0 = 0, n_rows = 0;
    uint32_t pos0 = 0;
    KvStore* kv = nullptr;
};

// What a chunk of the pass will be asked to deliver, known before any operation is issued (a
// backend that records commands sizes its read-back buffers from it).
struct ChunkPlan {
    uint32_t n_tokens = 0;
    uint32_t pos0 = 0;                      // position of the chunk's first token
    uint32_t order = 1;                     // batch size whose summation order the whole request uses
    uint32_t logit_row0 = 0;                // first chunk row whose logits are wanted
    uint32_t n_logit_rows = 0;              // 0: none in this chunk
    uint32_t logit_order = 1;               // the order of the output head (rows of the whole request)
    bool batch_invariant = false;           // deterministic mode: one order for every matmul (ForwardRequest)
    bool residuals = false;                 // deliver the residual stream after every layer
    std::vector<Site> sites;                // further sites delivered at every layer (not Residual)
    std::vector<uint32_t> attention_layers; // layers whose attention weights and queries are delivered
    bool routing = false;                   // deliver every MoE layer's router decision
    bool expert_outputs = false;            // …and its last row's weighted expert outputs
    // Several sequences (forward_batch): the rows by sequence, each with its own positions and cache
    // (rope, store_kv and attention follow them; pos0 is 0 then). Empty: one sequence, the backend's
    // own cache, positions pos0 ….
    std::vector<PlanSegment> segments;
    // Every layer runs from the chunk's tokens and no intervention edits anything: chunks of the same
    // shape then issue the same operations, whatever their position (a backend may replay them).
    bool plain = false;

    // A plain decode step: one token, its logits, nothing delivered besides. Every such step issues
    // the same operations but for its position and token (the GPU backends record one and replay it).
    bool replayable_decode_step() const
    {
        return plain && segments.empty() && n_tokens == 1 && n_logit_rows == 1 && order == 1 && logit_order == 1 &&
               !residuals && sites.empty() && attention_layers.empty() && !routing && !expert_outputs;
    }
};

// Where a backend delivers a chunk's results: synchronous backends as each operation runs, others
// when the chunk finishes. Pointers are valid only during the call.
class ChunkSink {
public:
    virtual ~ChunkSink() = default;
    // Where the logits [n_logit_rows][V] of chunk rows logit_row0 … go: the backend writes them
    // there (the request's result, so that all-position logits are never held twice).
    virtual float* logits() = 0;
    // The residual stream after `layer`, [n][E].
    virtual void residual(uint32_t layer, const float* x) = 0;
    // One layer's queries as used in q·k (post-RoPE, scaled), [n][H][D], and its softmax weights,
    // [n][H][pos0 + n] (0 where masked).
    virtual void attention(uint32_t layer, const float* q, const float* weights) = 0;
    // One site of the plan's `sites` at `layer`, [n][site_width].
    virtual void activation(Site site, uint32_t layer, const float* rows) = 0;
    // One MoE layer's router for the chunk's rows: its logits and probabilities [n][n_expert] and the
    // experts and weights it chose (delivered when the plan asks for the routing).
    virtual void routing(uint32_t /*layer*/, const float* /*logits*/, const float* /*probs*/,
                         const ExpertRouting& /*routing*/)
    {
    }
    // The chunk's last row's weighted expert outputs at one MoE layer, [k][E] in slot order.
    virtual void expert_outputs(uint32_t /*layer*/, const float* /*outputs*/) {}
};

// A change to rows of an activation buffer (an intervention's part in one chunk): rows
// [row0, row0 + n_rows) of a buffer whose rows are `row_width` floats, columns [col0, col0 + cols).
struct RowEdit {
    uint32_t row_width = 0;
    uint32_t row0 = 0, n_rows = 0;
    uint32_t col0 = 0, cols = 0;
    const float* values = nullptr; // [n_rows][cols], or [cols] for every row when !per_row
    bool per_row = true;
    bool add = false; // add instead of replace (whole rows only: col0 = 0, cols = row_width)
};

// The attention of one layer over a chunk.
struct AttentionShape {
    uint32_t layer = 0;
    uint32_t n_tokens = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
    uint32_t pos0 = 0;    // position of the first query
    uint32_t window = 0;  // sliding window in tokens, 0: every earlier position
    float scale = 1.0f;   // applied to q·k before the softmax
    float softcap = 0.0f; // gemma2: q·k ← c·tanh(q·k · 1/c) before the scale; 0: none
    bool batched = false; // the summation order of a request of 2+ tokens
    uint32_t batch = 1;   // the batch whose order the chunk follows (ChunkPlan::order): llama.cpp picks
                          // its flash-attention kernel by it
};

// One layer's rotary embedding.
struct RopeShape {
    uint32_t n_rot = 0; // rotated dimensions of a head
    bool neox = false;  // pairs (i, i + n_rot/2) instead of (2i, 2i+1)
    float base = 10000.0f;
    float freq_scale = 1.0f;
    const float* factors = nullptr; // per-pair frequency factors (rope_freqs), or null
    // ggml's rope_yarn: the mix of interpolated and extrapolated angles (0: none) between the
    // correction dimensions, and the factor on cos and sin
    float ext_factor = 0.0f;
    float attn_factor = 1.0f;
    float corr_low = 0.0f, corr_high = 0.0f;
    // mistral3's query temperature: after the rotation, × 1 + beta·ln(floor(pos / floor_positions) + 1)
    float temperature_beta = 0.0f; // 0: none
    uint32_t temperature_floor = 0;
    RopeYarn yarn() const { return {ext_factor, attn_factor, corr_low, corr_high}; }
};

// How the pass uses a weight: the operations a backend prepares it for.
enum class WeightUse {
    Embedding, // rows looked up by token id (and the output head when tied)
    Matrix,    // a matrix–vector product
    Vector,    // an f32 vector: norm weights and biases
};
// Every weight of the model the pass reads, once each (a tied output head is the embedding).
void for_each_weight(const Model& model, const std::function<void(const TensorView&, WeightUse)>& fn);

// A backend made of operations: forward(), read_kv() and project_to_vocab() are the shared pass.
class LayeredBackend : public Backend {
public:
    const Model& model() const final { return *m_model; }
    ForwardResult forward(const ForwardRequest& request) final;
    BatchResult forward_batch(const BatchRequest& request) final;
    KvReadback read_kv(uint32_t layer, uint32_t kv_head) const final;
    std::vector<float> project_to_vocab(std::span<const float> residual) final;

protected:
    explicit LayeredBackend(std::shared_ptr<const Model> model);
    // The rotary embedding of a layer (its frequency factors live here).
    RopeShape rope_shape(uint32_t layer) const;
    // The cos/sin tables of the model's rotations (one per distinct base, frequency scale and YaRN)
    // and its query temperature, for backends that read the angles from tables.
    RopeTables rope_tables() const;

    std::shared_ptr<const Model> m_model;

    // ---- the operations -------------------------------------------------------------------------
    // Throws Error when the backend can no longer compute (e.g. its device was lost).
    virtual void ensure_usable() const = 0;
    // The most tokens one chunk of this request may hold (the pass splits longer requests). Throws
    // Error when not even one token's results fit the backend.
    virtual uint32_t max_chunk_tokens(const ForwardRequest& request, uint32_t pos0) const = 0;
    // Starts a chunk; its results go to `sink` (which outlives finish_chunk()).
    virtual void begin_chunk(const ChunkPlan& plan, ChunkSink& sink) = 0;
    // After begin_chunk: a backend that recorded the commands of a chunk of this plan's shape (a plain
    // decode step, ChunkPlan::replayable_decode_step) may run that recording again for these tokens
    // instead of being asked for each operation. Returns true when it will (the pass then issues no
    // operation before finish_chunk, which runs it); the default records nothing and returns false.
    virtual bool replay_chunk(std::span<const TokenId> tokens);
    // X = the embedding rows of `tokens`, times `scale`.
    virtual void embed(std::span<const TokenId> tokens, float scale) = 0;
    // X rows 0 … rows.size()/E − 1 = `rows` (the logit lens's input).
    virtual void load_residual(std::span<const float> rows) = 0;
    // out = rmsnorm(in) ⊙ weight over `n_rows` rows of `width` (out may be in).
    virtual void rmsnorm(Act in, Act out, const TensorView& weight, uint32_t width, uint32_t n_rows, float eps) = 0;
    // out[t] = w · in[t] for rows row0 … row0 + n_rows − 1 (in has w.cols() floats per row, out
    // w.rows()), summed in the order of a batch of `order` rows.
    virtual void matmul_rows(const TensorView& w, Act in, Act out, uint32_t row0, uint32_t n_rows, uint32_t order) = 0;
    void matmul(const TensorView& w, Act in, Act out, uint32_t n_rows, uint32_t order)
    {
        matmul_rows(w, in, out, 0, n_rows, order);
    }
    // Mixture-of-experts layers (the defaults refuse them, naming the backend).
    // The router's logits: out[t] = w · in[t] for rows row0 … row0 + n_rows − 1 into host memory
    // ([n_rows][w.rows()]), summed as matmul_rows sums; the pass routes on them.
    virtual void router_logits(const TensorView& w, Act in, uint32_t row0, uint32_t n_rows, uint32_t order, float* out);
    // out[t] = Σ over row t's slots, in slot order, of weight · down_e(silu(gate_e · in[t]) ⊙ up_e · in[t])
    // (added to out when `accumulate`: a shared expert's output is already there). Each expert's rows are
    // computed together (its weights read once per chunk), every result as llama.cpp's mul_mat_id sums
    // it; `deterministic`: the same bits whatever the number of rows an expert gets. `last_row`, when not
    // null, receives the last row's products weight · expert output, [k][E] in slot order. The routing's
    // rows are chunk rows row0 … row0 + routing.n_rows − 1.
    virtual void moe_experts(const LayerWeights& layer, Act in, Act out, const ExpertRouting& routing,
                             bool deterministic, bool accumulate, float* last_row = nullptr, uint32_t row0 = 0);
    // x[t] += bias for every row (width = bias length).
    virtual void add_bias(Act x, const TensorView& bias, uint32_t n_rows) = 0;
    // x[t] ·= factor over rows of `width` (granite's residual multiplier).
    virtual void scale_rows(Act x, uint32_t width, uint32_t n_rows, float factor) = 0;
    // Rotary embedding of every head of every row in place (row t at position pos0 + t, or at its
    // segment's position), then × scale.
    virtual void rope(Act x, uint32_t n_heads, uint32_t head_dim, const RopeShape& rope, float scale) = 0;
    // K and V rows of the chunk into the layer's cache at positions pos0 …, as F16 (each segment's
    // rows into its own cache).
    virtual void store_kv(uint32_t layer, uint32_t n_kv_heads, uint32_t head_dim) = 0;
    // Attn = softmax(Q·Kᵀ · scale + mask) · V with keys and values from the layer's cache (a segment's
    // rows from its own; the shape's n_tokens and pos0 are then the whole chunk's); delivers
    // the layer's queries and weights to the sink when `deliver` is set (a layer of the plan's
    // attention_layers).
    virtual void attention(const AttentionShape& shape, bool deliver) = 0;
    // Gate = act(Gate) ⊙ Up over rows of `width` (GELU or SiLU).
    virtual void glu(uint32_t width, uint32_t n_rows, bool gelu) = 0;
    // X += O.
    virtual void add_residual(uint32_t n_rows) = 0;
    // X += O, then `out` = rmsnorm(X) ⊙ weight over rows of E: the residual add and the next block's
    // norm, which the pass asks for together where nothing (an intervention, a capture) looks at X in
    // between. A backend may fuse them (the Vulkan backend: one dispatch, the same bits); the default
    // runs the two operations.
    virtual void add_residual_rmsnorm(uint32_t n_rows, const TensorView& weight, Act out, float eps);
    // Backends that hold the residual stream in host memory stop here with a message naming the
    // layer when it holds NaN or infinity; others leave it to the logits check of the session.
    virtual void check_finite(uint32_t layer, uint32_t pos0) = 0;
    // Delivers X after `layer` to the sink.
    virtual void deliver_residual(uint32_t layer) = 0;
    // Delivers rows of `a` (row_width floats each) to the sink as `site` of `layer`.
    virtual void deliver_activation(Site site, uint32_t layer, Act a, uint32_t row_width) = 0;
    // Applies an edit to `a` (the values are read before the call returns).
    virtual void edit_rows(Act a, const RowEdit& edit) = 0;
    // Final norm and output head of chunk rows [row0, row0 + n_rows) of X; logits to the sink.
    virtual void output_head(const TensorView& norm, const TensorView& output, uint32_t row0, uint32_t n_rows,
                             uint32_t order, float eps) = 0;
    // Final norm and output head of the listed chunk rows (ascending), as one batch of rows.size() rows
    // summed in the order of `order`; the logits [rows][V] to the sink one row after another. For
    // multi-sequence passes (forward_batch), so only backends that run them implement it.
    virtual void output_head_rows(const TensorView& norm, const TensorView& output, std::span<const uint32_t> rows,
                                  uint32_t order, float eps);
    // Runs what was issued and delivers the rest of the chunk's results.
    virtual void finish_chunk() = 0;
    // Keys and values of positions [0, n) of one layer's KV head as f32 ([n][D] each); positions
    // the cache no longer holds may have any value (the caller clears them).
    virtual void read_cache(uint32_t layer, uint32_t kv_head, uint32_t n, std::vector<float>& keys,
                            std::vector<float>& values) const = 0;

private:
    // Whether a pass runs in deterministic mode: asked for, or always on this backend (throws
    // UnsupportedError where it cannot run).
    bool pass_is_invariant(bool asked) const;
    void run_layers(std::span<const TokenId> tokens, const ChunkPlan& plan);
    // The request's interventions at one site, then its delivery when the plan asks for it.
    void at_site(Site site, uint32_t layer, Act a, const ChunkPlan& plan);
    // at_site would do nothing there: no intervention of the request and no delivery of the plan.
    bool site_idle(Site site, uint32_t layer, const ChunkPlan& plan) const;
    // An MoE layer's feed-forward block: the router, the routing (with the request's expert
    // interventions), the shared expert where there is one, the experts; the block's output in O.
    void moe_block(uint32_t il, Act in, const ChunkPlan& plan, uint32_t mlp_order, bool reorder_logit_rows);
    std::span<const Intervention> m_interventions; // of the request being run
    std::span<const ExpertIntervention> m_expert_interventions;
    std::vector<float> m_router_logits, m_router_probs; // an MoE layer's, [n][n_expert]
    std::vector<float> m_expert_outputs;                // its last row's weighted expert outputs [k][E]
    ChunkSink* m_pass_sink = nullptr;                   // the request's, while it runs
    uint32_t m_start_layer = 0;                         // of the request being run
    uint32_t m_end_layer = 0;                           // its layer after the last one run (0: all)
    std::span<const float> m_start_rows;                // its start residual's rows of the chunk
    std::vector<float> m_rope_factors;
    std::vector<float> m_rope_factors_long; // phi3's LongRoPE: used when the context exceeds the original
};

} // namespace engine
