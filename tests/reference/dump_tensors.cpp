// SPDX-License-Identifier: GPL-3.0-or-later
//
// dump_tensors: intermediate graph tensors from llama.cpp, for layer-by-layer
// numerical parity checks of Tokenscope's own forward pass.
//
// This is our own small program; it only links against an out-of-tree build of
// llama.cpp (see build_dump_tensors.sh). For one model and one prompt given as
// token ids it evaluates the whole prompt in ONE llama_decode call (same context
// settings as dump_logits: flash attention disabled, f16 K/V cache, no extra
// buffer types, n_batch = n_ubatch >= prompt length) with llama.cpp's eval
// callback (llama_context_params.cb_eval) installed. The scheduler asks the
// callback, node by node in graph order, whether it wants a tensor; for every
// node whose name matches the filter it answers yes and, once the node is
// computed, copies the data (ggml_backend_tensor_get) and converts it to f32.
//
// Default filter (ECMAScript regex, regex_search on the tensor name):
//   -[01](?![0-9])|^l_out-[0-9]+$|^result_norm$|^result_output$
// i.e. every tensor of layers 0 and 1 (also "Qcur-0 (view)" etc.), l_out of all
// layers, the final norm and the logits. Graph inputs (ggml_set_input leaves, e.g.
// the KQ mask, inp_pos) that a dumped tensor reads are dumped too, once each.
//
// Note: asking for a node makes the scheduler compute the graph in pieces ending
// at that node; this can keep the CPU backend from fusing RMS_NORM+MUL across the
// boundary (the fused and unfused kernels compute the same (x*scale)*w).
//
// Output file (little-endian):
//   char[8]  magic "TSDTEN01"
//   u32      json_len, then json_len bytes of JSON (settings, tokens, filter)
//   records until EOF, each:
//     u32 name_len, name bytes
//     u32 op_len, op bytes          (ggml_op_desc(t); "NONE" for inputs)
//     i32 type                      (ggml_type of the tensor as computed)
//     i64 ne[4], i64 nb[4]          (shape and byte strides in llama.cpp)
//     u32 n_src, then for each src: u32 name_len, name, i32 type, i64 ne[4], i64 nb[4]
//     u32 flags                     (1: graph input leaf, 2: data missing -> n_values = 0)
//     u64 n_values, f32 values[n_values]  (logical element order, ne[0] fastest, i.e.
//                                          index i0 + ne0*(i1 + ne1*(i2 + ne2*i3)))

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

#include <algorithm>
#include <clocale>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#ifndef TSDL_LLAMA_CPP_COMMIT
#define TSDL_LLAMA_CPP_COMMIT "unknown"
#endif
#ifndef TSDL_CPU_VARIANT
#define TSDL_CPU_VARIANT "unknown" // build_dump_tensors.sh: avx2 or native (TOKENSCOPE_REF_CPU)
#endif

namespace {

const char* kDefaultFilter = "-[01](?![0-9])|^l_out-[0-9]+$|^result_norm$|^result_output$";

struct Options {
    std::string model;
    std::string tokens;
    std::string tokens_file;
    std::string out;
    std::string list; // text listing of every graph node
    std::vector<std::string> filters;
    bool all = false;
    bool inputs = true;
    bool all_outputs = false;
    int threads = 2;
    int n_ctx = 4096;
    int n_batch = 0;
    bool repack = false;
    bool verbose = false;
};

void usage(const char* argv0)
{
    std::fprintf(stderr,
                 "usage: %s -m MODEL (--tokens IDS | --tokens-file FILE) -o OUT\n"
                 "          [--filter REGEX]... [--all] [--no-inputs] [--list FILE] [--all-outputs]\n"
                 "          [--threads 2] [--ctx 4096] [--batch N] [--repack] [--verbose]\n"
                 "  --tokens IDS    token ids, comma or space separated (no BOS is added)\n"
                 "  --filter REGEX  dump nodes whose name regex_search-matches (repeatable; replaces\n"
                 "                  the default '%s')\n"
                 "  --all           dump every graph node\n"
                 "  --no-inputs     do not dump the graph-input leaves read by dumped nodes\n"
                 "  --list FILE     write a text listing of every graph node (order, op, type, shape, srcs)\n"
                 "  --all-outputs   request logits for every position (default: last only, like\n"
                 "                  dump_logits; then the last layer keeps only that row after attention)\n",
                 argv0, kDefaultFilter);
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
        case '\t':
            o += "\\t";
            break;
        default:
            if (c < 0x20 || c >= 0x7f) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", c);
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

template <typename T> void put(std::FILE* f, const T* data, size_t n)
{
    if (n && std::fwrite(data, sizeof(T), n, f) != n) {
        std::perror("fwrite");
        std::exit(1);
    }
}

void put_str(std::FILE* f, const std::string& s)
{
    const uint32_t n = static_cast<uint32_t>(s.size());
    put(f, &n, 1);
    put(f, s.data(), s.size());
}

void put_shape(std::FILE* f, const ggml_tensor* t)
{
    const int32_t type = t->type;
    put(f, &type, 1);
    int64_t ne[4], nb[4];
    for (int i = 0; i < 4; ++i) {
        ne[i] = t->ne[i];
        nb[i] = static_cast<int64_t>(t->nb[i]);
    }
    put(f, ne, 4);
    put(f, nb, 4);
}

std::string shape_str(const ggml_tensor* t)
{
    char buf[128];
    std::snprintf(buf, sizeof buf, "[%lld,%lld,%lld,%lld]", (long long)t->ne[0], (long long)t->ne[1],
                  (long long)t->ne[2], (long long)t->ne[3]);
    return buf;
}

// Copy t's bytes (the span ggml_nbytes covers, starting at t->data) and convert every
// element to f32 in logical order, honouring the strides. Returns false if impossible.
bool to_f32(const ggml_tensor* t, std::vector<float>& out)
{
    out.clear();
    if (t->data == nullptr || t->buffer == nullptr)
        return false;
    const size_t nbytes = ggml_nbytes(t);
    std::vector<uint8_t> raw;
    const uint8_t* base;
    if (ggml_backend_buffer_is_host(t->buffer)) {
        base = static_cast<const uint8_t*>(t->data);
    } else {
        raw.resize(nbytes);
        ggml_backend_tensor_get(t, raw.data(), 0, nbytes);
        base = raw.data();
    }
    const int64_t n = ggml_nelements(t);
    out.resize(static_cast<size_t>(n));
    const bool quant = ggml_is_quantized(t->type);
    const auto* traits = ggml_get_type_traits(t->type);
    size_t k = 0;
    std::vector<float> row;
    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < t->ne[1]; ++i1) {
                const uint8_t* r = base + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
                if (quant) {
                    if (!traits->to_float)
                        return false;
                    traits->to_float(r, out.data() + k, t->ne[0]); // quantized rows are contiguous
                    k += static_cast<size_t>(t->ne[0]);
                    continue;
                }
                for (int64_t i0 = 0; i0 < t->ne[0]; ++i0) {
                    const uint8_t* p = r + i0 * t->nb[0];
                    float v;
                    switch (t->type) {
                    case GGML_TYPE_F32:
                        std::memcpy(&v, p, 4);
                        break;
                    case GGML_TYPE_F16: {
                        ggml_fp16_t h;
                        std::memcpy(&h, p, 2);
                        v = ggml_fp16_to_fp32(h);
                    } break;
                    case GGML_TYPE_BF16: {
                        ggml_bf16_t h;
                        std::memcpy(&h, p, 2);
                        v = ggml_bf16_to_fp32(h);
                    } break;
                    case GGML_TYPE_I32: {
                        int32_t x;
                        std::memcpy(&x, p, 4);
                        v = static_cast<float>(x);
                    } break;
                    case GGML_TYPE_I16: {
                        int16_t x;
                        std::memcpy(&x, p, 2);
                        v = static_cast<float>(x);
                    } break;
                    case GGML_TYPE_I8:
                        v = static_cast<float>(*reinterpret_cast<const int8_t*>(p));
                        break;
                    case GGML_TYPE_I64: {
                        int64_t x;
                        std::memcpy(&x, p, 8);
                        v = static_cast<float>(x);
                    } break;
                    default:
                        return false;
                    }
                    out[k++] = v;
                }
            }
    return true;
}

struct State {
    std::vector<std::regex> filters;
    bool all = false;
    bool inputs = true;
    bool armed = false;
    std::FILE* out = nullptr;
    std::FILE* list = nullptr;
    std::set<const ggml_tensor*> dumped_inputs;
    int n_nodes = 0;
    int n_dumped = 0;
    int n_failed = 0;

    bool wants(const ggml_tensor* t) const
    {
        if (all)
            return true;
        for (const auto& r : filters)
            if (std::regex_search(t->name, r))
                return true;
        return false;
    }

    void write(const ggml_tensor* t, bool is_input)
    {
        std::vector<float> v;
        const bool ok = to_f32(t, v);
        if (!ok) {
            ++n_failed;
            std::fprintf(stderr, "warning: cannot read %s (type %s)\n", t->name, ggml_type_name(t->type));
        }
        put_str(out, t->name);
        put_str(out, is_input ? std::string("NONE") : std::string(ggml_op_desc(t)));
        put_shape(out, t);
        uint32_t n_src = 0;
        for (int i = 0; i < GGML_MAX_SRC; ++i)
            if (t->src[i])
                n_src = static_cast<uint32_t>(i + 1);
        put(out, &n_src, 1);
        for (uint32_t i = 0; i < n_src; ++i) {
            const ggml_tensor* s = t->src[i];
            put_str(out, s ? s->name : "");
            if (s) {
                put_shape(out, s);
            } else {
                const int32_t type = -1;
                const int64_t z[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                put(out, &type, 1);
                put(out, z, 8);
            }
        }
        const uint32_t flags = (is_input ? 1u : 0u) | (ok ? 0u : 2u);
        put(out, &flags, 1);
        const uint64_t nv = ok ? v.size() : 0;
        put(out, &nv, 1);
        put(out, v.data(), nv);
        ++n_dumped;
    }
};

bool eval_cb(ggml_tensor* t, bool ask, void* user)
{
    auto* st = static_cast<State*>(user);
    if (!st->armed)
        return ask ? false : true;
    if (ask) {
        ++st->n_nodes;
        const bool want = st->wants(t);
        if (st->list) {
            std::fprintf(st->list, "%5d %c %-36s %-14s %-5s %-22s", st->n_nodes, want ? '*' : ' ', t->name,
                         ggml_op_desc(t), ggml_type_name(t->type), shape_str(t).c_str());
            for (int i = 0; i < GGML_MAX_SRC; ++i)
                if (t->src[i])
                    std::fprintf(st->list, " src%d=%s%s", i, t->src[i]->name, shape_str(t->src[i]).c_str());
            std::fputc('\n', st->list);
        }
        return want;
    }
    if (st->inputs) {
        for (int i = 0; i < GGML_MAX_SRC; ++i) {
            const ggml_tensor* s = t->src[i];
            if (s && (s->flags & GGML_TENSOR_FLAG_INPUT) && s->op == GGML_OP_NONE && st->dumped_inputs.insert(s).second)
                st->write(s, true);
        }
    }
    st->write(t, false);
    return true;
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
        else if (a == "--tokens")
            o.tokens = need();
        else if (a == "--tokens-file")
            o.tokens_file = need();
        else if (a == "-o" || a == "--out")
            o.out = need();
        else if (a == "--list")
            o.list = need();
        else if (a == "--filter")
            o.filters.push_back(need());
        else if (a == "--all")
            o.all = true;
        else if (a == "--no-inputs")
            o.inputs = false;
        else if (a == "--all-outputs")
            o.all_outputs = true;
        else if (a == "-t" || a == "--threads")
            o.threads = std::atoi(need().c_str());
        else if (a == "-c" || a == "--ctx")
            o.n_ctx = std::atoi(need().c_str());
        else if (a == "-b" || a == "--batch")
            o.n_batch = std::atoi(need().c_str());
        else if (a == "--repack")
            o.repack = true;
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
    if (o.model.empty() || o.out.empty() || (o.tokens.empty() == o.tokens_file.empty()) || o.threads < 1) {
        usage(argv[0]);
        return 2;
    }
    if (o.filters.empty())
        o.filters.push_back(kDefaultFilter);

    State st;
    st.all = o.all;
    st.inputs = o.inputs;
    try {
        for (const auto& f : o.filters)
            st.filters.emplace_back(f, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
        std::fprintf(stderr, "error: bad --filter regex: %s\n", e.what());
        return 2;
    }

    std::vector<llama_token> tokens;
    {
        std::string s = o.tokens;
        if (!o.tokens_file.empty() && !read_file(o.tokens_file, s)) {
            std::fprintf(stderr, "error: cannot read %s\n", o.tokens_file.c_str());
            return 1;
        }
        if (!parse_ids(s, tokens) || tokens.empty()) {
            std::fprintf(stderr, "error: bad or empty token id list\n");
            return 1;
        }
    }
    const int n_prompt = static_cast<int>(tokens.size());

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
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    for (llama_token t : tokens)
        if (t >= n_vocab) {
            std::fprintf(stderr, "error: token id %d out of range\n", t);
            return 1;
        }

    const int n_ctx = std::max(o.n_ctx, n_prompt);
    const int n_batch = o.n_batch > 0 ? std::max(o.n_batch, n_prompt) : std::max(2048, n_prompt);
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = static_cast<uint32_t>(n_ctx);
    cp.n_batch = static_cast<uint32_t>(n_batch);
    cp.n_ubatch = static_cast<uint32_t>(n_batch);
    cp.n_seq_max = 1;
    cp.n_threads = o.threads;
    cp.n_threads_batch = o.threads;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = GGML_TYPE_F16;
    cp.type_v = GGML_TYPE_F16;
    cp.offload_kqv = false;
    cp.op_offload = false;
    cp.embeddings = false;
    cp.no_perf = true;
    cp.cb_eval = eval_cb;
    cp.cb_eval_user_data = &st;
    llama_context* ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        std::fprintf(stderr, "error: cannot create context\n");
        return 1;
    }

    std::FILE* f = std::fopen(o.out.c_str(), "wb");
    if (!f) {
        std::perror(o.out.c_str());
        return 1;
    }
    if (!o.list.empty()) {
        st.list = std::fopen(o.list.c_str(), "w");
        if (!st.list) {
            std::perror(o.list.c_str());
            return 1;
        }
    }
    st.out = f;

    char desc[256] = {0};
    llama_model_desc(model, desc, sizeof desc);
    std::ostringstream js;
    js << "{\"tool\":\"dump_tensors\",\"format\":1,"
       << "\"llama_cpp_commit\":\"" << json_escape(TSDL_LLAMA_CPP_COMMIT) << "\","
       << "\"model_path\":\"" << json_escape(o.model) << "\","
       << "\"model_desc\":\"" << json_escape(desc) << "\",\"tokens\":[";
    for (int i = 0; i < n_prompt; ++i)
        js << (i ? "," : "") << tokens[i];
    js << "],\"n_prompt\":" << n_prompt << ",\"outputs\":\"" << (o.all_outputs ? "all" : "last") << "\","
       << "\"filter\":[";
    if (o.all) {
        js << "\".*\"";
    } else {
        for (size_t i = 0; i < o.filters.size(); ++i)
            js << (i ? "," : "") << "\"" << json_escape(o.filters[i]) << "\"";
    }
    js << "],\"n_ctx\":" << llama_n_ctx(ctx) << ",\"n_batch\":" << llama_n_batch(ctx)
       << ",\"n_ubatch\":" << llama_n_ubatch(ctx) << ",\"n_threads\":" << o.threads << ",\"flash_attn\":\""
       << llama_flash_attn_type_name(cp.flash_attn_type) << "\","
       << "\"type_k\":\"f16\",\"type_v\":\"f16\",\"use_extra_bufts\":" << (o.repack ? "true" : "false")
       << ",\"swa_full\":" << (cp.swa_full ? "true" : "false")
       << ",\"kv_unified\":" << (cp.kv_unified ? "true" : "false") << ",\"cpu_variant\":\""
       << json_escape(TSDL_CPU_VARIANT) << "\""
       << ",\"system_info\":\"" << json_escape(llama_print_system_info()) << "\""
       << "}";
    const std::string header = js.str();
    put(f, "TSDTEN01", 8);
    const uint32_t hl = static_cast<uint32_t>(header.size());
    put(f, &hl, 1);
    put(f, header.data(), header.size());

    llama_batch batch = llama_batch_init(n_prompt, 0, 1);
    batch.n_tokens = n_prompt;
    for (int i = 0; i < n_prompt; ++i) {
        batch.token[i] = tokens[i];
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = o.all_outputs || i == n_prompt - 1;
    }
    st.armed = true;
    const int rc = llama_decode(ctx, batch);
    st.armed = false;
    if (rc != 0) {
        std::fprintf(stderr, "error: llama_decode = %d\n", rc);
        return 1;
    }
    if (std::fclose(f) != 0) {
        std::perror(o.out.c_str());
        return 1;
    }
    if (st.list)
        std::fclose(st.list);
    std::fprintf(stderr, "dump_tensors: %d graph nodes seen, %d tensors written to %s%s\n", st.n_nodes, st.n_dumped,
                 o.out.c_str(), st.n_failed ? " (some without data)" : "");

    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return st.n_failed ? 3 : 0;
}
