// SPDX-License-Identifier: GPL-3.0-or-later
#pragma once

// The limits on what a served model's server may send (engine/remote/remote_protocol.h reads what
// it sends; the client in ui/remote/ enforces these as bytes arrive).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace engine::remote {

// What a server may send for one request: a server is untrusted input, so every answer and stream
// is bounded (README, "Beyond one machine" → Limits). A stream's limits are derived from the
// request's max_tokens, above what that many tokens can legitimately produce; each can be replaced
// by its environment variable, which the refusal names.
struct ResponseLimits {
    uint64_t max_bytes = 0;       // the whole answer or stream (TOKENSCOPE_REMOTE_MAX_BYTES)
    uint64_t max_events = 0;      // events (SSE) or lines (NDJSON) of a stream (TOKENSCOPE_REMOTE_MAX_EVENTS)
    uint64_t max_field_bytes = 0; // one event, line or string value (TOKENSCOPE_REMOTE_MAX_FIELD_BYTES)
    // Request sent → last byte, however steadily bytes arrive: a deadline, so that a server
    // dripping a byte at a time cannot hold a request open (TOKENSCOPE_REMOTE_MAX_SECONDS).
    uint64_t max_seconds = 0;
    std::string stream_note; // "a reply of at most 256 tokens", or empty for a one-shot answer
};
enum class Limit { Bytes, Events, FieldBytes, Seconds };
// A streamed reply of at most `max_tokens` tokens: 2 MiB + 16 KiB per token, 1,024 + 2 events per
// token, 1 MiB + 8 KiB per token in one event, 600 s + 2 s per token.
ResponseLimits stream_limits(int max_tokens);
// A one-shot answer (probe, /tokenize, /completion, /metrics): 16 MiB plus 128 bytes per byte of
// the text sent (`text_bytes`: /tokenize, whose answer grows with its text), 4 MiB per string, 600 s.
ResponseLimits answer_limits(std::size_t text_bytes = 0);
// The environment variable that replaces a limit.
const char* limit_variable(Limit which);
// The refusal: what was asked of which server, the limit passed and how to raise it.
std::string limit_message(Limit which, const ResponseLimits& limits, std::string_view what, std::string_view server);
// The length of the longest string in a JSON text (scanned, not parsed): a one-shot answer's
// strings are checked against max_field_bytes before it is parsed.
std::size_t longest_json_string(std::string_view json);

} // namespace engine::remote
