// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once
// A saved run's document as typed values: what the panels showed, field for field as the README's
// "Saved runs" schema spells it. The app (ui/storage/run_document.cpp) and the CLI's `trace` both
// convert to and from this one type; reading it back goes through parse (types and shapes, each
// error naming its field) and validate (run_validate.h: counts, ids and sizes against the limits),
// so a panel only ever sees a document that agrees with itself.

#include "run/run_experts.h"
#include "run/run_file.h"
#include "run/run_serving.h"
#include "run/run_speculation.h"
#include "sampling/sampler.h"
#include "sampling/sampling_settings.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace engine::run {

struct ModelInfo {
    std::string path; // the file's name only: a run is shared, the folders it was made in are not
    std::string name, architecture;
    uint64_t parameters = 0, file_size = 0;
    std::string quant_types;
    uint32_t context_length = 0, n_ctx = 0;
    std::string backend;
    int threads = 0;
    std::string chat_format;
    bool instruction_tuned = false;
    std::string model_kind_reason;
    int n_layers = 0;
    std::string sha256;
};

struct StepperSettingsDoc {
    SamplingSettings sampling;
    bool greedy = false;
    std::vector<std::string> stop_strings;
    bool logit_lens = false;
    int lens_top = 5;
};

struct TokenDoc {
    int id = 0;
    std::string text; // as shown: whitespace visible, byte tokens as <0xNN>
    std::string type; // normal, control, byte, …
    bool prompt = true, forced = false;
    float probability = 0.0f;
};

struct LensCandidateDoc {
    int id = 0;
    std::string text;
    float probability = 0.0f;
};

struct StepperDoc {
    StepperSettingsDoc settings;
    std::string action;
    std::vector<TokenDoc> tokens;
    int prompt_length = 0, steps = 0;
    int prefill_computed = 0, prefill_reused = 0, prefill_batches = 0;
    double prefill_ms = 0.0;
    int n_layers = 0, n_kv_heads = 0, kv_tokens = 0;
    uint64_t kv_bytes_in_use = 0;
    std::vector<int> kv_layer_tokens, layer_window;
    int last_reused = 0;
    double last_ms = 0.0;
    std::vector<int> history;
    std::vector<std::vector<LensCandidateDoc>> lens; // per layer
    std::vector<std::string> branches;
    std::string stop_reason, generated_text;
    std::map<int, SampleResult> distributions; // position → the distribution its token was drawn from
    std::vector<float> logits;                 // the last step's (F32 tensor "stepper.logits")
};

struct KvLayerDoc {
    int tokens_in_use = 0, blocks = 0, first_stored = 0, window = 0;
    uint64_t bytes_in_use = 0, bytes_allocated = 0;
};

struct KvDoc {
    std::string source;
    int n_ctx = 0, block_tokens = 0, blocks_per_layer = 0, tokens_cached = 0, prompt_tokens = 0, reused_tokens = 0;
    int n_layers = 0, n_kv_heads = 0, head_dim = 0, bytes_per_value = 2;
    std::string cache_types = "F16"; // kv_cache_types_name: "F16" or "K Q8_0, V Q4_0" (absent in older runs: F16)
    uint64_t bytes_in_use = 0, bytes_allocated = 0, bytes_per_block = 0, weight_bytes = 0;
    uint64_t device_total = 0, device_available = 0;
    std::string device;
    std::vector<KvLayerDoc> layers;
};

struct TimelineEventDoc {
    int stage = 0, step = -1;
    int64_t begin_ns = 0, end_ns = 0;
};

struct TimelineStepDoc {
    int token = 0;
    std::string text;
    double forward_ms = 0, sample_ms = 0, detokenize_ms = 0, latency_ms = 0, flops = 0, bytes_read = 0;
};

struct TimelineDoc {
    std::string source;
    std::vector<TimelineEventDoc> events;
    std::vector<TimelineStepDoc> steps;
    double tokenize_ms = 0, prefill_ms = 0;
    int prompt_tokens = 0, prefill_computed = 0;
    double prefill_flops = 0, prefill_bytes = 0, ttft_ms = 0;
    std::string note;
    // A served model's reply: measured here, the server's own account beside it (negative: not said).
    bool remote = false;
    std::string server;
    double server_prompt_ms = -1.0, server_generation_ms = -1.0;
    int server_generated = -1;
    int server_drafted = -1, server_draft_accepted = -1; // llama-server's speculative decoding
    double total_ms = 0;
};

struct AttentionHeadDoc {
    int layer = 0, head = 0, kv_head = 0;
    float scale = 1.0f;
    int n = 0, head_dim = 0;
    std::vector<float> weights, q, k, v; // [n][n], [n][head_dim] ×3 (F16 tensors: read back rounded)
    float softcap = 0.0f;                // attention soft-cap (gemma2); absent from runs without one
};

struct AttentionDoc {
    std::string source, text;
    std::vector<TokenDoc> tokens;
    int n_layers = 0;
    std::vector<int> heads_per_layer, kv_heads_per_layer, window;
    uint64_t bytes = 0;
    double ms = 0;
    std::vector<AttentionHeadDoc> heads;
};

struct AnalyzedTokenDoc {
    int id = 0;
    std::string text;
    bool predicted = false;
    double p = 0, surprisal_bits = 0, entropy_bits = 0;
    int rank = 0;
    std::vector<std::pair<std::string, double>> top;
    double kl = 0, reverse_kl = 0, p_b = 0;
    bool same_top = true;
    struct Candidate {
        int id = 0;
        std::string text;
        double p_a = 0, p_b = 0;
    };
    std::vector<Candidate> candidates;
};

struct TextAnalysisDoc {
    std::string model_a, model_b;
    int window = 0;
    std::vector<AnalyzedTokenDoc> tokens;
    double perplexity = 0, mean_kl = 0, same_top = 0, rms_dp = 0;
    bool compared = false, cancelled = false;
    double ms = 0;
};

struct PatchingDoc {
    std::string clean, corrupted; // the settings as typed
    int metric = 0;
    std::string settings_token_a, settings_token_b;
    int over = 0;
    std::vector<std::string> clean_pieces, corrupted_pieces;
    std::string token_a, token_b, metric_name, over_name, backend;
    int n_layers = 0, n_columns = 0;
    std::vector<std::vector<double>> effect, raw; // [layer][column], NaN where not run
    double clean_metric = 0, corrupted_metric = 0;
    int runs = 0;
    bool cancelled = false;
    double ms = 0;
};

struct AttributionPartDoc {
    int kind = 0;
    std::string name;
    int layer = -1, head = -1;
    double value = 0;
};

struct AttributionDoc {
    std::string token, versus;
    int token_id = -1, position = 0;
    double logit = 0, final_norm_scale = 0;
    std::vector<AttributionPartDoc> parts;
    std::string backend;
    double ms = 0;
};

struct HeadInfoDoc {
    int layer = 0, head = 0, cls = 5;
    std::vector<double> scores;
    double entropy = 0, kl = -1.0, logit_change = 0;
};

struct HeadsDoc {
    std::string kind; // "classes" or "scan"
    int n_layers = 0, n_heads = 0;
    std::vector<HeadInfoDoc> heads; // [layer * n_heads + head]
    std::string token;
    int runs = 0;
    bool cancelled = false;
    double ms = 0;
};

struct CandidateDoc {
    int id = 0;
    std::string text;
    double p = 0;
};

struct AblationDoc {
    std::vector<std::pair<int, int>> heads; // (layer, head)
    std::vector<CandidateDoc> before, after;
    double kl = 0;
    std::string token;
    double logit = 0, ablated_logit = 0;
    int positions = 0;
};

struct SteeringDoc {
    std::string plus, minus, prompt; // the settings as typed
    int layer = 6;
    double strength = 4.0;
    int tokens = 24;
    std::string default_text, steered_text;
    double kl = 0, norm = 0;
    std::vector<float> direction; // F32 tensor "steering.direction"
    std::string architecture;
    int n_layers = 0;
};

struct Document {
    std::optional<ModelInfo> model; // absent: the file's own identity keys name the model
    std::string saved_at;           // ISO 8601, UTC
    std::optional<StepperDoc> stepper;
    std::optional<KvDoc> kv;
    std::optional<TimelineDoc> timeline;
    std::optional<AttentionDoc> attention;
    std::optional<TextAnalysisDoc> text_analysis;
    std::optional<PatchingDoc> patching;
    std::optional<AttributionDoc> attribution;
    std::optional<HeadsDoc> head_classes, head_scan;
    std::optional<AblationDoc> ablation;
    std::optional<SteeringDoc> steering;
    std::optional<ServingDoc> serving;         // the serving lab's runs
    std::optional<SpeculationDoc> speculation; // the speculation view's comparison
    std::optional<ExpertsDoc> experts;         // the experts view's routing
};

// The file's contents for write_run_file(): the document as JSON, its bulk numbers as tensors.
RunContents to_contents(const Document& doc, std::string writer);

// Reads the document's JSON and tensors into types. Throws FormatError naming the field and what is
// wrong ("stepper.tokens[3].id: expected an integer"). Shapes only: validate() checks the rest.
Document parse_document(const RunContents& contents);

} // namespace engine::run
