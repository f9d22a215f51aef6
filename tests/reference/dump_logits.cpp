// SPDX-License-Identifier: GPL-3.0-or-later
//
// dump_logits: reference logits from llama.cpp for Tokenscope's fixtures.
//
// This is our own small program; it only links against an out-of-tree build of
// llama.cpp (see build_dump_logits.sh). For one model and one prompt it
//   1. tokenizes the prompt like llama_tokenize(vocab, text, add_special=true,
//      parse_special=true) (or takes token ids as given),
//   2. evaluates the whole prompt in ONE llama_decode call (n_batch = n_ubatch >=
//      prompt length), requesting logits for the last position only,
//   3. records the full-vocabulary logits of that last prompt position,
//   4. runs a greedy (argmax) continuation of --n-predict tokens, one token per
//      llama_decode call, recording for each step the chosen token, the runner-up
//      token and the top1 - top2 logit gap. End-of-generation tokens do NOT stop
//      the continuation: exactly n_predict tokens are produced.
//
// Argmax rule: the highest logit wins, ties go to the LOWEST token id. The gap is
// logit[top1] - max over all other ids (0 on a tie).
//
// Output file (little-endian):
//   char[8]  magic "TSDLOG01"
//   u32      json_len, then json_len bytes of JSON (settings and sizes)
//   i32      tokens[n_prompt]
//   f32      logits[n_vocab]          (last prompt position)
//   i32      greedy[n_predict]
//   i32      second[n_predict]        (runner-up token id at each step)
//   f32      gap[n_predict]
//   u32      text_len, then the detokenized greedy continuation (raw bytes,
//            llama_detokenize(remove_special=false, unparse_special=true))
//
// --control-vector FILE:SCALE applies a control-vector GGUF (F32 direction.N tensors, N >= 1) the
// way llama.cpp's --control-vector-scaled does: each direction times SCALE, added to the output of
// layer N at every position (layers 1 … n_layer, llama.cpp's default range).

#include "gguf.h"
#include "llama.h"

#include <algorithm>
#include <cinttypes>
#include <clocale>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

// set by build_dump_logits.sh from the llama.cpp build it links against
#ifndef TSDL_LLAMA_CPP_COMMIT
#define TSDL_LLAMA_CPP_COMMIT "unknown"
#endif
#ifndef TSDL_CPU_VARIANT
#define TSDL_CPU_VARIANT "unknown" // build_dump_logits.sh: avx2 or native (TOKENSCOPE_REF_CPU)
#endif
#ifndef TSDL_LLAMA_CPP_SOURCE
#define TSDL_LLAMA_CPP_SOURCE "unknown"
#endif

namespace {

struct Options {
    std::string model;
    std::string prompt_file;
    std::string tokens;      // comma/space separated ids
    std::string tokens_file; // file with whitespace/comma separated ids
    std::string out;
    int n_predict = 64;
    int threads = 2;
    int n_ctx = 4096;
    int n_batch = 0;                            // 0: max(2048, n_prompt)
    bool repack = false;                        // use_extra_bufts (CPU repack / AMX weight layouts)
    bool flash_attn = false;                    // --flash-attn: LLAMA_FLASH_ATTN_TYPE_ENABLED
    std::string type_k = "f16", type_v = "f16"; // --cache-type-k / --cache-type-v: f16, q8_0, q4_0
    std::string control_vector;                 // FILE:SCALE
    bool verbose = false;
};

void usage(const char* argv0)
{
    std::fprintf(stderr,
                 "usage: %s -m MODEL (-f PROMPT_FILE | --tokens IDS | --tokens-file FILE) -o OUT\n"
                 "          [--n-predict 64] [--threads 2] [--ctx 4096] [--batch N] [--repack] [--flash-attn] "
                 "[--cache-type-k T] [--cache-type-v T] [--verbose]\n"
                 "  -f FILE        prompt text, read in binary mode (no newline stripping),\n"
                 "                 tokenized with add_special=true, parse_special=true\n"
                 "  --tokens IDS   token ids, comma or space separated (no BOS is added)\n"
                 "  --batch N      n_batch = n_ubatch (default max(2048, n_prompt))\n"
                 "  --ctx N        n_ctx (default 4096; raised to n_prompt + n_predict if needed)\n"
                 "  --repack       allow the CPU extra buffer types (repack/AMX); default off\n"
                 "  --flash-attn   flash attention on (default off); a quantized V cache needs it\n"
                 "  --cache-type-k T, --cache-type-v T   KV cache types: f16 (default), q8_0, q4_0\n"
                 "  --control-vector FILE:SCALE  apply a control vector as --control-vector-scaled does\n",
                 argv0);
}

bool read_file(const std::string& path, std::string& out)
{
    std::ifstream f(path, std::ios::binary);
    if (!f)
        return false;
    std::ostringstream ss;
    ss << f.rdbuf();
    out = ss.str();
    return true;
}

bool parse_ids(const std::string& s, std::vector<llama_token>& ids)
{
    std::string cur;
    auto flush = [&]() -> bool {
        if (cur.empty())
            return true;
        char* end = nullptr;
        long v = std::strtol(cur.c_str(), &end, 10);
        if (*end != '\0' || v < 0 || v > INT32_MAX)
            return false;
        ids.push_back(static_cast<llama_token>(v));
        cur.clear();
        return true;
    };
    for (char c : s) {
        if (c == ',' || c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '[' || c == ']') {
            if (!flush())
                return false;
        } else {
            cur.push_back(c);
        }
    }
    return flush();
}

std::string json_escape(const std::string& s)
{
    std::string o;
    for (unsigned char c : s) {
        switch (c) {
        case '"':
            o += "\\\"";
            break;
        case '\\':
            o += "\\\\";
            break;
        case '\n':
            o += "\\n";
            break;
        case '\r':
            o += "\\r";
            break;
        case '\t':
            o += "\\t";
            break;
        default:
            if (c < 0x20 || c >= 0x7f) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", c); // bytes >= 0x80 as latin-1 code points
                o += buf;
            } else {
                o.push_back(static_cast<char>(c));
            }
        }
    }
    return o;
}

void quiet_log(ggml_log_level level, const char* text, void* user)
{
    const bool verbose = *static_cast<bool*>(user);
    if (verbose || level == GGML_LOG_LEVEL_ERROR)
        std::fputs(text, stderr);
}

struct Top2 {
    llama_token top1 = 0, top2 = 0;
    float gap = 0.0f;
};

Top2 top2(const float* logits, int n_vocab)
{
    // highest logit wins; ties -> lowest id (strict '>' while scanning upwards)
    int i1 = 0;
    for (int i = 1; i < n_vocab; ++i)
        if (logits[i] > logits[i1])
            i1 = i;
    int i2 = i1 == 0 ? 1 : 0;
    for (int i = 0; i < n_vocab; ++i)
        if (i != i1 && logits[i] > logits[i2])
            i2 = i;
    Top2 r;
    r.top1 = i1;
    r.top2 = i2;
    r.gap = logits[i1] - logits[i2];
    return r;
}

template <typename T> void put(std::FILE* f, const T* data, size_t n)
{
    if (n && std::fwrite(data, sizeof(T), n, f) != n) {
        std::perror("fwrite");
        std::exit(1);
    }
}

} // namespace

int main(int argc, char** argv)
{
    std::setlocale(LC_NUMERIC, "C");
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto need = [&]() -> std::string {
            if (i + 1 >= argc) {
                usage(argv[0]);
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "-m" || a == "--model")
            o.model = need();
        else if (a == "-f" || a == "--prompt-file")
            o.prompt_file = need();
        else if (a == "--tokens")
            o.tokens = need();
        else if (a == "--tokens-file")
            o.tokens_file = need();
        else if (a == "-o" || a == "--out")
            o.out = need();
        else if (a == "-n" || a == "--n-predict")
            o.n_predict = std::atoi(need().c_str());
        else if (a == "-t" || a == "--threads")
            o.threads = std::atoi(need().c_str());
        else if (a == "-c" || a == "--ctx")
            o.n_ctx = std::atoi(need().c_str());
        else if (a == "-b" || a == "--batch")
            o.n_batch = std::atoi(need().c_str());
        else if (a == "--control-vector")
            o.control_vector = need();
        else if (a == "--repack")
            o.repack = true;
        else if (a == "--flash-attn")
            o.flash_attn = true;
        else if (a == "--cache-type-k" && i + 1 < argc)
            o.type_k = argv[++i];
        else if (a == "--cache-type-v" && i + 1 < argc)
            o.type_v = argv[++i];
        else if (a == "-v" || a == "--verbose")
            o.verbose = true;
        else if (a == "-h" || a == "--help") {
            usage(argv[0]);
            return 0;
        } else {
            std::fprintf(stderr, "unknown argument: %s\n", a.c_str());
            usage(argv[0]);
            return 2;
        }
    }
    const int n_inputs = !o.prompt_file.empty() + !o.tokens.empty() + !o.tokens_file.empty();
    if (o.model.empty() || o.out.empty() || n_inputs != 1 || o.n_predict < 1 || o.threads < 1) {
        usage(argv[0]);
        return 2;
    }

    llama_log_set(quiet_log, &o.verbose);
    llama_backend_init();

    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.use_extra_bufts = o.repack;
    llama_model* model = llama_model_load_from_file(o.model.c_str(), mp);
    if (!model) {
        std::fprintf(stderr, "error: cannot load model %s\n", o.model.c_str());
        return 1;
    }
    const llama_vocab* vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    // ---- prompt tokens
    std::vector<llama_token> tokens;
    std::string input_kind;
    if (!o.prompt_file.empty()) {
        input_kind = "text";
        std::string text;
        if (!read_file(o.prompt_file, text)) {
            std::fprintf(stderr, "error: cannot read %s\n", o.prompt_file.c_str());
            return 1;
        }
        const int n = -llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), nullptr, 0,
                                      /*add_special=*/true, /*parse_special=*/true);
        tokens.resize(std::max(n, 0));
        if (llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), tokens.data(),
                           static_cast<int32_t>(tokens.size()), true, true) != n) {
            std::fprintf(stderr, "error: tokenization failed\n");
            return 1;
        }
    } else {
        input_kind = "token_ids";
        std::string s = o.tokens;
        if (!o.tokens_file.empty() && !read_file(o.tokens_file, s)) {
            std::fprintf(stderr, "error: cannot read %s\n", o.tokens_file.c_str());
            return 1;
        }
        if (!parse_ids(s, tokens)) {
            std::fprintf(stderr, "error: bad token id list\n");
            return 1;
        }
    }
    const int n_prompt = static_cast<int>(tokens.size());
    if (n_prompt < 1) {
        std::fprintf(stderr, "error: empty prompt\n");
        return 1;
    }
    for (llama_token t : tokens)
        if (t < 0 || t >= n_vocab) {
            std::fprintf(stderr, "error: token id %d out of range\n", t);
            return 1;
        }

    // ---- context
    const int n_ctx = std::max(o.n_ctx, n_prompt + o.n_predict);
    const int n_batch = o.n_batch > 0 ? std::max(o.n_batch, n_prompt) : std::max(2048, n_prompt);
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = static_cast<uint32_t>(n_ctx);
    cp.n_batch = static_cast<uint32_t>(n_batch);
    cp.n_ubatch = static_cast<uint32_t>(n_batch);
    cp.n_seq_max = 1;
    cp.n_threads = o.threads;
    cp.n_threads_batch = o.threads;
    cp.flash_attn_type = o.flash_attn ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    const auto cache_type = [](const std::string& name) {
        if (name == "f16")
            return GGML_TYPE_F16;
        if (name == "q8_0")
            return GGML_TYPE_Q8_0;
        if (name == "q4_0")
            return GGML_TYPE_Q4_0;
        std::fprintf(stderr, "error: cache type %s: expected f16, q8_0 or q4_0\n", name.c_str());
        std::exit(2);
    };
    cp.type_k = cache_type(o.type_k);
    cp.type_v = cache_type(o.type_v);
    cp.offload_kqv = false;
    cp.op_offload = false;
    cp.embeddings = false;
    cp.no_perf = true;
    // swa_full, kv_unified: library defaults (recorded below)
    llama_context* ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        std::fprintf(stderr, "error: cannot create context\n");
        return 1;
    }

    // ---- control vector: data[n_embd * (N - 1)] holds direction.N × scale (layer 1 first)
    if (!o.control_vector.empty()) {
        const auto colon = o.control_vector.rfind(':');
        if (colon == std::string::npos) {
            std::fprintf(stderr, "error: --control-vector FILE:SCALE\n");
            return 2;
        }
        const std::string file = o.control_vector.substr(0, colon);
        const float scale = std::strtof(o.control_vector.c_str() + colon + 1, nullptr);
        ggml_context* gctx = nullptr;
        gguf_init_params gp = {/*no_alloc=*/false, /*ctx=*/&gctx};
        gguf_context* g = gguf_init_from_file(file.c_str(), gp);
        if (!g) {
            std::fprintf(stderr, "error: cannot read control vector %s\n", file.c_str());
            return 1;
        }
        const int n_embd = llama_model_n_embd(model), n_layer = llama_model_n_layer(model);
        std::vector<float> data(static_cast<size_t>(n_embd) * n_layer, 0.0f);
        for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
            const std::string name = gguf_get_tensor_name(g, i);
            const int layer = std::atoi(name.c_str() + std::strlen("direction."));
            ggml_tensor* t = ggml_get_tensor(gctx, name.c_str());
            if (name.rfind("direction.", 0) != 0 || layer < 1 || layer > n_layer || t->type != GGML_TYPE_F32 ||
                ggml_nelements(t) != n_embd) {
                std::fprintf(stderr, "error: bad control-vector tensor %s\n", name.c_str());
                return 1;
            }
            const float* src = static_cast<const float*>(t->data);
            float* dst = data.data() + static_cast<size_t>(n_embd) * (layer - 1);
            for (int j = 0; j < n_embd; ++j)
                dst[j] += src[j] * scale;
        }
        gguf_free(g);
        ggml_free(gctx);
        if (llama_set_adapter_cvec(ctx, data.data(), data.size(), n_embd, 1, n_layer) != 0) {
            std::fprintf(stderr, "error: llama_set_adapter_cvec failed\n");
            return 1;
        }
    }

    // ---- prompt: one decode call, logits for the last position only
    llama_batch batch = llama_batch_init(std::max(n_prompt, 1), 0, 1);
    batch.n_tokens = n_prompt;
    for (int i = 0; i < n_prompt; ++i) {
        batch.token[i] = tokens[i];
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = (i == n_prompt - 1);
    }
    if (int rc = llama_decode(ctx, batch); rc != 0) {
        std::fprintf(stderr, "error: llama_decode(prompt) = %d\n", rc);
        return 1;
    }
    const float* last = llama_get_logits_ith(ctx, n_prompt - 1);
    if (!last) {
        std::fprintf(stderr, "error: no logits for the last prompt position\n");
        return 1;
    }
    std::vector<float> prompt_logits(last, last + n_vocab);

    // ---- greedy continuation, one token per decode call
    std::vector<int32_t> greedy, second;
    std::vector<float> gap;
    Top2 t = top2(prompt_logits.data(), n_vocab);
    for (int step = 0; step < o.n_predict; ++step) {
        greedy.push_back(t.top1);
        second.push_back(t.top2);
        gap.push_back(t.gap);
        if (step + 1 == o.n_predict)
            break;
        batch.n_tokens = 1;
        batch.token[0] = t.top1;
        batch.pos[0] = n_prompt + step;
        batch.n_seq_id[0] = 1;
        batch.seq_id[0][0] = 0;
        batch.logits[0] = 1;
        if (int rc = llama_decode(ctx, batch); rc != 0) {
            std::fprintf(stderr, "error: llama_decode(step %d) = %d\n", step, rc);
            return 1;
        }
        const float* lg = llama_get_logits_ith(ctx, 0);
        if (!lg) {
            std::fprintf(stderr, "error: no logits at step %d\n", step);
            return 1;
        }
        t = top2(lg, n_vocab);
    }

    // ---- detokenized continuation
    std::string text(static_cast<size_t>(o.n_predict) * 64 + 64, '\0');
    int32_t nt = llama_detokenize(vocab, greedy.data(), static_cast<int32_t>(greedy.size()), text.data(),
                                  static_cast<int32_t>(text.size()), false, true);
    if (nt < 0) {
        text.resize(static_cast<size_t>(-nt));
        nt = llama_detokenize(vocab, greedy.data(), static_cast<int32_t>(greedy.size()), text.data(),
                              static_cast<int32_t>(text.size()), false, true);
    }
    text.resize(static_cast<size_t>(std::max(nt, 0)));

    size_t n_nonfinite = 0;
    for (float v : prompt_logits)
        n_nonfinite += !std::isfinite(v);

    char desc[256] = {0};
    llama_model_desc(model, desc, sizeof desc);

    std::ostringstream js;
    js << "{"
       << "\"tool\":\"dump_logits\",\"format\":1,"
       << "\"llama_cpp_commit\":\"" << json_escape(TSDL_LLAMA_CPP_COMMIT) << "\","
       << "\"llama_cpp_source\":\"" << json_escape(TSDL_LLAMA_CPP_SOURCE) << "\","
       << "\"cpu_variant\":\"" << json_escape(TSDL_CPU_VARIANT) << "\","
       << "\"model_path\":\"" << json_escape(o.model) << "\","
       << "\"model_desc\":\"" << json_escape(desc) << "\","
       << "\"input\":\"" << input_kind << "\","
       << "\"add_special\":" << (input_kind == "text" ? "true" : "false") << ","
       << "\"parse_special\":" << (input_kind == "text" ? "true" : "false") << ","
       << "\"n_prompt\":" << n_prompt << ",\"n_vocab\":" << n_vocab << ",\"n_predict\":" << o.n_predict << ","
       << "\"n_ctx\":" << llama_n_ctx(ctx) << ",\"n_ctx_requested\":" << n_ctx << ","
       << "\"n_batch\":" << llama_n_batch(ctx) << ",\"n_ubatch\":" << llama_n_ubatch(ctx) << ","
       << "\"n_seq_max\":" << llama_n_seq_max(ctx) << ","
       << "\"n_threads\":" << llama_n_threads(ctx) << ",\"n_threads_batch\":" << llama_n_threads_batch(ctx) << ","
       << "\"flash_attn\":\"" << llama_flash_attn_type_name(cp.flash_attn_type) << "\","
       << "\"type_k\":\"" << ggml_type_name(cp.type_k) << "\",\"type_v\":\"" << ggml_type_name(cp.type_v) << "\","
       << "\"offload_kqv\":" << (cp.offload_kqv ? "true" : "false") << ","
       << "\"op_offload\":" << (cp.op_offload ? "true" : "false") << ","
       << "\"swa_full\":" << (cp.swa_full ? "true" : "false") << ","
       << "\"kv_unified\":" << (cp.kv_unified ? "true" : "false") << ","
       << "\"n_gpu_layers\":" << mp.n_gpu_layers << ","
       << "\"use_extra_bufts\":" << (mp.use_extra_bufts ? "true" : "false") << ","
       << "\"prompt_decode_calls\":1,\"greedy_decode_calls\":" << (o.n_predict - 1) << ","
       << "\"logits_nonfinite\":" << n_nonfinite << ","
       << "\"control_vector\":\"" << json_escape(o.control_vector) << "\","
       << "\"system_info\":\"" << json_escape(llama_print_system_info()) << "\""
       << "}";
    const std::string header = js.str();

    std::FILE* f = std::fopen(o.out.c_str(), "wb");
    if (!f) {
        std::perror(o.out.c_str());
        return 1;
    }
    put(f, "TSDLOG01", 8);
    const uint32_t hl = static_cast<uint32_t>(header.size());
    put(f, &hl, 1);
    put(f, header.data(), header.size());
    put(f, tokens.data(), tokens.size());
    put(f, prompt_logits.data(), prompt_logits.size());
    put(f, greedy.data(), greedy.size());
    put(f, second.data(), second.size());
    put(f, gap.data(), gap.size());
    const uint32_t tl = static_cast<uint32_t>(text.size());
    put(f, &tl, 1);
    put(f, text.data(), text.size());
    if (std::fclose(f) != 0) {
        std::perror(o.out.c_str());
        return 1;
    }

    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return n_nonfinite ? 3 : 0;
}
