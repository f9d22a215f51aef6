// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "backend/intervention.h"
#include "kv/kv_cache.h"
#include "moe/routing.h"
#include "tokenizer/vocab.h"

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace engine {

class Model;
struct ModelConfig;

// What a forward pass should record besides the logits. The UI declares what it watches; nothing
// else is copied.
struct CaptureRequest {
    std::vector<std::pair<uint32_t, uint32_t>> heads; // (layer, query head)
    bool all_heads = false;
    bool residuals = false;      // residual stream after every layer (logit lens)
    std::vector<Site> sites;     // further activations of every layer (Site::Residual: as `residuals`)
    bool routing = false;        // each MoE layer's router: probabilities, chosen experts, weights
    bool expert_outputs = false; // with routing: the last position's weighted expert outputs (attribution)

    bool wants(uint32_t layer, uint32_t head) const;
    bool empty() const
    {
        return heads.empty() && !all_heads && !residuals && sites.empty() && !routing && !expert_outputs;
    }
};

// One head's attention over one forward pass: rows are this pass's queries, columns every position
// from 0 to the last query's (masked entries are exactly 0).
struct AttentionCapture {
    uint32_t layer = 0;
    uint32_t head = 0;
    uint32_t kv_head = 0;
    uint32_t first_position = 0; // position of the first query row
    uint32_t n_queries = 0;
    uint32_t n_keys = 0; // first_position + n_queries
    uint32_t head_dim = 0;
    float scale = 1.0f;         // applied to q·k before the softmax
    std::vector<float> weights; // [n_queries][n_keys] softmax output
    std::vector<float> q;       // [n_queries][head_dim] post-RoPE query as used in q·k (F16-rounded)
    std::vector<float> k;       // [n_keys][head_dim] cached keys (post-RoPE, F16); zeros where freed
    std::vector<float> v;       // [n_keys][head_dim] cached values (F16); zeros where freed
    float softcap = 0.0f;       // gemma2: q·k ← c·tanh(q·k / c) before the scale; 0: none
};

// One MoE layer's router over one forward pass (rows are this pass's tokens).
struct RoutingCapture {
    uint32_t layer = 0;
    uint32_t first_position = 0;
    uint32_t n_tokens = 0, n_expert = 0, k = 0;
    std::vector<float> logits;    // [n_tokens][n_expert] the router's outputs
    std::vector<float> probs;     // [n_tokens][n_expert] the gating softmax over every expert
    std::vector<int32_t> experts; // [n_tokens][k] the chosen experts, in slot order
    std::vector<float> weights;   // [n_tokens][k] their weights as applied (after normalisation)
    // CaptureRequest::expert_outputs: at the pass's last position, each chosen expert's output times
    // its weight, [k][n_embd] in slot order (what the layer sums, before a residual multiplier)
    std::vector<float> last_outputs;
};

struct ForwardCaptures {
    std::vector<AttentionCapture> attention;
    std::vector<RoutingCapture> routing;       // one per MoE layer, in layer order (CaptureRequest::routing)
    std::vector<std::vector<float>> residuals; // per layer: [n_tokens][n_embd]
    // Per site of CaptureRequest::sites, per layer: [n_tokens][site_width] (Embedding: layer 0 only;
    // Residual: see `residuals`). Empty for a site nobody asked for.
    std::array<std::vector<std::vector<float>>, kSiteCount> activations;

    // The rows of one site and layer ([n_tokens][site_width]); throws Error when not captured.
    const std::vector<float>& at(Site site, uint32_t layer) const;
};

// The cached keys and values of one layer and KV head, read back for the KV-cache view.
struct KvReadback {
    uint32_t layer = 0;
    uint32_t kv_head = 0;
    uint32_t n_positions = 0;
    uint32_t head_dim = 0;
    std::vector<float> keys;   // [n_positions][head_dim], post-RoPE; zeros where not held
    std::vector<float> values; // [n_positions][head_dim]; zeros where not held
    std::vector<bool> held;    // [n_positions]: false where a sliding window freed the position
};

// The summation order of deterministic mode (ForwardRequest::batch_invariant): larger than any
// batch, so every kernel sums as for a large batch whatever the number of tokens.
inline constexpr uint32_t kBatchInvariantOrder = 1u << 20;

struct ForwardRequest {
    std::span<const TokenId> tokens; // positions n_cached … n_cached + tokens.size() − 1
    bool all_logits = false;         // logits of every position instead of the last only
    const CaptureRequest* capture = nullptr;
    // Sum in the order of a batch this large (0: the batch's own size). Kernels pick their summation
    // order by batch size, as llama.cpp does; re-evaluating one position of an earlier batch with
    // that batch's size reproduces its logits bit for bit.
    uint32_t order_as_batch = 0;
    // Deterministic mode: every token's logits and cache entries independent of the rest of the
    // pass — the same bits whether it is evaluated alone, in a prompt chunk of 7 or 512, or in a
    // verification of several drafted tokens. Every matmul then sums in one fixed order (that of a
    // large batch: kBatchInvariantOrder), the output head and the last MLP too, and llama.cpp's
    // repacked matmul takes every token through its batch kernel. It leaves llama.cpp's order (which
    // depends on the batch size), so it is off by default. CPU only: other backends refuse it.
    bool batch_invariant = false;
    // Changes to the pass (the lab's patching, ablation and steering); empty: none, every bit as
    // without. Positions are absolute (n_cached …).
    std::span<const Intervention> interventions;
    // Changes at the routers of a mixture-of-experts model (force a token's experts, remove an expert);
    // empty: none, every bit as without.
    std::span<const ExpertIntervention> expert_interventions;
    // Resume the pass at this layer from a residual stream computed before — [tokens][n_embd], the
    // residual after layer start_layer − 1 — instead of evaluating the layers below again (the
    // lab's patching: below a patch, a run computes what the unpatched run computed, bit for bit).
    // The skipped layers' cache is not written and no captures may be asked for: for one-off runs
    // on a cache cleared afterwards. start_layer = n_layer applies only the output head.
    uint32_t start_layer = 0;
    std::span<const float> start_residual;
    // Stop after layer end_layer − 1 and apply the final norm and output head there (0: every layer):
    // the early-exit drafter of speculative decoding, the logit lens run as a model. Only layers below
    // it write the cache.
    uint32_t end_layer = 0;
};

// One sequence's part of a multi-sequence pass (Backend::forward_batch): its tokens go to positions
// kv->n_cached() … of its own cache.
struct BatchSequence {
    KvStore* kv = nullptr;
    std::span<const TokenId> tokens;
    bool logits = true; // the logits of its last token (a prompt chunk before the last needs none)
};

// Tokens of several sequences in one pass: every matrix is read once for all of them, attention reads
// each sequence's own cache. No captures or interventions (a single-sequence pass has them).
struct BatchRequest {
    std::vector<BatchSequence> sequences;
    // Deterministic mode (as ForwardRequest::batch_invariant): each sequence's logits and cache
    // entries the bits of its single-sequence pass, whatever else the batch holds.
    bool batch_invariant = false;
};

struct BatchResult {
    uint32_t n_vocab = 0;
    std::vector<std::vector<float>> logits; // per sequence: [n_vocab], empty where not asked for
};

struct ForwardResult {
    uint32_t n_vocab = 0;
    std::vector<float> logits;                 // [rows][n_vocab]
    std::shared_ptr<ForwardCaptures> captures; // null when nothing was requested
};

struct BackendMemory {
    std::string device; // "CPU", a GPU's name, …
    uint64_t weight_bytes = 0;
    uint64_t kv_bytes_allocated = 0;
    uint64_t scratch_bytes = 0;
    uint64_t device_total = 0; // memory the device has (RAM for the CPU)
};

// A compute backend: weights uploaded once, a forward pass over a batch of new positions appended
// to the KV cache it owns. Implementations: CPU (here), Vulkan and CUDA (later), all checked against
// the CPU by the same parity tests.
class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;
    // "cpu", "vulkan" or "cuda": which of the engine's backends this is (name() is for people).
    virtual std::string_view kind() const = 0;
    virtual const Model& model() const = 0;
    // Whether forward() takes ForwardRequest::batch_invariant (the CPU backend's kernels); others
    // refuse such a request by name (require_batch_invariant).
    virtual bool batch_invariant_capable() const { return false; }
    // Whether every pass runs in deterministic mode (CpuBackendOptions::batch_invariant), whatever the
    // request says: for code that issues its own requests (the lab, the text analysis).
    virtual bool batch_invariant_always() const { return false; }
    // Appends request.tokens to the cache and returns their logits. Throws Error when the context
    // is full; the cache is unchanged then.
    virtual ForwardResult forward(const ForwardRequest& request) = 0;
    // Whether forward_batch runs here (the CPU backend); others refuse it by name.
    virtual bool multi_sequence_capable() const { return false; }
    // One pass over tokens of several sequences, each appended to its own cache. Throws Error when a
    // cache cannot take its tokens (the caches are unchanged then); UnsupportedError on a backend
    // without multi-sequence passes.
    virtual BatchResult forward_batch(const BatchRequest& request);
    virtual KvCache& kv_cache() = 0;
    virtual const KvCache& kv_cache() const = 0;
    virtual BackendMemory memory() const = 0;
    // Throws Error for a layer or KV head the model does not have.
    virtual KvReadback read_kv(uint32_t layer, uint32_t kv_head) const = 0;
    // The logit lens: the final norm and output head applied to one residual-stream vector
    // (n_embd floats), exactly as the forward pass applies them to the last layer's output, so the
    // last layer's residual gives the real logits bit for bit. Returns n_vocab logits.
    virtual std::vector<float> project_to_vocab(std::span<const float> residual) = 0;
};

// What every backend checks and applies the same way (backend.cpp), so that they refuse the same
// input with the same words and agree on the numbers around the forward pass.
// Throws Error for an empty batch or a token id outside the vocabulary.
void check_forward_request(const ModelConfig& config, const ForwardRequest& request);
// Throws Error for a layer or KV head the model does not have (Backend::read_kv's contract).
void check_kv_head(const ModelConfig& config, uint32_t layer, uint32_t kv_head);
// Throws Error when a logit-lens input is not one residual vector of the model's width.
void check_residual_width(const ModelConfig& config, std::span<const float> residual);
// What the models' graphs do to the output head's result, in llama.cpp's order: × 1/logit_scale
// (granite), then cap · tanh(logit · 1/cap) (a final logit soft-cap, gemma2); nothing otherwise.
void apply_output_scaling(const ModelConfig& config, std::span<float> logits);
// How queries are scaled: after RoPE (gemma's pre-scaling, 1 elsewhere) and inside the attention
// scores (1 / sqrt(head_dim) unless the queries were pre-scaled).
struct QueryScaling {
    float query = 1.0f;
    float attention = 1.0f;
};
QueryScaling query_scaling(const Model& model);

// Which of llama.cpp's summation orders the CPU backend's matrices follow. llama.cpp's default x86
// build repacks Q4_0, IQ4_NL and Q4_K matrices (rows a multiple of 8) into interleaved layouts whose
// kernels sum in another order (vec_dot.h: vec_dot_repacked); `--no-repack` keeps the plain one.
enum class WeightOrder {
    Plain,           // llama.cpp --no-repack (the test fixtures' order)
    Repacked,        // llama.cpp's default on a CPU with AVX2, on any path
    LlamaCppDefault, // Repacked where the CPU has AVX2 (where llama.cpp repacks), Plain elsewhere
};
std::string_view weight_order_name(WeightOrder order); // "repacked" or "plain" (resolved)
WeightOrder resolved_weight_order(WeightOrder order);  // LlamaCppDefault decided for this CPU

// Throws UnsupportedError, naming the backend, when it cannot run deterministic mode.
void require_batch_invariant(const Backend& backend);

struct CpuBackendOptions {
    int threads = 0;       // 0: all hardware threads
    uint32_t n_ctx = 4096; // positions the KV cache may hold (capped at the model's training context)
    WeightOrder order = WeightOrder::Plain;
    bool batch_invariant = false; // every pass in deterministic mode, asked for or not (ForwardRequest)
    KvCacheTypes kv_types;        // F16, or llama.cpp's quantized cache types (read by flash attention)
    // llama.cpp's flash-attention order (`-fa on`; its default `-fa auto` resolves to on for a CPU) for an
    // F16 cache too (a quantized cache is always read so). Off: its `-fa off` order, the fixtures'.
    bool flash_attention = false;
    // With flash attention, a decode step over 512 cells or more splits them among llama.cpp's threads,
    // and its bits depend on their number: the thread count to mirror (0: this backend's own).
    uint32_t flash_splits = 0;
    // Move the model's file onto 2 MiB pages before the first pass (MappedFile::move_to_huge_pages):
    // a decode step streams every weight, a few percent faster so. Off: the weights stay mapped.
    bool huge_page_weights = true;
};

std::unique_ptr<Backend> make_cpu_backend(std::shared_ptr<const Model> model, const CpuBackendOptions& options);

} // namespace engine
