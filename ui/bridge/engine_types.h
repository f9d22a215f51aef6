// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "sampling/sampling_settings.h"

#include <QMetaType>
#include <QString>
#include <QStringList>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace engine {
class Tokenizer;
}

namespace tokenscope::ui {

// Immutable snapshots that cross from the engine thread to the UI (held in shared_ptr<const T>).

struct ModelSummary {
    QString path;
    QString name;
    QString architecture;
    quint64 parameters = 0;
    quint64 active_parameters = 0;       // a mixture of experts': those a token goes through (= parameters when dense)
    int n_expert = 0, n_expert_used = 0; // 0: a dense model
    quint64 file_size = 0;
    QString quant_types; // e.g. "Q8_0, Q5_0, Q4_K, Q6_K, F32"
    quint32 context_length = 0;
    quint32 n_ctx = 0;    // context the session was created with
    QString backend;      // "CPU (2 threads) AVX2", "Vulkan: …"
    QString backend_note; // why it is not the backend asked for (a fallback), else empty
    int threads = 0;
    QString chat_format;            // "model template (Jinja; chatml family)", "gemma (fixed layout)", …
    QString chat_template_notice;   // why the model's own template is not used, else empty
    bool instruction_tuned = false; // engine::model_kind: an instruct/chat model, not a base model
    QString model_kind_reason;      // the rule that decided it: "it has a chat template", … (empty: not said)
    int n_layers = 0;
    // A model served elsewhere (File → Connect to server…): no weights here, only what the server exposes.
    bool remote = false;
    QString server_url;
    QString server_kind; // "llama.cpp (llama-server)", "vLLM", …
};

using SamplingSettings = engine::SamplingSettings; // the one struct the chat, stepper, CLI and servers share

struct ChatTurn {
    QString role; // system | user | assistant
    QString content;
};

struct ReplyStats {
    quint64 request_id = 0;
    int prompt_tokens = 0;
    int reused_tokens = 0;
    int computed_tokens = 0;
    int generated_tokens = 0;
    double ttft_ms = 0.0;
    double tokens_per_second = 0.0;
    QString stop_reason;
    QString prompt_text;       // exactly what the model received, after the chat template
    QStringList prompt_pieces; // its tokens
    QString notice;            // e.g. the context policy's message
    bool cancelled = false;
    quint64 attention_bytes = 0; // what the attention recording holds after the reply (0: no view watched)
    QString server;              // the server that answered ("llama.cpp (llama-server)"), empty: this machine
    // How the prompt was made (engine::ChatPromptBuilder): taken whole from the fit check of the same
    // conversation (reused), or rendered and tokenized for this reply: never more than once each.
    bool prompt_reused = false;
    int prompt_renders = 0;
    int prompt_tokenizations = 0;
};

struct TokenSpan {
    int id = 0;
    int begin = 0; // byte offsets in the UTF-8 text
    int end = 0;
    QString piece; // the vocabulary entry
    QString type;  // normal, control, byte, user-defined, …
};

struct Tokenization {
    quint64 request_id = 0;
    QString text;
    QByteArray utf8;
    std::vector<TokenSpan> tokens;
    double ms = 0.0;
    QString source; // who tokenized, when not this machine: "the server (llama.cpp (llama-server))"
    QString error;  // the server could not tokenize (no tokens then)
};

// The decode stepper's settings: how the next token is drawn, when the run stops, and whether the
// logit lens is computed after every pass.
struct StepperSettings {
    SamplingSettings sampling;
    bool greedy = false;
    QStringList stop_strings;
    bool logit_lens = false;
    int lens_top = 5;
};

struct StepperToken {
    int id = 0;
    QString text; // what it stands for, whitespace visible; byte tokens as <0xNN>
    QString type; // normal, control, byte, …
    bool prompt = true;
    bool forced = false;
    float probability = 0.0f; // generated tokens: in the distribution they were drawn from
};

struct LensCandidate {
    int id = 0;
    QString text;
    float probability = 0.0f;
};

// One candidate of a server's top-N for the next token (probability before sampling).
struct ServerCandidate {
    int id = 0;
    QString text;
    float probability = 0.0f;
};

struct StepperState {
    quint64 request_id = 0;
    QString action;                   // prefill | step | back | error
    QString error;                    // when action is error
    std::vector<StepperToken> tokens; // the whole sequence
    int prompt_length = 0;
    int steps = 0; // generated tokens
    // The prefill
    int prefill_computed = 0;
    int prefill_reused = 0;
    int prefill_batches = 0;
    double prefill_ms = 0.0;
    // The KV cache after this action (the engine's accounting)
    int n_layers = 0;
    int n_kv_heads = 0;
    int kv_tokens = 0;
    quint64 kv_bytes_in_use = 0;
    std::vector<int> kv_layer_tokens; // per layer: positions attention can see (sliding windows cap it)
    std::vector<int> layer_window;    // per layer: 0 = global
    // The last step
    int last_reused = 0;
    double last_ms = 0.0;
    // The next token's raw logits and the history the sampler reads, so the panel can preview any
    // sampling settings without a round trip.
    std::shared_ptr<const std::vector<float>> logits;
    std::vector<int> history;
    std::vector<std::vector<LensCandidate>> lens; // per layer, best first; empty when off
    QStringList branches;                         // "at 12: ␣blue␣sky (2 tokens)"
    // The model's tokenizer (immutable, safe on any thread), for naming candidate tokens.
    std::shared_ptr<const engine::Tokenizer> tokenizer;
    QString stop_reason; // empty while the run can go on
    QString generated_text;
    // On a served model: the server's top-N for the next token instead of the whole vocabulary's
    // logits, and the token the server drew with the settings (what Step takes).
    QString server;
    std::vector<ServerCandidate> server_top;
    int server_drawn = -1;
    QString server_drawn_text;
};

// The KV cache as the engine accounts for it, after a forward pass (chat or stepper).
struct KvLayerState {
    int tokens_in_use = 0; // positions attention can see (sliding windows cap it)
    int blocks = 0;        // blocks allocated
    int first_stored = 0;  // oldest position still held
    int window = 0;        // 0: global layer
    quint64 bytes_in_use = 0;
    quint64 bytes_allocated = 0;
};

struct KvSnapshot {
    QString source; // "chat" | "stepper" | "reset"
    int n_ctx = 0;
    int block_tokens = 0;
    int blocks_per_layer = 0; // n_ctx / block_tokens, rounded up
    int tokens_cached = 0;
    int prompt_tokens = 0; // of the current request
    int reused_tokens = 0; // of those, taken from the cache (shared prefix)
    int n_layers = 0;
    int n_kv_heads = 0;
    int head_dim = 0;
    int bytes_per_value = 2;                                       // F16
    QString cache_types = "F16";                                   // or "K Q8_0, V Q4_0" (engine::kv_cache_types_name)
    double key_bytes_per_value = 2.0, value_bytes_per_value = 2.0; // Q8_0: 34/32, Q4_0: 18/32
    quint64 bytes_in_use = 0;
    quint64 bytes_allocated = 0;
    quint64 bytes_per_block = 0; // one layer's block, K and V of every KV head
    quint64 weight_bytes = 0;
    quint64 device_total = 0; // memory of the backend's device (RAM for the CPU)
    quint64 device_available = 0;
    QString device;
    std::vector<KvLayerState> layers;
};

// A served model's cache as far as its server says, after each reply (remote connections): the
// context one request may hold, what the last request held and reused, and the server's whole
// cache and queue from /metrics where it reports them. Nothing here is estimated.
struct ServerCacheSnapshot {
    QString server;                 // "llama-server at http://…"
    int context_length = 0;         // tokens one request may hold (llama-server: per slot); 0 unknown
    int tokens_held = 0;            // the last request: its prompt and reply (the server's usage)
    int prompt_tokens = 0;          // of those, the prompt
    int reused_tokens = -1;         // of the prompt, taken from the server's cache; -1 not said
    std::optional<double> kv_usage; // the server's whole KV cache in use, 0..1 (/metrics)
    std::optional<double> running;  // requests being served (/metrics)
    std::optional<double> waiting;  // requests queued (/metrics)
    QString metrics_note;           // where the /metrics figures came from, or why there are none
};

// The cached keys and values of one layer and KV head, for the contents view.
struct KvContents {
    quint64 request_id = 0;
    int layer = 0;
    int kv_head = 0;
    int head_dim = 0;
    int n_positions = 0;
    std::vector<float> keys; // [n_positions][head_dim]
    std::vector<float> values;
    std::vector<bool> held; // false where a sliding window freed the position
    std::vector<StepperToken> tokens;
    QString error;
};

// One generation's measured timeline (chat reply or stepper run).
struct TimelineEventUi {
    int stage = 0; // engine::TimelineStage
    int step = -1;
    qint64 begin_ns = 0;
    qint64 end_ns = 0;
};

struct TimelineStepUi {
    int token = 0;
    QString text;
    double forward_ms = 0.0;
    double sample_ms = 0.0;
    double detokenize_ms = 0.0;
    double latency_ms = 0.0; // TTFT for step 0, then the inter-token latency
    double flops = 0.0;      // of the forward pass that produced its logits
    double bytes_read = 0.0; // weights + KV read by that pass
};

struct TimelineSnapshot {
    QString source;    // "chat" | "stepper"
    bool live = false; // more steps are coming
    std::vector<TimelineEventUi> events;
    std::vector<TimelineStepUi> steps;
    double tokenize_ms = 0.0;
    double prefill_ms = 0.0;
    int prompt_tokens = 0;
    int prefill_computed = 0;
    double prefill_flops = 0.0;
    double prefill_bytes = 0.0;
    double ttft_ms = 0.0;
    QString note; // e.g. "waiting between your clicks left out"
    // A reply from a server: the times are measured here, on the stream's arrivals; the server's own
    // account beside them where it reports one (negative: not reported).
    bool remote = false;
    QString server;
    double server_prompt_ms = -1.0;
    double server_generation_ms = -1.0;
    int server_generated = -1;
    int server_drafted = -1, server_draft_accepted = -1; // llama-server's speculative decoding, if it drafted
    double total_ms = 0.0;
};

struct MachinePeaksUi {
    double read_bytes_per_second = 0.0;
    double flops_per_second = 0.0;
    int threads = 0;
    QString simd;
};

// Attention weights of one head over a whole sequence, from one forward pass over its tokens.
struct AttentionHead {
    int layer = 0;
    int head = 0;
    int kv_head = 0;
    float scale = 1.0f; // applied to q·k before the softmax
    int n = 0;          // tokens (rows and columns)
    int head_dim = 0;
    std::vector<float> weights; // [n][n]: row = query, column = key; masked entries exactly 0
    std::vector<float> q;       // [n][head_dim] post-RoPE queries (as used in q·k)
    std::vector<float> k;       // [n][head_dim] post-RoPE keys (F16 in the cache)
    std::vector<float> v;       // [n][head_dim] values
    float softcap = 0.0f;       // gemma2: q·k ← c·tanh(q·k / c) before the scale; 0: none
};

struct AttentionSnapshot {
    quint64 request_id = 0;
    QString source; // "prompt" | "sequence"
    QString text;
    QString error;
    std::vector<StepperToken> tokens;
    int n_layers = 0;
    std::vector<int> heads_per_layer;
    std::vector<int> kv_heads_per_layer;
    std::vector<int> window;          // per layer, 0 = global
    std::vector<AttentionHead> heads; // those captured
    quint64 bytes = 0;                // memory the captures take
    double ms = 0.0;                  // the forward pass
    const AttentionHead* find(int layer, int head) const
    {
        for (const auto& h : heads)
            if (h.layer == layer && h.head == head)
                return &h;
        return nullptr;
    }
};

// Set by the UI thread to cancel one request, read by the engine thread (between tokens, batches
// or stages): every cancellable request carries its own, so a Stop is never lost or misapplied.
using CancelToken = std::shared_ptr<std::atomic<bool>>;

// A test hook: when set, a model load stops at 50% of its progress until the test lets it go,
// so that cancelling at that exact point can be checked.
struct LoadGate {
    std::function<void()> reached; // called on the engine thread at 50%
    std::function<void()> wait;    // blocks the engine thread until released
};

} // namespace tokenscope::ui

Q_DECLARE_METATYPE(std::shared_ptr<const tokenscope::ui::ModelSummary>)
Q_DECLARE_METATYPE(std::shared_ptr<const tokenscope::ui::ReplyStats>)
Q_DECLARE_METATYPE(std::shared_ptr<const tokenscope::ui::ServerCacheSnapshot>)
Q_DECLARE_METATYPE(std::shared_ptr<const tokenscope::ui::Tokenization>)
Q_DECLARE_METATYPE(tokenscope::ui::StepperSettings)
Q_DECLARE_METATYPE(std::shared_ptr<const tokenscope::ui::KvSnapshot>)
Q_DECLARE_METATYPE(std::shared_ptr<const tokenscope::ui::KvContents>)
Q_DECLARE_METATYPE(std::shared_ptr<const tokenscope::ui::TimelineSnapshot>)
Q_DECLARE_METATYPE(tokenscope::ui::MachinePeaksUi)
Q_DECLARE_METATYPE(std::shared_ptr<const tokenscope::ui::AttentionSnapshot>)
Q_DECLARE_METATYPE(std::shared_ptr<const tokenscope::ui::StepperState>)
