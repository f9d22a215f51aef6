// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

#include "sampling/sampling_settings.h"

// What OpenAI-compatible servers (llama.cpp's llama-server, vLLM, SGLang, Ollama, LM Studio) send
// and expect, as plain C++ values: request bodies built, response bodies read. No transport here
// (the Qt client in ui/remote/ does the HTTP); everything is testable on the JSON the servers'
// documentation gives. Malformed input throws engine::Error naming what was wrong: ids and counts
// outside their ranges and numbers that are not finite (or not log-probabilities) are refused,
// never truncated.

#include "remote/remote_limits.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace engine::remote {

enum class ServerKind { Unknown, LlamaCpp, Vllm, Sglang, Ollama, LmStudio };
// "llama.cpp (llama-server)", "vLLM", …; "OpenAI-compatible server" for Unknown.
std::string server_kind_name(ServerKind kind);

struct ServedModel {
    std::string id;
    std::string owned_by;
    uint32_t context_length = 0; // what the server says the model takes (vLLM max_model_len, llama-server n_ctx_train)
    uint32_t n_vocab = 0;
    uint64_t n_params = 0;
};

struct ModelList {
    ServerKind kind = ServerKind::Unknown; // from owned_by ("llamacpp", "vllm", "sglang")
    std::vector<ServedModel> models;
};
// GET /v1/models
ModelList parse_models(std::string_view body);
// GET /api/tags (Ollama's own list) → model names.
std::vector<std::string> parse_ollama_tags(std::string_view body);
// GET /api/version (Ollama): its version, or nothing when the body is not Ollama's answer.
std::optional<std::string> parse_ollama_version(std::string_view body);
// GET /api/v0/models (LM Studio) → the loaded LLMs first, with their max_context_length.
std::vector<ServedModel> parse_lmstudio_models(std::string_view body);
// GET /props (llama-server): the context each slot has (n_ctx); 0 when not given.
uint32_t parse_props_context(std::string_view body);

// Server-sent events, fed in whatever pieces the network delivers: each complete event's data
// (multi-line data joined with '\n'), comments and other fields dropped. "[DONE]" ends the stream.
// An event or line longer than `max_event_bytes` stops the decoder (too_long()): what it held is
// dropped, nothing more is buffered.
class SseDecoder {
public:
    explicit SseDecoder(std::size_t max_event_bytes = SIZE_MAX) : m_max(max_event_bytes) {}
    std::vector<std::string> feed(std::string_view bytes);
    bool done() const { return m_done; }
    bool too_long() const { return m_too_long; }
    // Bytes received after the last complete event (a stream cut mid-event leaves some).
    bool has_partial() const { return !m_line.empty() || !m_data.empty(); }

private:
    void line(std::string_view l, std::vector<std::string>& out);
    void overflow();
    std::size_t m_max;
    std::string m_line;
    std::string m_data;
    bool m_has_data = false;
    bool m_done = false;
    bool m_too_long = false;
};

// One JSON object per line (Ollama's native streaming), each at most `max_line_bytes` (too_long()).
class LineDecoder {
public:
    explicit LineDecoder(std::size_t max_line_bytes = SIZE_MAX) : m_max(max_line_bytes) {}
    std::vector<std::string> feed(std::string_view bytes);
    // The last line when the stream ended without a newline.
    std::optional<std::string> finish();
    bool too_long() const { return m_too_long; }

private:
    std::size_t m_max;
    std::string m_line;
    bool m_too_long = false;
};

struct TopCandidate {
    int32_t id = -1; // llama-server names ids; OpenAI-style servers only the text
    std::string token;
    double logprob = 0.0;
};

struct TokenLogprob {
    int32_t id = -1;
    std::string token;
    double logprob = 0.0;
    std::vector<TopCandidate> top;
};

struct Usage {
    int prompt_tokens = 0;
    int completion_tokens = 0;
    int cached_tokens = -1; // -1: not reported
};

// The server's own account of a reply (llama-server timings, Ollama durations, LM Studio stats),
// in one shape; a field the server did not send stays negative.
struct ServerTimings {
    int cache_n = -1;     // prompt tokens taken from the server's cache
    int prompt_n = -1;    // prompt tokens evaluated
    int predicted_n = -1; // tokens generated
    double prompt_ms = -1.0;
    double predicted_ms = -1.0;
    double ttft_ms = -1.0;  // LM Studio's time_to_first_token
    double total_ms = -1.0; // Ollama's total_duration
    double load_ms = -1.0;  // Ollama's load_duration
    // llama-server with speculative decoding (a draft model or n-gram drafts): tokens drafted for this
    // reply and how many of them the target accepted; absent when the slot drafted nothing
    int draft_n = -1;
    int draft_n_accepted = -1;
    double server_ms() const; // prompt + generation as the server counts them; -1 when unknown
};

// One streamed piece of a reply: OpenAI chat (`choices[0].delta.content`) or completions
// (`choices[0].text`) chunks, llama-server's /completion chunks (`content`), Ollama /api/chat
// lines (`message.content`). The usage-only final chunk has no content.
struct StreamChunk {
    std::string content;
    std::string reasoning; // reasoning_content (thinking models)
    std::string finish_reason;
    std::vector<TokenLogprob> logprobs;
    std::optional<Usage> usage;
    std::optional<ServerTimings> timings;
    bool done = false; // Ollama's done, llama-server's stop
    std::string error; // a server that reports an error inside the stream
};
StreamChunk parse_stream_chunk(std::string_view json);

struct ChatMessage {
    std::string role;
    std::string content;
};

// The user's sampling settings as a request sends them, and what only the request needs.
struct SamplingRequest {
    std::string model;
    SamplingSettings sampling;
    bool send_seed = false; // false: the server picks one
    int top_logprobs = 0;   // 0: no logprobs
    bool stream = true;
};

// A request with these settings and their seed (greedy: temperature 0).
SamplingRequest sampling_request(const SamplingSettings& settings, bool greedy = false);

// POST /v1/chat/completions (or /api/chat for Ollama), and /v1/completions for a raw prompt.
std::string chat_request_body(const std::vector<ChatMessage>& messages, const SamplingRequest& s, ServerKind kind);
std::string completion_request_body(std::string_view prompt, const SamplingRequest& s);

// llama-server's POST /completion with the prompt as token ids, for the distribution of the next
// token (n_probs candidates, before sampling), and what it returns.
// With `sampling`, the server also draws the token with those settings (the decode stepper over a
// server: the token Step takes is drawn by the server) and reuses its cache of the shared prefix, as
// a decode step does; without, the whole prompt is evaluated afresh.
std::string next_token_request_body(const std::vector<int32_t>& ids, int n_probs,
                                    const SamplingRequest* sampling = nullptr);
std::vector<TokenLogprob> parse_completion_probabilities(std::string_view body);

struct RemoteToken {
    int32_t id = 0;
    std::string piece; // its bytes (llama-server sends invalid UTF-8 pieces as byte arrays)
    bool has_piece = false;
};
// POST /tokenize: llama-server ({content, with_pieces}) or vLLM/SGLang ({model, prompt}).
std::string tokenize_request_body(std::string_view text, ServerKind kind, std::string_view model, bool add_special);
std::vector<RemoteToken> parse_tokenize(std::string_view body);

// GET /metrics (Prometheus text): what the server says of its cache and queue.
struct ServerMetrics {
    std::optional<double> kv_cache_usage; // 0..1: vllm:kv_cache_usage_perc, sglang:token_usage
    std::optional<double> running;        // requests being served
    std::optional<double> waiting;        // requests queued
};
ServerMetrics parse_metrics(std::string_view text);

// A clear sentence for an HTTP failure: what was asked, the status and what it means, and the
// server's own message when its body carries one ({"error":{"message"}}, {"error":"…"}, {"detail"}).
std::string http_error_message(int status, std::string_view body, std::string_view what);

} // namespace engine::remote
