// SPDX-License-Identifier: GPL-3.0-or-later
#include "remote/remote_protocol.h"

#include "util/error.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

namespace engine::remote {

using nlohmann::json;

namespace {

json parse_json(std::string_view body, std::string_view what)
{
    json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
        std::string start(body.substr(0, 80));
        throw Error(std::string(what) + ": the server's answer is not JSON" +
                    (start.empty() ? std::string(" (it was empty)") : " (it begins \"" + start + "\")"));
    }
    return j;
}

// A member of an object, or nullptr when absent, null or not an object itself.
const json* member(const json& j, const char* key)
{
    if (!j.is_object())
        return nullptr;
    const auto it = j.find(key);
    if (it == j.end() || it->is_null())
        return nullptr;
    return &*it;
}

std::string string_of(const json& j, const char* key)
{
    const json* m = member(j, key);
    return m && m->is_string() ? m->get<std::string>() : std::string();
}

std::string number_text(const json& n)
{
    return n.dump();
}

// A number field, or `fallback` when absent or not a number; a value that is not finite (a JSON
// number too large for a double reads as infinity) is refused.
double number_of(const json& j, const char* key, double fallback)
{
    const json* m = member(j, key);
    if (!m || !m->is_number())
        return fallback;
    const double v = m->get<double>();
    if (!std::isfinite(v))
        throw Error(std::string(key) + " " + number_text(*m) + " is not a finite number");
    return v;
}

// An integer field in [lo, hi], or `fallback` when absent or not a number. A fraction or a value
// outside the range is refused with the field named, never truncated (2^40 must not become 0).
int64_t integer_value(const json& n, std::string_view name, int64_t lo, int64_t hi)
{
    const auto refuse = [&] {
        throw Error(std::string(name) + " " + number_text(n) + " is outside " + std::to_string(lo) + ".." +
                    std::to_string(hi));
    };
    if (n.is_number_unsigned()) {
        const auto v = n.get<uint64_t>();
        if (v > static_cast<uint64_t>(hi))
            refuse();
        return static_cast<int64_t>(v);
    }
    if (n.is_number_integer()) {
        const auto v = n.get<int64_t>();
        if (v < lo || v > hi)
            refuse();
        return v;
    }
    if (!n.is_number())
        throw Error(std::string(name) + " is not a number");
    const double v = n.get<double>();
    // 2^63 is the first double above INT64_MAX: compare below it, not with INT64_MAX rounded up.
    if (!(v >= static_cast<double>(lo) && v < static_cast<double>(hi) + 1.0) || std::floor(v) != v)
        refuse();
    return static_cast<int64_t>(v);
}

int64_t integer_of(const json& j, const char* key, int64_t lo, int64_t hi, int64_t fallback)
{
    const json* m = member(j, key);
    if (!m || !m->is_number())
        return fallback;
    return integer_value(*m, key, lo, hi);
}

constexpr int64_t kMaxCount = INT32_MAX; // token counts, ids, context lengths

// A count (tokens, a context length): 0..2^31-1, or `fallback` when absent.
int count_of(const json& j, const char* key, int fallback)
{
    return static_cast<int>(integer_of(j, key, 0, kMaxCount, fallback));
}

// A token id: 0..2^31-1, or -1 when absent.
int32_t id_of(const json& j, const char* key)
{
    return static_cast<int32_t>(integer_of(j, key, 0, kMaxCount, -1));
}

// A log-probability: finite and at most 0 (a little above 0 is a rounding of log(1)); far below
// is a server's stand-in for -inf (vLLM's -9999, llama.cpp's float lowest), kept as given.
double logprob_value(double v, const std::string& text)
{
    if (!std::isfinite(v) || v > 1e-3)
        throw Error("logprob " + text + " is not a log-probability (it must be a finite number at most 0)");
    return std::min(v, 0.0);
}

// A token's text: the string, or its bytes when the server sent the UTF-8 bytes as an array
// (llama-server for pieces that are not valid UTF-8 on their own).
std::string piece_text(const json& token, const json* bytes)
{
    if (bytes && bytes->is_array() && !bytes->empty()) {
        std::string out;
        for (const auto& b : *bytes)
            out.push_back(static_cast<char>(integer_value(b, "a token's byte", 0, 255)));
        return out;
    }
    if (token.is_string())
        return token.get<std::string>();
    if (token.is_array())
        return piece_text(json(), &token);
    return {};
}

TopCandidate candidate_of(const json& c)
{
    TopCandidate t;
    t.id = id_of(c, "id");
    const json* token = member(c, "token");
    t.token = piece_text(token ? *token : json(), member(c, "bytes"));
    // post_sampling_probs answers with probabilities instead of log-probabilities.
    if (const json* lp = member(c, "logprob"); lp && lp->is_number()) {
        t.logprob = logprob_value(lp->get<double>(), number_text(*lp));
    } else if (const json* p = member(c, "prob"); p && p->is_number()) {
        const double prob = p->get<double>();
        if (!(prob >= 0.0 && prob <= 1.0 + 1e-3))
            throw Error("prob " + number_text(*p) + " is not a probability (it must be between 0 and 1)");
        t.logprob = std::min(std::log(prob), 0.0);
    }
    return t;
}

TokenLogprob token_logprob_of(const json& entry)
{
    TokenLogprob t;
    const TopCandidate self = candidate_of(entry);
    t.id = self.id;
    t.token = self.token;
    t.logprob = self.logprob;
    const json* top = member(entry, "top_logprobs");
    if (!top)
        top = member(entry, "top_probs");
    if (top && top->is_array())
        for (const auto& c : *top)
            t.top.push_back(candidate_of(c));
    return t;
}

Usage usage_of(const json& u)
{
    Usage out;
    out.prompt_tokens = count_of(u, "prompt_tokens", 0);
    out.completion_tokens = count_of(u, "completion_tokens", 0);
    if (const json* d = member(u, "prompt_tokens_details"))
        out.cached_tokens = count_of(*d, "cached_tokens", -1);
    return out;
}

ServerTimings llama_timings_of(const json& t)
{
    ServerTimings out;
    out.cache_n = count_of(t, "cache_n", -1);
    out.prompt_n = count_of(t, "prompt_n", -1);
    out.predicted_n = count_of(t, "predicted_n", -1);
    out.prompt_ms = number_of(t, "prompt_ms", -1.0);
    out.predicted_ms = number_of(t, "predicted_ms", -1.0);
    out.draft_n = count_of(t, "draft_n", -1);
    out.draft_n_accepted = count_of(t, "draft_n_accepted", -1);
    return out;
}

ServerTimings lmstudio_stats_of(const json& s)
{
    ServerTimings out;
    const double ttft_s = number_of(s, "time_to_first_token", number_of(s, "time_to_first_token_seconds", -1.0));
    const double gen_s = number_of(s, "generation_time", -1.0);
    if (ttft_s >= 0)
        out.ttft_ms = ttft_s * 1000.0;
    if (gen_s >= 0)
        out.predicted_ms = gen_s * 1000.0;
    return out;
}

void add_sampling(json& body, const SamplingRequest& s, bool native_extras)
{
    body["temperature"] = s.sampling.temperature;
    body["top_p"] = s.sampling.top_p;
    if (native_extras) { // llama-server, vLLM, SGLang and LM Studio take these beside OpenAI's
        body["top_k"] = s.sampling.top_k;
        body["min_p"] = s.sampling.min_p;
        body["repeat_penalty"] = s.sampling.repeat_penalty;
    }
    if (s.send_seed)
        body["seed"] = s.sampling.seed;
    if (s.sampling.max_tokens > 0) // else the server's own limit
        body["max_tokens"] = s.sampling.max_tokens;
    body["stream"] = s.stream;
    if (s.stream)
        body["stream_options"] = {{"include_usage", true}};
    if (!s.model.empty())
        body["model"] = s.model;
}

} // namespace

std::string server_kind_name(ServerKind kind)
{
    switch (kind) {
    case ServerKind::LlamaCpp:
        return "llama.cpp (llama-server)";
    case ServerKind::Vllm:
        return "vLLM";
    case ServerKind::Sglang:
        return "SGLang";
    case ServerKind::Ollama:
        return "Ollama";
    case ServerKind::LmStudio:
        return "LM Studio";
    case ServerKind::Unknown:
        break;
    }
    return "OpenAI-compatible server";
}

double ServerTimings::server_ms() const
{
    if (prompt_ms < 0 && predicted_ms < 0)
        return -1.0;
    return std::max(prompt_ms, 0.0) + std::max(predicted_ms, 0.0);
}

ModelList parse_models(std::string_view body)
{
    const json j = parse_json(body, "GET /v1/models");
    const json* data = member(j, "data");
    if (!data || !data->is_array())
        throw Error("GET /v1/models: the answer has no \"data\" list of models (is this an OpenAI-compatible server?)");
    ModelList out;
    for (const auto& m : *data) {
        ServedModel sm;
        sm.id = string_of(m, "id");
        sm.owned_by = string_of(m, "owned_by");
        sm.context_length = static_cast<uint32_t>(count_of(m, "max_model_len", 0));
        if (const json* meta = member(m, "meta")) { // llama-server
            if (!sm.context_length)
                sm.context_length = static_cast<uint32_t>(count_of(*meta, "n_ctx_train", 0));
            sm.n_vocab = static_cast<uint32_t>(count_of(*meta, "n_vocab", 0));
            sm.n_params = static_cast<uint64_t>(integer_of(*meta, "n_params", 0, INT64_MAX, 0));
        }
        if (sm.id.empty())
            continue;
        if (out.kind == ServerKind::Unknown) {
            if (sm.owned_by == "llamacpp")
                out.kind = ServerKind::LlamaCpp;
            else if (sm.owned_by == "vllm")
                out.kind = ServerKind::Vllm;
            else if (sm.owned_by == "sglang")
                out.kind = ServerKind::Sglang;
        }
        out.models.push_back(std::move(sm));
    }
    return out;
}

std::vector<std::string> parse_ollama_tags(std::string_view body)
{
    const json j = parse_json(body, "GET /api/tags");
    std::vector<std::string> out;
    if (const json* models = member(j, "models"); models && models->is_array())
        for (const auto& m : *models) {
            std::string name = string_of(m, "name");
            if (name.empty())
                name = string_of(m, "model");
            if (!name.empty())
                out.push_back(std::move(name));
        }
    return out;
}

std::optional<std::string> parse_ollama_version(std::string_view body)
{
    const json j = json::parse(body, nullptr, false);
    const json* v = j.is_discarded() ? nullptr : member(j, "version");
    if (!v || !v->is_string())
        return std::nullopt;
    return v->get<std::string>();
}

std::vector<ServedModel> parse_lmstudio_models(std::string_view body)
{
    const json j = parse_json(body, "GET /api/v0/models");
    const json* data = member(j, "data");
    if (!data || !data->is_array())
        throw Error("GET /api/v0/models: the answer has no \"data\" list");
    std::vector<ServedModel> loaded, other;
    for (const auto& m : *data) {
        const std::string type = string_of(m, "type");
        if (type == "embeddings")
            continue;
        ServedModel sm;
        sm.id = string_of(m, "id");
        sm.owned_by = string_of(m, "publisher");
        sm.context_length = static_cast<uint32_t>(count_of(m, "max_context_length", 0));
        if (sm.id.empty())
            continue;
        (string_of(m, "state") == "loaded" ? loaded : other).push_back(std::move(sm));
    }
    loaded.insert(loaded.end(), other.begin(), other.end());
    return loaded;
}

uint32_t parse_props_context(std::string_view body)
{
    const json j = parse_json(body, "GET /props");
    if (const json* d = member(j, "default_generation_settings"))
        return static_cast<uint32_t>(count_of(*d, "n_ctx", 0));
    return 0;
}

// ---- Stream framing ---------------------------------------------------------------------------

void SseDecoder::overflow()
{
    m_too_long = true;
    std::string().swap(m_line);
    std::string().swap(m_data);
    m_has_data = false;
}

std::vector<std::string> SseDecoder::feed(std::string_view bytes)
{
    std::vector<std::string> out;
    for (const char c : bytes) {
        if (m_done || m_too_long)
            break;
        if (c == '\n') {
            std::string_view l(m_line);
            if (!l.empty() && l.back() == '\r')
                l.remove_suffix(1);
            line(l, out);
            m_line.clear();
            if (m_data.size() > m_max)
                overflow();
        } else if (m_line.size() + m_data.size() >= m_max) {
            overflow();
        } else {
            m_line.push_back(c);
        }
    }
    return out;
}

void SseDecoder::line(std::string_view l, std::vector<std::string>& out)
{
    if (l.empty()) { // the blank line ends an event
        if (m_has_data) {
            if (m_data == "[DONE]")
                m_done = true;
            else
                out.push_back(m_data);
        }
        m_data.clear();
        m_has_data = false;
        return;
    }
    if (l.front() == ':')
        return; // a comment (keep-alive)
    const auto colon = l.find(':');
    const std::string_view field = l.substr(0, colon);
    std::string_view value = colon == std::string_view::npos ? std::string_view() : l.substr(colon + 1);
    if (!value.empty() && value.front() == ' ')
        value.remove_prefix(1);
    if (field != "data")
        return; // event, id, retry: not used by these servers' streams
    if (m_has_data)
        m_data.push_back('\n');
    m_data.append(value);
    m_has_data = true;
}

std::vector<std::string> LineDecoder::feed(std::string_view bytes)
{
    std::vector<std::string> out;
    for (const char c : bytes) {
        if (m_too_long)
            break;
        if (m_line.size() >= m_max && c != '\n') {
            m_too_long = true;
            std::string().swap(m_line);
        } else if (c == '\n') {
            if (!m_line.empty() && m_line.back() == '\r')
                m_line.pop_back();
            if (!m_line.empty())
                out.push_back(std::move(m_line));
            m_line.clear();
        } else {
            m_line.push_back(c);
        }
    }
    return out;
}

std::optional<std::string> LineDecoder::finish()
{
    if (m_line.empty())
        return std::nullopt;
    std::string last = std::move(m_line);
    m_line.clear();
    return last;
}

StreamChunk parse_stream_chunk(std::string_view text)
{
    const json j = parse_json(text, "a streamed chunk");
    StreamChunk out;
    if (const json* e = member(j, "error")) {
        out.error = e->is_string() ? e->get<std::string>() : string_of(*e, "message");
        if (out.error.empty())
            out.error = e->dump();
        return out;
    }
    if (const json* choices = member(j, "choices"); choices && choices->is_array() && !choices->empty()) {
        const json& c = (*choices)[0];
        if (const json* delta = member(c, "delta")) {
            out.content = string_of(*delta, "content");
            out.reasoning = string_of(*delta, "reasoning_content");
            if (out.reasoning.empty())
                out.reasoning = string_of(*delta, "reasoning");
        } else if (const json* message = member(c, "message")) { // a non-streamed chat answer
            out.content = string_of(*message, "content");
        } else {
            out.content = string_of(c, "text"); // /v1/completions
        }
        out.finish_reason = string_of(c, "finish_reason");
        if (const json* lp = member(c, "logprobs")) {
            if (const json* content = member(*lp, "content"); content && content->is_array())
                for (const auto& e : *content)
                    out.logprobs.push_back(token_logprob_of(e));
        }
    } else if (const json* message = member(j, "message")) { // Ollama /api/chat
        out.content = string_of(*message, "content");
        out.reasoning = string_of(*message, "thinking");
    } else if (const json* content = member(j, "content");
               content && content->is_string()) { // llama-server /completion
        out.content = content->get<std::string>();
    } else if (const json* response = member(j, "response");
               response && response->is_string()) { // Ollama /api/generate
        out.content = response->get<std::string>();
    }
    if (const json* u = member(j, "usage"); u && u->is_object())
        out.usage = usage_of(*u);
    if (const json* t = member(j, "timings"); t && t->is_object())
        out.timings = llama_timings_of(*t);
    if (const json* s = member(j, "stats"); s && s->is_object())
        out.timings = lmstudio_stats_of(*s);
    if (const json* probs = member(j, "completion_probabilities"); probs && probs->is_array())
        for (const auto& e : *probs)
            out.logprobs.push_back(token_logprob_of(e));
    if (const json* done = member(j, "done"); done && done->is_boolean()) {
        out.done = done->get<bool>();
        if (out.done) {
            out.finish_reason = string_of(j, "done_reason");
            ServerTimings t; // Ollama: durations in nanoseconds
            const auto ms = [&](const char* key) {
                const double ns = number_of(j, key, -1.0);
                return ns < 0 ? -1.0 : ns / 1e6;
            };
            t.prompt_n = count_of(j, "prompt_eval_count", -1);
            t.predicted_n = count_of(j, "eval_count", -1);
            t.prompt_ms = ms("prompt_eval_duration");
            t.predicted_ms = ms("eval_duration");
            t.total_ms = ms("total_duration");
            t.load_ms = ms("load_duration");
            const int cached = count_of(j, "prompt_eval_cached_count", -1);
            t.cache_n = cached;
            out.timings = t;
            Usage u;
            u.prompt_tokens = std::max(0, t.prompt_n);
            u.completion_tokens = std::max(0, t.predicted_n);
            u.cached_tokens = cached;
            out.usage = u;
        }
    }
    if (const json* stop = member(j, "stop"); stop && stop->is_boolean() && stop->get<bool>())
        out.done = true;
    return out;
}

std::string chat_request_body(const std::vector<ChatMessage>& messages, const SamplingRequest& s, ServerKind kind)
{
    json msgs = json::array();
    for (const auto& m : messages)
        msgs.push_back({{"role", m.role}, {"content", m.content}});
    json body;
    body["messages"] = std::move(msgs);
    if (kind == ServerKind::Ollama) { // /api/chat: options, NDJSON stream
        body["model"] = s.model;
        body["stream"] = s.stream;
        json options = {{"temperature", s.sampling.temperature},
                        {"top_k", s.sampling.top_k},
                        {"top_p", s.sampling.top_p},
                        {"min_p", s.sampling.min_p},
                        {"num_predict", s.sampling.max_tokens > 0 ? s.sampling.max_tokens : -1},
                        {"repeat_penalty", s.sampling.repeat_penalty}};
        if (s.send_seed)
            options["seed"] = s.sampling.seed;
        body["options"] = std::move(options);
        if (s.top_logprobs > 0) {
            body["logprobs"] = true;
            body["top_logprobs"] = s.top_logprobs;
        }
        return body.dump();
    }
    add_sampling(body, s, true);
    if (s.top_logprobs > 0) {
        body["logprobs"] = true;
        body["top_logprobs"] = s.top_logprobs;
    }
    if (kind == ServerKind::LlamaCpp)
        body["timings_per_token"] = false; // timings arrive once, on the last chunk
    return body.dump();
}

std::string completion_request_body(std::string_view prompt, const SamplingRequest& s)
{
    json body;
    body["prompt"] = std::string(prompt);
    add_sampling(body, s, true);
    if (s.top_logprobs > 0)
        body["logprobs"] = s.top_logprobs;
    return body.dump();
}

std::string next_token_request_body(const std::vector<int32_t>& ids, int n_probs, const SamplingRequest* sampling)
{
    json body;
    body["prompt"] = ids;
    body["n_predict"] = 1;
    body["n_probs"] = n_probs;
    body["stream"] = false;
    if (sampling) {
        body["temperature"] = sampling->sampling.temperature;
        body["top_k"] = sampling->sampling.top_k;
        body["top_p"] = sampling->sampling.top_p;
        body["min_p"] = sampling->sampling.min_p;
        body["repeat_penalty"] = sampling->sampling.repeat_penalty;
        if (sampling->send_seed)
            body["seed"] = sampling->sampling.seed;
        body["cache_prompt"] = true;
    } else {
        // The token drawn does not matter, the probabilities are before sampling; evaluated whole: a
        // reused prefix changes the batches, and with them the last bits.
        body["temperature"] = 0.0;
        body["cache_prompt"] = false;
    }
    return body.dump();
}

std::vector<TokenLogprob> parse_completion_probabilities(std::string_view body)
{
    const json j = parse_json(body, "POST /completion");
    const json* probs = member(j, "completion_probabilities");
    if (!probs || !probs->is_array() || probs->empty())
        throw Error("POST /completion: the answer has no completion_probabilities (the server does not send n_probs)");
    std::vector<TokenLogprob> out;
    for (const auto& e : *probs)
        out.push_back(token_logprob_of(e));
    return out;
}

std::string tokenize_request_body(std::string_view text, ServerKind kind, std::string_view model, bool add_special)
{
    json body;
    if (kind == ServerKind::LlamaCpp) {
        body["content"] = std::string(text);
        body["add_special"] = add_special;
        body["parse_special"] = true;
        body["with_pieces"] = true;
    } else { // vLLM, SGLang
        if (!model.empty())
            body["model"] = std::string(model);
        body["prompt"] = std::string(text);
        body["add_special_tokens"] = add_special;
        if (kind == ServerKind::Vllm)
            body["return_token_strs"] = true;
    }
    return body.dump();
}

std::vector<RemoteToken> parse_tokenize(std::string_view body)
{
    const json j = parse_json(body, "POST /tokenize");
    const json* tokens = member(j, "tokens");
    if (!tokens || !tokens->is_array())
        throw Error("POST /tokenize: the answer has no \"tokens\" list");
    const json* strs = member(j, "token_strs"); // vLLM with return_token_strs
    std::vector<RemoteToken> out;
    for (std::size_t i = 0; i < tokens->size(); ++i) {
        const json& t = (*tokens)[i];
        RemoteToken rt;
        if (t.is_number()) {
            rt.id = static_cast<int32_t>(integer_value(t, "POST /tokenize: token id", 0, kMaxCount));
            if (strs && strs->is_array() && i < strs->size() && (*strs)[i].is_string()) {
                rt.piece = (*strs)[i].get<std::string>();
                rt.has_piece = true;
            }
        } else if (t.is_object()) { // llama-server with_pieces
            const json* id = member(t, "id");
            if (!id || !id->is_number())
                throw Error("POST /tokenize: a token without an id");
            rt.id = static_cast<int32_t>(integer_value(*id, "POST /tokenize: token id", 0, kMaxCount));
            if (const json* piece = member(t, "piece")) {
                rt.piece = piece_text(*piece, nullptr);
                rt.has_piece = true;
            }
        } else {
            throw Error("POST /tokenize: a token that is neither an id nor {id, piece}");
        }
        out.push_back(std::move(rt));
    }
    return out;
}

ServerMetrics parse_metrics(std::string_view text)
{
    ServerMetrics out;
    // Sums over the series of each name (one per model or data-parallel rank); usage the mean.
    double usage_sum = 0.0, running = 0.0, waiting = 0.0;
    int usage_n = 0, running_n = 0, waiting_n = 0;
    std::size_t pos = 0;
    while (pos < text.size()) {
        auto end = text.find('\n', pos);
        if (end == std::string_view::npos)
            end = text.size();
        std::string_view l = text.substr(pos, end - pos);
        pos = end + 1;
        if (l.empty() || l.front() == '#')
            continue;
        const auto name_end = l.find_first_of("{ ");
        if (name_end == std::string_view::npos)
            continue;
        const std::string_view name = l.substr(0, name_end);
        const auto value_at = l.rfind(' ');
        if (value_at == std::string_view::npos)
            continue;
        double value = 0.0;
        try {
            value = std::stod(std::string(l.substr(value_at + 1)));
        } catch (...) {
            continue;
        }
        if (!std::isfinite(value) || value < 0.0)
            continue; // NaN, ±Inf or a negative gauge: not a figure to show
        if (name == "vllm:kv_cache_usage_perc" || name == "vllm:gpu_cache_usage_perc" || name == "sglang:token_usage") {
            if (value > 1.0)
                continue; // a fraction of the cache
            usage_sum += value;
            ++usage_n;
        } else if (name == "vllm:num_requests_running" || name == "sglang:num_running_reqs" ||
                   name == "llamacpp:requests_processing") {
            running += value;
            ++running_n;
        } else if (name == "vllm:num_requests_waiting" || name == "sglang:num_queue_reqs" ||
                   name == "llamacpp:requests_deferred") {
            waiting += value;
            ++waiting_n;
        }
    }
    if (usage_n)
        out.kv_cache_usage = usage_sum / usage_n;
    if (running_n)
        out.running = running;
    if (waiting_n)
        out.waiting = waiting;
    return out;
}

std::string http_error_message(int status, std::string_view body, std::string_view what)
{
    std::string meaning;
    switch (status) {
    case 400:
        meaning = "the server refused the request as malformed";
        break;
    case 401:
        meaning = "the server wants an API key, or the key given is wrong";
        break;
    case 403:
        meaning = "the API key is not allowed to do this";
        break;
    case 404:
        meaning = "the server has no such endpoint or model";
        break;
    case 408:
        meaning = "the server timed out waiting for the request";
        break;
    case 413:
        meaning = "the request is too large for the server";
        break;
    case 429:
        meaning = "the server is rate-limiting requests; wait and try again";
        break;
    case 500:
        meaning = "the server failed";
        break;
    case 501:
        meaning = "the server does not implement this";
        break;
    case 502:
    case 504:
        meaning = "a proxy in front of the server could not reach it";
        break;
    case 503:
        meaning = "the server is unavailable (loading a model, or overloaded)";
        break;
    default:
        meaning = status >= 500 ? "the server failed" : "the server refused the request";
        break;
    }
    std::string detail;
    const json j = json::parse(body, nullptr, false);
    if (!j.is_discarded()) {
        if (const json* e = member(j, "error"))
            detail = e->is_string() ? e->get<std::string>() : string_of(*e, "message");
        if (detail.empty()) {
            if (const json* d = member(j, "detail"))
                detail = d->is_string() ? d->get<std::string>() : d->dump();
        }
        if (detail.empty())
            detail = string_of(j, "message");
    } else if (!body.empty() && body.size() < 300) {
        detail = std::string(body);
        while (!detail.empty() && (detail.back() == '\n' || detail.back() == '\r'))
            detail.pop_back();
    }
    if (detail.size() > 1000) { // a server's message, not a document
        detail.resize(1000);
        while (!detail.empty() && (static_cast<unsigned char>(detail.back()) & 0xC0) == 0x80)
            detail.pop_back(); // no UTF-8 sequence cut in two
        if (!detail.empty() && static_cast<unsigned char>(detail.back()) >= 0xC0)
            detail.pop_back();
        detail += "…";
    }
    std::string out = std::string(what) + " failed: HTTP " + std::to_string(status) + " — " + meaning;
    if (!detail.empty())
        out += " (the server says: " + detail + ")";
    return out;
}

SamplingRequest sampling_request(const SamplingSettings& settings, bool greedy)
{
    SamplingRequest s;
    s.sampling = settings;
    if (greedy)
        s.sampling.temperature = 0.0f;
    s.send_seed = true;
    return s;
}

} // namespace engine::remote
